"""OfflinePreLearner (RLlib's `ray.rllib.offline.offline_prelearner`): maps batches of raw
offline rows to train batches, as the function OfflineData's `map_batches` runs.

Three row layouts, as in RLlib's new stack:

- one env step per row (the default): columns `obs`, `actions`, `rewards`, `new_obs`,
  `terminateds` (or `dones`), `truncateds`, `eps_id` and any other columns (e.g. `action_logp`),
  renamed by `input_read_schema`;
- `input_read_sample_batches=True`: each row is an old-stack SampleBatch record (one list per
  column, as rlx's and RLlib's JSON/Parquet output write them);
- `input_read_episodes=True`: each row's `item` is a msgpack'ed episode state.

Rows of the last two become SingleAgentEpisodes, go into an episode buffer
(`prelearner_buffer_class`, default EpisodeReplayBuffer) and come out as n-step transitions.
The output is a flat dict `{"<module_id>/<column>": array}` (RLlib's flattened batch);
OfflineData turns it into a MultiAgentBatch.

Multi-agent rows train several modules (rlx.offline.multi_agent_rows): rows of steps name
their module in a `module_id` column (or their agent in `agent_id`, mapped by the config's
policy_mapping_fn); `MultiAgentBatch` records (what rlx and RLlib's old stack write for
multi-agent runs) and `MultiAgentEpisode` states hold each agent's steps with its module.
Each module's episodes go into a buffer of their own.
"""
from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from rlx.core import DEFAULT_MODULE_ID
from rlx.core.columns import Columns
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.runner.flat_rows import fragment_bounds
from rlx.env.single_agent_episode import SingleAgentEpisode
from rlx.offline.compression import unpack
from rlx.offline.multi_agent_rows import pad_modules, row_modules
from rlx.offline.spaces import OfflineDataError
from rlx.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from rlx.utils.replay_buffers.episode_storage import extra_output_keys, make_episode

#: Column names rlx looks for, mapped to their names in the data (input_read_schema overrides).
SCHEMA = {
    Columns.EPS_ID: Columns.EPS_ID,
    Columns.AGENT_ID: Columns.AGENT_ID,
    Columns.MODULE_ID: Columns.MODULE_ID,
    Columns.OBS: Columns.OBS,
    Columns.ACTIONS: Columns.ACTIONS,
    Columns.REWARDS: Columns.REWARDS,
    Columns.INFOS: Columns.INFOS,
    Columns.NEXT_OBS: Columns.NEXT_OBS,
    Columns.TERMINATEDS: Columns.TERMINATEDS,
    Columns.TRUNCATEDS: Columns.TRUNCATEDS,
    Columns.T: Columns.T,
    "agent_index": "agent_index",
    "dones": "dones",
    "unroll_id": "unroll_id",
}
#: Columns of the data that are bookkeeping, not training columns.
_SKIPPED = {"type", "agent_index", "unroll_id", "dones", Columns.AGENT_ID, Columns.MODULE_ID, Columns.T,
            Columns.INFOS}


def _setting(config: Any, key: str, default: Any = None) -> Any:
    value = getattr(config, key, default)
    return default if value is None else value


def _decoded(value: Any, compressed: bool) -> Any:
    return unpack(value) if compressed and isinstance(value, str) else value


def _stack(values: list[Any]) -> np.ndarray:
    try:
        return np.stack([np.asarray(v) for v in values]) if values else np.zeros((0,))
    except ValueError:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out


def _key(obj: dict, name: str) -> Any:
    return obj.get(name.encode(), obj.get(name))


def decode_ndarray(obj: dict) -> Any:
    """msgpack object hook reading the NumPy arrays and scalars msgpack-numpy writes (RLlib packs
    episode states with it) without unpickling: object arrays are refused."""
    nd = _key(obj, "nd")
    if nd is None:
        return obj
    dtype_text = _key(obj, "type")
    dtype_text = dtype_text.decode() if isinstance(dtype_text, bytes) else dtype_text
    dtype = np.dtype(dtype_text if isinstance(dtype_text, str) else [tuple(f) for f in dtype_text])
    if dtype.hasobject:
        raise OfflineDataError("An offline episode holds a NumPy object array, which msgpack-numpy stores as a "
                               "pickle; rlx does not unpickle offline data. Write the data with numeric columns.")
    data = np.frombuffer(_key(obj, "data"), dtype=dtype)
    if nd is True:
        return data.reshape(tuple(_key(obj, "shape"))).copy()
    return data[0]


class OfflinePreLearner:
    """Maps one batch of raw rows ({column: array}) to a flat train batch ({"module/column": array})
    and runs the Learner's connector pipeline on it, as RLlib 2.60's does.

    Subclass it and pass the class as `config.offline_data(prelearner_class=...)` to map
    custom data: override `_map_to_episodes(batch, to_numpy=False, **kwargs) -> {"episodes": [...]}`
    for rows of another layout (each episode's steps then become train rows), or `__call__`.

    The learner connector pipeline (`self._learner_connector`, from
    `config.build_learner_connector()`: the config's `learner_connector` pieces) runs on the
    episodes (rows of steps: one-step episodes, as in RLlib) with the module `self._module`
    (built from `module_spec`, else the config's `rl_module_spec`, on first use, with
    `module_state`). When an Algorithm trains from the OfflineData, its Learner runs those pieces
    on every train batch, whatever its source, so the OfflineData builds its prelearners with
    `learner_connector_in_learner=True` and they leave the pieces to the Learner: each runs once.

    Args:
        config: the AlgorithmConfig (offline_data settings, train batch size, policies_to_train).
        spaces: (observation_space, action_space) of the data, when known.
        module_state: RLModule weights of the current Learner (set into `self._module`).
        module_spec: RLlib's (deprecated) way to name the module spec; default the config's.
        learner_connector_in_learner: leave the learner connector pieces to the Learner.
        kwargs: RLlib's other arguments (e.g. `learner`), accepted and not used.
    """

    default_prelearner_buffer_class = EpisodeReplayBuffer

    def __init__(self, *, config: Any, spaces: tuple[Any, Any] | None = None,
                 module_state: dict[str, Any] | None = None, module_spec: Any = None,
                 learner_connector_in_learner: bool = False, **kwargs: Any) -> None:
        self.config = config
        self.observation_space: Any = spaces[0] if spaces else None
        self.action_space: Any = spaces[1] if spaces else None
        self.module_state = module_state
        self._module_spec = module_spec
        self._rl_module: Any = None
        self.learner_connector_in_learner = bool(learner_connector_in_learner)
        build = getattr(config, "build_learner_connector", None)
        self._learner_connector: Any = build(self.observation_space, self.action_space) if callable(build) else None
        self.schema = {**SCHEMA, **(_setting(config, "input_read_schema", {}))}
        self.compressed = set(_setting(config, "input_compress_columns", []))
        self.batch_size = int(_setting(config, "train_batch_size_per_learner", 0)
                              or _setting(config, "train_batch_size", 0) or 256)
        self.episode_buffer: Any = None
        #: The episode buffers of modules other than the default one (multi-agent data).
        self.module_episode_buffers: dict[str, Any] = {}
        if _setting(config, "input_read_episodes", False) or _setting(config, "input_read_sample_batches", False):
            self.episode_buffer = self._new_buffer()

    def _new_buffer(self) -> Any:
        buffer_class = _setting(self.config, "prelearner_buffer_class", None) or self.default_prelearner_buffer_class
        buffer_kwargs = {"capacity": self.batch_size * 10, "batch_size_B": self.batch_size,
                         **_setting(self.config, "prelearner_buffer_kwargs", {})}
        return buffer_class(**buffer_kwargs)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The flat train batch of one batch of raw rows (the learner connector pieces run on it)."""
        if _setting(self.config, "input_read_episodes", False):
            episodes = self._map_episode_states(batch)
        elif _setting(self.config, "input_read_sample_batches", False):
            episodes = self._map_sample_batch_to_episode(batch)["episodes"]
        elif type(self)._map_to_episodes is not OfflinePreLearner._map_to_episodes:
            # A subclass maps the rows to episodes of its own: their steps are the train rows.
            return self._flatten(pad_modules(self._episode_columns(
                _by_module(self._map_to_episodes(batch)["episodes"]))))
        else:
            return self._flatten(pad_modules({mid: self._run_learner_pieces(mid, columns)
                                              for mid, columns in self._map_rows_by_module(batch).items()}))
        return self._flatten(pad_modules(self._episode_columns(
            {mid: self._postprocess_and_sample(eps, mid) for mid, eps in _by_module(episodes).items()})))

    # ------------------------------------------------------------------ module and learner pipeline

    @property
    def _module(self) -> Any:
        """The RLModule the learner connector pieces see (RLlib's MultiRLModule on the Learner's
        side): built from `module_spec`, else the config's `rl_module_spec`, on first use."""
        if getattr(self, "_rl_module", None) is None:
            spec = getattr(self, "_module_spec", None)
            if spec is None:
                spec = self.config.rl_module_spec
            module = spec.build()
            state = getattr(self, "module_state", None)
            if state:
                module.set_state(state)
            self._rl_module = module
        return self._rl_module

    @_module.setter
    def _module(self, module: Any) -> None:
        self._rl_module = module

    def _runs_learner_pieces(self) -> bool:
        """Whether this prelearner runs the learner connector pieces (it has some, and no Learner
        runs them after it)."""
        pipeline = getattr(self, "_learner_connector", None)
        return pipeline is not None and len(pipeline) > 0 \
            and not getattr(self, "learner_connector_in_learner", False)

    def _module_for(self, module_id: str) -> Any:
        module = self._module
        keys = getattr(module, "keys", None)
        return module[module_id] if callable(keys) and module_id in module.keys() else module

    def _run_learner_pieces(self, module_id: str, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One module's rows of steps after the learner connector pieces (each row a one-step
        episode, as RLlib maps rows of steps)."""
        if not self._runs_learner_pieces():
            return columns
        # (The connector package loads torch: only prelearners that run pieces import it.)
        from rlx.connectors.learner.learner_connector_pipeline import run_learner_connector

        return run_learner_connector(self._learner_connector, dict(columns), self._module_for(module_id),
                                     module_id=module_id)

    def _episode_columns(self, episodes: dict[str, list[Any]]) -> dict[str, dict[str, np.ndarray]]:
        """{module id: train rows} of {module id: episodes}: through the learner connector pipeline
        (its pieces see whole episodes), else the episodes' steps as they are."""
        if not self._runs_learner_pieces():
            return {mid: episodes_to_columns(eps) for mid, eps in episodes.items()}
        out = {}
        for mid, eps in episodes.items():
            for episode in eps:
                episode.module_id = mid  # (the pipeline groups episodes by module)
            rows = self._learner_connector(rl_module=self._module_for(mid), batch={}, episodes=eps, shared_data={},
                                           metrics=None)
            out.update({str(m): dict(columns) for m, columns in rows.items()})
        return out

    def _map_to_episodes(self, batch: dict[str, Any], to_numpy: bool = False,
                         **kwargs: Any) -> dict[str, list[SingleAgentEpisode]]:
        """{'episodes': one single-step SingleAgentEpisode per row of steps} (RLlib's mapping of
        rows; rlx's own __call__ maps rows of steps column-wise, faster). Override it to read rows
        of another layout: __call__ then trains on the steps of the episodes it returns."""
        columns = self._map_rows(batch)
        extra = [k for k in columns if k not in SCHEMA and k not in _SKIPPED]
        episodes = []
        for i in range(len(columns[Columns.OBS])):
            next_obs = columns.get(Columns.NEXT_OBS, columns[Columns.OBS])[i]
            episode = make_episode(
                id_=str(columns[Columns.EPS_ID][i]), observation_space=self.observation_space,
                action_space=self.action_space, observations=[columns[Columns.OBS][i], next_obs],
                actions=[columns[Columns.ACTIONS][i]], rewards=[float(columns[Columns.REWARDS][i])],
                terminated=bool(columns[Columns.TERMINATEDS][i]), truncated=bool(columns[Columns.TRUNCATEDS][i]),
                extra_model_outputs={k: [columns[k][i]] for k in extra})
            if to_numpy:
                episode.to_numpy()
            episodes.append(episode)
        return {"episodes": episodes}

    # ------------------------------------------------------------------ rows of steps

    def _column(self, batch: dict[str, np.ndarray], name: str) -> Any:
        return batch.get(self.schema.get(name, name))

    def _map_rows_by_module(self, batch: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
        """{module id: the columns of its rows} (one module, the default, unless the rows name
        modules or agents)."""
        agents = self._column(batch, Columns.AGENT_ID)
        if agents is not None and all(a is None or a == "" for a in agents):
            agents = None  # (single-agent rows with an empty agent_id column)
        modules = row_modules(self.config, self._column(batch, Columns.MODULE_ID), agents)
        if modules is None:
            return {DEFAULT_MODULE_ID: self._map_rows(batch)}
        out = {}
        for mid in dict.fromkeys(modules.tolist()):
            rows = np.flatnonzero(modules == mid)
            out[mid] = self._map_rows({name: _take(values, rows) for name, values in batch.items()})
        return out

    def _map_rows(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Columns of rows that are one env step each (vectorised; no per-row episodes)."""
        obs = self._column(batch, Columns.OBS)
        if obs is None:
            raise OfflineDataError(f"The offline rows have no {self.schema[Columns.OBS]!r} column (columns: "
                                   f"{sorted(batch)}); name it with input_read_schema={{'obs': '<column>'}}.")
        n = len(obs)
        out = {Columns.OBS: self._array(obs, Columns.OBS)}
        if _setting(self.config, "ignore_final_observation", False):
            out[Columns.NEXT_OBS] = np.zeros_like(out[Columns.OBS])
        elif self._column(batch, Columns.NEXT_OBS) is not None:
            out[Columns.NEXT_OBS] = self._array(self._column(batch, Columns.NEXT_OBS), Columns.NEXT_OBS)
        for name in (Columns.ACTIONS, Columns.REWARDS):
            values = self._column(batch, name)
            if values is None:
                raise OfflineDataError(f"The offline rows have no {self.schema[name]!r} column (columns: "
                                       f"{sorted(batch)}); name it with input_read_schema={{{name!r}: '<column>'}}.")
            out[name] = self._array(values, name)
        terminateds = self._column(batch, Columns.TERMINATEDS)
        if terminateds is None:
            terminateds = batch.get("dones")
        truncateds = self._column(batch, Columns.TRUNCATEDS)
        out[Columns.TERMINATEDS] = np.zeros(n, bool) if terminateds is None else np.asarray(terminateds, bool)
        out[Columns.TRUNCATEDS] = np.zeros(n, bool) if truncateds is None else np.asarray(truncateds, bool)
        eps_id = self._column(batch, Columns.EPS_ID)
        out[Columns.EPS_ID] = np.asarray([uuid.uuid4().hex for _ in range(n)] if eps_id is None else
                                         [str(e) for e in eps_id])
        known = set(self.schema.values()) | set(self.schema) | _SKIPPED
        for name, values in batch.items():
            if name not in known:
                out[name] = self._array(values, name)
        return out

    def _array(self, values: Any, name: str) -> np.ndarray:
        compressed = name in self.compressed or self.schema.get(name, name) in self.compressed
        items = [_decoded(v, compressed) for v in values]
        return _stack(items)

    # ------------------------------------------------------------------ rows of episodes

    def _map_sample_batch_to_episode(self, batch: dict[str, np.ndarray], to_numpy: bool = False,
                                     **kwargs: Any) -> dict[str, list[SingleAgentEpisode]]:
        """{'episodes': one SingleAgentEpisode per old-stack SampleBatch row (its columns are lists)}."""
        if "policy_batches" in batch:  # MultiAgentBatch records
            return {"episodes": [e for record in batch["policy_batches"] if record is not None
                                 for e in self._multi_agent_record_episodes(record)]}
        episodes = []
        obs_rows = self._column(batch, Columns.OBS)
        if obs_rows is None:
            raise OfflineDataError(f"input_read_sample_batches=True: the rows have no {self.schema['obs']!r} "
                                   f"column (columns: {sorted(batch)}).")
        for i, obs in enumerate(obs_rows):
            obs = list(_decoded(obs, Columns.OBS in self.compressed))
            row = {name: values[i] for name, values in batch.items()}
            actions = list(_decoded(row[self.schema[Columns.ACTIONS]], Columns.ACTIONS in self.compressed))
            rewards = [float(r) for r in row[self.schema[Columns.REWARDS]]]
            next_obs = row.get(self.schema[Columns.NEXT_OBS])
            final = list(_decoded(next_obs, Columns.NEXT_OBS in self.compressed))[-1] if next_obs is not None \
                else obs[-1]
            terminated = row.get(self.schema[Columns.TERMINATEDS], row.get("dones"))
            truncated = row.get(self.schema[Columns.TRUNCATEDS])
            eps_id = row.get(self.schema[Columns.EPS_ID])
            extra = {name: list(values) for name, values in row.items()
                     if name not in self.schema.values() and name not in _SKIPPED and name not in self.schema
                     and np.ndim(values) and len(values) == len(actions)}
            episodes.append(make_episode(
                id_=str(eps_id[0]) if eps_id is not None and len(eps_id) else None,
                observation_space=self.observation_space, action_space=self.action_space,
                observations=obs + [final], actions=actions, rewards=rewards,
                terminated=bool(terminated[-1]) if terminated is not None and len(terminated) else True,
                truncated=bool(truncated[-1]) if truncated is not None and len(truncated) else False,
                extra_model_outputs=extra))
        return {"episodes": episodes}

    def _multi_agent_record_episodes(self, record: dict[str, Any]) -> list[SingleAgentEpisode]:
        """One episode per (episode, agent) fragment of each policy's rows of a MultiAgentBatch
        record, with its module id; a fragment its record cut short counts as truncated."""
        out = []
        for pid, columns in record.items():
            # (A written column may be compressed as a whole: rlx's and RLlib's obs/new_obs by default.)
            cols = {name: np.asarray(unpack(values) if isinstance(values, str) else values)
                    for name, values in columns.items()}
            starts, lengths = fragment_bounds(cols)
            for start, length in zip(starts.tolist(), lengths.tolist()):
                part = {name: values[start:start + length] for name, values in cols.items()}
                terminated = bool(part[Columns.TERMINATEDS][-1])
                truncated = bool(part[Columns.TRUNCATEDS][-1]) if Columns.TRUNCATEDS in part else not terminated
                ids = [part[key][0] for key in (Columns.EPS_ID, "agent_index", Columns.T) if key in part]
                extra = {name: list(values) for name, values in part.items() if name not in self.schema.values()
                         and name not in _SKIPPED and name not in self.schema and name != "action_prob"}
                episode = make_episode(
                    id_="/".join(map(str, [pid, *ids, start])), observation_space=self.observation_space,
                    action_space=self.action_space, observations=list(part[Columns.OBS]) + [part[Columns.NEXT_OBS][-1]],
                    actions=list(part[Columns.ACTIONS]), rewards=[float(r) for r in part[Columns.REWARDS]],
                    terminated=terminated, truncated=truncated or not terminated, extra_model_outputs=extra)
                episode.module_id = str(pid)
                out.append(episode)
        return out

    def _map_episode_states(self, batch: dict[str, np.ndarray]) -> list[SingleAgentEpisode]:
        """Episodes of rows whose `item` column holds msgpack'ed episode states (a MultiAgentEpisode's
        state gives each of its agents' episodes, with its module)."""
        if "item" not in batch:
            raise OfflineDataError(f"input_read_episodes=True: each row's 'item' column holds one msgpack'ed "
                                   f"episode state; these rows have {sorted(batch)}.")
        import msgpack  # noqa: PLC0415 (only this layout needs it)

        out = []
        for item in batch["item"]:
            state = msgpack.unpackb(item, raw=False, object_hook=decode_ndarray, strict_map_key=False)
            if isinstance(state, dict) and "agent_episodes" in state:
                episode = MultiAgentEpisode.from_state(state)
                for aid, agent_episode in episode.agent_episodes.items():
                    agent_episode.module_id = agent_episode.module_id or episode.module_for(aid)
                    out.append(agent_episode)
            else:
                out.append(SingleAgentEpisode.from_state(state))
        return out

    def _postprocess_and_sample(self, episodes: list[SingleAgentEpisode],
                                module_id: str = DEFAULT_MODULE_ID) -> list[SingleAgentEpisode]:
        """Add the (done, not yet stored) episodes to module `module_id`'s buffer and sample
        n-step transitions."""
        if not all(e.is_done for e in episodes):
            raise OfflineDataError("Offline episodes must be done (terminated or truncated); an episode row ends "
                                   "before its episode did.")
        if module_id == DEFAULT_MODULE_ID or self.episode_buffer is None:
            buffer = self.episode_buffer
        else:
            buffer = self.module_episode_buffers.get(module_id)
            if buffer is None:
                buffer = self.module_episode_buffers[module_id] = self._new_buffer()
        new = [e for e in episodes if e.id_ not in buffer.episode_id_to_index]
        if new:
            buffer.add(new)
        n_step = getattr(self.config, "n_step", None) or 1
        return buffer.sample(num_items=self.batch_size, n_step=n_step, sample_episodes=True,
                             gamma=float(_setting(self.config, "gamma", 0.99)))

    # ------------------------------------------------------------------ output

    def _should_module_be_updated(self, module_id: str, multi_agent_batch: Any = None) -> bool:
        """Whether `module_id` is trained (config.policies_to_train)."""
        to_train = getattr(self.config, "policies_to_train", None)
        if not to_train:
            return True
        if callable(to_train):
            return bool(to_train(module_id, multi_agent_batch))
        return module_id in set(to_train)

    def _flatten(self, batch: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {f"{mid}/{name}": values for mid, columns in batch.items()
                if self._should_module_be_updated(mid, batch) for name, values in columns.items()}


def _by_module(episodes: list[Any]) -> dict[str, list[Any]]:
    """{module id: its episodes} (an episode naming no module is the default module's)."""
    out: dict[str, list[Any]] = {}
    for episode in episodes:
        out.setdefault(str(getattr(episode, "module_id", None) or DEFAULT_MODULE_ID), []).append(episode)
    return out


def _take(values: Any, rows: np.ndarray) -> Any:
    """The `rows` of one raw column (an array or a list)."""
    if isinstance(values, np.ndarray):
        return values[rows]
    return [values[i] for i in rows.tolist()]


def episodes_to_columns(episodes: list[Any]) -> dict[str, np.ndarray]:
    """The step columns (obs, new_obs, actions, rewards, terminateds, truncateds, eps_id and
    extra model outputs) of a list of SingleAgentEpisodes, one row per step."""
    cols: dict[str, list[Any]] = {k: [] for k in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS,
                                                  Columns.TERMINATEDS, Columns.TRUNCATEDS, Columns.EPS_ID)}
    extra: dict[str, list[Any]] = {}
    for episode in episodes:
        n = len(episode)
        if not n:
            continue
        obs = list(episode.get_observations())[-(n + 1):]
        cols[Columns.OBS].extend(obs[:-1])
        cols[Columns.NEXT_OBS].extend(obs[1:])
        cols[Columns.ACTIONS].extend(list(episode.get_actions())[-n:])
        cols[Columns.REWARDS].extend(list(episode.get_rewards())[-n:])
        cols[Columns.TERMINATEDS].extend([False] * (n - 1) + [bool(episode.is_terminated)])
        cols[Columns.TRUNCATEDS].extend([False] * (n - 1) + [bool(episode.is_truncated)])
        cols[Columns.EPS_ID].extend([str(episode.id_)] * n)
        for key in extra_output_keys(episode):
            extra.setdefault(key, []).extend(list(episode.get_extra_model_outputs(key))[-n:])
    out = {name: _stack(values) for name, values in cols.items()}
    out.update({name: _stack(values) for name, values in extra.items() if len(values) == len(cols[Columns.OBS])})
    return out

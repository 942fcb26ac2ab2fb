"""SingleAgentEpisode: the per-sub-env episode record that EnvRunner callbacks receive."""
from __future__ import annotations

import builtins
import operator
import time
import uuid
from typing import Any, Sequence

import numpy as np
from gymnasium.spaces import Discrete as _Discrete

from rlx.env.episode_state import episode_from_state, episode_get_state
from rlx.utils.errors import RLXError


class EpisodeError(RLXError, RuntimeError):
    """Steps were added to an episode out of order (before its reset or after it ended)."""


_NO_FILL = object()


def _fill_like(item: Any, fill: Any) -> Any:
    """`fill` shaped like `item` (arrays, dicts and tuples of them, numbers)."""
    if isinstance(item, dict):
        return {k: _fill_like(v, fill) for k, v in item.items()}
    if isinstance(item, tuple):
        return tuple(_fill_like(v, fill) for v in item)
    if isinstance(item, np.ndarray):
        return np.full_like(item, fill)
    if isinstance(item, (bool, np.bool_)):
        return bool(fill)
    if isinstance(item, (int, float, np.number)) and fill is not None:
        return type(item)(fill)
    return fill


def _as_index(index: Any, what: str) -> int:
    try:
        return operator.index(index)
    except TypeError:
        raise TypeError(f"{what} indices must be None, an int, a list of ints or a slice, got {index!r}.") from None


def _positions(n: int, indices: Any, what: str, lookback_ok: bool, has_fill: bool = False
               ) -> tuple[list[int] | int, bool]:
    """(positions relative to the chunk's first item, whether one item was asked for), by RLlib's
    rules: None -> all, int -> one item, list of ints or slice -> a list. Negative indices count
    from the end, or with `lookback_ok` (neg_index_as_lookback) reach into the lookback buffer.
    A slice is cut to the data as Python's slicing does, unless `has_fill` (then every position
    it names is kept, to be filled) or `lookback_ok`."""
    if indices is None:
        return list(range(n)), False
    if isinstance(indices, slice):
        if not lookback_ok and not has_fill:
            return list(range(n))[indices], False
        start = 0 if indices.start is None else _as_index(indices.start, what)
        stop = n if indices.stop is None else _as_index(indices.stop, what)
        if not lookback_ok:
            start, stop = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
        return list(range(start, stop, indices.step or 1)), False
    if isinstance(indices, (list, tuple, np.ndarray)):
        out = [_as_index(i, what) for i in indices]
        return [i if lookback_ok or i >= 0 else i + n for i in out], False
    i = _as_index(indices, what)
    return (i if lookback_ok or i >= 0 else i + n), True


def _get(items: Sequence[Any], lookback: int, indices: Any, what: str, fill: Any, neg_index_as_lookback: bool,
         as_array: bool = False) -> Any:
    """Items of one episode buffer (`items`, whose first `lookback` entries are the lookback
    buffer) by RLlib's episode indexing; `fill` pads positions outside the buffer."""
    has_fill = fill is not _NO_FILL
    positions, _ = _positions(len(items) - lookback, indices, what, neg_index_as_lookback, has_fill)

    def one(i: int) -> Any:
        p = lookback + i
        if 0 <= p < len(items):
            return items[p]
        if has_fill:
            return _fill_like(items[0], fill) if len(items) else fill
        chunk = len(items) - lookback
        raise IndexError(f"{what} index {i} out of range: the episode has {chunk} {what}"
                         + (f" (and {lookback} in its lookback buffer)." if lookback else "."))

    if isinstance(positions, int):  # (single) one item asked for
        return one(positions)
    if not has_fill and isinstance(indices, slice):  # (neg_index_as_lookback) cut to the data, as Python's slicing
        positions = [i for i in positions if 0 <= lookback + i < len(items)]
    out = [one(i) for i in positions]
    if as_array and out and not isinstance(out[0], (dict, tuple)):
        return np.asarray(out)
    return out


def _set(items: list[Any], lookback: int, new_data: Any, at_indices: Any, what: str,
         neg_index_as_lookback: bool = False) -> None:
    n = len(items) - lookback
    if at_indices is None:
        if len(new_data) != n:
            raise ValueError(f"set_{what.split()[0]}(new_data=...) without at_indices replaces all {n} "
                             f"{what}; got {len(new_data)} items.")
        items[lookback:] = list(new_data)
        return
    found, single = _positions(n, at_indices, what, neg_index_as_lookback)
    positions = [found] if isinstance(found, int) else found
    if single:
        new_data = [new_data]
    if len(positions) != len(new_data):
        raise ValueError(f"set_{what.split()[0]}: {len(positions)} indices but {len(new_data)} items in new_data.")
    for i, value in zip(positions, new_data):
        p = lookback + i
        if not 0 <= p < len(items):
            raise IndexError(f"{what} index {i} out of range: the episode has {n} {what}.")
        items[p] = value


def _stack(items: list[Any]) -> Any:
    """A buffer's items as one array when they are arrays or numbers of one shape, else the list."""
    if not items or isinstance(items[0], (dict, tuple, str)) or items[0] is None:
        return items
    try:
        return np.asarray(items)
    except ValueError:  # ragged items stay a list
        return items


class SingleAgentEpisode:
    """Observations, actions, rewards, infos and user data of one episode (or one chunk of it) in
    one sub-environment.

    Observations and infos have len(episode) + 1 entries (the reset ones, or the chunk's first,
    at index 0); actions, rewards and each extra-model-output key have len(episode) entries.
    A chunk made by `cut()` continues the episode at global step `t_started` and may keep a
    lookback buffer of the steps before it (reached with `neg_index_as_lookback=True`).
    """

    def __init__(
        self,
        id_: str | None = None,
        *,
        env_index: int = 0,
        worker_index: int = 0,
        observation_space: Any = None,
        action_space: Any = None,
        observations: Sequence[Any] | None = None,
        infos: Sequence[Any] | None = None,
        actions: Sequence[Any] | None = None,
        rewards: Sequence[float] | None = None,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, Sequence[Any]] | None = None,
        t_started: int | None = None,
        len_lookback_buffer: int | str = "auto",
        agent_id: Any = None,
        module_id: Any = None,
        multi_agent_episode_id: str | None = None,
    ) -> None:
        self.id_ = id_ if id_ is not None else uuid.uuid4().hex
        #: Set for one agent's episode inside a MultiAgentEpisode.
        self.agent_id: Any = agent_id
        self.module_id: Any = module_id
        self.multi_agent_episode_id: str | None = multi_agent_episode_id
        self.is_numpy = False
        self.env_index = env_index
        self.worker_index = worker_index
        self.observation_space = observation_space
        self.action_space = action_space
        self.user_data: dict[str, Any] = {}
        # RLlib's new-API name of the per-episode scratch dict (user_data is the old one).
        self.custom_data: dict[str, Any] = self.user_data
        self.custom_metrics: dict[str, Any] = {}
        self.hist_data: dict[str, Any] = {}
        self.media: dict[str, Any] = {}
        self.is_terminated = False
        self.is_truncated = False
        #: The global env step at which this chunk starts (0 for an episode's first chunk).
        self.t_started = int(t_started or 0)
        #: How many of the stored steps precede the chunk (its lookback buffer).
        self._lookback = 0
        self._observations: list[Any] = []
        self._actions: list[Any] = []
        self._rewards: list[float] = []
        self._infos: list[Any] = []
        self._extra_model_outputs: dict[str, list[Any]] = {}
        self._temporary: dict[str, list[Any]] = {}
        self._return = 0.0
        self._start_time: float | None = None
        self._end_time: float | None = None
        if observations is not None:  # RLlib's constructor form: the data so far (actions one fewer)
            self._init_data(observations, infos, actions, rewards, extra_model_outputs, terminated, truncated,
                            len_lookback_buffer)

    def _init_data(self, observations: Sequence[Any], infos: Sequence[Any] | None, actions: Sequence[Any] | None,
                   rewards: Sequence[float] | None, extra: dict[str, Sequence[Any]] | None, terminated: bool,
                   truncated: bool, len_lookback_buffer: int | str) -> None:
        actions, rewards = list(actions or []), list(rewards or [])
        if not observations or len(observations) != len(actions) + 1 or len(rewards) != len(actions):
            raise EpisodeError(f"SingleAgentEpisode(observations=..., actions=..., rewards=...) needs one observation "
                               f"more than actions and as many rewards as actions; got {len(observations or [])}, "
                               f"{len(actions)} and {len(rewards)}.")
        if len_lookback_buffer == "auto":  # RLlib's default: all data given is the lookback buffer
            lookback = len(rewards)
        elif isinstance(len_lookback_buffer, (int, np.integer)) and len_lookback_buffer >= 0:
            lookback = min(int(len_lookback_buffer), len(rewards))
        else:
            raise ValueError(f"len_lookback_buffer must be 'auto' or an int >= 0, got {len_lookback_buffer!r}.")
        self._observations, self._actions, self._rewards = list(observations), actions, rewards
        self._infos = list(infos) if infos is not None and len(infos) == len(observations) else \
            [{} for _ in observations]
        self._extra_model_outputs = {k: list(v) for k, v in (extra or {}).items()}
        for key, values in self._extra_model_outputs.items():
            if len(values) != len(actions):
                raise EpisodeError(f"extra_model_outputs[{key!r}] has {len(values)} entries for {len(actions)} "
                                   "actions; give one per action.")
        self._lookback = lookback
        self._return = float(sum(rewards[lookback:]))
        self._start_time = time.perf_counter()
        self.is_terminated, self.is_truncated = bool(terminated), bool(truncated)

    # ------------------------------------------------------------------ adding data

    def add_env_reset(self, observation: Any, infos: dict | None = None) -> None:
        """Record the first observation (and infos) returned by env.reset()."""
        if len(self._observations):
            raise EpisodeError(f"Episode {self.id_} was already reset; create a new episode instead.")
        self._observations.append(observation)
        self._infos.append(infos if infos is not None else {})
        self._start_time = time.perf_counter()

    def add_env_step(
        self,
        observation: Any,
        action: Any,
        reward: float,
        infos: dict | None = None,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, Any] | None = None,
    ) -> None:
        """Record one env step: the action taken and the observation, reward and infos it produced."""
        if not len(self._observations):
            raise EpisodeError(f"Episode {self.id_}: call add_env_reset() before add_env_step().")
        if self.is_terminated or self.is_truncated:
            raise EpisodeError(f"Episode {self.id_} is already done; start a new episode for further steps.")
        if self.is_numpy:
            raise EpisodeError(f"Episode {self.id_} was converted with to_numpy(); steps can no longer be added.")
        self._observations.append(observation)
        self._actions.append(action)
        self._rewards.append(reward)
        self._return += float(reward)
        self._infos.append(infos if infos is not None else {})
        if extra_model_outputs or self._extra_model_outputs:
            self._add_extra_model_outputs(extra_model_outputs or {})
        if terminated or truncated:
            self.is_terminated = bool(terminated)
            self.is_truncated = bool(truncated)
            self._end_time = time.perf_counter()

    def _add_extra_model_outputs(self, outputs: dict[str, Any]) -> None:
        # Keys stay aligned with the actions: a key missing at a step gets None there.
        steps_before = len(self._actions) - 1
        for key in outputs:
            if key not in self._extra_model_outputs:
                self._extra_model_outputs[key] = [None] * steps_before
        for key, values in self._extra_model_outputs.items():
            values.append(outputs.get(key))

    def add_temporary_timestep_data(self, key: str, value: Any) -> None:
        """Append `value` to the temporary per-timestep list under `key` (not part of the trajectory)."""
        self._temporary.setdefault(key, []).append(value)

    def get_temporary_timestep_data(self, key: str) -> list[Any]:
        """The values added under `key` with add_temporary_timestep_data, in order."""
        try:
            return list(self._temporary[key])
        except KeyError:
            known = ", ".join(repr(k) for k in self._temporary) or "none"
            raise KeyError(f"No temporary timestep data under {key!r}; known keys: {known}.") from None

    # ------------------------------------------------------------------ accessors

    @property
    def t(self) -> int:
        """The global env step the episode has reached (`t_started + len(self)`)."""
        return self.t_started + len(self._actions) - self._lookback

    @property
    def env_t(self) -> int:
        """Same as `t` (one agent: env steps are agent steps)."""
        return self.t

    @property
    def env_t_started(self) -> int:
        """Same as `t_started`."""
        return self.t_started

    @property
    def is_done(self) -> bool:
        """Whether the episode terminated or was truncated."""
        return self.is_terminated or self.is_truncated

    @property
    def is_reset(self) -> bool:
        """Whether the reset observation was added."""
        return bool(len(self._observations))

    def __len__(self) -> int:
        return len(self._actions) - self._lookback

    def env_steps(self) -> int:
        """Env steps in this chunk (its length)."""
        return len(self)

    def agent_steps(self) -> int:
        """Agent steps in this chunk (its length: one agent)."""
        return len(self)

    def get_return(self) -> float:
        """Sum of this chunk's rewards (not the lookback buffer's, nor an earlier chunk's)."""
        return self._return

    def get_duration_s(self) -> float:
        """Wall-clock seconds from the reset to now, or to the last step once the episode is done."""
        if self._start_time is None:
            return 0.0
        end = self._end_time if self._end_time is not None else time.perf_counter()
        return end - self._start_time

    def get_observations(self, indices: Any = None, *, neg_index_as_lookback: bool = False, fill: Any = _NO_FILL,
                         **kwargs: Any) -> Any:
        """Observations (the chunk's first at index 0): all, one (int, -1 is the last) or several
        (a list of ints or a slice).

        With `fill`, indices outside the data give that value (shaped like an observation)
        instead of failing: `get_observations(slice(-4, None), neg_index_as_lookback=True,
        fill=0.0)` is always 4 items. With neg_index_as_lookback, negative indices mean steps
        before the chunk's start (its lookback buffer) instead of counting from the end.
        """
        return _get(self._observations, self._lookback, indices, "observations", fill, neg_index_as_lookback,
                    self.is_numpy)

    def get_actions(self, indices: Any = None, *, neg_index_as_lookback: bool = False, fill: Any = _NO_FILL,
                    one_hot_discrete: bool = False, **kwargs: Any) -> Any:
        """Actions taken, indexed as get_observations; one_hot_discrete encodes Discrete actions
        as one-hot vectors."""
        out = _get(self._actions, self._lookback, indices, "actions", fill, neg_index_as_lookback, self.is_numpy)
        if one_hot_discrete and isinstance(self.action_space, _Discrete):
            n = int(self.action_space.n)

            def one_hot(a: Any) -> np.ndarray:
                vec = np.zeros(n, np.float32)
                if a is not None and not (isinstance(a, np.ndarray) and a.dtype.kind == "f"):
                    vec[int(a)] = 1.0
                return vec

            single = not isinstance(out, (list, np.ndarray)) or (isinstance(out, np.ndarray) and out.ndim == 0)
            out = one_hot(out) if single else np.stack([one_hot(a) for a in out]) if self.is_numpy \
                else [one_hot(a) for a in out]
        return out

    def get_rewards(self, indices: Any = None, *, neg_index_as_lookback: bool = False, fill: Any = _NO_FILL,
                    **kwargs: Any) -> Any:
        """Rewards received, indexed as get_observations."""
        return _get(self._rewards, self._lookback, indices, "rewards", fill, neg_index_as_lookback, self.is_numpy)

    def get_infos(self, indices: Any = None, *, neg_index_as_lookback: bool = False, fill: Any = _NO_FILL,
                  **kwargs: Any) -> Any:
        """Infos (the chunk's first at index 0), indexed as get_observations."""
        return _get(self._infos, self._lookback, indices, "infos", fill, neg_index_as_lookback)

    def get_extra_model_outputs(self, key: str, indices: Any = None, *, neg_index_as_lookback: bool = False,
                                fill: Any = _NO_FILL, **kwargs: Any) -> Any:
        """Extra model outputs under `key` (e.g. "action_logp"), one per action, indexed as get_actions."""
        try:
            values = self._extra_model_outputs[key]
        except KeyError:
            known = ", ".join(repr(k) for k in self._extra_model_outputs) or "none"
            raise KeyError(f"No extra model output {key!r}; known keys: {known}.") from None
        return _get(values, self._lookback, indices, f"extra model outputs {key!r}", fill, neg_index_as_lookback,
                    self.is_numpy)

    @property
    def extra_model_outputs(self) -> dict[str, Any]:
        """{key: this chunk's values} of every extra model output."""
        return {k: self.get_extra_model_outputs(k) for k in self._extra_model_outputs}

    # ------------------------------------------------------------------ changing recorded data

    def set_observations(self, *, new_data: Any, at_indices: Any = None, neg_index_as_lookback: bool = False,
                         **kwargs: Any) -> None:
        """Overwrite observations: all of the chunk's (a list, at_indices=None), one (an int index)
        or several (a list of indices or a slice, new_data a list). Connector pieces use this to
        replace the latest observation with its processed form."""
        _set(self._observations, self._lookback, new_data, at_indices, "observations", neg_index_as_lookback)

    def set_actions(self, *, new_data: Any, at_indices: Any = None, neg_index_as_lookback: bool = False,
                    **kwargs: Any) -> None:
        """Overwrite actions (indexed as in set_observations)."""
        _set(self._actions, self._lookback, new_data, at_indices, "actions", neg_index_as_lookback)

    def set_rewards(self, *, new_data: Any, at_indices: Any = None, neg_index_as_lookback: bool = False,
                    **kwargs: Any) -> None:
        """Overwrite rewards (indexed as in set_observations); the return follows."""
        _set(self._rewards, self._lookback, new_data, at_indices, "rewards", neg_index_as_lookback)
        self._return = float(sum(self._rewards[self._lookback:]))

    def set_extra_model_outputs(self, *, key: str, new_data: Any, at_indices: Any = None,
                                neg_index_as_lookback: bool = False, **kwargs: Any) -> None:
        """Overwrite the extra model outputs under `key` (indexed as in set_observations)."""
        values = self._extra_model_outputs.setdefault(key, [None] * len(self._actions))
        _set(values, self._lookback, new_data, at_indices, f"extra model outputs {key!r}", neg_index_as_lookback)

    # ------------------------------------------------------------------ chunks

    def cut(self, len_lookback_buffer: int = 0) -> "SingleAgentEpisode":
        """A successor chunk of this ongoing episode: same id, length 0, starting at global step
        `self.t` with this chunk's latest observation, and the last `len_lookback_buffer` steps
        kept as its lookback buffer (fewer when there are fewer)."""
        if self.is_done:
            raise EpisodeError(f"Episode {self.id_} is done; only an ongoing episode can be cut into a successor.")
        if len_lookback_buffer < 0:
            raise ValueError(f"len_lookback_buffer must be >= 0, got {len_lookback_buffer}.")
        keep = min(int(len_lookback_buffer), len(self._actions))
        successor = SingleAgentEpisode(self.id_, env_index=self.env_index, worker_index=self.worker_index,
                                       observation_space=self.observation_space, action_space=self.action_space,
                                       agent_id=self.agent_id, module_id=self.module_id,
                                       multi_agent_episode_id=self.multi_agent_episode_id, t_started=self.t)
        successor._observations = list(self._observations[len(self._observations) - keep - 1:])
        successor._infos = list(self._infos[len(self._infos) - keep - 1:])
        successor._actions = list(self._actions[len(self._actions) - keep:]) if keep else []
        successor._rewards = list(self._rewards[len(self._rewards) - keep:]) if keep else []
        successor._extra_model_outputs = {k: list(v[len(v) - keep:]) if keep else []
                                          for k, v in self._extra_model_outputs.items()}
        successor._lookback = keep
        successor.user_data.update(self.user_data)
        successor._start_time = time.perf_counter()
        return successor

    def concat_episode(self, other: "SingleAgentEpisode") -> None:
        """Append chunk `other` (its successor: same id, starting where this one ends, at the same
        observation) to this ongoing chunk, in place."""
        if other.id_ != self.id_:
            raise EpisodeError(f"concat_episode: episode {other.id_} is not a chunk of episode {self.id_}.")
        if self.is_done:
            raise EpisodeError(f"concat_episode: episode {self.id_} is already done; nothing can follow it.")
        if other.t_started != self.t:
            raise EpisodeError(f"concat_episode: the other chunk starts at step {other.t_started}, this one ends at "
                               f"step {self.t}; concatenate chunks in order.")
        if not _same(other.get_observations(0), self.get_observations(-1)):
            raise EpisodeError("concat_episode: the other chunk's first observation differs from this chunk's last.")
        if self.is_numpy:
            raise EpisodeError(f"concat_episode: episode {self.id_} was converted with to_numpy(); concatenate "
                               "before converting.")
        self._observations = list(self._observations[:-1]) + list(other.get_observations())
        self._infos = list(self._infos[:-1]) + list(other.get_infos())
        self._actions = list(self._actions) + list(other.get_actions())
        self._rewards = list(self._rewards) + list(other.get_rewards())
        n_other = len(other)
        for key in set(self._extra_model_outputs) | set(other._extra_model_outputs):
            mine = list(self._extra_model_outputs.get(key, [None] * (len(self._actions) - n_other)))
            theirs = list(other.get_extra_model_outputs(key)) if key in other._extra_model_outputs \
                else [None] * n_other
            self._extra_model_outputs[key] = mine + theirs
        self._return += other.get_return()
        self.is_terminated, self.is_truncated = other.is_terminated, other.is_truncated
        if other.is_done:
            self._end_time = other._end_time
        self.custom_data.update(other.custom_data)

    def slice(self, slice_: slice, len_lookback_buffer: int | None = None) -> "SingleAgentEpisode":
        """A new episode of the steps `slice_` (step indices of this chunk, step 1 at most), with
        up to `len_lookback_buffer` (default: this chunk's) earlier steps as its lookback buffer."""
        start, stop, step = slice_.indices(len(self))
        if step != 1:
            raise ValueError(f"SingleAgentEpisode.slice() takes slices of step 1, got step {step}.")
        stop = max(start, stop)
        keep = min(self._lookback + start, self._lookback if len_lookback_buffer is None else len_lookback_buffer)
        a, b = self._lookback + start - keep, self._lookback + stop
        out = SingleAgentEpisode(self.id_, env_index=self.env_index, worker_index=self.worker_index,
                                 observation_space=self.observation_space, action_space=self.action_space,
                                 agent_id=self.agent_id, module_id=self.module_id,
                                 multi_agent_episode_id=self.multi_agent_episode_id, t_started=self.t_started + start)
        out._observations, out._infos = list(self._observations[a:b + 1]), list(self._infos[a:b + 1])
        out._actions, out._rewards = list(self._actions[a:b]), list(self._rewards[a:b])
        out._extra_model_outputs = {k: list(v[a:b]) for k, v in self._extra_model_outputs.items()}
        out._lookback = keep
        out._return = float(sum(out._rewards[keep:]))
        at_end = stop == len(self)
        out.is_terminated, out.is_truncated = self.is_terminated and at_end, self.is_truncated and at_end
        out.user_data.update(self.user_data)
        return out

    def __getitem__(self, item: builtins.slice) -> "SingleAgentEpisode":  # (`slice` here is the method)
        """`episode[2:5]` is `episode.slice(slice(2, 5))`."""
        if not isinstance(item, slice):
            raise TypeError(f"SingleAgentEpisode[...] takes a slice (e.g. episode[2:5]), got {item!r}; use "
                            "get_observations(i), get_actions(i), ... for single steps.")
        return self.slice(item)

    def to_numpy(self) -> "SingleAgentEpisode":
        """Turn the buffers into NumPy arrays (observations [len + 1, ...], actions and rewards
        [len, ...]; dict or tuple observations and infos stay lists), in place; steps can no
        longer be added. Returns self."""
        self._observations = _stack(list(self._observations))
        self._actions = _stack(list(self._actions))
        self._rewards = _stack(list(self._rewards))
        self._extra_model_outputs = {k: _stack(list(v)) for k, v in self._extra_model_outputs.items()}
        self.is_numpy = True
        return self

    def validate(self) -> None:
        """Check the buffers agree in length (observations one more than actions); EpisodeError if not."""
        n_obs, n_act = len(self._observations), len(self._actions)
        if n_obs and n_obs != n_act + 1:
            raise EpisodeError(f"Episode {self.id_} has {n_obs} observations and {n_act} actions; an episode has "
                               "one observation more than actions.")
        if len(self._rewards) != n_act or len(self._infos) != n_obs:
            raise EpisodeError(f"Episode {self.id_} has {len(self._rewards)} rewards and {len(self._infos)} infos "
                               f"for {n_act} actions and {n_obs} observations.")
        for key, values in self._extra_model_outputs.items():
            if len(values) != n_act:
                raise EpisodeError(f"Episode {self.id_}: extra model output {key!r} has {len(values)} entries for "
                                   f"{n_act} actions.")

    # ------------------------------------------------------------------ old API names

    @property
    def episode_id(self) -> str:
        """Old name of id_."""
        return self.id_

    @property
    def env_id(self) -> int:
        """Old name of env_index."""
        return self.env_index

    @property
    def length(self) -> int:
        """Old name of len(episode)."""
        return len(self)

    @property
    def total_reward(self) -> float:
        """Old name of get_return()."""
        return self._return

    # agent_id is accepted for the old multi-agent-shaped signatures; there is one agent.
    def last_observation_for(self, agent_id: Any = None) -> Any:
        """The latest observation, or None before the reset."""
        return self._observations[-1] if len(self._observations) else None

    def last_raw_obs_for(self, agent_id: Any = None) -> Any:
        """The latest observation as the env returned it (rlx does not preprocess), or None."""
        return self.last_observation_for(agent_id)

    def last_action_for(self, agent_id: Any = None) -> Any:
        """The latest action, or None before the first step."""
        return self._actions[-1] if len(self._actions) > self._lookback else None

    def last_reward_for(self, agent_id: Any = None) -> float:
        """The latest reward, or 0.0 before the first step."""
        return self._rewards[-1] if len(self._rewards) > self._lookback else 0.0

    def last_info_for(self, agent_id: Any = None) -> Any:
        """The latest infos dict, or None before the reset."""
        return self._infos[-1] if self._infos else None

    def get_state(self) -> dict[str, Any]:
        """This episode as a dict of plain values and arrays, in RLlib's layout
        (rlx.env.episode_state); `SingleAgentEpisode.from_state` rebuilds it."""
        return episode_get_state(self)

    @staticmethod
    def from_state(state: dict[str, Any]) -> "SingleAgentEpisode":
        """The episode of a `get_state()` dict (rlx's or RLlib's); EpisodeStateError when malformed."""
        return episode_from_state(state, SingleAgentEpisode)

    def __repr__(self) -> str:
        state = "terminated" if self.is_terminated else "truncated" if self.is_truncated else "running"
        return f"SingleAgentEpisode(id_={self.id_[:8]}, len={len(self)}, R={self._return:.2f}, {state})"


def _same(a: Any, b: Any) -> bool:
    """Whether two observations are equal (arrays, dicts and tuples of them, scalars)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))

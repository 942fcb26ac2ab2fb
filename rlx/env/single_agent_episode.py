"""SingleAgentEpisode: the per-sub-env episode record that EnvRunner callbacks receive."""
from __future__ import annotations

import operator
import time
import uuid
from typing import Any, Sequence

import numpy as np
from gymnasium.spaces import Discrete as _Discrete

from rlx.connectors.episode_indexing import select_items
from rlx.env.episode_state import episode_from_state, episode_get_state
from rlx.utils.errors import RLXError


class EpisodeError(RLXError, RuntimeError):
    """Steps were added to an episode out of order (before its reset or after it ended)."""


def _select(items: Sequence[Any], indices: Any, what: str) -> Any:
    """RLlib-style indexing: None -> all (list), int -> one item, list of ints or slice -> list."""
    if indices is None:
        return list(items)
    if isinstance(indices, slice):
        return list(items[indices])
    if isinstance(indices, (list, tuple)):
        return [_one(items, i, what) for i in indices]
    return _one(items, indices, what)


def _one(items: Sequence[Any], index: Any, what: str) -> Any:
    try:
        i = operator.index(index)
    except TypeError:
        raise TypeError(f"{what} indices must be None, an int, a list of ints or a slice, got {index!r}.") from None
    try:
        return items[i]
    except IndexError:
        raise IndexError(f"{what} index {i} out of range: the episode has {len(items)} {what}.") from None


_NO_FILL = object()


def _get(items: Sequence[Any], indices: Any, what: str, fill: Any, lookback: bool) -> Any:
    if fill is _NO_FILL and not lookback:
        return _select(items, indices, what)
    return select_items(items, indices, what, None if fill is _NO_FILL else fill, fill is not _NO_FILL, lookback)


def _set(items: list[Any], new_data: Any, at_indices: Any, what: str) -> None:
    if at_indices is None:
        if len(new_data) != len(items):
            raise ValueError(f"set_{what.split()[0]}(new_data=...) without at_indices replaces all {len(items)} "
                             f"{what}; got {len(new_data)} items.")
        items[:] = list(new_data)
        return
    if isinstance(at_indices, slice):
        positions = list(range(*at_indices.indices(len(items))))
    elif isinstance(at_indices, (list, tuple)):
        positions = [operator.index(i) for i in at_indices]
    else:
        _one(items, at_indices, what)  # the index error names the episode's length
        items[operator.index(at_indices)] = new_data
        return
    if len(positions) != len(new_data):
        raise ValueError(f"set_{what.split()[0]}: {len(positions)} indices but {len(new_data)} items in new_data.")
    for i, value in zip(positions, new_data):
        _one(items, i, what)
        items[i] = value


class SingleAgentEpisode:
    """Observations, actions, rewards, infos and user data of one episode in one sub-environment.

    Observations and infos have len(episode) + 1 entries (the reset ones first); actions, rewards
    and each extra-model-output key have len(episode) entries.
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
        self.t_started = 0
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
            self._init_data(observations, infos, actions, rewards, extra_model_outputs, terminated, truncated)

    def _init_data(self, observations: Sequence[Any], infos: Sequence[Any] | None, actions: Sequence[Any] | None,
                   rewards: Sequence[float] | None, extra: dict[str, Sequence[Any]] | None, terminated: bool,
                   truncated: bool) -> None:
        actions, rewards = list(actions or []), list(rewards or [])
        if not observations or len(observations) != len(actions) + 1 or len(rewards) != len(actions):
            raise EpisodeError(f"SingleAgentEpisode(observations=..., actions=..., rewards=...) needs one observation "
                               f"more than actions and as many rewards as actions; got {len(observations or [])}, "
                               f"{len(actions)} and {len(rewards)}.")
        self._observations, self._actions, self._rewards = list(observations), actions, rewards
        self._infos = list(infos) if infos is not None and len(infos) == len(observations) else \
            [{} for _ in observations]
        self._extra_model_outputs = {k: list(v) for k, v in (extra or {}).items()}
        self._return = float(sum(rewards))
        self._start_time = time.perf_counter()
        self.is_terminated, self.is_truncated = bool(terminated), bool(truncated)

    # ------------------------------------------------------------------ adding data

    def add_env_reset(self, observation: Any, infos: dict | None = None) -> None:
        """Record the first observation (and infos) returned by env.reset()."""
        if self._observations:
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
        if not self._observations:
            raise EpisodeError(f"Episode {self.id_}: call add_env_reset() before add_env_step().")
        if self.is_terminated or self.is_truncated:
            raise EpisodeError(f"Episode {self.id_} is already done; start a new episode for further steps.")
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
        """Number of env steps taken so far."""
        return len(self._actions)

    @property
    def is_done(self) -> bool:
        """Whether the episode terminated or was truncated."""
        return self.is_terminated or self.is_truncated

    @property
    def is_reset(self) -> bool:
        """Whether the reset observation was added."""
        return bool(self._observations)

    def __len__(self) -> int:
        return self.t - self.t_started

    def get_return(self) -> float:
        """Sum of the rewards so far."""
        return self._return

    def get_duration_s(self) -> float:
        """Wall-clock seconds from the reset to now, or to the last step once the episode is done."""
        if self._start_time is None:
            return 0.0
        end = self._end_time if self._end_time is not None else time.perf_counter()
        return end - self._start_time

    def get_observations(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                         **kwargs: Any) -> Any:
        """Observations (the reset one at index 0): all, one (int, -1 is the last) or several.

        With `fill`, indices before the episode's start give that value (shaped like an
        observation) instead of failing: `get_observations(slice(-4, None), fill=0.0)` is always 4
        items. With neg_index_as_lookback, negative indices mean steps before the start.
        """
        return _get(self._observations, indices, "observations", fill, neg_index_as_lookback)

    def get_actions(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                    one_hot_discrete: bool = False, **kwargs: Any) -> Any:
        """Actions taken: all, one (int, -1 is the last) or several (list of ints or slice);
        `fill` and neg_index_as_lookback as in get_observations; one_hot_discrete encodes
        Discrete actions as one-hot vectors."""
        out = _get(self._actions, indices, "actions", fill, neg_index_as_lookback)
        if one_hot_discrete and isinstance(self.action_space, _Discrete):
            n = int(self.action_space.n)

            def one_hot(a: Any) -> np.ndarray:
                vec = np.zeros(n, np.float32)
                if a is not None and not (isinstance(a, np.ndarray) and a.dtype.kind == "f"):
                    vec[int(a)] = 1.0
                return vec

            out = [one_hot(a) for a in out] if isinstance(out, list) else one_hot(out)
        return out

    def get_rewards(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                    **kwargs: Any) -> Any:
        """Rewards received: all, one (int, -1 is the last) or several (list of ints or slice);
        `fill` and neg_index_as_lookback as in get_observations."""
        return _get(self._rewards, indices, "rewards", fill, neg_index_as_lookback)

    def get_infos(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                  **kwargs: Any) -> Any:
        """Infos (the reset one at index 0): all, one (int, -1 is the last) or several."""
        return _get(self._infos, indices, "infos", fill, neg_index_as_lookback)

    # ------------------------------------------------------------------ changing recorded data

    def set_observations(self, *, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite observations: all of them (a list, at_indices=None), one (an int index) or
        several (a list of indices or a slice, new_data a list). Connector pieces use this to
        replace the latest observation with its processed form."""
        _set(self._observations, new_data, at_indices, "observations")

    def set_actions(self, *, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite actions (indexed as in set_observations)."""
        _set(self._actions, new_data, at_indices, "actions")

    def set_rewards(self, *, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite rewards (indexed as in set_observations); the return follows."""
        _set(self._rewards, new_data, at_indices, "rewards")
        self._return = float(sum(self._rewards))

    def set_extra_model_outputs(self, *, key: str, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite the extra model outputs under `key` (indexed as in set_observations)."""
        values = self._extra_model_outputs.setdefault(key, [None] * len(self._actions))
        _set(values, new_data, at_indices, f"extra model outputs {key!r}")

    def get_extra_model_outputs(self, key: str, indices: Any = None) -> Any:
        """Extra model outputs under `key`, one per action, indexed like get_actions()."""
        try:
            values = self._extra_model_outputs[key]
        except KeyError:
            known = ", ".join(repr(k) for k in self._extra_model_outputs) or "none"
            raise KeyError(f"No extra model output {key!r}; known keys: {known}.") from None
        return _select(values, indices, f"extra model outputs {key!r}")

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
        return self._observations[-1] if self._observations else None

    def last_raw_obs_for(self, agent_id: Any = None) -> Any:
        """The latest observation as the env returned it (rlx does not preprocess), or None."""
        return self.last_observation_for(agent_id)

    def last_action_for(self, agent_id: Any = None) -> Any:
        """The latest action, or None before the first step."""
        return self._actions[-1] if self._actions else None

    def last_reward_for(self, agent_id: Any = None) -> float:
        """The latest reward, or 0.0 before the first step."""
        return self._rewards[-1] if self._rewards else 0.0

    def last_info_for(self, agent_id: Any = None) -> Any:
        """The latest infos dict, or None before the reset."""
        return self._infos[-1] if self._infos else None

    def cut(self, len_lookback_buffer: int = 0) -> "SingleAgentEpisode":
        """A successor chunk of this (ongoing) episode: same id, starting at its latest
        observation, with the last `len_lookback_buffer` steps kept for indexing back."""
        successor = SingleAgentEpisode(self.id_, env_index=self.env_index, worker_index=self.worker_index,
                                       observation_space=self.observation_space, action_space=self.action_space)
        keep = max(0, min(int(len_lookback_buffer), self.t))
        successor._observations = self._observations[len(self._observations) - keep - 1:]
        successor._infos = self._infos[len(self._infos) - keep - 1:]
        successor._actions = self._actions[len(self._actions) - keep:] if keep else []
        successor._rewards = self._rewards[len(self._rewards) - keep:] if keep else []
        successor.t_started = keep
        successor.user_data = self.user_data
        successor._return = self._return
        successor._start_time = self._start_time
        for attr in ("agent_id", "module_id", "multi_agent_episode_id"):
            setattr(successor, attr, getattr(self, attr))
        return successor

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

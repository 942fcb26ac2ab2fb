"""MeanStdFilter: normalize observations by running mean and standard deviation."""
from __future__ import annotations

from typing import Any, Iterable

import gymnasium as gym
import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.utils.filters import MeanStdFilter as _RunningFilter


class MeanStdFilter(ConnectorV2):
    """Rewrites each episode's latest observation as (obs - mean) / std, clipped to
    +-clip_by_value, with statistics running over every observation seen.

    The statistics of all EnvRunners are merged after each sample() (what each runner saw since the
    last merge is folded into the driver's copy, which is sent back), and saved in checkpoints.

    Args:
        multi_agent: the observation space is a Dict keyed by agent id (one filter per agent).
        agent_ids: with multi_agent, filter only these agents.
        de_mean_to_zero: subtract the running mean.
        de_std_to_one: divide by the running standard deviation.
        clip_by_value: clip the result to [-clip_by_value, clip_by_value] (None: no clipping).
        update_stats: fold the observations seen into the statistics.
    """

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, *, multi_agent: bool = False,
                 agent_ids: Iterable[Any] | None = None, de_mean_to_zero: bool = True,
                 de_std_to_one: bool = True, clip_by_value: float | None = 10.0, update_stats: bool = True,
                 **kwargs: Any):
        self._multi_agent = bool(multi_agent)
        self._agent_ids = None if agent_ids is None else set(agent_ids)
        self.de_mean_to_zero = bool(de_mean_to_zero)
        self.de_std_to_one = bool(de_std_to_one)
        self.clip_by_value = clip_by_value
        self._update_stats = bool(update_stats)
        self._filters: dict[Any, _RunningFilter] = {}
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def _filtered_space(self, space: gym.Space) -> gym.Space:
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"MeanStdFilter needs Box observations (add FlattenObservations before it for others); "
                             f"got {space}.")
        bound = np.inf if self.clip_by_value is None else float(self.clip_by_value)
        return gym.spaces.Box(-bound, bound, shape=space.shape, dtype=np.float32)

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        if self._multi_agent:
            spaces = {}
            for aid, space in input_observation_space.spaces.items():
                if self._agent_ids is None or aid in self._agent_ids:
                    spaces[aid] = self._filtered_space(space)
                    self._filters.setdefault(aid, self._new_filter(space.shape))
                else:
                    spaces[aid] = space
            return gym.spaces.Dict(spaces)
        out = self._filtered_space(input_observation_space)
        self._filters.setdefault(None, self._new_filter(input_observation_space.shape))
        return out

    def _new_filter(self, shape: tuple[int, ...]) -> _RunningFilter:
        return _RunningFilter(shape, demean=self.de_mean_to_zero, destd=self.de_std_to_one, clip=self.clip_by_value)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=True):
            key = getattr(sa_episode, "agent_id", None) if self._multi_agent else None
            running = self._filters.get(key)
            if running is None:
                continue
            obs = np.asarray(sa_episode.get_observations(-1), dtype=np.float32)
            sa_episode.set_observations(at_indices=-1, new_data=running(obs, update=self._update_stats))
        return batch

    # ------------------------------------------------------------------ state (synced across runners)

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict[str, Any]:
        return {repr(k): f.get_state() for k, f in self._filters.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for key, running in self._filters.items():
            if repr(key) in state:
                running.set_state(state[repr(key)])

    def reset_state(self) -> None:
        for key, running in list(self._filters.items()):
            self._filters[key] = self._new_filter(running.shape)

    def merge_states(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        """Statistics over all observations the copies saw (counts, means and variances combined)."""
        out = {}
        for key, running in self._filters.items():
            merged = self._new_filter(running.shape)
            for state in states:
                part = state.get(repr(key))
                if part:
                    merged.merge_delta(part)
            out[repr(key)] = merged.get_state()
        return out

    def pop_delta(self) -> dict[str, Any]:
        """What each filter saw since the last call (rlx's runner-sync protocol)."""
        return {repr(k): f.pop_delta() for k, f in self._filters.items()}

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Fold another copy's pop_delta() into these statistics."""
        for key, running in self._filters.items():
            if repr(key) in delta:
                running.merge_delta(delta[repr(key)])

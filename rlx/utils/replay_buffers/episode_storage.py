"""How the episode replay buffers hold episodes: one `Track` per agent per stored episode.

A Track keeps one agent's trajectory as plain lists (observations and infos one longer than
actions, rewards and each extra-model-output column), so chunks of an ongoing episode append
cheaply. The buffers never keep the caller's episode objects: `track_of` copies an episode's
data out through its public getters, and `transition_episode` / `sequence_episode` build new
`SingleAgentEpisode`s for what `sample()` returns.
"""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from rlx.core import DEFAULT_AGENT_ID, DEFAULT_MODULE_ID
from rlx.env.single_agent_episode import SingleAgentEpisode


class Track:
    """One agent's stored trajectory inside a buffer row (a stored episode)."""

    __slots__ = ("id_", "agent_id", "module_id", "multi_agent_episode_id", "observation_space", "action_space",
                 "obs", "infos", "actions", "rewards", "extra", "terminated", "truncated")

    def __init__(self, id_: str, agent_id: Any, module_id: Any, multi_agent_episode_id: str | None,
                 observation_space: Any, action_space: Any) -> None:
        self.id_ = id_
        self.agent_id = agent_id
        self.module_id = module_id
        self.multi_agent_episode_id = multi_agent_episode_id
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs: list[Any] = []
        self.infos: list[Any] = []
        self.actions: list[Any] = []
        self.rewards: list[float] = []
        self.extra: dict[str, list[Any]] = {}
        self.terminated = False
        self.truncated = False

    def __len__(self) -> int:
        return len(self.actions)

    def extend(self, chunk: "Track") -> None:
        """Append a later chunk of the same episode (its first observation is this track's last)."""
        if not self.obs:
            self.obs, self.infos = list(chunk.obs), list(chunk.infos)
        else:
            self.obs.extend(chunk.obs[1:])
            self.infos.extend(chunk.infos[1:])
        steps_before = len(self.actions)
        self.actions.extend(chunk.actions)
        self.rewards.extend(chunk.rewards)
        for key in set(self.extra) | set(chunk.extra):
            values = self.extra.setdefault(key, [None] * steps_before)
            values.extend(chunk.extra.get(key, [None] * len(chunk.actions)))
        self.terminated, self.truncated = chunk.terminated, chunk.truncated

    def get_state(self) -> dict[str, Any]:
        """The track as a dict of plain values (for the buffer's get_state)."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Track":
        """The track of a `get_state()` dict."""
        track = cls.__new__(cls)
        for name in cls.__slots__:
            setattr(track, name, state[name])
        return track


def extra_output_keys(episode: Any) -> list[str]:
    """The extra-model-output columns an episode holds (the keys of its `extra_model_outputs`)."""
    return list(getattr(episode, "extra_model_outputs", None) or {})


def _last(items: Any, n: int) -> list[Any]:
    """The last n items as a list (an episode's getters may return a lookback before them)."""
    items = list(items)
    return items[len(items) - n:] if n else []


def track_of(episode: Any, *, agent_id: Any = None, module_id: Any = None,
             multi_agent_episode_id: str | None = None) -> Track:
    """A Track holding a copy of one SingleAgentEpisode's steps (not its lookback)."""
    if not episode.is_reset:
        raise ValueError(f"Cannot add episode {episode.id_!r} to a replay buffer: it has no observation yet "
                         "(call add_env_reset first).")
    n = len(episode)
    aid = agent_id if agent_id is not None else (episode.agent_id if episode.agent_id is not None
                                                 else DEFAULT_AGENT_ID)
    mid = module_id if module_id is not None else (episode.module_id if episode.module_id is not None
                                                   else DEFAULT_MODULE_ID)
    track = Track(episode.id_, aid, mid, multi_agent_episode_id or episode.multi_agent_episode_id,
                  episode.observation_space, episode.action_space)
    track.obs = _last(episode.get_observations(), n + 1)
    track.infos = _last(episode.get_infos(), n + 1)
    track.actions = _last(episode.get_actions(), n)
    track.rewards = [float(r) for r in _last(episode.get_rewards(), n)]
    track.extra = {key: _last(episode.get_extra_model_outputs(key), n) for key in extra_output_keys(episode)}
    track.terminated, track.truncated = bool(episode.is_terminated), bool(episode.is_truncated)
    return track


def discounted_sum(rewards: list[float], gamma: float) -> float:
    """r_0 + gamma r_1 + gamma^2 r_2 + ... (the n-step reward of a transition)."""
    return float(np.dot(np.power(gamma, np.arange(len(rewards))), rewards)) if rewards else 0.0


def _episode_kwargs() -> frozenset[str]:
    return frozenset(inspect.signature(SingleAgentEpisode.__init__).parameters)


_EPISODE_KWARGS = _episode_kwargs()


def make_episode(*, lookback: int = 0, t_started: int = 0, **data: Any) -> SingleAgentEpisode:
    """A SingleAgentEpisode holding `data` (observations, actions, rewards, ... as the constructor
    takes them) whose first `lookback` steps are a lookback buffer (indexable with
    neg_index_as_lookback, not counted in len()); the rest are its steps."""
    if "len_lookback_buffer" in _EPISODE_KWARGS:  # RLlib's constructor form
        return SingleAgentEpisode(len_lookback_buffer=lookback, t_started=t_started, **data)
    episode = SingleAgentEpisode(**data)
    if lookback:
        # rlx's episodes count their lookback steps in t_started, as cut() leaves them.
        episode.t_started = lookback
    return episode


def _new_episode(track: Track, *, lookback: int, t_started: int, **data: Any) -> SingleAgentEpisode:
    """make_episode with `track`'s identity (id, agent, module, spaces)."""
    return make_episode(lookback=lookback, t_started=t_started, id_=track.id_,
                        observation_space=track.observation_space, action_space=track.action_space,
                        agent_id=track.agent_id, module_id=track.module_id,
                        multi_agent_episode_id=track.multi_agent_episode_id, **data)


def transition_episode(track: Track, ts: int, n_step: int, *, gamma: float, weight: float,
                       include_infos: bool, include_extra_model_outputs: bool) -> SingleAgentEpisode:
    """The one-step episode (o_t, a_t, sum_k gamma^k r_(t+k), o_(t+n)) of `track` at `ts`.

    Near the episode's end n shrinks to the steps left; the `n_step` column holds the n used
    and `weights` the importance weight. terminated/truncated are the episode's only when the
    transition reaches its last step.
    """
    end = ts + n_step
    reaches_end = end >= len(track)
    extra: dict[str, list[Any]] = {"weights": [float(weight)], "n_step": [int(n_step)]}
    if include_extra_model_outputs:
        extra.update({key: [values[ts]] for key, values in track.extra.items()})
    return _new_episode(
        track, lookback=0, t_started=ts,
        observations=[track.obs[ts], track.obs[end]],
        infos=[track.infos[ts], track.infos[end]] if include_infos else None,
        actions=[track.actions[ts]],
        rewards=[discounted_sum(track.rewards[ts:end], gamma)],
        terminated=reaches_end and track.terminated,
        truncated=reaches_end and track.truncated,
        extra_model_outputs=extra,
    )


def sequence_episode(track: Track, start: int, end: int, *, lookback: int) -> SingleAgentEpisode:
    """Steps [start, end) of `track` as an episode with up to `lookback` earlier steps before
    them (fewer at the episode's start), plus `n_step` (1) and `weights` (1.0) columns."""
    lb = min(lookback, start)
    lo = start - lb
    steps = end - lo
    extra = {key: values[lo:end] for key, values in track.extra.items()}
    extra["n_step"] = [1] * steps
    extra["weights"] = [1.0] * steps
    reaches_end = end >= len(track)
    return _new_episode(
        track, lookback=lb, t_started=start,
        observations=track.obs[lo:end + 1], infos=track.infos[lo:end + 1],
        actions=track.actions[lo:end], rewards=track.rewards[lo:end],
        terminated=reaches_end and track.terminated, truncated=reaches_end and track.truncated,
        extra_model_outputs=extra,
    )


def whole_episode(track: Track) -> SingleAgentEpisode:
    """All of `track` as a SingleAgentEpisode (what a buffer's `episodes` show)."""
    return _new_episode(track, lookback=0, t_started=0, observations=track.obs, infos=track.infos,
                        actions=track.actions, rewards=track.rewards, terminated=track.terminated,
                        truncated=track.truncated, extra_model_outputs=track.extra)

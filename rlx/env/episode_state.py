"""SingleAgentEpisode state dicts in RLlib 2.60's layout (`get_state()` / `from_state()`).

The layout is RLlib's, so episodes travel between rlx and RLlib peers (the RLlink
protocol's EPISODES messages carry lists of them):

    {"id_", "agent_id", "module_id", "multi_agent_episode_id",
     "observations" | "actions" | "rewards" | "infos": {"data": [...], "lookback": L,
                                                        "finalized": bool, "space": None},
     "extra_model_outputs": {key: <buffer as above>} or None,
     "is_terminated", "is_truncated", "t_started", "t",
     "_observation_space", "_action_space", "_start_time", "_last_step_time", "custom_data"}

A buffer's data holds its first L items as lookback (steps before this chunk of the
episode); `t_started` is the global step the chunk starts at and `t - t_started` its
length. A finalized buffer's data is one array (or a dict/tuple of arrays) with the steps
along axis 0. Spaces are written as None.

`episode_from_state` checks a state it did not write (it reads what network peers send):
every malformed part raises EpisodeStateError naming it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.utils.errors import RLXError


class EpisodeStateError(RLXError, ValueError):
    """An episode state dict that is not in SingleAgentEpisode's get_state() layout."""


_BUFFERS = ("observations", "actions", "rewards", "infos")


def _buffer(items: list[Any], lookback: int) -> dict[str, Any]:
    return {"data": list(items), "lookback": int(lookback), "finalized": False, "space": None}


def episode_get_state(episode: Any) -> dict[str, Any]:
    """The state dict of an rlx SingleAgentEpisode (RLlib's layout)."""
    lookback = int(episode._lookback)
    extra = {k: _buffer(v, lookback) for k, v in episode._extra_model_outputs.items()}
    return {
        "id_": episode.id_,
        "agent_id": episode.agent_id,
        "module_id": episode.module_id,
        "multi_agent_episode_id": episode.multi_agent_episode_id,
        "observations": _buffer(episode._observations, lookback),
        "actions": _buffer(episode._actions, lookback),
        "rewards": _buffer(episode._rewards, lookback),
        "infos": _buffer([info if info else {} for info in episode._infos], lookback),
        "extra_model_outputs": extra or None,
        "is_terminated": bool(episode.is_terminated),
        "is_truncated": bool(episode.is_truncated),
        "t_started": int(episode.t_started),
        "t": int(episode.t),
        "_observation_space": None,
        "_action_space": None,
        "_start_time": None,
        "_last_step_time": None,
        "custom_data": dict(episode.custom_data),
    }


def episode_from_state(state: Any, episode_class: type) -> Any:
    """An episode of `episode_class` (SingleAgentEpisode, which calls this from its `from_state`)
    from a state dict (RLlib's or rlx's get_state()), checked."""
    if not isinstance(state, dict):
        raise EpisodeStateError(f"An episode state is a dict, got a {type(state).__name__}.")
    missing = [k for k in ("id_", "observations", "actions", "rewards") if k not in state]
    if missing:
        raise EpisodeStateError(f"The episode state has no {missing} (keys: {sorted(map(str, state))[:12]}).")
    episode_id = state["id_"]
    if not isinstance(episode_id, str) or not episode_id:
        raise EpisodeStateError(f"The episode state's id_ must be a non-empty string, got {episode_id!r:.60}.")
    buffers = {name: _read_buffer(state.get(name), name) for name in _BUFFERS if state.get(name) is not None}
    observations, obs_lookback = buffers["observations"]
    actions, lookback = buffers["actions"]
    rewards, reward_lookback = buffers["rewards"]
    if obs_lookback != lookback or reward_lookback != lookback:
        raise EpisodeStateError(f"Episode {episode_id}: observations, actions and rewards must have the same "
                                f"lookback, got {obs_lookback}, {lookback} and {reward_lookback}.")
    if len(observations) != len(actions) + 1:
        raise EpisodeStateError(f"Episode {episode_id}: it has {len(observations)} observations and {len(actions)} "
                                "actions; an episode has one observation more than actions.")
    if len(rewards) != len(actions):
        raise EpisodeStateError(f"Episode {episode_id}: it has {len(rewards)} rewards and {len(actions)} actions.")
    if lookback > len(actions):
        raise EpisodeStateError(f"Episode {episode_id}: lookback {lookback} exceeds its {len(actions)} steps.")
    infos, _ = buffers.get("infos", ([{}] * len(observations), lookback))
    if len(infos) != len(observations):
        infos = [{}] * len(observations)
    extra: dict[str, list[Any]] = {}
    raw_extra = state.get("extra_model_outputs") or {}
    if not isinstance(raw_extra, dict):
        raise EpisodeStateError(f"Episode {episode_id}: extra_model_outputs must be a dict of buffers or None.")
    for key, buffer in raw_extra.items():
        values, _ = _read_buffer(buffer, f"extra_model_outputs[{key!r}]")
        if len(values) != len(actions):
            raise EpisodeStateError(f"Episode {episode_id}: extra_model_outputs[{key!r}] has {len(values)} "
                                    f"entries for {len(actions)} actions.")
        extra[str(key)] = values
    terminated, truncated = state.get("is_terminated", False), state.get("is_truncated", False)
    if not isinstance(terminated, (bool, np.bool_)) or not isinstance(truncated, (bool, np.bool_)):
        raise EpisodeStateError(f"Episode {episode_id}: is_terminated and is_truncated must be booleans.")
    episode = episode_class(episode_id)
    for name in ("agent_id", "module_id", "multi_agent_episode_id"):
        setattr(episode, name, state.get(name))
    episode._observations = observations
    episode._actions = actions
    episode._rewards = rewards
    episode._infos = [info if isinstance(info, dict) else {} for info in infos]
    episode._extra_model_outputs = extra
    episode._lookback = lookback
    t_started = state.get("t_started", 0)
    if isinstance(t_started, bool) or not isinstance(t_started, (int, np.integer)) or t_started < 0:
        raise EpisodeStateError(f"Episode {episode_id}: t_started must be an integer >= 0, got {t_started!r:.40}.")
    episode.t_started = int(t_started)
    episode.is_terminated, episode.is_truncated = bool(terminated), bool(truncated)
    try:
        episode._return = float(sum(float(r) for r in rewards[lookback:]))
    except (TypeError, ValueError):
        raise EpisodeStateError(f"Episode {episode_id}: rewards must be numbers.") from None
    custom = state.get("custom_data")
    if isinstance(custom, dict):
        episode.user_data.update(custom)
    return episode


def _read_buffer(buffer: Any, name: str) -> tuple[list[Any], int]:
    """(items, lookback) of one serialized InfiniteLookbackBuffer."""
    if not isinstance(buffer, dict) or "data" not in buffer:
        raise EpisodeStateError(f"The episode state's {name} must be a buffer dict with 'data' and 'lookback'.")
    lookback = buffer.get("lookback", 0)
    if isinstance(lookback, bool) or not isinstance(lookback, (int, np.integer)) or lookback < 0:
        raise EpisodeStateError(f"The episode state's {name} lookback must be an integer >= 0, got {lookback!r:.40}.")
    data = buffer["data"]
    if buffer.get("finalized"):
        data = _split_finalized(data, name)
    elif not isinstance(data, list):
        raise EpisodeStateError(f"The episode state's {name} data must be a list (or arrays when finalized), got "
                                f"a {type(data).__name__}.")
    return list(data), int(lookback)


def _split_finalized(data: Any, name: str) -> list[Any]:
    """The items of a finalized buffer: one array (or a dict/tuple of them) along axis 0."""
    if isinstance(data, np.ndarray):
        return list(data) if data.ndim else [data]
    if isinstance(data, dict) and data:
        parts = {k: _split_finalized(v, f"{name}[{k!r}]") for k, v in data.items()}
        lengths = {len(v) for v in parts.values()}
        if len(lengths) != 1:
            raise EpisodeStateError(f"The episode state's {name} parts have different lengths {sorted(lengths)}.")
        return [{k: v[i] for k, v in parts.items()} for i in range(lengths.pop())]
    if isinstance(data, list):  # msgpack sends tuples as lists: read them as the items
        return data
    raise EpisodeStateError(f"The episode state's {name} is finalized but its data is a {type(data).__name__}.")

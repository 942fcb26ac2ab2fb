"""SingleAgentEpisode state dicts in RLlib 2.60's layout (`get_state()` / `from_state()`).

The layout is RLlib's, so episodes travel between rlx and RLlib peers (the RLlink
protocol's EPISODES messages carry lists of them):

    {"id_", "agent_id", "module_id", "multi_agent_episode_id",
     "observations" | "actions" | "rewards" | "infos": {"data": [...], "lookback": L,
                                                        "finalized": bool, "space": None},
     "extra_model_outputs": {key: <buffer as above>} or None,
     "is_terminated", "is_truncated", "t_started", "t",
     "_observation_space", "_action_space", "_start_time", "_last_step_time", "custom_data",
     and rlx's own: "env_index", "worker_index", "custom_metrics", "hist_data"}

A buffer's data holds its first L items as lookback (steps before this chunk of the
episode); `t_started` is the global step the chunk starts at and `t - t_started` its
length. A finalized buffer's data is one array (or a dict/tuple of arrays) with the steps
along axis 0 (an episode after `to_numpy()` writes its buffers so, and is read back as one).
Spaces are written as `gym_space_to_dict` describes them.

A MultiAgentEpisode's state (`multi_agent_episode_get_state`) has RLlib's keys ("id_",
"_agent_to_module_mapping", "env_t_started", "env_t", "agent_t_started", "env_t_to_agent_t",
the "_hanging_*" values, "agent_episodes" as a list of (agent id, SingleAgentEpisode state)
pairs, ...) and, under "rlx", the per-agent returns, step counts and latest values rlx's
episode keeps besides; RLlib's state without them is read too (they are rebuilt from the
agent episodes).

`episode_from_state` checks a state it did not write (it reads what network peers send):
every malformed part raises EpisodeStateError naming it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.utils.errors import RLXError
from rlx.utils.serialization import gym_space_from_dict, gym_space_to_dict


class EpisodeStateError(RLXError, ValueError):
    """An episode state dict that is not in SingleAgentEpisode's get_state() layout."""


_BUFFERS = ("observations", "actions", "rewards", "infos")


def _buffer(items: Any, lookback: int, finalized: bool = False) -> dict[str, Any]:
    if finalized and isinstance(items, np.ndarray):
        return {"data": items, "lookback": int(lookback), "finalized": True, "space": None}
    return {"data": list(items), "lookback": int(lookback), "finalized": False, "space": None}


def _space_state(space: Any) -> Any:
    return gym_space_to_dict(space) if isinstance(space, gym.Space) else None


def _space_from_state(state: Any, name: str) -> Any:
    if state is None or isinstance(state, gym.Space):
        return state
    try:
        return gym_space_from_dict(state)
    except Exception as err:  # any malformed description: say which field
        raise EpisodeStateError(f"The episode state's {name} is not a space description ({err}).") from None


def episode_get_state(episode: Any) -> dict[str, Any]:
    """The state dict of an rlx SingleAgentEpisode (RLlib's layout)."""
    lookback = int(episode._lookback)
    numpy = bool(episode.is_numpy)
    extra = {k: _buffer(v, lookback, numpy) for k, v in episode._extra_model_outputs.items()}
    return {
        "id_": episode.id_,
        "agent_id": episode.agent_id,
        "module_id": episode.module_id,
        "multi_agent_episode_id": episode.multi_agent_episode_id,
        "observations": _buffer(episode._observations, lookback, numpy),
        "actions": _buffer(episode._actions, lookback, numpy),
        "rewards": _buffer(episode._rewards, lookback, numpy),
        "infos": _buffer([info if info else {} for info in episode._infos], lookback),
        "extra_model_outputs": extra or None,
        "is_terminated": bool(episode.is_terminated),
        "is_truncated": bool(episode.is_truncated),
        "t_started": int(episode.t_started),
        "t": int(episode.t),
        "_observation_space": _space_state(episode.observation_space),
        "_action_space": _space_state(episode.action_space),
        "_start_time": episode._start_time,
        "_last_step_time": episode._end_time,
        "custom_data": dict(episode.custom_data),
        "env_index": int(episode.env_index),
        "worker_index": int(episode.worker_index),
        "custom_metrics": dict(episode.custom_metrics),
        "hist_data": dict(episode.hist_data),
    }


def _check_state_keys(state: Any, required: tuple[str, ...], what: str) -> None:
    """Raise EpisodeStateError unless `state` is a dict holding every key of `required`."""
    if not isinstance(state, dict):
        raise EpisodeStateError(f"The {what} must be a dict, got a {type(state).__name__}.")
    missing = [k for k in required if k not in state]
    if missing:
        raise EpisodeStateError(f"The {what} has no {missing} (keys: {sorted(map(str, state))[:12]}).")


def episode_from_state(state: Any, episode_class: type) -> Any:
    """An episode of `episode_class` (SingleAgentEpisode, which calls this from its `from_state`)
    from a state dict (RLlib's or rlx's get_state()), checked."""
    _check_state_keys(state, ("id_", "observations", "actions", "rewards"), "episode state")
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
    _restore_extras(episode, state, episode_id)
    if isinstance(state["observations"], dict) and state["observations"].get("finalized"):
        episode.to_numpy()  # (a finalized state is an episode after to_numpy())
    return episode


def _restore_extras(episode: Any, state: dict[str, Any], episode_id: str) -> None:
    """Spaces, times and rlx's own fields of a SingleAgentEpisode state (all optional)."""
    episode.observation_space = _space_from_state(state.get("_observation_space"), "_observation_space")
    episode.action_space = _space_from_state(state.get("_action_space"), "_action_space")
    for key, attr in (("_start_time", "_start_time"), ("_last_step_time", "_end_time")):
        value = state.get(key)
        if value is not None and not isinstance(value, (int, float, np.number)):
            raise EpisodeStateError(f"Episode {episode_id}: {key} must be a number or None, got {value!r:.40}.")
        setattr(episode, attr, None if value is None else float(value))
    for key in ("env_index", "worker_index"):
        value = state.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise EpisodeStateError(f"Episode {episode_id}: {key} must be an integer, got {value!r:.40}.")
        setattr(episode, key, int(value))
    for key in ("custom_metrics", "hist_data"):
        if isinstance(state.get(key), dict):
            getattr(episode, key).update(state[key])


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


def multi_agent_episode_get_state(episode: Any) -> dict[str, Any]:
    """The state dict of an rlx MultiAgentEpisode: RLlib's keys plus rlx's own under "rlx"."""
    awaiting = set(episode._awaiting)
    return {
        "id_": episode.id_,
        "agent_to_module_mapping_fn": None,  # (rlx keeps the chosen modules, not the function)
        "_agent_to_module_mapping": dict(episode.agent_to_module_map),
        "observation_space": _space_state(episode.observation_space),
        "action_space": _space_state(episode.action_space),
        "env_t_started": int(episode.env_t_started),
        "env_t": int(episode.env_t),
        "agent_t_started": episode.agent_t_started,
        "env_t_to_agent_t": episode._env_steps_map.get_state(),
        "_hanging_actions_end": {aid: episode._last_actions[aid] for aid in awaiting if aid in episode._last_actions},
        "_hanging_extra_model_outputs_end": {aid: episode._last_extra[aid] for aid in awaiting
                                             if episode._last_extra.get(aid) is not None},
        "_hanging_rewards_end": dict(episode._last_rewards),
        "_hanging_rewards_begin": {},
        "is_terminated": bool(episode.is_terminated),
        "is_truncated": bool(episode.is_truncated),
        "agent_episodes": [(aid, sa.get_state()) for aid, sa in episode.agent_episodes.items()],
        "_start_time": episode._start_time,
        "_last_step_time": episode._end_time,
        "custom_data": dict(episode.custom_data),
        "rlx": {
            "env_index": int(episode.env_index),
            "worker_index": int(episode.worker_index),
            "record": bool(episode._record),
            "awaiting": sorted(awaiting, key=str),
            "agent_returns": dict(episode._agent_returns),
            "agent_steps": dict(episode._agent_steps),
            "returns_before": dict(episode._returns_before),
            "steps_before": dict(episode._steps_before),
            "last_observations": dict(episode._last_obs),
            "last_infos": dict(episode._last_infos),
            "last_actions": dict(episode._last_actions),
            "agents_that_stepped": list(episode._last_step_agents),
            "custom_metrics": dict(episode.custom_metrics),
            "hist_data": dict(episode.hist_data),
        },
    }


def multi_agent_episode_from_state(state: Any, episode_class: type, agent_episode_class: type) -> Any:
    """A MultiAgentEpisode (`episode_class`, its agents' episodes `agent_episode_class`) from a
    state dict (rlx's or RLlib's), checked."""
    _check_state_keys(state, ("id_", "agent_episodes", "env_t_started", "env_t"), "multi-agent episode state")
    pairs = state["agent_episodes"]
    pairs = list(pairs.items()) if isinstance(pairs, dict) else pairs
    if not isinstance(pairs, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise EpisodeStateError("The multi-agent episode state's agent_episodes must be (agent id, episode state) "
                                "pairs.")
    own = state.get("rlx") or {}
    episode = episode_class(state["id_"], env_index=int(own.get("env_index", 0)),
                            worker_index=int(own.get("worker_index", 0)), record=bool(own.get("record", True)),
                            env_t_started=int(state["env_t_started"]))
    episode._env_t = int(state["env_t"])
    episode.agent_episodes = {aid: episode_from_state(sub, agent_episode_class) for aid, sub in pairs}
    episode.agent_to_module_map.update(state.get("_agent_to_module_mapping") or {})
    episode.observation_space = _space_from_state(state.get("observation_space"), "observation_space")
    episode.action_space = _space_from_state(state.get("action_space"), "action_space")
    mapping = state.get("env_t_to_agent_t") or {}
    try:
        episode._env_steps_map = type(episode._env_steps_map).from_state(
            {aid: v if isinstance(v, dict) else {"data": list(v), "lookback": 0} for aid, v in mapping.items()})
    except (KeyError, TypeError, ValueError) as err:
        raise EpisodeStateError(f"The multi-agent episode state's env_t_to_agent_t is malformed ({err}).") from None
    hanging: dict[Any, Any] = dict(state.get("_hanging_actions_end") or {})
    episode._last_actions.update(own["last_actions"] if "last_actions" in own else hanging)
    episode._awaiting = set(own["awaiting"] if "awaiting" in own else hanging)
    episode._last_extra.update(state.get("_hanging_extra_model_outputs_end") or {})
    episode._last_rewards.update(state.get("_hanging_rewards_end") or {})
    episode.is_terminated = bool(state.get("is_terminated", False))
    episode.is_truncated = bool(state.get("is_truncated", False))
    for key, attr in (("_start_time", "_start_time"), ("_last_step_time", "_end_time")):
        if state.get(key) is not None:
            setattr(episode, attr, float(state[key]))
    custom = state.get("custom_data")
    if isinstance(custom, dict):
        episode.user_data.update(custom)
    subs = episode.agent_episodes
    episode._agent_returns = dict(own.get("agent_returns", {a: e.get_return() for a, e in subs.items()}))
    episode._agent_steps = dict(own.get("agent_steps", {a: len(e) for a, e in subs.items()}))
    episode._returns_before = dict(own.get("returns_before", {}))
    episode._steps_before = dict(own.get("steps_before", {}))
    episode._last_obs = dict(own.get("last_observations", {a: e.get_observations(-1) for a, e in subs.items()
                                                           if e.is_reset}))
    episode._last_infos = dict(own.get("last_infos", {a: e.get_infos(-1) for a, e in subs.items() if e.is_reset}))
    stepped = own.get("agents_that_stepped")
    if stepped is None:
        last = {aid: entries[-1] for aid, entries in episode._env_steps_map.data.items() if entries}
        stepped = [aid for aid, t in last.items() if t != "S"]
    episode._last_step_agents = list(stepped)
    episode.custom_metrics.update(own.get("custom_metrics", {}))
    episode.hist_data.update(own.get("hist_data", {}))
    return episode


"""Checks that a MultiAgentEnv follows RLlib's multi-agent API, with errors that name the agent.

`check_multi_agent_env` resets the env and takes a few random steps, validating every dict it
returns; the runner calls it once on its first sub-env. `check_step_output` is the cheap
per-step check (key sets only) and `check_multi_agent_step` validates an action dict.
"""
from __future__ import annotations

import copy
import numbers
from typing import Any, Collection, Iterable

import gymnasium as gym
import numpy as np

from rlx.env.env_checker import describe_value, warn_out_of_bounds
from rlx.env.multi_agent_env import ALL_AGENTS, COMMON_INFO, MultiAgentEnv
from rlx.utils.errors import EnvError
from rlx.utils.typing import AgentID, MultiAgentDict

_DISABLE_HINT = " (Turn these checks off with config.environment(disable_env_checking=True).)"
_STEP_NAMES = ("obs", "rewards", "terminateds", "truncateds", "infos")
#: How many random steps check_multi_agent_env takes after reset().
_NUM_CHECK_STEPS = 3


def check_multi_agent_env(env: Any, seed: int | None = None) -> None:
    """Reset `env` (with `seed`), take up to 3 random steps and validate everything it returns.

    Each step sends a random action (from a seeded copy of `env.get_action_space(agent)`) for
    exactly the agents in the last obs dict that are not done. Raises EnvError naming the agent
    or key at fault and how to fix it. The env is left mid-episode (or at an episode's end);
    callers reset it before use.
    """
    label = type(env).__name__
    out = env.reset(seed=seed)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise EnvError(f"{label}.reset() returned {describe_value(out)}; a MultiAgentEnv's reset() returns "
                       f"(obs_dict, infos_dict), both keyed by agent id.{_DISABLE_HINT}")
    obs, infos = out
    _check_dict(label, "reset()", "obs", obs)
    _check_dict(label, "reset()", "infos", infos)
    if not obs:
        raise EnvError(f"{label}.reset() returned an empty obs dict; at least one agent must observe (and so act) "
                       f"first.{_DISABLE_HINT}")
    _check_observations(env, label, "reset()", obs)
    _check_info_keys(label, "reset()", infos, set(obs))

    known = set(obs) | set(getattr(env, "possible_agents", None) or ())
    samplers: dict[AgentID, gym.Space] = {}
    acting = list(obs)
    for i in range(_NUM_CHECK_STEPS):
        actions = {aid: _sampler(env, aid, samplers, seed).sample() for aid in acting}
        check_multi_agent_step(label, actions, acting)
        result = env.step(actions)
        where = f"step() (step {i + 1} after reset)"
        check_step_output(label, result, acting, known)
        obs, rewards, terminateds, truncateds, infos = result
        known |= set(obs)
        _check_observations(env, label, where, obs)
        _check_rewards(label, where, rewards)
        _check_flags(label, where, "terminateds", terminateds)
        _check_flags(label, where, "truncateds", truncateds)
        for name, info in infos.items():
            if not isinstance(info, dict):
                raise EnvError(f"{label}.{where} returned infos[{name!r}] = {describe_value(info)}; each agent's "
                               f"info must be a dict.{_DISABLE_HINT}")
        if terminateds[ALL_AGENTS] or truncateds.get(ALL_AGENTS, False):
            return
        acting = [aid for aid in obs if not (terminateds.get(aid) or truncateds.get(aid))]
        if not acting:
            raise EnvError(f"{label}.{where} returned no observation for an agent that is still active, but "
                           f"'__all__' is False in terminateds and truncateds: no agent can act in the next step. "
                           f"Return an obs for the agent(s) to move next, or set terminateds['__all__'] = True."
                           f"{_DISABLE_HINT}")


def check_multi_agent_step(env_label: str, action_dict: MultiAgentDict, observed_agents: Collection[AgentID]) -> None:
    """Raise EnvError if `action_dict` is not a dict or holds an action for an agent that is not in
    `observed_agents` (the agents in the last obs dict, the only ones allowed to act)."""
    if not isinstance(action_dict, dict):
        raise EnvError(f"{env_label}.step() takes a dict of actions keyed by agent id, got "
                       f"{describe_value(action_dict)}.")
    observed = set(observed_agents)
    for aid in action_dict:
        if aid not in observed:
            raise EnvError(f"The action dict for {env_label}.step() has an action for agent {aid!r}, which is not "
                           f"in the last obs dict (agents that observed: {_names(observed)}). An agent acts only "
                           f"in the step after it received an observation; send actions for those agents only.")


def check_step_output(env_label: str, outputs: Any, acted_agents: Iterable[AgentID],
                      known_agents: Iterable[AgentID]) -> None:
    """Cheap validation of one `step()` result: a 5-tuple of dicts whose terminateds and truncateds
    hold `"__all__"`, and whose rewards, flags and infos name only known agents.

    Known agents are `known_agents` (observed earlier in the episode, or possible agents),
    `acted_agents` (the agents that acted in this step) and the agents in this step's obs.
    Raises EnvError naming the key at fault; uses set operations only (no space checks).
    """
    if not (isinstance(outputs, tuple) and len(outputs) == 5):
        n = f"{len(outputs)} values" if isinstance(outputs, tuple) else describe_value(outputs)
        raise EnvError(f"{env_label}.step() returned {n}; a MultiAgentEnv's step() returns 5 dicts keyed by agent "
                       f"id: (obs, rewards, terminateds, truncateds, infos).{_DISABLE_HINT}")
    for name, value in zip(_STEP_NAMES, outputs):
        _check_dict(env_label, "step()", name, value)
    obs, rewards, terminateds, truncateds, infos = outputs
    for name, flags in (("terminateds", terminateds), ("truncateds", truncateds)):
        # An empty truncateds dict means "nothing truncated" (RLlib's own example envs return {}).
        if ALL_AGENTS not in flags and (flags or name == "terminateds"):
            raise EnvError(f"{env_label}.step() returned {name} without the key '__all__' (got keys "
                           f"{_names(flags)}). RLlib requires '__all__' in terminateds (and in truncateds "
                           f"unless it is empty): set {name}['__all__'] = True when the episode ends for every "
                           f"agent, else False.{_DISABLE_HINT}")
    known = set(known_agents)
    known.update(acted_agents)
    known.update(obs)
    for name, value, extra in (("rewards", rewards, ()), ("terminateds", terminateds, (ALL_AGENTS,)),
                               ("truncateds", truncateds, (ALL_AGENTS,)), ("infos", infos, (COMMON_INFO,))):
        unknown = value.keys() - known - set(extra)
        if unknown:
            aid = sorted(unknown, key=str)[0]
            raise EnvError(f"{env_label}.step() returned {name} for agent {aid!r}, which has never observed in this "
                           f"episode (agents seen so far: {_names(known)}). An agent must appear in an obs dict "
                           f"(or in env.possible_agents) before it gets rewards, flags or infos.{_DISABLE_HINT}")


# ---------------------------------------------------------------- helpers


def _names(keys: Iterable[Any]) -> str:
    return "[" + ", ".join(repr(k) for k in sorted(keys, key=str)) + "]"


def _check_dict(label: str, where: str, name: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise EnvError(f"{label}.{where} returned {name} as {describe_value(value)}; it must be a dict keyed by "
                       f"agent id (e.g. {{'agent_0': ...}}).{_DISABLE_HINT}")


def _space_of(env: Any, agent_id: AgentID, kind: str) -> gym.Space:
    """`env.get_<kind>_space(agent_id)`, with an EnvError naming the agent when it has none."""
    getter = getattr(env, f"get_{kind}_space", None) or \
        (lambda aid: getattr(MultiAgentEnv, f"get_{kind}_space")(env, aid))
    try:
        return getter(agent_id)
    except (KeyError, AttributeError, TypeError) as err:
        detail = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise EnvError(f"{type(env).__name__} returned an observation for agent {agent_id!r}, but "
                       f"get_{kind}_space({agent_id!r}) fails: {detail} Add agent {agent_id!r} to "
                       f"self.{kind}_spaces (or fix the agent id in the obs dict).{_DISABLE_HINT}") from err


def _check_observations(env: Any, label: str, where: str, obs: MultiAgentDict) -> None:
    for aid, value in obs.items():
        space = _space_of(env, aid, "observation")
        try:
            ok = space.contains(value)
        except Exception:
            ok = False
        if not ok and _only_out_of_bounds(value, space):
            # RLlib samples such envs (many step slightly outside their bounds): flagged once, not refused.
            warn_out_of_bounds(label, f"{where} for agent {aid!r}", space, value)
        elif not ok:
            raise EnvError(f"{label}.{where} returned an observation for agent {aid!r} that is not in its "
                           f"observation space: got {describe_value(value)}, the space is {space}."
                           f"{_space_mismatch_hint(value, space)}{_DISABLE_HINT}")


def _only_out_of_bounds(value: Any, space: gym.Space) -> bool:
    """Whether `value` misses its Box `space` only by values outside low/high (right array type,
    shape and dtype, all finite)."""
    return (isinstance(space, gym.spaces.Box) and isinstance(value, np.ndarray) and value.shape == space.shape
            and value.dtype == space.dtype and not (value.dtype.kind == "f" and not np.isfinite(value).all()))


def _space_mismatch_hint(value: Any, space: gym.Space) -> str:
    if not isinstance(space, gym.spaces.Box):
        return ""
    if not isinstance(value, np.ndarray):
        return f" Return a numpy array of shape {space.shape} and dtype {space.dtype}."
    if value.shape != space.shape:
        return f" The shapes differ: {value.shape} vs {space.shape}."
    if value.dtype != space.dtype:
        return f" The dtypes differ: {value.dtype} vs {space.dtype} (cast with .astype(np.{space.dtype}))."
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        return " It holds NaN or infinite values; observations must be finite."
    return ""


def _check_info_keys(label: str, where: str, infos: MultiAgentDict, obs_agents: set) -> None:
    extra = infos.keys() - obs_agents - {COMMON_INFO}
    if extra:
        aid = sorted(extra, key=str)[0]
        raise EnvError(f"{label}.{where} returned an info for agent {aid!r}, which has no observation in that "
                       f"obs dict (agents that observed: {_names(obs_agents)}). Infos may be keyed only by agents "
                       f"in the obs dict or by '__common__'.{_DISABLE_HINT}")


def _check_rewards(label: str, where: str, rewards: MultiAgentDict) -> None:
    for aid, reward in rewards.items():
        if isinstance(reward, np.ndarray) and reward.shape == ():
            reward = reward.item()
        if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (numbers.Real, np.integer, np.floating)):
            raise EnvError(f"{label}.{where} returned reward {describe_value(reward)} for agent {aid!r}; each "
                           f"agent's reward must be a single real number (int or float).{_DISABLE_HINT}")
        if not np.isfinite(float(reward)):
            raise EnvError(f"{label}.{where} returned reward {reward!r} for agent {aid!r}; rewards must be "
                           f"finite numbers.{_DISABLE_HINT}")


def _check_flags(label: str, where: str, name: str, flags: MultiAgentDict) -> None:
    for aid, flag in flags.items():
        if not isinstance(flag, (bool, np.bool_)):
            raise EnvError(f"{label}.{where} returned {name}[{aid!r}] = {describe_value(flag)}; flags must be "
                           f"bools.{_DISABLE_HINT}")


def _sampler(env: Any, agent_id: AgentID, cache: dict, seed: int | None) -> gym.Space:
    """A seeded copy of the agent's action space, so checking neither draws from nor reseeds the env's own."""
    if agent_id not in cache:
        space = copy.deepcopy(_space_of(env, agent_id, "action"))
        space.seed(None if seed is None else seed + len(cache))
        cache[agent_id] = space
    return cache[agent_id]

"""MultiAgentEnvs that wrap PettingZoo envs (RLlib's `ray.rllib.env.wrappers.pettingzoo_env`).

`PettingZooEnv` wraps a turn-based AEC env (`pettingzoo.AECEnv`): each step acts for the one
agent whose turn it is and returns the observation of the next agent to move.
`ParallelPettingZooEnv` wraps a `pettingzoo.ParallelEnv`, where every live agent acts at once.
PettingZoo is imported only when a wrapper is built, so this module imports without it.
"""
from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.errors import EnvError, install_hint
from rlx.utils.typing import AgentID, MultiAgentDict

StepResult = tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]


def _dict_space(spaces: dict[AgentID, gym.Space]) -> gym.spaces.Dict:
    """The per-agent spaces as one gym Dict keyed by agent id (RLlib's PettingZooEnv offers them so)."""
    # gymnasium types Dict keys as str; agent ids are any hashable, which Dict holds as well.
    return gym.spaces.Dict(spaces)  # type: ignore[arg-type]


class PettingZooEnv(MultiAgentEnv):
    """A PettingZoo AEC env as a MultiAgentEnv: agents take turns, one agent acts per step.

    `reset()` returns the observation of `env.agent_selection` only. `step({agent: action})`
    takes the action of that agent, then removes agents that are terminated or truncated (by
    stepping them with `None`, as PettingZoo requires) and returns the observation of the next
    agent to act. An agent that leaves gets its flags and its last observation in the step it
    leaves; every other agent in the episode gets False flags. `rewards` holds every agent's
    reward from that step (`env.rewards`), so each reward reaches its agent exactly once,
    in the step it is given. `"__all__"` is True when no agents are left.
    """

    def __init__(self, env: Any):
        super().__init__()
        _check_pettingzoo_env(env, "aec", type(self).__name__)
        self.env = env
        self.possible_agents = _possible_agents(env, type(self).__name__)
        self.observation_spaces, self.action_spaces = _agent_spaces(env, self.possible_agents)
        # RLlib's PettingZooEnv exposes the spaces also as gym Dicts keyed by agent id.
        self.observation_space = _dict_space(self.observation_spaces)
        self.action_space = _dict_space(self.action_spaces)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._has_reset = False

    @property
    def agents(self) -> list[AgentID]:  # type: ignore[override]  # read-only: the PettingZoo env's agents
        """The agents now in the episode (PettingZoo's `env.agents`; empty before reset())."""
        return _current_agents(self.env) if self._has_reset else []

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the AEC env (seeding it with `seed`); `(obs, infos)` of the agent that moves first."""
        self.env.reset(seed=seed, options=options)
        self._has_reset = True
        if not _current_agents(self.env):
            return {}, {}
        agent = self.env.agent_selection
        return {agent: self.env.observe(agent)}, {agent: _info(self.env, agent)}

    def step(self, action_dict: MultiAgentDict) -> StepResult:  # type: ignore[override]  # see MultiAgentEnv.step
        """Act for the agent whose turn it is; `(obs, rewards, terminateds, truncateds, infos)`.

        `action_dict` must hold exactly one action, for the agent in the last obs dict.
        """
        env = self.env
        live = _live_agents_or_raise(self, env)
        selected = env.agent_selection
        if not isinstance(action_dict, dict) or list(action_dict) != [selected]:
            got = (f"actions for agents {sorted(action_dict, key=str)}" if isinstance(action_dict, dict)
                   else f"a {type(action_dict).__name__}")
            raise EnvError(f"{type(self).__name__}.step() got {got}, but it is agent {selected!r}'s turn "
                           f"(env.agent_selection). A PettingZoo AEC env moves one agent at a time: pass "
                           f"{{{selected!r}: action}}, keyed by the agent in the last obs dict.")
        env.step(action_dict[selected])

        # Read the rewards now: the dead steps below call PettingZoo's `_was_dead_step`, which
        # clears `env.rewards`. `env._cumulative_rewards` is not a safe source: parallel_to_aec
        # does not zero it when an agent acts mid-cycle, so it can still hold rewards that were
        # reported before.
        rewards = dict.fromkeys(live, 0.0)
        rewards.update({agent: _reward(r) for agent, r in env.rewards.items()})

        obs, infos, terminateds, truncateds = {}, {}, {}, {}
        while _current_agents(env):
            agent = env.agent_selection
            terminated = bool(env.terminations.get(agent, False))
            truncated = bool(env.truncations.get(agent, False))
            if not (terminated or truncated):
                break
            obs[agent], infos[agent] = env.observe(agent), _info(env, agent)
            terminateds[agent], truncateds[agent] = terminated, truncated
            env.step(None)
            if agent in _current_agents(env):
                raise EnvError(f"{type(env).__name__}.step(None) for the done agent {agent!r} left it in env.agents; "
                               f"a PettingZoo env must remove a terminated or truncated agent when it is stepped "
                               f"with None (call self._was_dead_step(action) at the top of step()).")

        now = _current_agents(env)
        if now:
            agent = env.agent_selection
            obs[agent], infos[agent] = env.observe(agent), _info(env, agent)
        for agent in [*live, *now]:
            if agent in terminateds:
                continue
            if agent in now:
                terminateds[agent] = truncateds[agent] = False
            else:
                # The env dropped the agent itself, without a step(None): it is done now.
                terminated = bool(env.terminations.get(agent, False))
                truncated = bool(env.truncations.get(agent, False))
                terminateds[agent], truncateds[agent] = terminated or not truncated, truncated
        left = [agent for agent in terminateds if agent not in now]
        terminateds[ALL_AGENTS], truncateds[ALL_AGENTS] = _all_flags(not now, left, terminateds, truncateds)
        return obs, rewards, terminateds, truncateds, infos

    @property
    def get_sub_environments(self) -> Any:
        """The unwrapped PettingZoo env (RLlib's property of the same name)."""
        return self.env.unwrapped

    def render(self) -> Any:
        """Render the PettingZoo env (in the `render_mode` it was made with)."""
        return self.env.render()

    def close(self) -> None:
        """Close the PettingZoo env."""
        self.env.close()


class ParallelPettingZooEnv(MultiAgentEnv):
    """A PettingZoo ParallelEnv as a MultiAgentEnv: every live agent acts in every step.

    `reset()` and `step()` return PettingZoo's dicts, with `"__all__"` added to terminateds and
    truncateds: `terminateds["__all__"]` when every agent ended terminated, `truncateds["__all__"]`
    when every agent ended truncated, or when all agents are done for mixed reasons (so the
    episode always ends once no agent is left).
    """

    def __init__(self, env: Any):
        super().__init__()
        _check_pettingzoo_env(env, "parallel", type(self).__name__)
        self.par_env = env
        self.possible_agents = _possible_agents(env, type(self).__name__)
        self.observation_spaces, self.action_spaces = _agent_spaces(env, self.possible_agents)
        self.observation_space = _dict_space(self.observation_spaces)
        self.action_space = _dict_space(self.action_spaces)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._has_reset = False

    @property
    def env(self) -> Any:
        """The wrapped ParallelEnv (also `par_env`, RLlib's name)."""
        return self.par_env

    @property
    def agents(self) -> list[AgentID]:  # type: ignore[override]  # read-only: the PettingZoo env's agents
        """The agents now in the episode (PettingZoo's `env.agents`; empty before reset())."""
        return _current_agents(self.par_env) if self._has_reset else []

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the ParallelEnv (seeding it with `seed`); `(obs, infos)` of every agent."""
        out = self.par_env.reset(seed=seed, options=options)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise EnvError(f"{type(self.par_env).__name__}.reset() returned {type(out).__name__}, not "
                           f"(observations, infos); {type(self).__name__} needs a PettingZoo >= 1.24 ParallelEnv.")
        self._has_reset = True
        obs, infos = out
        # Infos are keyed by the agents that observe (aec_to_parallel also returns the done ones).
        return dict(obs), {agent: info for agent, info in (infos or {}).items() if agent in obs}

    def step(self, action_dict: MultiAgentDict) -> StepResult:  # type: ignore[override]  # see MultiAgentEnv.step
        """Step every live agent at once; `(obs, rewards, terminateds, truncateds, infos)`."""
        live = _live_agents_or_raise(self, self.par_env)
        if not isinstance(action_dict, dict):
            raise EnvError(f"{type(self).__name__}.step() takes a dict of actions keyed by agent id, got "
                           f"{type(action_dict).__name__}.")
        unknown = [agent for agent in action_dict if agent not in live]
        if unknown:
            raise EnvError(f"{type(self).__name__}.step() got an action for agent {unknown[0]!r}, which is not "
                           f"in the episode now (live agents: {live}). Send actions only for the agents in the "
                           f"last obs dict that are not done.")
        obs, rewards, terminations, truncations, infos = self.par_env.step(action_dict)
        terminateds = {agent: bool(flag) for agent, flag in terminations.items()}
        truncateds = {agent: bool(flag) for agent, flag in truncations.items()}
        flagged = [*terminateds, *(agent for agent in truncateds if agent not in terminateds)]
        all_done = not _current_agents(self.par_env) or (
            bool(flagged) and all(terminateds.get(a, False) or truncateds.get(a, False) for a in flagged))
        terminateds[ALL_AGENTS], truncateds[ALL_AGENTS] = _all_flags(all_done, flagged, terminateds, truncateds)
        return (dict(obs), {agent: _reward(r) for agent, r in rewards.items()}, terminateds, truncateds,
                dict(infos))

    @property
    def get_sub_environments(self) -> Any:
        """The unwrapped PettingZoo env (RLlib's property of the same name)."""
        return self.par_env.unwrapped

    def render(self) -> Any:
        """Render the PettingZoo env (in the `render_mode` it was made with)."""
        return self.par_env.render()

    def close(self) -> None:
        """Close the PettingZoo env."""
        self.par_env.close()


# ---------------------------------------------------------------- helpers


def _check_pettingzoo_env(env: Any, kind: str, wrapper: str) -> None:
    """Raise EnvError unless `env` is a PettingZoo env of `kind` ("aec" or "parallel")."""
    try:
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError as err:
        raise ImportError(f"{wrapper} needs the pettingzoo package, which is not installed. Install it with: "
                          f"{install_hint('pettingzoo')}") from err
    want, other = (AECEnv, ParallelEnv) if kind == "aec" else (ParallelEnv, AECEnv)
    if isinstance(env, want):
        return
    if isinstance(env, other) and kind == "aec":
        hint = ("it is a ParallelEnv: wrap it with ParallelPettingZooEnv(env), or convert it with "
                "pettingzoo.utils.conversions.parallel_to_aec(env) first.")
    elif isinstance(env, other):
        hint = ("it is an AEC env: wrap it with PettingZooEnv(env), or convert it with "
                "pettingzoo.utils.conversions.aec_to_parallel(env) first (parallelizable envs only).")
    elif inspect.ismodule(env) or inspect.isclass(env) or callable(env):
        example = "rps_v2.env()" if kind == "aec" else "rps_v2.parallel_env()"
        hint = (f"pass an env instance, not {'a module' if inspect.ismodule(env) else 'a class or function'} "
                f"that makes one: e.g. {wrapper}({example}) or {wrapper}(pettingzoo.make({kind!r}, 'classic/rps-v2')).")
    else:
        hint = f"it must be an instance of pettingzoo.{want.__name__}."
    raise EnvError(f"{wrapper} wraps a PettingZoo {want.__name__}, got {type(env).__name__} {env!r:.100}; {hint}")


def _possible_agents(env: Any, wrapper: str) -> list[AgentID]:
    agents = getattr(env, "possible_agents", None)
    if not agents:
        raise EnvError(f"{type(env).__name__} has no possible_agents; {wrapper} needs the list of every agent "
                       f"that can appear (PettingZoo envs set self.possible_agents in __init__).")
    return list(agents)


def _agent_spaces(env: Any, agents: list[AgentID]) -> tuple[dict[AgentID, gym.Space], dict[AgentID, gym.Space]]:
    return ({agent: env.observation_space(agent) for agent in agents},
            {agent: env.action_space(agent) for agent in agents})


def _current_agents(env: Any) -> list[AgentID]:
    """`env.agents`, or [] where the env does not have them yet (OrderEnforcingWrapper before reset)."""
    try:
        return list(env.agents)
    except AttributeError:
        return []


def _live_agents_or_raise(wrapper: Any, env: Any) -> list[AgentID]:
    name = type(wrapper).__name__
    if not wrapper._has_reset:
        raise EnvError(f"{name}.step() was called before reset(); call reset() to start an episode first.")
    live = _current_agents(env)
    if not live:
        raise EnvError(f"{name}.step() was called after the episode ended (no agents are left); call reset() "
                       f"to start a new episode.")
    return live


def _all_flags(all_done: bool, ended: list[AgentID], terminateds: MultiAgentDict,
               truncateds: MultiAgentDict) -> tuple[bool, bool]:
    """`("__all__" terminated, "__all__" truncated)` from the flags of the agents that just ended.

    Terminated when every one of them terminated, truncated when every one was truncated; when
    they ended for mixed reasons it counts as truncated, so a finished episode always ends.
    """
    terminated = all_done and bool(ended) and all(terminateds[agent] for agent in ended)
    truncated = all_done and (not terminated or all(truncateds.get(agent, False) for agent in ended))
    return terminated, truncated


def _info(env: Any, agent: AgentID) -> Any:
    info = env.infos.get(agent, {})
    # A copy, since PettingZoo envs update their info dicts in place.
    return dict(info) if isinstance(info, dict) else info


def _reward(reward: Any) -> Any:
    try:
        return float(reward)
    except (TypeError, ValueError):
        return reward  # the env checker names the bad value

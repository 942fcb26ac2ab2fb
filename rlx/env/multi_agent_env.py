"""MultiAgentEnv: an env whose observations, actions, rewards and flags are dicts keyed by agent id.

`reset()` returns `(obs, infos)` and `step(action_dict)` returns `(obs, rewards, terminateds,
truncateds, infos)`, each a dict keyed by agent id. An agent acts in the next step exactly
when it appears in the last `obs` dict, so agents can act in turns and appear or leave
mid-episode. `terminateds` and `truncateds` carry the key `"__all__"`, which ends the episode
for every agent. Spaces are per agent: `observation_spaces` / `action_spaces` dicts (or one
`observation_space` / `action_space` shared by all agents).
"""
from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from rlx.env.env_context import EnvContext
from rlx.utils.checkpoint_recipes import set_recipe
from rlx.utils.registry import get_registered_creator, import_object, make_env_creator
from rlx.utils.typing import AgentID, MultiAgentDict

#: The key of terminateds/truncateds that ends the episode for every agent.
ALL_AGENTS = "__all__"
#: The key of an info dict that holds info for every agent (RLlib's "__common__").
COMMON_INFO = "__common__"
#: The observation key of a global state, for envs that offer one (RLlib's ENV_STATE).
ENV_STATE = "state"


class MultiAgentEnv(gym.Env):
    """Base class of multi-agent envs (RLlib's `MultiAgentEnv`).

    Subclasses set `self.agents` (the agents now in the episode), `self.possible_agents` (every
    agent that may ever appear) and the per-agent spaces, and implement `reset()` and `step()`.
    """

    #: Agent ids now in the episode (subclasses update it in reset()/step()).
    agents: list[AgentID] = []
    #: Every agent id that can appear in an episode.
    possible_agents: list[AgentID] = []
    #: {agent_id: observation space}; None when `observation_space` is shared by all agents.
    observation_spaces: dict[AgentID, gym.Space] | None = None
    #: {agent_id: action space}; None when `action_space` is shared by all agents.
    action_spaces: dict[AgentID, gym.Space] | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start an episode; subclasses return `(obs, infos)` keyed by the agents that act first.

        The base seeds `self.np_random` (as gymnasium.Env.reset does), so subclasses call
        `super().reset(seed=seed, options=options)` first, as in RLlib.
        """
        return super().reset(seed=seed, options=options)

    # RLlib's MultiAgentEnv is a gymnasium.Env whose step returns per-agent dicts (rewards and
    # flags included), which gymnasium's signature cannot say: hence the type: ignore here and on
    # the subclasses' step.
    def step(self, action_dict: MultiAgentDict) -> tuple[  # type: ignore[override]
            MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Apply the actions of the agents that observed last; `(obs, rewards, terminateds,
        truncateds, infos)`, the flags with an `"__all__"` key."""
        raise TypeError(f"{type(self).__name__} must implement step(action_dict).")

    def get_observation_space(self, agent_id: AgentID) -> gym.Space:
        """The observation space of `agent_id`."""
        return _agent_space(self, agent_id, "observation")

    def get_action_space(self, agent_id: AgentID) -> gym.Space:
        """The action space of `agent_id`."""
        return _agent_space(self, agent_id, "action")

    def get_agent_ids(self) -> set[AgentID]:
        """Every agent id that can appear (old API)."""
        return set(self.possible_agents or self.agents or getattr(self, "_agent_ids", None) or ())

    @property
    def num_agents(self) -> int:
        """How many agents are now in the episode."""
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        """How many agents can appear in an episode."""
        return len(self.possible_agents)

    def render(self) -> Any:
        """Render the env (none by default)."""
        return None


def _agent_space(env: Any, agent_id: AgentID, kind: str) -> gym.Space:
    """`<kind>_spaces[agent_id]`, else the shared `<kind>_space` (a gym Dict keyed by agent ids
    is read per agent, RLlib's old convention); KeyError naming the agent when neither has it."""
    spaces = getattr(env, f"{kind}_spaces", None)
    if spaces:
        if agent_id in spaces:
            return spaces[agent_id]
        raise KeyError(f"{type(env).__name__}.{kind}_spaces has no space for agent {agent_id!r}; it has "
                       f"{sorted(map(str, spaces))}.")
    space = getattr(env, f"{kind}_space", None)
    if isinstance(space, gym.spaces.Dict) and agent_id in space.spaces and _keyed_by_agents(env, space):
        return space[agent_id]
    if space is None:
        raise KeyError(f"{type(env).__name__} defines neither {kind}_spaces nor {kind}_space; set "
                       f"self.{kind}_spaces = {{agent_id: space, ...}} in its __init__.")
    return space


def _keyed_by_agents(env: Any, space: gym.spaces.Dict) -> bool:
    agents = set(getattr(env, "possible_agents", None) or getattr(env, "agents", None) or
                 getattr(env, "_agent_ids", None) or ())
    return bool(agents) and set(space.spaces) <= agents


def make_multi_agent(env_name_or_creator: str | Callable[[Any], Any]) -> type[MultiAgentEnv]:
    """A MultiAgentEnv class whose agents 0..num_agents-1 each play their own copy of a single-agent env.

    `env_name_or_creator` is a Gymnasium id (or any name `config.environment()` accepts) or a
    callable `creator(env_config) -> env`. The class takes an env config with `num_agents`
    (default 1). An agent whose episode ends leaves; the episode ends when every agent's has.

    Checkpoints store the class as this call, `make_multi_agent(env_name_or_creator)`, when
    its argument can be stored (a name, or a class or creator defined at module level).
    """
    class MultiEnv(MultiAgentEnv):
        """`num_agents` independent copies of one env, each played by its own agent."""

        def __init__(self, config: dict | None = None):
            super().__init__()
            config = config if config is not None else {}
            num = int(config.get("num_agents", 1))
            if num < 1:
                raise ValueError(f"make_multi_agent env needs num_agents >= 1, got {num}.")
            if callable(env_name_or_creator):
                self.envs = [env_name_or_creator(config) for _ in range(num)]
            else:
                # A named env gets the env config without num_agents (a Gymnasium id passes
                # every key to the env's constructor).
                create, _ = make_env_creator(env_name_or_creator)
                rest = {k: v for k, v in dict(config).items() if k != "num_agents"}
                ctx = config.copy_with_overrides(rest) if isinstance(config, EnvContext) else EnvContext(rest)
                self.envs = [create(ctx) for _ in range(num)]
            self.possible_agents = list(range(num))
            self.agents = list(self.possible_agents)
            self.observation_spaces = {i: env.observation_space for i, env in enumerate(self.envs)}
            self.action_spaces = {i: env.action_space for i, env in enumerate(self.envs)}
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
            self._done: set[int] = set()

        def reset(self, *, seed: int | None = None, options: dict | None = None
                  ) -> tuple[MultiAgentDict, MultiAgentDict]:
            self._done = set()
            self.agents = list(self.possible_agents)
            obs, infos = {}, {}
            for i, env in enumerate(self.envs):
                obs[i], infos[i] = env.reset(seed=None if seed is None else seed + i, options=options)
            return obs, infos

        def step(self, action_dict: MultiAgentDict) -> tuple[  # type: ignore[override]  # see MultiAgentEnv.step
                MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
            obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
            for i, action in action_dict.items():
                obs[i], rewards[i], terminateds[i], truncateds[i], infos[i] = self.envs[i].step(action)
                if terminateds[i] or truncateds[i]:
                    self._done.add(i)
            self.agents = [i for i in self.possible_agents if i not in self._done]
            everyone = len(self._done) == len(self.envs)
            terminateds[ALL_AGENTS] = everyone and all(terminateds.get(i, True) for i in action_dict)
            truncateds[ALL_AGENTS] = everyone and not terminateds[ALL_AGENTS]
            return obs, rewards, terminateds, truncateds, infos

        def render(self) -> Any:
            return self.envs[0].render()

        def close(self) -> None:
            for env in self.envs:
                env.close()

    name = env_name_or_creator if isinstance(env_name_or_creator, str) else \
        getattr(env_name_or_creator, "__name__", "env")
    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent{''.join(c for c in str(name) if c.isalnum())}"
    # A checkpoint stores the class as this call (an env name, or a creator with an import path).
    set_recipe(MultiEnv, "make_multi_agent", env_name_or_creator)
    return MultiEnv


def names_multi_agent_env_class(env: Any) -> bool:
    """Whether `config.environment(env)` names a MultiAgentEnv class (directly or by import path).
    Creators and registered names are not called here: what they return is known once built."""
    if isinstance(env, type):
        return issubclass(env, MultiAgentEnv)
    if isinstance(env, str) and (":" in env or "." in env):
        if get_registered_creator(env) is not None:
            return False
        try:
            target = import_object(env)
        except Exception:  # not an import path: env creation reports what it is
            return False
        return isinstance(target, type) and issubclass(target, MultiAgentEnv)
    return False

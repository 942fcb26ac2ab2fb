"""TwoStepGame: a cooperative two-agent matrix game that needs coordination.

RLlib's `ray.rllib.examples.envs.classes.multi_agent.two_step_game` (the QMIX paper's game).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Dict, Discrete, MultiDiscrete, Tuple

from rlx.env.multi_agent_env import ALL_AGENTS, ENV_STATE, MultiAgentEnv
from rlx.utils.typing import MultiAgentDict

__all__ = ["TwoStepGame", "TwoStepGameWithGroupedAgents"]

#: RLlib's info keys of a grouped agent: its members' infos and rewards.
GROUP_INFO = "_group_info"
GROUP_REWARDS = "_group_rewards"


class TwoStepGame(MultiAgentEnv):
    """Agents 0 and 1; three states, one-hot `[1, 0, 0]` (start), `[0, 1, 0]` and `[0, 0, 1]`.

    In the start state, agent 0's action picks the next state (0 -> state 2, 1 -> state 3);
    agent 1's action does not matter. In state 2 the game ends with a global reward of 7 no
    matter what. In state 3 it ends with 8 if both agents play 1, 0 if both play 0 and 1
    otherwise. Each agent is rewarded half the global reward. Actions: Discrete(2).

    Env config keys:

    - `one_hot_state_encoding` (default False): observe the one-hot state plus the agent's
      number (1 or 2), MultiDiscrete([2, 2, 2, 3]); otherwise Discrete(6): the state index
      (agent 0) or the state index + 3 (agent 1).
    - `separate_state_space` (only with one-hot encoding): observe
      `{"obs": <as above>, "state": <the one-hot state>}` (the key is `ENV_STATE`).
    - `actions_are_logits` (default False): actions are probability pairs (as MADDPG emits);
      the env samples the discrete action from each.
    """

    def __init__(self, env_config: dict | None = None):
        super().__init__()
        env_config = env_config or {}
        self.action_space = Discrete(2)
        self.state: np.ndarray | None = None
        self.agent_1 = 0
        self.agent_2 = 1
        self.possible_agents = [self.agent_1, self.agent_2]
        self.agents = list(self.possible_agents)
        self._agent_ids = set(self.possible_agents)
        self.actions_are_logits = bool(env_config.get("actions_are_logits", False))
        self.one_hot_state_encoding = bool(env_config.get("one_hot_state_encoding", False))
        self.with_state = bool(env_config.get("separate_state_space", False)) and self.one_hot_state_encoding
        if not self.one_hot_state_encoding:
            self.observation_space = Discrete(6)
        elif self.with_state:
            self.observation_space = Dict({"obs": MultiDiscrete([2, 2, 2, 3]), ENV_STATE: MultiDiscrete([2, 2, 2])})
        else:
            self.observation_space = MultiDiscrete([2, 2, 2, 3])

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Go to the start state; both agents observe."""
        gym.Env.reset(self, seed=seed)  # seeds self.np_random
        self.state = np.array([1, 0, 0])
        return self._obs(), {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Apply both agents' actions (see the class docstring for the rules)."""
        if self.actions_are_logits:
            action_dict = {k: int(self.np_random.choice(2, p=v)) for k, v in action_dict.items()}
        state_index = int(np.flatnonzero(self.state)[0])
        if state_index == 0:
            action = action_dict[self.agent_1]
            if action not in (0, 1):
                raise ValueError(f"TwoStepGame actions are 0 and 1, got {action!r}.")
            self.state = np.array([0, 1, 0]) if action == 0 else np.array([0, 0, 1])
            global_rew, terminated = 0, False
        elif state_index == 1:
            global_rew, terminated = 7, True
        else:
            a1, a2 = action_dict[self.agent_1], action_dict[self.agent_2]
            global_rew = 0 if a1 == a2 == 0 else (8 if a1 == a2 == 1 else 1)
            terminated = True
        rewards = {self.agent_1: global_rew / 2.0, self.agent_2: global_rew / 2.0}
        infos = {self.agent_1: {"done": terminated}, self.agent_2: {"done": terminated}}
        return self._obs(), rewards, {ALL_AGENTS: terminated}, {ALL_AGENTS: False}, infos

    def _obs(self) -> MultiAgentDict:
        if self.with_state:
            return {self.agent_1: {"obs": self.agent_1_obs(), ENV_STATE: self.state},
                    self.agent_2: {"obs": self.agent_2_obs(), ENV_STATE: self.state}}
        return {self.agent_1: self.agent_1_obs(), self.agent_2: self.agent_2_obs()}

    def agent_1_obs(self) -> Any:
        """Agent 0's observation of the current state."""
        if self.one_hot_state_encoding:
            return np.concatenate([self.state, [1]])
        return int(np.flatnonzero(self.state)[0])

    def agent_2_obs(self) -> Any:
        """Agent 1's observation of the current state."""
        if self.one_hot_state_encoding:
            return np.concatenate([self.state, [2]])
        return int(np.flatnonzero(self.state)[0]) + 3


class TwoStepGameWithGroupedAgents(MultiAgentEnv):
    """TwoStepGame with agents 0 and 1 grouped into one agent, "agents".

    "agents" observes the Tuple of both observations and acts with a Tuple of both actions;
    its reward is the sum of theirs (the parts are in `infos["agents"]["_group_rewards"]`),
    and its infos hold the members' infos under "_group_info". Env config as TwoStepGame.
    (RLlib builds this with `MultiAgentEnv.with_agent_groups()`; rlx groups the two agents
    here directly.)
    """

    GROUP = "agents"

    def __init__(self, env_config: dict | None = None):
        super().__init__()
        self.env = TwoStepGame(env_config)
        self.members = [self.env.agent_1, self.env.agent_2]
        self.possible_agents = [self.GROUP]
        self.agents = [self.GROUP]
        self._agent_ids = {self.GROUP}
        self.observation_spaces = {self.GROUP: Tuple([self.env.observation_space] * 2)}
        self.action_spaces = {self.GROUP: Tuple([self.env.action_space] * 2)}

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the game; "agents" observes both observations."""
        obs, infos = self.env.reset(seed=seed, options=options)
        return {self.GROUP: tuple(obs[m] for m in self.members)}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Split the group's Tuple action among its members and step the game."""
        actions = action_dict[self.GROUP]
        if len(actions) != len(self.members):
            raise ValueError(f"The group action needs {len(self.members)} parts, got {actions!r}.")
        obs, rewards, terminateds, truncateds, infos = self.env.step(dict(zip(self.members, actions)))
        parts = [rewards[m] for m in self.members]
        group_infos = {self.GROUP: {GROUP_INFO: [infos.get(m, {}) for m in self.members], GROUP_REWARDS: parts}}
        return ({self.GROUP: tuple(obs[m] for m in self.members)}, {self.GROUP: float(sum(parts))},
                {ALL_AGENTS: terminateds[ALL_AGENTS]}, {ALL_AGENTS: truncateds[ALL_AGENTS]}, group_infos)

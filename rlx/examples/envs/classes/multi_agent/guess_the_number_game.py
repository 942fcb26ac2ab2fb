"""GuessTheNumberGame: one agent picks a number, the other finds it by asking questions.

RLlib's `ray.rllib.examples.envs.classes.multi_agent.guess_the_number_game`.
"""
from __future__ import annotations

import gymnasium as gym

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.typing import MultiAgentDict

__all__ = ["GuessTheNumberGame"]

LOWER, HIGHER, EQUAL = 0, 1, 2


class GuessTheNumberGame(MultiAgentEnv):
    """Agent 0 picks a number in [0, max_number); agent 1 then guesses it with questions.

    Both agents act with MultiDiscrete([3, max_number]) = (question, number) and observe
    Discrete(2) (always 0). Agent 0 acts once, after reset: only the number part counts. Agent
    1 then acts every step, asking whether `number` is lower (0) or higher (1) than the picked
    number — reward 1 for "yes", 0 for "no" — or whether it is equal (2): a correct guess
    gives agent 1 +100, agent 0 -100 and terminates the episode, a wrong one gives 0. Agent 0
    gets +1 for each question that is not a correct guess. After `max_steps` questions the
    episode is truncated and, if agent 1 never guessed right, agent 0 gets +100.

    Env config keys: `max_number` (default 3) and `max_steps` (default 20).
    """

    MAX_NUMBER = 3
    MAX_STEPS = 20

    def __init__(self, config: dict | None = None):
        super().__init__()
        config = config or {}
        self.possible_agents = [0, 1]
        self.agents = list(self.possible_agents)
        self._agent_ids = {0, 1}
        self.max_number = int(config.get("max_number", self.MAX_NUMBER))
        self.max_steps = int(config.get("max_steps", self.MAX_STEPS))
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.MultiDiscrete([3, self.max_number])
        self._number: int | None = None
        self._step = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Agent 0 observes first (and picks the number)."""
        gym.Env.reset(self, seed=seed)  # seeds self.np_random
        self._step = 0
        self._number = None
        return {0: 0}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Agent 0 picks the number, or agent 1 asks a question."""
        if action_dict.get(0) is not None:
            self._number = int(action_dict[0][1])
            return {1: 0}, {0: 0.0}, {0: False, ALL_AGENTS: False}, {0: False, ALL_AGENTS: False}, {}
        if self._number is None:
            raise ValueError("No number is selected by agent 0. Have you restarted the environment?")
        direction, number = (int(x) for x in action_dict[1])
        guessed = False
        terminateds = {1: False, ALL_AGENTS: False}
        truncateds = {1: False, ALL_AGENTS: False}
        if direction == LOWER:
            rewards = {1: float(number > self._number), 0: 1.0}
        elif direction == HIGHER:
            rewards = {1: float(number < self._number), 0: 1.0}
        else:
            guessed = number == self._number
            rewards = {1: 100.0 * guessed, 0: -100.0 * guessed}
            terminateds = {1: guessed, ALL_AGENTS: guessed}
        self._step += 1
        if self._step >= self.max_steps:
            truncateds[ALL_AGENTS] = True
            if not guessed:
                rewards[0] = 100.0
        return {1: 0}, rewards, terminateds, truncateds, {}

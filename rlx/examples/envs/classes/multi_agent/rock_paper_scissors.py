"""RockPaperScissors: two players move at the same time, optionally with lizard and Spock.

RLlib's `ray.rllib.examples.envs.classes.multi_agent.rock_paper_scissors`.
"""
from __future__ import annotations

import gymnasium as gym

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.typing import MultiAgentDict

__all__ = ["RockPaperScissors"]

ROCK, PAPER, SCISSORS, LIZARD, SPOCK = range(5)
#: What each move beats (rock crushes scissors and lizard, paper covers rock and disproves Spock, ...).
_BEATS = {
    ROCK: {SCISSORS, LIZARD},
    PAPER: {ROCK, SPOCK},
    SCISSORS: {PAPER, LIZARD},
    LIZARD: {SPOCK, PAPER},
    SPOCK: {SCISSORS, ROCK},
}


def _outcome(move1: int, move2: int) -> tuple[int, int]:
    if move2 in _BEATS[move1]:
        return 1, -1
    if move1 in _BEATS[move2]:
        return -1, 1
    return 0, 0


class RockPaperScissors(MultiAgentEnv):
    """Rock-paper-scissors for "player1" and "player2", who move at the same time for 10 rounds.

    Actions are Discrete(3): ROCK=0, PAPER=1, SCISSORS=2. With the env config
    `sheldon_cooper_mode=True` they are Discrete(5), adding LIZARD=3 and SPOCK=4 (Spock smashes
    scissors and vaporizes rock, lizard poisons Spock and eats paper; both lose to the rest).
    Each player observes the opponent's last move (0 before the first; the observation space
    equals the action space). A round's winner gets +1, the loser -1, a tie 0 each. The
    episode terminates after `num_moves` rounds (env config, default 10).
    """

    ROCK, PAPER, SCISSORS, LIZARD, SPOCK = ROCK, PAPER, SCISSORS, LIZARD, SPOCK
    #: {(move1, move2): (reward1, reward2)} for all moves, Sheldon Cooper mode's included.
    WIN_MATRIX = {(m1, m2): _outcome(m1, m2) for m1 in range(5) for m2 in range(5)}

    def __init__(self, config: dict | None = None):
        super().__init__()
        config = config or {}
        self.possible_agents = ["player1", "player2"]
        self.agents = list(self.possible_agents)
        self.sheldon_cooper_mode = bool(config.get("sheldon_cooper_mode", False))
        n = 5 if self.sheldon_cooper_mode else 3
        self.observation_spaces = self.action_spaces = {aid: gym.spaces.Discrete(n) for aid in self.possible_agents}
        self.max_moves = int(config.get("num_moves", 10))
        self.num_moves = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start a game; both players observe 0."""
        gym.Env.reset(self, seed=seed)  # seeds self.np_random
        self.num_moves = 0
        return {"player1": 0, "player2": 0}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Play one round; both players must move."""
        self.num_moves += 1
        move1, move2 = int(action_dict["player1"]), int(action_dict["player2"])
        r1, r2 = self.WIN_MATRIX[move1, move2]
        observations = {"player1": move2, "player2": move1}
        rewards = {"player1": float(r1), "player2": float(r2)}
        return observations, rewards, {ALL_AGENTS: self.num_moves >= self.max_moves}, {}, {}

"""TicTacToe: two players take turns on a 3x3 board.

RLlib's `ray.rllib.examples.envs.classes.multi_agent.tic_tac_toe`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.typing import MultiAgentDict

__all__ = ["TicTacToe"]


class TicTacToe(MultiAgentEnv):
    """Turn-based tic-tac-toe for "player1" and "player2"; a random player starts.

    Only the player to move observes: the 9 cells (row by row) from its own perspective,
    Box(-1.0, 1.0, (9,), float32) with 1.0 its own marks, -1.0 the opponent's, 0.0 empty. An
    action is the cell to mark (Discrete(9)). Marking an occupied cell costs -0.5 and passes
    the turn with the board unchanged. Three in a row wins: +1.0 for the winner, -1.0 for the
    loser; a full board is a draw (0.0 each); both then get a last observation and the
    episode terminates. After 30 moves (`max_timesteps`) the episode is truncated.
    """

    #: Rows, columns and diagonals that win.
    WIN_LINES = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.possible_agents = ["player1", "player2"]
        self.agents = list(self.possible_agents)
        board = gym.spaces.Box(-1.0, 1.0, (9,), np.float32)
        self.observation_spaces = {aid: board for aid in self.possible_agents}
        self.action_spaces = {aid: gym.spaces.Discrete(9) for aid in self.possible_agents}
        self.max_timesteps = 30
        # The board from the current player's perspective (1 own, -1 opponent's, 0 empty).
        self.board = [0] * 9
        self.current_player = "player1"
        self.timestep = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Empty the board; a random player observes and moves first."""
        gym.Env.reset(self, seed=seed)  # seeds self.np_random
        self.board = [0] * 9
        self.current_player = self.possible_agents[int(self.np_random.integers(2))]
        self.timestep = 0
        return {self.current_player: self._board()}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Mark the current player's cell; pass the turn or end the game."""
        player = self.current_player
        opponent = "player2" if player == "player1" else "player1"
        cell = int(action_dict[player])
        self.timestep += 1
        if self.board[cell] != 0:
            if self.timestep >= self.max_timesteps:
                return self._final(player, opponent, -0.5, 0.0, truncated=True)
            return self._pass_turn(opponent, {player: -0.5})
        self.board[cell] = 1
        if any(all(self.board[i] == 1 for i in line) for line in self.WIN_LINES):
            return self._final(player, opponent, 1.0, -1.0)
        if 0 not in self.board:
            return self._final(player, opponent, 0.0, 0.0)
        if self.timestep >= self.max_timesteps:
            return self._final(player, opponent, 0.0, 0.0, truncated=True)
        return self._pass_turn(opponent, {player: 0.0})

    def _board(self) -> np.ndarray:
        return np.array(self.board, np.float32)

    def _pass_turn(self, opponent: str, rewards: dict) -> tuple[MultiAgentDict, ...]:
        self.board = [-x for x in self.board]
        self.current_player = opponent
        return {opponent: self._board()}, rewards, {ALL_AGENTS: False}, {ALL_AGENTS: False}, {}

    def _final(self, player: str, opponent: str, reward: float, opponent_reward: float,
               truncated: bool = False) -> tuple[MultiAgentDict, ...]:
        board = self._board()
        obs = {player: board, opponent: -board}
        rewards = {player: reward, opponent: opponent_reward}
        return obs, rewards, {ALL_AGENTS: not truncated}, {ALL_AGENTS: truncated}, {}

    def render(self) -> str:
        """The board as ASCII art: X the current player's marks, O the opponent's."""
        symbols = {0: " ", 1: "X", -1: "O"}
        rows = [" " + " | ".join(symbols[self.board[r * 3 + c]] for c in range(3)) + " " for r in range(3)]
        return "\n" + "\n-----------\n".join(rows) + "\n"

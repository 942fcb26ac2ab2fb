"""Multi-agent example envs (RLlib's `ray.rllib.examples.envs.classes.multi_agent`).

RLlib's names: `MultiAgentCartPole`, `MultiAgentPendulum`, `MultiAgentMountainCar`,
`MultiAgentStatelessCartPole`, `MultiAgentCartPoleWithDictObservationSpace`,
`MultiAgentNestedSpaceRepeatAfterMeEnv` (`num_agents` independent copies of a single-agent
env, agent ids 0..num_agents-1), `TwoStepGame`, `TwoStepGameWithGroupedAgents`,
`GuessTheNumberGame`; RLlib's `TicTacToe` and `RockPaperScissors` live in the modules
`tic_tac_toe` and `rock_paper_scissors` of this package.

rlx's own small games, for tests and docs:
- `SimpleRockPaperScissors`: two players move at the same time, ±1 per round.
- `SimpleTicTacToe`: two players move in turns, player1 first; unlike RLlib's TicTacToe an
  illegal move loses at once, so every game is zero-sum and ends within 9 moves.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv, make_multi_agent
from rlx.env.multi_agent_env_checker import check_multi_agent_step
from rlx.utils.errors import EnvError
from rlx.utils.typing import MultiAgentDict

from rlx.examples.envs.classes.cartpole_with_dict_observation_space import CartPoleWithDictObservationSpace
from rlx.examples.envs.classes.multi_agent.guess_the_number_game import GuessTheNumberGame
from rlx.examples.envs.classes.multi_agent.two_step_game import TwoStepGame, TwoStepGameWithGroupedAgents
from rlx.examples.envs.classes.nested_space_repeat_after_me_env import NestedSpaceRepeatAfterMeEnv
from rlx.examples.envs.classes.stateless_cartpole import StatelessCartPole

__all__ = ["GuessTheNumberGame", "MultiAgentCartPole", "MultiAgentCartPoleWithDictObservationSpace",
           "MultiAgentMountainCar", "MultiAgentNestedSpaceRepeatAfterMeEnv", "MultiAgentPendulum",
           "MultiAgentStatelessCartPole", "SimpleRockPaperScissors", "SimpleTicTacToe", "TwoStepGame",
           "TwoStepGameWithGroupedAgents"]


def _module_level(cls: type, name: str) -> type:
    """Name a made class after its module-level variable, so it pickles by reference."""
    cls.__name__ = cls.__qualname__ = name
    cls.__module__ = __name__
    return cls


#: CartPole-v1 for `num_agents` agents (env config {"num_agents": n}, default 1).
MultiAgentCartPole = _module_level(make_multi_agent("CartPole-v1"), "MultiAgentCartPole")
#: Pendulum-v1 for `num_agents` agents (env config {"num_agents": n}, default 1).
MultiAgentPendulum = _module_level(make_multi_agent("Pendulum-v1"), "MultiAgentPendulum")
MultiAgentMountainCar = _module_level(make_multi_agent("MountainCarContinuous-v0"), "MultiAgentMountainCar")
MultiAgentStatelessCartPole = _module_level(make_multi_agent(StatelessCartPole), "MultiAgentStatelessCartPole")
MultiAgentCartPoleWithDictObservationSpace = _module_level(
    make_multi_agent(CartPoleWithDictObservationSpace), "MultiAgentCartPoleWithDictObservationSpace")
MultiAgentNestedSpaceRepeatAfterMeEnv = _module_level(
    make_multi_agent(NestedSpaceRepeatAfterMeEnv), "MultiAgentNestedSpaceRepeatAfterMeEnv")


class SimpleRockPaperScissors(MultiAgentEnv):
    """Rock-paper-scissors: "player1" and "player2" move at the same time, `num_moves` times.

    Actions are Discrete(3) (ROCK=0, PAPER=1, SCISSORS=2). Each player observes the opponent's
    last move (0 before the first move). The winner of a round gets +1, the loser -1, a tie 0.
    The episode ends (terminateds["__all__"]) after `num_moves` rounds (env config, default 10).
    """

    ROCK, PAPER, SCISSORS = 0, 1, 2

    def __init__(self, config: dict | None = None):
        super().__init__()
        config = config or {}
        self.num_moves = int(config.get("num_moves", 10))
        self.possible_agents = ["player1", "player2"]
        self.agents = list(self.possible_agents)
        self.observation_spaces = {aid: gym.spaces.Discrete(3) for aid in self.possible_agents}
        self.action_spaces = {aid: gym.spaces.Discrete(3) for aid in self.possible_agents}
        self._moves_done = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start a game; both players observe 0."""
        self._moves_done = 0
        self.agents = list(self.possible_agents)
        return {aid: 0 for aid in self.agents}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Play one round; both players must move."""
        check_multi_agent_step(type(self).__name__, action_dict, self.agents)
        if set(action_dict) != set(self.agents):
            raise EnvError(f"SimpleRockPaperScissors.step() needs a move from both players, got {sorted(action_dict)}.")
        move1, move2 = int(action_dict["player1"]), int(action_dict["player2"])
        r1 = self.payoff(move1, move2)
        self._moves_done += 1
        done = self._moves_done >= self.num_moves
        obs = {"player1": move2, "player2": move1}
        rewards = {"player1": float(r1), "player2": float(-r1)}
        return obs, rewards, {ALL_AGENTS: done}, {ALL_AGENTS: False}, {}

    @classmethod
    def payoff(cls, move: int, other: int) -> int:
        """+1 when `move` beats `other`, -1 when it loses, 0 on a tie."""
        diff = (move - other) % 3
        return 0 if diff == 0 else (1 if diff == 1 else -1)


#: The 8 lines of three cells that win SimpleTicTacToe (cells numbered 0..8 row by row).
_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


class SimpleTicTacToe(MultiAgentEnv):
    """Turn-based tic-tac-toe: "player1" (moves first) and "player2" take turns (rlx's game; see
    the `tic_tac_toe` module for RLlib's, where an illegal move costs -0.5 and passes the turn).

    Only the player to move is in the obs dict. Its observation is the board from its own
    perspective: a float32 Box of 9 cells, +1 its own marks, -1 the opponent's, 0 empty. An
    action is the cell to mark (Discrete(9)). Three in a row wins (+1, the loser -1), a full
    board is a draw (0 each), and marking an occupied cell loses at once (-1, the opponent +1).
    The final step gives both players their reward, a last observation and terminated=True,
    though only one of them moved (RLlib's convention).
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.possible_agents = ["player1", "player2"]
        self.agents = list(self.possible_agents)
        board = gym.spaces.Box(-1.0, 1.0, (9,), np.float32)
        self.observation_spaces = {aid: board for aid in self.possible_agents}
        self.action_spaces = {aid: gym.spaces.Discrete(9) for aid in self.possible_agents}
        # +1 marks player1's cells, -1 player2's.
        self.board = np.zeros(9, dtype=np.int8)
        self.current_player = "player1"

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Empty the board; player1 observes and moves first."""
        self.board[:] = 0
        self.current_player = "player1"
        self.agents = list(self.possible_agents)
        return {self.current_player: self.observe(self.current_player)}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Mark the mover's cell; pass the turn or end the game."""
        mover = self.current_player
        check_multi_agent_step(type(self).__name__, action_dict, [mover])
        if mover not in action_dict:
            raise EnvError(f"SimpleTicTacToe.step() needs an action for {mover!r}, whose turn it is.")
        other = self._opponent(mover)
        cell = int(action_dict[mover])
        if self.board[cell] != 0:
            return self._game_over(winner=other)
        self.board[cell] = self._sign(mover)
        if self._has_line(mover):
            return self._game_over(winner=mover)
        if not (self.board == 0).any():
            return self._game_over(winner=None)
        self.current_player = other
        return ({other: self.observe(other)}, {mover: 0.0}, {ALL_AGENTS: False}, {ALL_AGENTS: False}, {})

    def observe(self, agent_id: str) -> np.ndarray:
        """The board from `agent_id`'s perspective (+1 own marks, -1 the opponent's)."""
        return (self.board * self._sign(agent_id)).astype(np.float32)

    def _game_over(self, winner: str | None) -> tuple[MultiAgentDict, ...]:
        """The final step: both players get a last obs, their reward and terminated=True."""
        self.agents = []
        obs = {aid: self.observe(aid) for aid in self.possible_agents}
        if winner is None:
            rewards = {aid: 0.0 for aid in self.possible_agents}
        else:
            rewards = {winner: 1.0, self._opponent(winner): -1.0}
        terminateds = {aid: True for aid in self.possible_agents}
        terminateds[ALL_AGENTS] = True
        return obs, rewards, terminateds, {ALL_AGENTS: False}, {}

    def _has_line(self, agent_id: str) -> bool:
        sign = self._sign(agent_id)
        return any(all(self.board[c] == sign for c in line) for line in _LINES)

    @staticmethod
    def _sign(agent_id: str) -> int:
        return 1 if agent_id == "player1" else -1

    @staticmethod
    def _opponent(agent_id: str) -> str:
        return "player2" if agent_id == "player1" else "player1"

    def render(self) -> Any:
        """The board as text: X for player1, O for player2."""
        marks = {1: "X", -1: "O", 0: "."}
        rows = ["".join(marks[int(v)] for v in self.board[r * 3:r * 3 + 3]) for r in range(3)]
        return "\n".join(rows)

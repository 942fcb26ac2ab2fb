"""A callbacks class that reports Atari game scores beside rlx's per-life episode returns.

rlx's DeepMind preprocessing ends an episode at each lost life (as RLlib's and the DQN paper's
does), so `episode_return_mean` on Breakout is a per-life return, while published scores and
Stable-Baselines3's Monitor count a whole game. This class adds the lives' returns up until the
game is over (no lives left, or the episode was truncated) and logs the sum as
`env_runners/game_score` (mean of the last 10 games). `benchmarks/learning_curves.py` sets it on
Atari examples: `--config '{"callbacks": "benchmarks.atari_game_score.GameScore"}'`.
"""
from __future__ import annotations

from typing import Any

from rlx.callbacks import RLlibCallback

GAME_SCORE_KEY = "game_score"
WINDOW = 10


class GameScore(RLlibCallback):
    """Sums per-life episode returns into whole-game scores and logs them as `game_score`."""

    def __init__(self) -> None:
        super().__init__()
        self._running: dict[int, float] = {}

    def on_episode_end(self, *, episode: Any, env_index: int, metrics_logger: Any = None, **kwargs: Any) -> None:
        """Add the finished life's return to its sub-env's game; log the game when it is over."""
        total = self._running.get(env_index, 0.0) + float(episode.get_return())
        lives = episode.get_infos(-1).get("lives", 0)
        if lives > 0 and not episode.is_truncated:
            self._running[env_index] = total
            return
        self._running[env_index] = 0.0
        if metrics_logger is not None:
            metrics_logger.log_value(GAME_SCORE_KEY, total, reduce="mean", window=WINDOW)

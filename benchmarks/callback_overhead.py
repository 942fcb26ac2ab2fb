"""What callbacks cost in the sampling loop: EnvRunner steps/s on CartPole-v1 per callback setup.

Prints one JSON line per number of sub-envs with the steps/s of the plain Gymnasium loop
(the floor), of the EnvRunner with no callbacks, with a class that overrides only
Algorithm events (must cost nothing in the runner), with an `on_episode_end` lambda, and
with an `on_episode_step` class that logs to the MetricsLogger; each as a ratio to the
runner without callbacks, measured in the same run (interleaved rounds, best of each).

    python benchmarks/callback_overhead.py [N_ENVS ...]
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

from sample_throughput import env_runner_rate, plain_loop_rate

from rlx.callbacks.callbacks import RLlibCallback


class AlgorithmEventsOnly(RLlibCallback):
    """Overrides only Algorithm events: EnvRunners must not dispatch anything for it."""

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        """Record the iteration."""
        result["seen"] = True


class StepLogger(RLlibCallback):
    """Touches every step: temporary per-step data and a MetricsLogger value per episode."""

    def on_episode_step(self, *, episode: Any, **kwargs: Any) -> None:
        """Keep the latest reward as temporary per-step data."""
        episode.add_temporary_timestep_data("r", episode.get_rewards(-1))

    def on_episode_end(self, *, episode: Any, metrics_logger: Any, **kwargs: Any) -> None:
        """Log the episode's mean reward."""
        rewards = episode.get_temporary_timestep_data("r")
        metrics_logger.log_value("mean_step_reward", sum(rewards) / len(rewards), window=100)


def _configure(name: str) -> Callable[[Any], Any]:
    setups: dict[str, Callable[[Any], Any]] = {
        "none": lambda c: c,
        "algorithm_events_only": lambda c: c.callbacks(AlgorithmEventsOnly),
        "on_episode_end_lambda": lambda c: c.callbacks(on_episode_end=lambda episode, **kw: episode.get_return()),
        "on_episode_step_class": lambda c: c.callbacks(StepLogger),
    }
    return setups[name]


SETUPS = ("none", "algorithm_events_only", "on_episode_end_lambda", "on_episode_step_class")


def runner_rate(setup: str, n_envs: int, seconds: float) -> float:
    """Steps/s of the EnvRunner of a PPO built with the named callback setup."""
    return env_runner_rate(n_envs, seconds, configure=_configure(setup))


def main() -> None:
    """Measure every setup for each number of sub-envs given (default 1 and 8)."""
    import torch

    torch.set_num_threads(1)
    counts = [int(a) for a in sys.argv[1:]] or [1, 8]
    for n in counts:
        best = {s: 0.0 for s in SETUPS}
        for _ in range(5):  # interleaved rounds, so drifts of the machine's speed hit every setup
            for setup in SETUPS:
                best[setup] = max(best[setup], runner_rate(setup, n, seconds=1.5))
        plain = plain_loop_rate(n)
        base = best["none"]
        print(json.dumps({
            "benchmark": "callback_overhead", "env": "CartPole-v1", "num_envs": n,
            "plain_loop_steps_per_s": round(plain),
            **{f"{s}_steps_per_s": round(r) for s, r in best.items()},
            **{f"{s}_ratio_to_none": round(r / base, 3) for s, r in best.items() if s != "none"},
            "none_ratio_to_plain_loop": round(base / plain, 3),
        }), flush=True)


if __name__ == "__main__":
    main()

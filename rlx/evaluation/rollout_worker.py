"""`get_global_worker()` and `RolloutWorker` at RLlib's old path (`ray.rllib.evaluation.rollout_worker`).

The machinery lives with the EnvRunner (rlx.env.runner.current); `RolloutWorker` is the
single-agent EnvRunner class.
"""
from __future__ import annotations

from typing import Any

from rlx.env.runner.current import acting_runner, get_global_worker, register_runner, unregister_runner

__all__ = ["acting_runner", "get_global_worker"]  # and RolloutWorker, on first use (module __getattr__)

# Old private names (kept for code that imported them from here).
_register_runner = register_runner
_unregister_runner = unregister_runner


def __getattr__(name: str) -> Any:
    # RolloutWorker is the EnvRunner class; imported lazily to keep this module free of torch.
    if name == "RolloutWorker":
        from rlx.env.runner.single_agent import SingleAgentEnvRunner

        return SingleAgentEnvRunner
    raise AttributeError(name)

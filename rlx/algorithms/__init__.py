"""Algorithms and their configs."""
from __future__ import annotations

from typing import Any

__all__ = ["Algorithm", "AlgorithmConfig"]


def __getattr__(name: str) -> Any:
    if name == "Algorithm":
        from rlx.algorithms.algorithm import Algorithm

        return Algorithm
    if name == "AlgorithmConfig":
        from rlx.algorithms.algorithm_config import AlgorithmConfig

        return AlgorithmConfig
    raise AttributeError(f"module 'rlx.algorithms' has no attribute '{name}'")


# Registers rlx's algorithms with Ray Tune once ray.tune is imported (never imports Ray itself).
from rlx.utils.import_hooks import install as _install_tune_hook  # noqa: E402

_install_tune_hook()
del _install_tune_hook

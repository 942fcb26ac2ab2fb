"""rlx: reinforcement learning with RLlib's API, in one process, on PyTorch and Gymnasium.

Heavy modules (torch) load only when an Algorithm is built, so `import rlx` stays cheap.
"""
from __future__ import annotations

from typing import Any

from rlx.utils.registry import register_env  # light: no torch
from rlx.utils.version import __version__

__all__ = ["__version__", "register_env", "Algorithm", "AlgorithmConfig"]


def __getattr__(name: str) -> Any:
    if name == "Algorithm":
        from rlx.algorithms.algorithm import Algorithm

        return Algorithm
    if name == "AlgorithmConfig":
        from rlx.algorithms.algorithm_config import AlgorithmConfig

        return AlgorithmConfig
    raise AttributeError(f"module 'rlx' has no attribute '{name}'")

"""`rlx list`: the algorithms rlx can train, one per line with its description.

Reads only the algorithm registry, so it runs without importing torch.
"""
from __future__ import annotations

import argparse
from typing import Mapping

from rlx.algorithms.registry import list_algorithms

#: The example printed under the table.
HINT = "Train one: rlx train --algo PPO --env CartPole-v1"


def format_algorithm_table(algorithms: Mapping[str, str]) -> list[str]:
    """One line per algorithm: its name padded to a common column, then its description."""
    if not algorithms:
        return []
    width = max(len(name) for name in algorithms) + 2
    return [f"{name:<{width}}{description}" for name, description in algorithms.items()]


def run_list_command(args: argparse.Namespace) -> int:
    """Print every registered algorithm and how to train one; returns the exit status (0)."""
    for line in format_algorithm_table(list_algorithms()):
        print(line)
    print()
    print(HINT)
    return 0

"""`rlx list`: the algorithms rlx can train, one per line with its description, then the tuned
examples `rlx train file NAME` runs.

Reads only the algorithm registry and the tuned examples folder, so it runs without importing torch.
"""
from __future__ import annotations

import argparse
from typing import Mapping

from rlx.algorithms.registry import list_algorithms
from rlx.cli.tuned_examples import TunedExample, list_tuned_examples

#: The example printed under the table.
HINT = "Train one: rlx train --algo PPO --env CartPole-v1"
#: The example printed under the tuned examples.
TUNED_HINT = "Run one: rlx train file cartpole-ppo (a name above, or its path)"


def format_algorithm_table(algorithms: Mapping[str, str]) -> list[str]:
    """One line per algorithm: its name padded to a common column, then its description."""
    if not algorithms:
        return []
    width = max(len(name) for name in algorithms) + 2
    return [f"{name:<{width}}{description}" for name, description in algorithms.items()]


def format_tuned_examples(examples: list[TunedExample]) -> list[str]:
    """One line per tuned example: its name padded to a common column, then its path inside
    tuned_examples/."""
    if not examples:
        return []
    width = max(len(e.name) for e in examples) + 2
    return [f"{e.name:<{width}}{e.relative_path}" for e in examples]


def run_list_command(args: argparse.Namespace) -> int:
    """Print every registered algorithm and how to train one, then the tuned examples (found in
    the checkout or in the installed package); returns the exit status (0)."""
    for line in format_algorithm_table(list_algorithms()):
        print(line)
    print()
    print(HINT)
    examples = list_tuned_examples()
    if examples:
        print()
        print("Tuned examples:")
        for line in format_tuned_examples(examples):
            print("  " + line)
        print()
        print(TUNED_HINT)
    return 0

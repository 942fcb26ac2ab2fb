"""`python -m rlx.train ...`: the `rlx train` command, as RLlib's `train.py` script is `rllib train`.

    python -m rlx.train --run PPO --env CartPole-v1 --stop '{"training_iteration": 5}'
    python -m rlx.train -f tuned_examples/ppo/cartpole-ppo.yaml
    python -m rlx.train file tuned_examples/ppo/cartpole-ppo.yaml
    python -m rlx.train --help
"""
from __future__ import annotations

import sys
from typing import Sequence

from rlx.cli.main import main as rlx_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run `rlx train` with `argv` (default: this process's arguments); returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    return rlx_main(["train", *args])


if __name__ == "__main__":
    raise SystemExit(main())

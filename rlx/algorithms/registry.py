"""Algorithm names ("PPO") to their classes, for the CLI, Tune and checkpoints."""
from __future__ import annotations

import importlib
from typing import Any

from rlx.utils.errors import ConfigError, did_you_mean

# name -> (module, algorithm class, config class, one-line description)
ALGORITHMS: dict[str, tuple[str, str, str, str]] = {
    "PPO": ("rlx.algorithms.ppo.ppo", "PPO", "PPOConfig", "Proximal Policy Optimization (on-policy, any action space)"),
}


def _lookup(name: str) -> tuple[str, str, str, str]:
    key = name.upper() if name.upper() in ALGORITHMS else name
    if key not in ALGORITHMS:
        raise ConfigError(f"Unknown algorithm '{name}'.{did_you_mean(name, ALGORITHMS)} Available: {', '.join(ALGORITHMS)}.")
    return ALGORITHMS[key]


def get_algorithm_class(name: str) -> Any:
    """The Algorithm class registered under `name` (case-insensitive)."""
    module, cls, _, _ = _lookup(name)
    return getattr(importlib.import_module(module), cls)


def get_algorithm_config(name: str) -> Any:
    """A default config of the algorithm registered under `name`."""
    module, _, cfg, _ = _lookup(name)
    return getattr(importlib.import_module(module), cfg)()


def list_algorithms() -> dict[str, str]:
    """{name: description} of every registered algorithm."""
    return {name: entry[3] for name, entry in ALGORITHMS.items()}

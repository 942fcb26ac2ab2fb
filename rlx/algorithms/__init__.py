"""Algorithms and their configs."""
from __future__ import annotations

import importlib
from typing import Any

#: RLlib 2.60's `ray.rllib.algorithms` exports: name -> the rlx module that defines it.
#: Loaded on first access, so `import rlx.algorithms` stays cheap.
_LAZY_EXPORTS: dict[str, str] = {
    "Algorithm": "rlx.algorithms.algorithm",
    "AlgorithmConfig": "rlx.algorithms.algorithm_config",
    **{name: "rlx.algorithms.ppo" for name in ("PPO", "PPOConfig")},
    **{name: "rlx.algorithms.dqn" for name in ("DQN", "DQNConfig")},
    **{name: "rlx.algorithms.sac" for name in ("SAC", "SACConfig")},
    **{name: "rlx.algorithms.impala" for name in ("IMPALA", "IMPALAConfig", "Impala", "ImpalaConfig")},
    **{name: "rlx.algorithms.appo" for name in ("APPO", "APPOConfig")},
    **{name: "rlx.algorithms.bc" for name in ("BC", "BCConfig")},
    **{name: "rlx.algorithms.cql" for name in ("CQL", "CQLConfig")},
    **{name: "rlx.algorithms.marwil" for name in ("MARWIL", "MARWILConfig")},
}

__all__ = list(_LAZY_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _LAZY_EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rlx.algorithms' has no attribute '{name}'")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_EXPORTS))


# Registers rlx's algorithms with Ray Tune once ray.tune is imported (never imports Ray itself).
from rlx.utils.import_hooks import install as _install_tune_hook  # noqa: E402

_install_tune_hook()
del _install_tune_hook

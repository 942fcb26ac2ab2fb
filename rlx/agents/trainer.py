"""Old import path of the Trainer (`ray.rllib.agents.trainer`): the Algorithm under its
Trainer-era name, and the common config dict.

    from rlx.agents.trainer import Trainer, COMMON_CONFIG, with_common_config

`Trainer` is `rlx.algorithms.algorithm.Algorithm`; `COMMON_CONFIG` is a plain dict of every
setting all algorithms share, with their defaults (`AlgorithmConfig().to_dict()`);
`with_common_config(extra)` is that dict updated with an algorithm's own settings.
"""
from __future__ import annotations

import copy
from typing import Any

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.results import deep_update

__all__ = ["COMMON_CONFIG", "Trainer", "with_common_config"]

#: The Trainer-era name of Algorithm.
Trainer = Algorithm

#: Defaults of the settings every algorithm shares, as an old-style flat config dict.
COMMON_CONFIG: dict[str, Any] = AlgorithmConfig().to_dict()


def with_common_config(extra_config: dict[str, Any]) -> dict[str, Any]:
    """A copy of COMMON_CONFIG updated (nested dicts merged) with `extra_config`."""
    return deep_update(copy.deepcopy(COMMON_CONFIG), copy.deepcopy(dict(extra_config)))

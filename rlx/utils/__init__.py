"""Utilities shared across rlx: schedules, filters, checkpoints, errors; `check_env` (RLlib's
`ray.rllib.utils.check_env`) is imported on first use."""
import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # check_env lives in rlx.utils.pre_checks.env, which sits beside rlx.env (a layer above):
    # imported on first use so `import rlx.utils` stays at the bottom layer.
    if name == "check_env":
        return importlib.import_module("rlx.utils.pre_checks.env").check_env
    raise AttributeError(f"module 'rlx.utils' has no attribute {name!r}")

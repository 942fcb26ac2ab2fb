"""What rebuilds a checkpoint's env besides config.json: the `env_source` entry of
rlx_checkpoint.json (checkpoint version 1.1, see rlx.algorithms.checkpointing).

`imports` are the modules to import before the env is resolved, in order: those the user
named (`rlx train --import`, recorded with `record_env_source`), then the module defining the
env (its class or creator, the module of an import path, or the package that registered a
Gymnasium id); `path` is the sys.path entry it was imported from. `experiment_file` is the
`rlx train file` Python file that defined the config.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from rlx.utils.registry import get_registered_creator
from rlx.utils.checkpoint_recipes import recipe_of

if TYPE_CHECKING:
    from rlx.algorithms.algorithm_config import AlgorithmConfig

#: Module name of a `rlx train file` Python file's code (rlx.cli.experiments runs it so).
EXPERIMENT_MODULE = "__rlx_experiment__"
#: Modules whose objects every process has without importing anything of the user's.
_BUILTIN_PREFIXES = ("builtins", "__main__", EXPERIMENT_MODULE, "gymnasium", "rlx", "ray", "functools")

#: What this process recorded about where its envs come from (see `record_env_source`).
_ENV_SOURCE: dict[str, Any] = {"imports": [], "experiment_file": None}


def record_env_source(imports: Iterable[str] = (), experiment_file: str | Path | None = None) -> None:
    """Have the checkpoints this process writes record modules to import (in order) and the
    experiment file that defined the config, so `rlx evaluate` can rebuild the env. Imports
    add to those recorded before; a given experiment file replaces the recorded one."""
    for name in imports:
        if name not in _ENV_SOURCE["imports"]:
            _ENV_SOURCE["imports"].append(name)
    if experiment_file is not None:
        _ENV_SOURCE["experiment_file"] = str(Path(experiment_file).expanduser().resolve())


def reset_env_source() -> None:
    """Forget what `record_env_source` recorded."""
    _ENV_SOURCE["imports"] = []
    _ENV_SOURCE["experiment_file"] = None


def env_source(config: AlgorithmConfig) -> dict[str, Any]:
    """The `env_source` entry of a checkpoint of `config` (see the module docstring)."""
    names = list(_ENV_SOURCE["imports"])
    for name in _env_modules(config.env):
        if name not in names:
            names.append(name)
    return {"imports": [{"module": name, "path": _import_root(name)} for name in names],
            "experiment_file": _ENV_SOURCE["experiment_file"]}


def read_env_source(meta: dict[str, Any]) -> dict[str, Any]:
    """The `env_source` of checkpoint metadata, empty for checkpoints written before 1.1."""
    source = meta.get("env_source") or {}
    imports = [entry for entry in source.get("imports") or [] if isinstance(entry, dict) and entry.get("module")]
    return {"imports": imports, "experiment_file": source.get("experiment_file")}


def _env_modules(env: Any) -> list[str]:
    """The user module an env specifier comes from, if any: the module of its class or
    creator, of an import path, or of the entry point of the Gymnasium id it names."""
    if env is None:
        return []
    recipe = recipe_of(env)
    if recipe is not None:  # made by an rlx factory: the modules of what it was made from
        return [module for arg in recipe[1] for module in _env_modules(arg)]
    if not isinstance(env, str):
        return _user_modules(_defining_module(env))
    creator = get_registered_creator(env)
    if creator is not None:
        return _user_modules(_defining_module(creator))
    import gymnasium as gym

    if env in gym.registry:
        entry_point = gym.registry[env].entry_point
        module = entry_point.partition(":")[0] if isinstance(entry_point, str) else _defining_module(entry_point)
        return _user_modules(module)
    if ":" in env:
        return _user_modules(env.partition(":")[0])
    if "." in env and "/" not in env:
        return _user_modules(env.rpartition(".")[0])
    return []


def _defining_module(obj: Any) -> str | None:
    while isinstance(obj, functools.partial):
        obj = obj.func
    module = getattr(obj, "__module__", None)
    if module is None and not isinstance(obj, type):
        module = getattr(type(obj), "__module__", None)
    return module


def _user_modules(module: str | None) -> list[str]:
    if not module or any(module == p or module.startswith(p + ".") for p in _BUILTIN_PREFIXES):
        return []
    return [module]


def _import_root(name: str) -> str | None:
    """The sys.path entry module `name` was imported from (None when not imported or not a file)."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    root = Path(file).resolve().parent
    levels = name.count(".") + (1 if Path(file).stem == "__init__" else 0)
    for _ in range(levels):
        root = root.parent
    return str(root)

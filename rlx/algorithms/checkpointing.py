"""Write and read Algorithm checkpoints in the layout of DESIGN.md.

    rlx_checkpoint.json       format name/version, rlx version, algorithm class, file list
    config.json               the config (classes and functions as import paths)
    algorithm_state.json      counters, metrics window, learner extras, env-runner state
    policies/default_policy/module.safetensors      module weights
    policies/default_policy/optimizer.safetensors   optimizer tensors (+ optimizer.json); extra
                                                    optimizers as optimizer_<name>.safetensors/.json
    policies/default_policy/learner.safetensors     learner tensors outside the module (target
                                                    networks, SAC's log-alpha), when there are any
    replay_buffer.safetensors (+ replay_buffer.json) only with store_buffer_in_checkpoints
    policies/default_policy/model.pt                 only with export_native_model_files

`checkpoint_version` 1.1 (format version 1 still) adds `env_source` to rlx_checkpoint.json:
what rebuilds the env besides config.json, as plain JSON (no code is stored):

    "env_source": {
        "imports": [{"module": "my_envs", "path": "/home/me/project"}, ...],
        "experiment_file": "/home/me/project/my_exp.py"      # or null
    }

`imports` are the modules to import before the env is resolved, in order: those the user
named (`rlx train --import`), then the module defining the env (its class or creator, the
module of an import path, or the package that registered a Gymnasium id); `path` is the
sys.path entry it was imported from, tried when it is not importable otherwise.
`experiment_file` is the `rlx train file` Python file that defined the config. Checkpoints
of version 1.0 have no `env_source` and load as before.
"""
from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from rlx.utils.checkpoints import (
    FORMAT_NAME,
    FORMAT_VERSION,
    METADATA_FILE,
    AtomicDirectory,
    decode_value,
    encode_value,
    flatten_optimizer_state,
    read_json,
    read_metadata,
    read_tensors,
    unflatten_optimizer_state,
    write_json,
    write_tensors,
)
from rlx.utils.errors import CheckpointError

POLICY_DIR = "policies/default_policy"
#: Version of what rlx_checkpoint.json holds within FORMAT_VERSION (1.1: `env_source`).
CHECKPOINT_VERSION = f"{FORMAT_VERSION}.1"
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


def env_source(config: Any) -> dict[str, Any]:
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
    if not isinstance(env, str):
        return _user_modules(_defining_module(env))
    from rlx.env.registry import get_registered_creator

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


def write_algorithm_checkpoint(algo: Any, path: Path) -> str:
    """Write `algo` into the checkpoint directory `path` atomically; return the path."""
    import rlx

    learner = algo.learner
    files = ["config.json", "algorithm_state.json", f"{POLICY_DIR}/module.safetensors"]
    with AtomicDirectory(path) as tmp:
        (tmp / POLICY_DIR).mkdir(parents=True)
        write_json(tmp / "config.json", _encoded_config(algo.config))
        write_json(tmp / "algorithm_state.json", algo.get_state())
        write_tensors(tmp / POLICY_DIR / "module.safetensors", learner.module.state_dict())
        for name, optimizer in learner.optimizers.items():
            stem = _optimizer_stem(name)
            tensors, meta = flatten_optimizer_state(optimizer.state_dict())
            write_tensors(tmp / POLICY_DIR / f"{stem}.safetensors", tensors)
            write_json(tmp / POLICY_DIR / f"{stem}.json", meta)
            files += [f"{POLICY_DIR}/{stem}.safetensors", f"{POLICY_DIR}/{stem}.json"]
        extra = learner.get_extra_tensors()
        if extra:
            write_tensors(tmp / POLICY_DIR / "learner.safetensors", extra)
            files.append(f"{POLICY_DIR}/learner.safetensors")
        buffer_files = algo.write_checkpoint_extras(tmp)
        files += buffer_files
        if algo.config.export_native_model_files:
            import torch

            torch.save(learner.module.state_dict(), tmp / POLICY_DIR / "model.pt")
            files.append(f"{POLICY_DIR}/model.pt")
        cls = type(algo)
        write_json(tmp / METADATA_FILE, {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "checkpoint_version": CHECKPOINT_VERSION,
            "rlx_version": rlx.__version__,
            "algorithm_class": f"{cls.__module__}:{cls.__qualname__}",
            "env": algo.config.env if isinstance(algo.config.env, str) else None,
            "env_source": env_source(algo.config),
            "policy_ids": ["default_policy"],
            "training_iteration": algo.iteration,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": files,
        })
    return str(Path(path).expanduser().resolve())


def _encoded_config(config: Any) -> dict:
    encoded = encode_value(config.to_dict())
    creator = encoded.get("logger_creator")
    if isinstance(creator, dict) and "__unserializable__" in creator:
        # A lambda that placed this run's results; an Algorithm restored from the checkpoint
        # is a new run and logs to a new directory, so nothing is lost by dropping it.
        encoded["logger_creator"] = None
    return encoded


def _optimizer_stem(name: str) -> str:
    return "optimizer" if name == "default" else f"optimizer_{name}"


def _check_files(root: Path, meta: dict) -> None:
    missing = [f for f in meta.get("files", []) if not (root / f).is_file()]
    if missing:
        raise CheckpointError(
            f"Checkpoint {root} is incomplete: missing {', '.join(missing)}. It may have been copied partially."
        )


def read_config(root: Path, algo_cls: Any, overrides: dict) -> Any:
    """Rebuild the config stored in a checkpoint, with `overrides` applied."""
    raw = read_json(root / "config.json")
    decoded = {}
    for key, value in raw.items():
        if key in overrides:
            continue
        decoded[key] = decode_value(value, key)
    config = algo_cls.get_default_config()
    try:
        config.update_from_dict(decoded)
        config.update_from_dict(overrides)
    except Exception as err:
        raise CheckpointError(f"The config in {root / 'config.json'} cannot be applied: {err}") from err
    return config


def algorithm_from_checkpoint(root: Path, overrides: dict) -> Any:
    """Build the Algorithm a checkpoint describes and load its state."""
    from rlx.env.registry import import_object

    meta = read_metadata(root)
    _check_files(root, meta)
    try:
        algo_cls = import_object(meta["algorithm_class"])
    except (ImportError, AttributeError, KeyError) as err:
        raise CheckpointError(f"{root / METADATA_FILE} names an algorithm class that cannot be imported: {err}.") from err
    config = read_config(root, algo_cls, overrides)
    algo = algo_cls(config=config)
    read_algorithm_checkpoint(algo, root, meta)
    return algo


def read_algorithm_checkpoint(algo: Any, root: Path, meta: dict | None = None) -> None:
    """Load weights, optimizer state and algorithm state from `root` into `algo`."""
    meta = meta or read_metadata(root)
    _check_files(root, meta)
    weights = read_tensors(root / POLICY_DIR / "module.safetensors")
    try:
        algo.learner.module.set_state(weights)
    except ValueError as err:
        raise CheckpointError(
            f"The weights in {root / POLICY_DIR / 'module.safetensors'} do not fit this algorithm's module: {err} "
            "Was the checkpoint written with a different model config?"
        ) from err
    for name, optimizer in algo.learner.optimizers.items():
        stem = _optimizer_stem(name)
        if not (root / POLICY_DIR / f"{stem}.json").is_file():
            raise CheckpointError(
                f"Checkpoint {root} has no state for the '{name}' optimizer ({POLICY_DIR}/{stem}.json): "
                "it was written by a different algorithm or config."
            )
        opt_meta = read_json(root / POLICY_DIR / f"{stem}.json")
        opt_tensors = read_tensors(root / POLICY_DIR / f"{stem}.safetensors")
        try:
            optimizer.load_state_dict(unflatten_optimizer_state(opt_tensors, opt_meta))
        except (ValueError, KeyError, RuntimeError) as err:
            raise CheckpointError(f"The optimizer state in {root / POLICY_DIR / stem}.* does not fit: {err}.") from err
    learner_file = root / POLICY_DIR / "learner.safetensors"
    if learner_file.is_file() or algo.learner.get_extra_tensors():
        if not learner_file.is_file():
            raise CheckpointError(f"Checkpoint {root} is missing {POLICY_DIR}/learner.safetensors (target networks).")
        try:
            algo.learner.set_extra_tensors(read_tensors(learner_file))
        except (ValueError, KeyError, RuntimeError) as err:
            raise CheckpointError(f"The learner tensors in {learner_file} do not fit: {err}") from err
    algo.read_checkpoint_extras(root)
    state = read_json(root / "algorithm_state.json")
    try:
        algo.set_state(state)
    except (KeyError, ValueError, TypeError) as err:
        raise CheckpointError(f"{root / 'algorithm_state.json'} is not a valid algorithm state: {err!r}.") from err
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner)

"""Write and read Algorithm checkpoints in the layout of DESIGN.md.

    rlx_checkpoint.json       format name/version, rlx version, algorithm class, file list
    config.json               the config (classes and functions as import paths)
    algorithm_state.json      counters, metrics window, learner extras, env-runner state
    policies/default_policy/module.safetensors      module weights
    policies/default_policy/optimizer.safetensors   optimizer tensors (+ optimizer.json)
    policies/default_policy/model.pt                 only with export_native_model_files
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

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


def write_algorithm_checkpoint(algo: Any, path: Path) -> str:
    """Write `algo` into the checkpoint directory `path` atomically; return the path."""
    import rlx

    files = ["config.json", "algorithm_state.json", f"{POLICY_DIR}/module.safetensors",
             f"{POLICY_DIR}/optimizer.safetensors", f"{POLICY_DIR}/optimizer.json"]
    with AtomicDirectory(path) as tmp:
        (tmp / POLICY_DIR).mkdir(parents=True)
        write_json(tmp / "config.json", encode_value(algo.config.to_dict()))
        write_json(tmp / "algorithm_state.json", algo.get_state())
        write_tensors(tmp / POLICY_DIR / "module.safetensors", algo.learner.module.state_dict())
        tensors, meta = flatten_optimizer_state(algo.learner.optimizer.state_dict())
        write_tensors(tmp / POLICY_DIR / "optimizer.safetensors", tensors)
        write_json(tmp / POLICY_DIR / "optimizer.json", meta)
        if algo.config.export_native_model_files:
            import torch

            torch.save(algo.learner.module.state_dict(), tmp / POLICY_DIR / "model.pt")
            files.append(f"{POLICY_DIR}/model.pt")
        cls = type(algo)
        write_json(tmp / METADATA_FILE, {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "checkpoint_version": f"{FORMAT_VERSION}.0",
            "rlx_version": rlx.__version__,
            "algorithm_class": f"{cls.__module__}:{cls.__qualname__}",
            "env": algo.config.env if isinstance(algo.config.env, str) else None,
            "policy_ids": ["default_policy"],
            "training_iteration": algo.iteration,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": files,
        })
    return str(Path(path).expanduser().resolve())


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
    opt_meta = read_json(root / POLICY_DIR / "optimizer.json")
    opt_tensors = read_tensors(root / POLICY_DIR / "optimizer.safetensors")
    try:
        algo.learner.optimizer.load_state_dict(unflatten_optimizer_state(opt_tensors, opt_meta))
    except (ValueError, KeyError, RuntimeError) as err:
        raise CheckpointError(f"The optimizer state in {root / POLICY_DIR} does not fit: {err}.") from err
    state = read_json(root / "algorithm_state.json")
    try:
        algo.set_state(state)
    except (KeyError, ValueError, TypeError) as err:
        raise CheckpointError(f"{root / 'algorithm_state.json'} is not a valid algorithm state: {err!r}.") from err
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner)

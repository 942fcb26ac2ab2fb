"""Write an Algorithm checkpoint in the layout of rlx.algorithms.checkpoint_layout, atomically:
config, algorithm state, each policy's module, optimizer and learner tensors, and the exported
model when export_native_model_files asks for it."""
from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path
from typing import Any

from rlx.algorithms.checkpoint_checks import class_path, file_checksum
from rlx.algorithms.checkpoint_env_source import env_source
from rlx.algorithms.checkpoint_layout import CHECKPOINT_VERSION, STATE_CLASS_KEY, optimizer_stem, policy_dir
from rlx.algorithms.policy_mapping_table import mapping_table_for
from rlx.core.rl_module.module_checkpoint import write_component_dir
from rlx.env.policy_export import DEFAULT_ONNX_OPSET, export_policy_files
from rlx.utils.checkpoints import (FORMAT_NAME, FORMAT_VERSION, METADATA_FILE, AtomicDirectory, encode_value,
                                   flatten_optimizer_state, write_json, write_tensors)
from rlx.utils.errors import EnvError, install_hint
from rlx.utils.registry import get_registered_creator, registered_env_names
from rlx.utils.version import __version__

logger = logging.getLogger(__name__)
#: Whether the missing-`onnx` warning of export_native_model_files was given (once per process).
_warned_no_onnx = False


def write_algorithm_checkpoint(algo: Any, path: Path) -> str:
    """Write `algo` into the checkpoint directory `path` atomically; return the path."""
    learners = _learners_to_save(algo)
    files = ["config.json", "algorithm_state.json"]
    config = _encoded_config(algo)
    with AtomicDirectory(path) as tmp:
        write_json(tmp / "config.json", config)
        write_json(tmp / "algorithm_state.json", {**algo.get_state(), STATE_CLASS_KEY: class_path(type(algo))})
        for module_id, learner in learners.items():
            files += _write_module_files(tmp, module_id, learner, algo.config.export_native_model_files)
            if algo.config.export_native_model_files:
                files += _write_exported_model(tmp, module_id, algo, learner)
            # RLlib's component path of the module (RLModule.from_checkpoint, RLModuleSpec(load_state_path=...)).
            files.append(write_component_dir(tmp, module_id, learner.module, f"{policy_dir(module_id)}/module.safetensors"))
        files += algo.write_checkpoint_extras(tmp)
        cls = type(algo)
        write_json(tmp / METADATA_FILE, {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "checkpoint_version": CHECKPOINT_VERSION,
            "rlx_version": __version__,
            "algorithm_class": f"{cls.__module__}:{cls.__qualname__}",
            "env": config.get("env") if isinstance(config.get("env"), str) else None,
            "env_source": env_source(algo.config),
            "policy_ids": list(learners),
            "trainable_policies_only": bool(algo.config.checkpoint_trainable_policies_only),
            "policy_spaces": _policy_spaces(algo, learners),
            "training_iteration": algo.iteration,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": files,
            # Of the binary files only: the JSON files are readable, and editable by hand.
            "checksums": {name: file_checksum(tmp / name) for name in files if not name.endswith(".json")},
        })
    return str(Path(path).expanduser().resolve())


def _policy_spaces(algo: Any, module_ids: Any) -> dict[str, Any]:
    """{policy_id: {"observation_space": ..., "action_space": ...}}: each policy's env spaces
    (encoded), so one policy loads without the mapping function that found them."""
    slots = getattr(algo.env_runner, "slots", None)
    if not slots:
        return {}
    return {mid: {"observation_space": encode_value(slots[mid].observation_space),
                  "action_space": encode_value(slots[mid].action_space)}
            for mid in module_ids if mid in slots}


def _learners_to_save(algo: Any) -> dict[str, Any]:
    container = algo.learners
    learners = container.by_module()
    if algo.config.checkpoint_trainable_policies_only:
        learners = {mid: l for mid, l in learners.items() if container.is_trainable(mid)}
    return learners


def _write_module_files(tmp: Path, module_id: str, learner: Any, native: bool) -> list[str]:
    """Write one module's weights, optimizer states and extra learner tensors; their names."""
    folder = policy_dir(module_id)
    (tmp / folder).mkdir(parents=True)
    write_tensors(tmp / folder / "module.safetensors", learner.module.state_dict())
    files = [f"{folder}/module.safetensors"]
    for name, optimizer in learner.optimizers.items():
        stem = optimizer_stem(name)
        tensors, meta = flatten_optimizer_state(optimizer.state_dict())
        write_tensors(tmp / folder / f"{stem}.safetensors", tensors)
        write_json(tmp / folder / f"{stem}.json", meta)
        files += [f"{folder}/{stem}.safetensors", f"{folder}/{stem}.json"]
    extra = learner.get_extra_tensors()
    if extra:
        write_tensors(tmp / folder / "learner.safetensors", extra)
        files.append(f"{folder}/learner.safetensors")
    if native:
        import torch

        torch.save(learner.module.state_dict(), tmp / folder / "model.pt")
        files.append(f"{folder}/model.pt")
    return files


def _write_exported_model(tmp: Path, module_id: str, algo: Any, learner: Any) -> list[str]:
    """policies/<module_id>/model/: the policy exported for serving without rlx (RLlib's
    native model files): TorchScript always, ONNX when the `onnx` package is installed."""
    global _warned_no_onnx
    folder = f"{policy_dir(module_id)}/model"
    policy = algo.get_policy(module_id)
    written = export_policy_files(policy, tmp / folder, module=learner.module)
    if importlib.util.find_spec("onnx") is not None:
        written += export_policy_files(policy, tmp / folder, onnx=DEFAULT_ONNX_OPSET, module=learner.module)
    elif not _warned_no_onnx:
        _warned_no_onnx = True
        logger.warning("export_native_model_files: checkpoints get model.pt (TorchScript) but no model.onnx, as "
                       f"the `onnx` package is not installed ({install_hint('export')}).")
    return sorted({f"{folder}/{name}" for name in written})


def _encoded_config(algo: Any) -> dict:
    """config.json of `algo`: its config encoded, with what has no import path stored another
    way where one exists (see `_store_env_by_name` and `_store_mapping_as_table`)."""
    config = algo.config
    encoded = encode_value(config.to_dict())
    if _unstorable(encoded.get("logger_creator")):
        # A lambda that placed this run's results; an Algorithm restored from the checkpoint
        # is a new run and logs to a new directory, so nothing is lost by dropping it.
        encoded["logger_creator"] = None
    _store_env_by_name(encoded, config.env)
    evaluation = encoded.get("evaluation_config")
    if isinstance(evaluation, dict) and isinstance(config.evaluation_config, dict):
        _store_env_by_name(evaluation, config.evaluation_config.get("env"))
    if _unstorable(encoded.get("policy_mapping_fn")):  # (no table for a single-agent env: it has no agent ids)
        _store_mapping_as_table(encoded, algo)
    return encoded


def _unstorable(encoded: Any) -> bool:
    return isinstance(encoded, dict) and "__unserializable__" in encoded


def _store_env_by_name(encoded: dict, env: Any) -> None:
    """An env class or creator without an import path that is registered with `register_env`
    is stored as its registered name, which resolves wherever that name is registered."""
    if not _unstorable(encoded.get("env")):
        return
    for name in registered_env_names():
        try:
            if get_registered_creator(name) is env:
                encoded["env"] = name
                return
        except EnvError:  # a shipped registration that does not load here is not this env
            continue


def _store_mapping_as_table(encoded: dict, algo: Any) -> None:
    """A policy_mapping_fn without an import path (the docs' lambdas) is stored as the table of
    the policy it picks for each of the env's agents (rlx.algorithms.policy_mapping_table)."""
    table = mapping_table_for(algo)
    if table is not None:
        encoded["policy_mapping_fn"] = encode_value(table)

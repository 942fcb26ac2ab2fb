"""Module directories: one RLModule's weights plus the spec that rebuilds it.

A module directory holds `rlx_module.json` (module and catalog class as import paths, spaces,
model config, flags, the weights file and its SHA-256) and, when written by
`RLModule.save_to_path`, the weights `module.safetensors`. An Algorithm checkpoint has one per
module at RLlib's component path `learner_group/learner/rl_module/<module_id>`; there the JSON
names the checkpoint's own `policies/<module_id>/module.safetensors`, so weights are not stored
twice. Loading follows the checkpoint trust rules: JSON and safetensors only, import paths
checked to be an RLModule and a Catalog subclass.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from rlx.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE
from rlx.utils.atomic_directory import AtomicDirectory
from rlx.utils.checkpoint_paths import check_links_stay_inside, enclosing_checkpoint, resolve_inside, warn_unverified
from rlx.utils.checkpoint_trust import checkpoint_off_sys_path
from rlx.utils.checkpoints import (checkpoint_dir, decode_value, encode_value, read_json, read_tensors, write_json,
                                   write_tensors)
from rlx.utils.errors import CheckpointError

#: The JSON file of a module directory.
MODULE_METADATA_FILE = "rlx_module.json"
MODULE_FORMAT = "rlx-module"
MODULE_FORMAT_VERSION = 1
WEIGHTS_FILE = "module.safetensors"


def component_dir(module_id: str) -> str:
    """A module's directory inside an Algorithm checkpoint: learner_group/learner/rl_module/<module_id>."""
    return f"{COMPONENT_LEARNER_GROUP}/{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}/{module_id}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def module_metadata(module: Any, weights: str, weights_path: Path) -> dict[str, Any]:
    """The JSON of a module directory describing `module`, whose weights are in `weights`
    (relative to the module directory; `weights_path` is that file, for its checksum)."""
    module = getattr(module, "unwrapped_module", module)
    catalog_class = getattr(module, "catalog_class", None)
    return {
        "format": MODULE_FORMAT,
        "format_version": MODULE_FORMAT_VERSION,
        "module_class": encode_value(type(module)),
        "catalog_class": None if catalog_class is None else encode_value(catalog_class),
        "observation_space": encode_value(module.observation_space),
        "action_space": encode_value(module.action_space),
        "model_config": encode_value(dict(getattr(module, "model_config", {}) or {})),
        "inference_only": bool(getattr(module, "inference_only", False)),
        "learner_only": bool(getattr(module, "learner_only", False)),
        "weights": weights,
        "checksum": _sha256(weights_path),
    }


def write_component_dir(root: Path, module_id: str, module: Any, weights_file: str) -> str:
    """Write the module directory of `module_id` inside the checkpoint being written at `root`,
    pointing at the checkpoint's `weights_file` (relative to `root`); return its JSON's name."""
    folder = component_dir(module_id)
    (root / folder).mkdir(parents=True)
    relative = "/".join([".."] * len(Path(folder).parts) + [weights_file])
    write_json(root / folder / MODULE_METADATA_FILE, module_metadata(module, relative, root / weights_file))
    return f"{folder}/{MODULE_METADATA_FILE}"


def save_module(module: Any, path: str | os.PathLike | None = None) -> str:
    """Write `module` (weights and spec) as a module directory at `path` (replaced atomically;
    a new temporary directory when None); return the absolute path."""
    target = Path(tempfile.mkdtemp(prefix="rlx_module_")) if path is None else Path(os.fspath(path)).expanduser()
    with AtomicDirectory(target) as tmp:
        write_tensors(tmp / WEIGHTS_FILE, getattr(module, "unwrapped_module", module).state_dict())
        write_json(tmp / MODULE_METADATA_FILE, module_metadata(module, WEIGHTS_FILE, tmp / WEIGHTS_FILE))
    return str(target.resolve())


def read_module_dir(path: str | os.PathLike) -> tuple[dict[str, Any], Path]:
    """(the JSON, the verified weights file) of the module directory `path`."""
    folder = Path(os.fspath(path)).expanduser()
    meta_path = folder / MODULE_METADATA_FILE
    if not folder.is_dir():
        raise CheckpointError(
            f"RLModule directory {folder} does not exist. An Algorithm checkpoint holds one per module at "
            f"<checkpoint>/{component_dir('<module_id>')} (checkpoints of rlx versions before it have none: "
            "rebuild the Algorithm with Algorithm.from_checkpoint(path) and save it again, or take "
            "algo.get_module(module_id).save_to_path(dir)).")
    if not meta_path.is_file():
        hint = ""
        if (folder / "rlx_checkpoint.json").is_file():
            hint = (" It is an Algorithm checkpoint: a module's directory in it is "
                    f"{folder}/{component_dir('<module_id>')}.")
        raise CheckpointError(f"{folder} is not an RLModule directory: it has no {MODULE_METADATA_FILE} (write one with "
                              f"module.save_to_path(path), or use an Algorithm checkpoint's "
                              f"{component_dir('<module_id>')} directory).{hint}")
    # The module directory, or the Algorithm checkpoint around it: nothing outside it is read.
    root = enclosing_checkpoint(folder)
    check_links_stay_inside(root)
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or meta.get("format") != MODULE_FORMAT:
        raise CheckpointError(f"{meta_path} is not an rlx module file (its 'format' is not {MODULE_FORMAT!r}).")
    version = meta.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"{meta_path}: field 'format_version' is {version!r:.40}, not an integer.")
    if version > MODULE_FORMAT_VERSION:
        raise CheckpointError(f"{meta_path} has format_version {meta['format_version']}, newer than this rlx reads "
                              f"({MODULE_FORMAT_VERSION}); upgrade rlx.")
    weights = meta.get("weights")
    if not isinstance(weights, str) or Path(weights).is_absolute() or not weights.endswith(".safetensors"):
        raise CheckpointError(f"{meta_path}: field 'weights' must be a relative path to a .safetensors file, "
                              f"got {weights!r:.120}.")
    weights_path = resolve_inside(root, weights, meta_path, "weights", base=folder)
    if not weights_path.is_file():
        raise CheckpointError(f"{meta_path} names the weights {weights_path}, which do not exist: the checkpoint was "
                              "copied partially, or the module directory was moved out of its checkpoint.")
    checksum = meta.get("checksum")
    if checksum is None:
        warn_unverified(root, [os.path.relpath(weights_path, os.path.realpath(root))], meta_path)
    elif _sha256(weights_path) != checksum:
        raise CheckpointError(f"{weights_path} does not match its checksum in {meta_path}: the file was changed or "
                              "damaged after it was written.")
    return meta, weights_path


def load_module_state(module: Any, path: str | os.PathLike) -> None:
    """Load the weights of the module directory `path` into `module` (an inference-only module
    takes the subset of the weights it has)."""
    folder = checkpoint_dir(path)
    with checkpoint_off_sys_path(enclosing_checkpoint(folder)):
        _, weights_path = read_module_dir(folder)
    tensors = read_tensors(weights_path)
    target = getattr(module, "unwrapped_module", module)
    if getattr(target, "inference_only", False):
        own = target.state_dict()
        tensors = {k: v for k, v in tensors.items() if k in own}
    try:
        target.set_state(tensors)
    except ValueError as err:
        raise CheckpointError(
            f"The weights in {path} do not fit the module being built: {err} Build it with the model config the "
            "weights were trained with (e.g. the same fcnet_hiddens).") from err


def module_spec_args(path: str | os.PathLike, expected: type | None = None) -> dict[str, Any]:
    """The RLModuleSpec arguments that rebuild the module of the module directory `path` and
    load its weights (`RLModule.from_checkpoint` builds it); CheckpointError when it is not an
    `expected` (subclass)."""
    folder = checkpoint_dir(path)
    with checkpoint_off_sys_path(enclosing_checkpoint(folder)):
        return _module_spec_args(folder, expected)


def _module_spec_args(folder: Path, expected: type | None) -> dict[str, Any]:
    meta, _ = read_module_dir(folder)
    source = folder / MODULE_METADATA_FILE
    module_class = decode_value(meta.get("module_class"), "module_class", source)
    catalog_class = decode_value(meta.get("catalog_class"), "catalog_class", source)
    for field in ("inference_only", "learner_only"):
        if not isinstance(meta.get(field, False), bool):
            raise CheckpointError(f"{source}: field '{field}' is {meta[field]!r:.40}, not true or false.")
    if not isinstance(module_class, type):
        raise CheckpointError(f"{source}: field 'module_class' holds {module_class!r:.80}, not an RLModule class.")
    if expected is not None and not issubclass(module_class, expected):
        raise CheckpointError(f"{source} holds a {module_class.__name__}, which is not a {expected.__name__}; load it "
                              f"with {module_class.__name__}.from_checkpoint(path) or RLModule.from_checkpoint(path).")
    return dict(
        module_class=module_class,
        observation_space=decode_value(meta.get("observation_space"), "observation_space", source),
        action_space=decode_value(meta.get("action_space"), "action_space", source),
        model_config=decode_value(meta.get("model_config"), "model_config", source),
        inference_only=bool(meta.get("inference_only", False)),
        learner_only=bool(meta.get("learner_only", False)),
        catalog_class=catalog_class,
        load_state_path=str(folder),
    )

"""Checks of a checkpoint's files before anything of it is loaded: the manifest's files and
checksums, the algorithm class that wrote it, and tensors that are finite and fit the
algorithm's own (names and shapes). Each failure is a CheckpointError naming file and field.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from rlx.utils.checkpoint_paths import binary_files, check_links_stay_inside, resolve_inside, warn_unverified
from rlx.utils.checkpoints import METADATA_FILE
from rlx.utils.errors import CheckpointError


def class_path(cls: type) -> str:
    """"module:QualName" of a class, as checkpoints record algorithm classes."""
    return f"{cls.__module__}:{cls.__qualname__}"


def file_checksum(path: Path) -> str:
    """"sha256:<hex>" of a file's bytes (the `checksums` of rlx_checkpoint.json)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def check_files(root: Path, meta: dict) -> None:
    """Every file the manifest lists is there, inside the checkpoint, with its recorded checksum."""
    source = root / METADATA_FILE
    files = meta.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise CheckpointError(f"{source}: field 'files' must be a list of file names.")
    for name in files:
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise CheckpointError(f"{source}: field 'files' names {name!r:.120}, which is outside the checkpoint.")
    check_links_stay_inside(root)
    for name in files:
        resolve_inside(root, name, source, "files")
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise CheckpointError(
            f"Checkpoint {root} is incomplete: missing {', '.join(missing)}. It may have been copied partially."
        )
    checksums = meta.get("checksums", {})
    if not isinstance(checksums, dict):
        raise CheckpointError(f"{source}: field 'checksums' must be an object of file name -> checksum.")
    for name in files:
        expected = checksums.get(name)
        if expected is not None and file_checksum(root / name) != expected:
            raise CheckpointError(f"{root / name} does not match its checksum in {source} (field 'checksums'): the "
                                  "file was changed or damaged after the checkpoint was written.")
    # Binary files the loader reads whether or not `files` lists them: each needs a checksum.
    binaries = set(binary_files(root)) | {f for f in files if f.endswith((".safetensors", ".pt"))}
    warn_unverified(root, [f for f in binaries if not isinstance(checksums.get(f), str)], source)


def check_algorithm_class(algo: Any, recorded: Any, source: Path, field: str) -> None:
    """A checkpoint written by another algorithm does not load (its class or a base of it may)."""
    if recorded is None:
        return  # state files written before rlx recorded the class
    accepted = {class_path(c) for c in type(algo).__mro__}
    if recorded not in accepted:
        raise CheckpointError(f"{source}: field '{field}' says the checkpoint holds a {recorded!s:.120}, not a "
                              f"{type(algo).__name__}; load it with Algorithm.from_checkpoint(path) instead.")


def check_finite(tensors: dict[str, Any], source: Path) -> None:
    """Refuse NaN or infinite values in a checkpoint's float tensors."""
    for name, array in tensors.items():
        array = np.asarray(array)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            bad = int(array.size - np.isfinite(array).sum())
            raise CheckpointError(f"{source}: tensor '{name}' holds {bad} NaN or infinite values; weights that "
                                  "diverged cannot be loaded. Load an earlier checkpoint.")


def check_param_groups(meta: Any, source: Path, own: list[dict[str, Any]] | None = None) -> None:
    """Refuse optimizer settings (learning rates, betas, ...) that are not finite numbers and,
    given the optimizer's own `param_groups`, groups whose number, keys or value types differ
    from them (a string learning rate would load and fail at the next update)."""
    groups = meta.get("param_groups") if isinstance(meta, dict) else None
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise CheckpointError(f"{source}: field 'param_groups' must be a list of objects.")
    for i, group in enumerate(groups):
        for key, value in group.items():
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, float) and not math.isfinite(v) for v in values):
                raise CheckpointError(f"{source}: field 'param_groups[{i}].{key}' is {value}, not a finite number.")
    if own is None:
        return
    if len(groups) != len(own):
        raise CheckpointError(f"{source}: field 'param_groups' holds {len(groups)} groups, the optimizer has "
                              f"{len(own)}.")
    for i, (group, mine) in enumerate(zip(groups, own)):
        for key, value in mine.items():
            if key == "params":
                expected: Any = list(range(len(value)))
            else:
                expected = value
            if key not in group:
                continue  # torch keeps the optimizer's own value for a setting the state lacks
            if not _same_kind(group[key], expected):
                raise CheckpointError(f"{source}: field 'param_groups[{i}].{key}' is {group[key]!r:.80}; the "
                                      f"optimizer's is {_kind_name(expected)}.")


def _same_kind(stored: Any, own: Any) -> bool:
    """Whether a JSON value can stand for an optimizer setting `own` (numbers for numbers, a
    list of the same length for a tuple, the same type otherwise)."""
    if own is None:  # torch's "not set" (foreach, fused, ...): unset, or a flag
        return stored is None or isinstance(stored, bool)
    if isinstance(own, bool):
        return isinstance(stored, bool)
    if isinstance(own, (int, float)):
        return isinstance(stored, (int, float)) and not isinstance(stored, bool)
    if hasattr(own, "item") and getattr(own, "ndim", 1) == 0:  # a 0-d tensor setting (e.g. lr as a tensor)
        return isinstance(stored, (int, float)) and not isinstance(stored, bool)
    if isinstance(own, (list, tuple)):
        return isinstance(stored, list) and len(stored) == len(own) and all(
            _same_kind(s, o) for s, o in zip(stored, own))
    if isinstance(own, str):
        return isinstance(stored, str)
    return True  # a setting of a type JSON cannot hold: the optimizer checks it


def _kind_name(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} values"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__


def check_fits(tensors: dict[str, Any], own: dict[str, Any], source: Path, hint: str) -> None:
    """Refuse tensors whose names or shapes differ from the ones they replace."""
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise CheckpointError(f"The tensors in {source} do not fit this algorithm: missing {missing or 'none'}, "
                              f"unexpected {unexpected or 'none'}. {hint}".rstrip())
    for name, value in tensors.items():
        if tuple(value.shape) != tuple(own[name].shape):
            raise CheckpointError(f"{source}: tensor '{name}' has shape {tuple(value.shape)}, this algorithm's has "
                                  f"{tuple(own[name].shape)}. {hint}".rstrip())

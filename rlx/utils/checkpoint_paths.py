"""Where the files a checkpoint names may be: inside the checkpoint directory only.

A checkpoint is a directory someone handed you. Loading reads the files inside it and nothing
else: a symbolic link that leads out of it, or a path that climbs out with `..` (the `files` of
`rlx_checkpoint.json`, the `weights` of `rlx_module.json`, a `load_state_path` stored in
`config.json`), is refused with a CheckpointError naming the file and the field. Binary files
without a checksum load with a warning (checkpoints of rlx before checkpoint version 1.2 have
none; a checkpoint whose checksums were deleted may have been changed).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

from rlx.utils.atomic_directory import METADATA_FILE
from rlx.utils.errors import CheckpointError

logger = logging.getLogger("rlx")

#: The JSON file of a module directory (rlx.core.rl_module.module_checkpoint writes it).
MODULE_METADATA_FILE = "rlx_module.json"
#: Where an Algorithm checkpoint keeps a module directory: learner_group/learner/rl_module/<module_id>.
_COMPONENT_PARTS = ("learner_group", "learner", "rl_module")
#: Files whose bytes a checksum protects (JSON files are meant to be readable and editable).
BINARY_SUFFIXES = (".safetensors", ".pt")


def is_inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether `path`, with every symbolic link and `..` resolved, is `root` or lies under it."""
    resolved = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    return resolved == base or base in resolved.parents


def enclosing_checkpoint(directory: str | os.PathLike) -> Path:
    """The checkpoint directory that `directory` belongs to: the Algorithm checkpoint around a
    module directory at its component path (`<ckpt>/learner_group/learner/rl_module/<id>`),
    else `directory` itself."""
    folder = Path(directory)
    if (folder / METADATA_FILE).is_file():
        return folder
    parts = Path(os.path.realpath(folder)).parts
    if len(parts) > 4 and parts[-4:-1] == _COMPONENT_PARTS:
        outer = Path(os.path.realpath(folder)).parents[3]
        if (outer / METADATA_FILE).is_file():
            return outer
    return folder


def checkpoint_of(source: str | os.PathLike) -> Path | None:
    """The checkpoint directory a checkpoint file `source` was read from (config.json,
    rlx_checkpoint.json, rlx_module.json, ...), or None when `source` is not a file of one."""
    folder = Path(source).parent
    for candidate in (folder, *list(folder.parents)[:3]):
        if (candidate / METADATA_FILE).is_file() or (candidate / MODULE_METADATA_FILE).is_file():
            return enclosing_checkpoint(candidate)
    return None


def resolve_inside(root: Path, name: str | os.PathLike, source: str | os.PathLike, field: str,
                   base: Path | None = None) -> Path:
    """`base / name` (base: `root`) with links resolved; a CheckpointError naming `source` and
    `field` when it leaves the checkpoint `root`."""
    path = (root if base is None else base) / name
    if not is_inside(path, root):
        raise CheckpointError(
            f"{source}: field '{field}' names {str(name)!r:.160}, which leads outside the checkpoint "
            f"{os.path.realpath(root)} (to {os.path.realpath(path)}). rlx reads only files inside a checkpoint; copy "
            "the file into it instead.")
    return Path(os.path.realpath(path))


def check_links_stay_inside(root: str | os.PathLike) -> None:
    """Refuse a checkpoint directory holding a symbolic link that leads out of it (the tree is
    walked without following links, so a link cannot hide another)."""
    root = Path(root)
    base = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            path = Path(dirpath) / name
            if path.is_symlink() and not is_inside(path, base):
                raise CheckpointError(
                    f"Checkpoint {base} holds {path.relative_to(root)}, a symbolic link to {os.readlink(path)}, "
                    "outside the checkpoint. rlx reads only files inside a checkpoint: copy the file into it "
                    "instead of linking it.")


def binary_files(root: str | os.PathLike) -> list[str]:
    """The checkpoint's binary files (relative, '/'-separated), those a checksum should cover."""
    root = Path(root)
    found = []
    for dirpath, _, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            if name.endswith(BINARY_SUFFIXES):
                found.append((Path(dirpath) / name).relative_to(root).as_posix())
    return sorted(found)


def warn_unverified(root: str | os.PathLike, unverified: Iterable[str], source: str | os.PathLike) -> None:
    """One WARNING naming the binary files of checkpoint `root` that no checksum in `source` covers."""
    names = sorted(unverified)
    if not names:
        return
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    logger.warning(
        "Checkpoint %s: %s has no checksum for %s, so their contents are not verified. Checkpoints written before "
        "checkpoint version 1.2 have none; a newer one whose checksums were removed may have been changed. Load "
        "only checkpoints you trust, and save this one again to add checksums.", root, source, shown)

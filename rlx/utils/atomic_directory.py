"""Atomic replacement of a checkpoint directory: write into a hidden sibling, then rename it
into place, so a crash mid-save never leaves a half-written checkpoint.

A save of `dir/name` writes into `dir/.name.tmp-{pid}-XXXX`; on success it renames an existing
`dir/name` to `dir/.name.old-{pid}`, renames the temp directory to `dir/name` and removes the old
one. A process killed between the two renames leaves the checkpoint only in the hidden
directories; `recover_interrupted_save` (run at the start of every save) puts it back.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rlx.utils.errors import CheckpointError

logger = logging.getLogger("rlx")

#: The file an rlx checkpoint directory always holds (written last by a save).
METADATA_FILE = "rlx_checkpoint.json"

#: Temp directories of the old naming (no pid) younger than this may still be written to.
LEGACY_TMP_MAX_AGE_S = 3600.0

# Temp directories of saves running in this process; recovery never touches them.
_in_progress: set[Path] = set()
_in_progress_lock = threading.Lock()


class AtomicDirectory:
    """Context manager yielding a temp directory that replaces `target` on success.

    `target` must be new, empty, or an earlier rlx checkpoint: a directory holding other
    files is refused before anything is written, so saving never deletes user files.
    Leftovers of an earlier save that was killed midway are first recovered or removed
    (see `recover_interrupted_save`).
    """

    def __init__(self, target: str | os.PathLike):
        self.target = Path(target).expanduser().resolve()

    def __enter__(self) -> Path:
        recover_interrupted_save(self.target)
        sweep_interrupted_saves(self.target.parent)
        if self.target.exists():
            if not self.target.is_dir():
                raise CheckpointError(f"Cannot save a checkpoint to {self.target}: it is a file.")
            if any(self.target.iterdir()) and not (self.target / METADATA_FILE).is_file():
                raise CheckpointError(
                    f"Cannot save a checkpoint to {self.target}: the directory holds other files and is not an rlx "
                    "checkpoint, and saving replaces the whole directory. Give a new or empty directory, "
                    f"e.g. {self.target / 'checkpoint'}."
                )
        self.target.parent.mkdir(parents=True, exist_ok=True)
        with _in_progress_lock:
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-{os.getpid()}-", dir=self.target.parent))
            _in_progress.add(self.tmp)
        return self.tmp

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._finish(exc_type is None)
        finally:
            with _in_progress_lock:
                _in_progress.discard(self.tmp)

    def _finish(self, success: bool) -> None:
        if not success:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.target.exists():
            old = self.target.with_name(f".{self.target.name}.old-{os.getpid()}")
            os.replace(self.target, old)
            os.replace(self.tmp, self.target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.target)


def recover_interrupted_save(target: str | os.PathLike) -> bool:
    """Recover or remove what saves to `target` that were killed midway left behind.

    Looks only at hidden siblings named exactly `.{name}.tmp-{pid}-XXXX` and `.{name}.old-{pid}`
    whose process is no longer alive (and at `.{name}.tmp-XXXX` of older rlx releases not
    modified for an hour); the directories of saves still running are never touched.

    - `target` missing: the newest complete temp directory (its `rlx_checkpoint.json` and every
      file that lists exist) becomes `target`; failing that, a complete old directory does.
      The other leftovers are then removed. With nothing to restore, only the temp directories
      (partial writes) are removed.
    - `target` an rlx checkpoint: the leftovers are removed.
    - `target` anything else, or missing because a running save is between its two renames:
      nothing is touched.

    Logs one WARNING line per directory restored or removed. Returns True when it restored
    `target`.
    """
    target = Path(target).expanduser().resolve()
    tmps, olds, renaming = _dead_leftovers(target)
    if not tmps and not olds:
        return False
    if os.path.lexists(target):
        if (target / METADATA_FILE).is_file():
            _remove(tmps + olds)
        return False
    if renaming:  # a running save is between its renames and is about to put target back
        return False
    source = _newest_complete(tmps) or _newest_complete(olds)
    if source is None:
        _remove(tmps)
        if olds:
            logger.warning("Checkpoint %s is missing; left %s in place: none of them is a complete checkpoint.",
                           target, ", ".join(p.name for p in olds))
        return False
    try:
        os.rename(source, target)
    except OSError as err:  # e.g. another process restored or saved it meanwhile
        logger.warning("Could not restore checkpoint %s from %s: %s", target, source.name, err)
        return False
    logger.warning("Restored checkpoint %s from %s, left there by a save that was interrupted.", target, source.name)
    _remove([p for p in tmps + olds if p != source])
    return True


#: Names of what any save in a directory leaves behind: `.{name}.tmp-{pid}-XXXX` and `.{name}.old-{pid}`.
_LEFTOVER_RE = re.compile(r"\.(?P<name>.+)\.(?:tmp-\d+-[a-z0-9_]+|old-\d+)")


def sweep_interrupted_saves(parent: str | os.PathLike) -> None:
    """Recover or remove what killed saves left in directory `parent`, for every checkpoint
    name there (not only the one being saved or loaded now): a save killed while writing a new
    checkpoint leaves a temp directory that no later save to another path would otherwise
    remove. Each name is handled as `recover_interrupted_save` handles it; leftovers of
    running saves are never touched. Errors (a read-only directory) are ignored."""
    try:
        found = [(m["name"], p) for p in Path(parent).iterdir() if (m := _LEFTOVER_RE.fullmatch(p.name))]
    except OSError:
        return
    names = {name for name, _ in found} - {name for name, path in found if not _looks_like_a_save(path)}
    for name in sorted(names):
        if "/" in name or name in (".", ".."):
            continue
        try:
            recover_interrupted_save(Path(parent) / name)
        except OSError as err:
            logger.debug("Could not clean up the leftovers of %s: %s", name, err)


#: What a save writes first (an Algorithm checkpoint, a module directory) or last.
_SAVE_FILES = ("config.json", "module.safetensors", METADATA_FILE)


def _looks_like_a_save(path: Path) -> bool:
    """Whether a hidden directory named like a save's leftover holds what a save writes (or
    nothing yet), so that the sweep never removes someone else's directory of that name."""
    try:
        return path.is_dir() and not path.is_symlink() and (
            not any(path.iterdir()) or any((path / name).exists() for name in _SAVE_FILES))
    except OSError:
        return False


def _dead_leftovers(target: Path) -> tuple[list[Path], list[Path], bool]:
    """The temp and old directories of `target` whose writer is no longer running, and whether
    a running writer has an old directory (so is between its renames)."""
    name = re.escape(target.name)
    tmp_re = re.compile(rf"\.{name}\.tmp-(\d+)-[a-z0-9_]+")
    legacy_tmp_re = re.compile(rf"\.{name}\.tmp-[a-z0-9_]+")
    old_re = re.compile(rf"\.{name}\.old-(\d+)")
    tmps: list[Path] = []
    olds: list[Path] = []
    renaming = False
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return tmps, olds, renaming
    with _in_progress_lock:
        running = set(_in_progress)
    saving_here = any(p.parent == target.parent and p.name.startswith(f".{target.name}.tmp-") for p in running)
    for path in siblings:
        if path.is_symlink() or not path.is_dir() or path in running:
            continue
        if match := tmp_re.fullmatch(path.name):
            if not _writer_alive(int(match[1])):
                tmps.append(path)
        elif legacy_tmp_re.fullmatch(path.name):
            if _age_s(path) > LEGACY_TMP_MAX_AGE_S:
                tmps.append(path)
        elif match := old_re.fullmatch(path.name):
            pid = int(match[1])
            # This process's own old directory exists only between the renames of a running save.
            if _writer_alive(pid) or (pid == os.getpid() and saving_here):
                renaming = True
            else:
                olds.append(path)
    return tmps, olds, renaming


def _writer_alive(pid: int) -> bool:
    """Whether process `pid` may still be writing. This process counts as not writing: its
    running saves are excluded by path, and a pid equal to ours is a crashed earlier process
    whose pid was reused (common in containers)."""
    if pid == os.getpid():
        return False
    if pid <= 0 or os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):  # not a pid this system can have
        return True
    return True


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _newest_complete(dirs: list[Path]) -> Path | None:
    """The complete checkpoint among `dirs` whose metadata was written last, or None."""
    complete = [(mtime, d) for d in dirs if (mtime := _complete_mtime(d)) is not None]
    return max(complete)[1] if complete else None


def _complete_mtime(directory: Path) -> float | None:
    """The mtime of `directory`'s metadata file when it and every file it lists exist, else None."""
    meta_path = directory / METADATA_FILE
    try:
        meta = json.loads(meta_path.read_text())
        files = meta.get("files", []) if isinstance(meta, dict) else None
        if not isinstance(files, list) or not all(isinstance(f, str) and (directory / f).is_file() for f in files):
            return None
        return meta_path.stat().st_mtime
    except (OSError, ValueError):
        return None


def _remove(dirs: list[Path]) -> None:
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)
        logger.warning("Removed %s, left by a checkpoint save that was interrupted.", path)

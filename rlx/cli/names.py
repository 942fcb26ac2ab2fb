"""Names that become directories under the storage root (experiment names).

An experiment's results go to `<storage path>/<experiment name>/`; the name comes from
`--experiment-name`, a key of an experiment file or a Python file's name. It must be one
plain directory name, so that nothing a run writes lands outside the storage path:
no '/' or '\\', not '.' or '..', not empty.
"""
from __future__ import annotations

import os

from rlx.utils.errors import ConfigError

#: Longest name most file systems accept for one directory entry, in bytes.
MAX_NAME_BYTES = 255
_SEPARATORS = ("/", "\\")


def name_problem(name: str) -> str | None:
    """Why `name` cannot be one directory under the storage root, or None when it can."""
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"'{name}' is not a directory name of its own"
    if any(sep in name for sep in _SEPARATORS):
        return "it contains a path separator"
    if "\0" in name:
        return "it contains a NUL character"
    if len(os.fsencode(name)) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_dir_name(name: str, what: str) -> str:
    """`name` when it is one plain directory name; else a ConfigError naming `what` (the
    option or file it came from, e.g. "--experiment-name") and the value."""
    problem = name_problem(name)
    if problem is not None:
        raise ConfigError(
            f"{what} {name!r} cannot be used: {problem}, and results must stay inside the storage path. "
            "Use a single directory name without '/', '\\' or '..', e.g. my_experiment "
            "(choose where results go with --storage-path)."
        )
    return name


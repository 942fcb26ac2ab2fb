"""Which files an offline input names: a file, a directory, a glob, or a list of files."""
from __future__ import annotations

import glob
import os
from typing import Any, Sequence

from rlx.offline.spaces import OfflineDataError

#: URI schemes that name local paths: file://, and Ray's local:// (the node's own disk).
LOCAL_SCHEMES = ("file", "local")


def uri_scheme(path: str) -> str:
    """The scheme of a URI such as "s3://bucket/x" ("s3"); "" for a plain path."""
    return path.split("://", 1)[0] if "://" in path else ""


def strip_local_scheme(path: str) -> str:
    """`path` without a file:// or local:// prefix."""
    scheme = uri_scheme(path)
    return path[len(scheme) + len("://"):] if scheme in LOCAL_SCHEMES else path


def resolve_input_files(inputs: Any, extensions: Sequence[str]) -> list[str]:
    """The files `inputs` names, sorted within each pattern; OfflineDataError when there are none
    or a listed file is missing. A directory stands for its files with one of `extensions`."""
    if isinstance(inputs, (str, os.PathLike)):
        patterns = [os.fspath(inputs)]
    elif isinstance(inputs, (list, tuple)) and inputs and all(isinstance(i, (str, os.PathLike)) for i in inputs):
        patterns = [os.fspath(i) for i in inputs]
    else:
        raise OfflineDataError(f"offline input must be a path, a glob or a non-empty list of paths, got {inputs!r}.")
    files: list[str] = []
    for pattern in patterns:
        if uri_scheme(pattern) not in ("",) + LOCAL_SCHEMES:
            raise OfflineDataError(f"offline input {pattern!r} is a URI; rlx reads local files only. Copy the files "
                                   "to a local directory and give its path.")
        path = os.path.abspath(os.path.expanduser(strip_local_scheme(pattern)))
        if os.path.isdir(path):
            found = sorted(f for ext in extensions for f in glob.glob(os.path.join(glob.escape(path), f"*{ext}")))
            if not found:
                raise OfflineDataError(f"offline input directory {path} holds no {' or '.join(extensions)} files.")
            files.extend(found)
        elif os.path.isfile(path):  # before globbing: "run[1].json" names that file when it exists
            files.append(path)
        elif glob.has_magic(path):
            found = _glob_files(path)
            if not found:
                raise OfflineDataError(f"no files match the offline input {pattern!r}.")
            files.extend(found)
        else:
            raise OfflineDataError(f"offline input file {path} not found.")
    for path in files:
        if path.endswith(".zip"):
            raise OfflineDataError(f"offline input {path} is a zip archive; rlx reads the files themselves. "
                                   "Unzip it and give the extracted directory.")
    return files


def _glob_files(pattern: str) -> list[str]:
    """The files `pattern` matches, sorted. When it matches none, the pattern is tried again with
    its longest existing directory prefix taken literally, so "/data/run[1]/*.json" finds the
    files of the directory "run[1]"."""
    found = sorted(f for f in glob.glob(pattern) if os.path.isfile(f))
    if found:
        return found
    head, tail = pattern, ""
    while head and not os.path.isdir(head):
        parent, name = os.path.split(head)
        if parent == head:
            break
        head, tail = parent, os.path.join(name, tail) if tail else name
    if not head or not tail or not glob.has_magic(head):
        return []
    return sorted(f for f in glob.glob(os.path.join(glob.escape(head), tail)) if os.path.isfile(f))

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
            found = sorted(f for ext in extensions for f in glob.glob(os.path.join(path, f"*{ext}")))
            if not found:
                raise OfflineDataError(f"offline input directory {path} holds no {' or '.join(extensions)} files.")
            files.extend(found)
        elif glob.has_magic(path):
            found = sorted(f for f in glob.glob(path) if os.path.isfile(f))
            if not found:
                raise OfflineDataError(f"no files match the offline input {pattern!r}.")
            files.extend(found)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise OfflineDataError(f"offline input file {path} not found.")
    for path in files:
        if path.endswith(".zip"):
            raise OfflineDataError(f"offline input {path} is a zip archive; rlx reads the files themselves. "
                                   "Unzip it and give the extracted directory.")
    return files

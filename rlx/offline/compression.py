"""Compressed columns of offline files: NumPy's .npy bytes, zlib-compressed, base64 text.

RLlib compresses `output_compress_columns` with LZ4 over a pickle. rlx never unpickles what
it reads, and keeps to the standard library: a compressed column is the string

    "rlx:npy+zlib:" + base64(zlib(np.save(array, allow_pickle=False)))

which any Python can decode with `base64`, `zlib` and `numpy.load` (see `unpack`). RLlib's
LZ4+pickle strings are recognised and refused with an explanation.
"""
from __future__ import annotations

import base64
import io
import zlib
from typing import Any

import numpy as np

#: Prefix of rlx's compressed columns.
PREFIX = "rlx:npy+zlib:"
#: zlib level: 1 compresses float observations almost as well as 6, several times faster.
LEVEL = 1
#: The base64 text of the LZ4 frame magic number (04 22 4D 18) that starts RLlib's packed columns.
_RLLIB_LZ4_START = "BCJNG"


class CompressedColumnError(ValueError):
    """A compressed column cannot be decoded (corrupt, or another library's format)."""


def pack(array: Any) -> str:
    """Compress an array (numbers or booleans, not objects) into rlx's column string."""
    array = np.ascontiguousarray(array)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"only numeric arrays can be compressed, got dtype {array.dtype}.")
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return PREFIX + base64.b64encode(zlib.compress(buffer.getbuffer(), LEVEL)).decode("ascii")


def is_compressed(value: Any) -> bool:
    """Whether a column value read from a file is a compressed string (rlx's or RLlib's)."""
    return isinstance(value, str)


def unpack(value: str) -> np.ndarray:
    """The array a `pack` string holds; CompressedColumnError for anything else."""
    if not value.startswith(PREFIX):
        if value.startswith(_RLLIB_LZ4_START):
            raise CompressedColumnError(
                "the column is compressed in RLlib's format (LZ4 over a pickle), which rlx does not read: "
                "unpickling a file can run arbitrary code. Write the data again with "
                "output_compress_columns=[] (plain JSON lists), or with rlx.")
        raise CompressedColumnError(f"the column is a string ({value[:30]!r}...), not a list of values or an "
                                    f"rlx compressed column (which starts with {PREFIX!r}).")
    try:
        raw = zlib.decompress(base64.b64decode(value[len(PREFIX):], validate=True))
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as err:  # binascii.Error, zlib.error, ValueError from np.load
        raise CompressedColumnError(f"the compressed column is corrupt ({type(err).__name__}: {err}).") from None


def unpack_if_needed(value: Any) -> Any:
    """`unpack(value)` for a compressed column, else `value` unchanged."""
    return unpack(value) if is_compressed(value) else value

"""Compressed arrays (`ray.rllib.utils.compression`): `pack`, `unpack` and their helpers.

RLlib packs data as LZ4 over a pickle. rlx never unpickles what it unpacks: `pack` takes a
numeric array and returns bytes,

    b"rlx:npy+lz4:" + lz4.frame(np.save(array, allow_pickle=False))     (lz4 installed)
    b"rlx:npy+zlib:" + zlib(np.save(array, allow_pickle=False))         (otherwise)

and `unpack` reads either, whichever codec this process has (a zlib payload anywhere, an
LZ4 one where lz4 is installed). `compress_observations=True` sends sampled observations from
remote EnvRunners to the driver this way (rlx.env.batch_compression).
"""
from __future__ import annotations

import functools
import io
import zlib
from typing import Any

import numpy as np

__all__ = ["CompressionError", "codec", "compression_supported", "is_compressed", "pack", "pack_if_needed",
           "unpack", "unpack_if_needed"]

_LZ4_PREFIX = b"rlx:npy+lz4:"
_ZLIB_PREFIX = b"rlx:npy+zlib:"
#: zlib level: 1 compresses observations almost as well as 6, several times faster.
_ZLIB_LEVEL = 1


class CompressionError(ValueError):
    """Data cannot be packed (not a numeric array) or unpacked (corrupt, or not rlx's format)."""


@functools.lru_cache(maxsize=1)
def _lz4_frame() -> Any:
    try:
        import lz4.frame
    except ImportError:
        return None
    return lz4.frame


def codec() -> str:
    """The codec `pack` uses in this process: 'lz4' when the lz4 package is installed, else 'zlib'."""
    return "lz4" if _lz4_frame() is not None else "zlib"


def compression_supported() -> bool:
    """Whether `pack` compresses (always in rlx: zlib is in the standard library, LZ4 is used when installed)."""
    return True


def pack(data: Any) -> bytes:
    """Compress a numeric (or boolean) array into bytes that `unpack` turns back into an equal array."""
    array = np.asarray(data)
    if array.dtype.kind not in "biuf":
        raise CompressionError(f"pack() compresses numeric and boolean arrays, got dtype {array.dtype} "
                               "(rlx never pickles what it compresses).")
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    lz4 = _lz4_frame()
    if lz4 is not None:
        return _LZ4_PREFIX + lz4.compress(buffer.getbuffer())
    return _ZLIB_PREFIX + zlib.compress(buffer.getbuffer(), _ZLIB_LEVEL)


def pack_if_needed(data: Any) -> Any:
    """`pack(data)` for a NumPy array, else `data` unchanged."""
    return pack(data) if isinstance(data, np.ndarray) else data


def is_compressed(data: Any) -> bool:
    """Whether `data` looks packed (bytes or text, as in RLlib)."""
    return isinstance(data, (bytes, bytearray, memoryview, str))


def unpack(data: Any) -> np.ndarray:
    """The array that `pack` compressed into `data`; CompressionError for anything else."""
    raw = bytes(data) if isinstance(data, (bytearray, memoryview)) else data
    if isinstance(raw, str):
        raise CompressionError("unpack() takes the bytes pack() returns; this is text (RLlib packs into base64 "
                               "text over a pickle, which rlx does not read: unpickling can run arbitrary code).")
    if not isinstance(raw, bytes):
        raise CompressionError(f"unpack() takes the bytes pack() returns, got {type(data).__name__}.")
    try:
        if raw.startswith(_ZLIB_PREFIX):
            payload = zlib.decompress(raw[len(_ZLIB_PREFIX):])
        elif raw.startswith(_LZ4_PREFIX):
            lz4 = _lz4_frame()
            if lz4 is None:
                raise CompressionError("the data is LZ4-compressed, and the lz4 package is not installed in this "
                                       "process: pip install lz4 (or let every process compress with zlib by "
                                       "uninstalling it where the data is packed).")
            payload = lz4.decompress(raw[len(_LZ4_PREFIX):])
        else:
            raise CompressionError(f"the data does not start with rlx's header ({_ZLIB_PREFIX!r} or "
                                   f"{_LZ4_PREFIX!r}); it was not made by rlx.utils.compression.pack().")
        return np.load(io.BytesIO(payload), allow_pickle=False)
    except CompressionError:
        raise
    except Exception as err:  # zlib.error, LZ4's RuntimeError, ValueError from np.load
        raise CompressionError(f"the compressed data is corrupt ({type(err).__name__}: {err}).") from None


def unpack_if_needed(data: Any) -> Any:
    """`unpack(data)` for packed data, else `data` unchanged."""
    return unpack(data) if is_compressed(data) else data

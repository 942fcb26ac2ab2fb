"""RLlink: the TCP message protocol between RLlib's EnvRunners and external simulators
(`ray.rllib.env.external.rllink`), byte for byte as RLlib 2.60 speaks it.

A message is an 8-byte header, the body's length as zero-padded ASCII decimal digits
("00000042"), followed by the body: a msgpack map with a "type" field holding one of the
RLlink names ("PING", "EPISODES", ...) and the message's own fields. NumPy arrays and
scalars inside a body use msgpack_numpy's encoding (a map {b"nd": True, b"type": "<f4",
b"kind": b"", b"shape": [...], b"data": <bytes>}), which is what RLlib's peers send; rlx
encodes and decodes it itself, so only `msgpack` is needed.

Nothing is unpickled here: object arrays (which msgpack_numpy pickles) are refused, and
every malformed frame raises RLlinkProtocolError naming what is wrong. Every wait can be
bounded (`timeout_s`); a peer that closes the connection raises RLlinkError. Both are
ConnectionErrors, as in RLlib.
"""
from __future__ import annotations

import socket
import time
from enum import Enum
from typing import Any

import numpy as np

#: Bytes of the length header.
HEADER_BYTES = 8
#: The largest body an 8-digit header can announce.
MAX_FRAMABLE_BYTES = 10**HEADER_BYTES - 1
#: The largest body `get_rllink_message` accepts unless told otherwise (256 MiB).
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: NumPy dtype kinds a message may carry: bool, ints, unsigned ints, floats, complex, bytes, str.
_SAFE_KINDS = frozenset("biufcSU")


class RLlink(Enum):
    """The message types (RLlib's names; the values are what travels in the "type" field)."""

    PROTOCOL_VERSION = "0.0.1"

    # Requests: client (external env) -> server (rlx).
    PING = "PING"
    EPISODES = "EPISODES"
    GET_STATE = "GET_STATE"
    GET_CONFIG = "GET_CONFIG"
    EPISODES_AND_GET_STATE = "EPISODES_AND_GET_STATE"

    # Responses: server -> client.
    PONG = "PONG"
    SET_STATE = "SET_STATE"
    SET_CONFIG = "SET_CONFIG"
    #: rlx's addition: the server refuses a message ({"type": "ERROR", "message": why}) and
    #: closes the connection. RLlib's clients do not know it and fail on it as on a closed socket.
    ERROR = "ERROR"

    # Old API stack (RLlib keeps the names; neither side here uses them).
    ACTION_SPACE = "ACTION_SPACE"
    OBSERVATION_SPACE = "OBSERVATION_SPACE"
    GET_WORKER_ARGS = "GET_WORKER_ARGS"
    GET_WEIGHTS = "GET_WEIGHTS"
    REPORT_SAMPLES = "REPORT_SAMPLES"
    START_EPISODE = "START_EPISODE"
    GET_ACTION = "GET_ACTION"
    LOG_ACTION = "LOG_ACTION"
    LOG_RETURNS = "LOG_RETURNS"
    END_EPISODE = "END_EPISODE"

    def __str__(self) -> str:
        return self.name


class RLlinkError(ConnectionError):
    """Sending or receiving an RLlink message failed (the peer is gone, or a wait ran out)."""


class RLlinkProtocolError(RLlinkError):
    """A frame that is not an RLlink message: bad header, oversized, not msgpack, no valid type."""


class RLlinkTimeoutError(RLlinkError, TimeoutError):
    """A message did not arrive (or could not be sent) within the time allowed."""


class _RefusedValue(ValueError):
    """A NumPy value in a body that rlx does not decode (object arrays, bad sizes)."""


def _msgpack() -> Any:
    try:
        import msgpack
    except ImportError:
        raise ImportError("RLlink messages need the msgpack package: pip install msgpack") from None
    return msgpack


# ---------------------------------------------------------------- body codec


def _encode_numpy(obj: Any) -> Any:
    """msgpack `default` hook: NumPy arrays and scalars in msgpack_numpy's form."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _SAFE_KINDS:
            raise TypeError(f"RLlink cannot send arrays of dtype {obj.dtype} (only numbers, bools and strings).")
        return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": list(obj.shape),
                b"data": np.ascontiguousarray(obj).tobytes()}
    if isinstance(obj, (np.bool_, np.number)):
        return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
    if isinstance(obj, complex):
        return {b"complex": True, b"data": repr(obj)}
    if isinstance(obj, Enum):
        return obj.name
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"RLlink cannot send a {type(obj).__name__}: send numbers, strings, bytes, lists, dicts "
                    "and NumPy arrays.")


def _decode_numpy(obj: dict) -> Any:
    """msgpack `object_hook`: msgpack_numpy's maps back to arrays and scalars (checked)."""
    if b"nd" not in obj:
        if obj.get(b"complex") is True and isinstance(obj.get(b"data"), (str, bytes)):
            data = obj[b"data"]
            return complex(data.decode() if isinstance(data, bytes) else data)
        return obj
    dtype = _checked_dtype(obj.get(b"type"), obj.get(b"kind", b""))
    data = obj.get(b"data")
    if not isinstance(data, (bytes, bytearray)):
        raise _RefusedValue("a NumPy value's 'data' is not bytes")
    if obj[b"nd"] is True:
        shape = obj.get(b"shape")
        if not isinstance(shape, (list, tuple)) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise _RefusedValue(f"a NumPy array's shape must be a list of sizes, got {shape!r:.60}")
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if expected != len(data):
            raise _RefusedValue(f"a NumPy array of shape {tuple(shape)} and dtype {dtype} needs {expected} bytes, "
                             f"got {len(data)}")
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    if len(data) != dtype.itemsize:
        raise _RefusedValue(f"a NumPy {dtype} scalar needs {dtype.itemsize} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=dtype)[0]


def _checked_dtype(descr: Any, kind: Any) -> np.dtype:
    if kind not in (b"", "", None) or not isinstance(descr, (str, bytes)):
        raise _RefusedValue("structured and object arrays are not accepted (object arrays would be unpickled)")
    try:
        dtype = np.dtype(descr.decode() if isinstance(descr, bytes) else descr)
    except (TypeError, ValueError):
        raise _RefusedValue(f"unknown NumPy dtype {descr!r:.40}") from None
    if dtype.kind not in _SAFE_KINDS:
        raise _RefusedValue(f"NumPy dtype {dtype} is not accepted (only numbers, bools and strings)")
    return dtype


def pack_message(message: dict) -> bytes:
    """The frame (header + msgpack body) of `message`; its "type" may be an RLlink member or name."""
    if not isinstance(message, dict) or "type" not in message:
        raise ValueError(f"An RLlink message is a dict with a 'type' field, got {message!r:.80}.")
    message = dict(message)
    kind = message["type"]
    message["type"] = kind.name if isinstance(kind, RLlink) else str(kind)
    body = _msgpack().packb(message, use_bin_type=True, default=_encode_numpy)
    if len(body) > MAX_FRAMABLE_BYTES:
        raise ValueError(f"An RLlink message body is at most {MAX_FRAMABLE_BYTES} bytes (8 header digits); "
                         f"this {message['type']} message has {len(body)}. Send fewer episodes per message.")
    return str(len(body)).zfill(HEADER_BYTES).encode("ascii") + body


def unpack_body(body: bytes) -> tuple[RLlink, dict]:
    """(type, the other fields) of a message body; RLlinkProtocolError when it is not a message."""
    try:
        message = _msgpack().unpackb(body, raw=False, object_hook=_decode_numpy, strict_map_key=False)
    except _RefusedValue as err:
        raise RLlinkProtocolError(f"The message holds a NumPy value rlx does not accept: {err}") from None
    except Exception as err:  # msgpack's own errors
        raise RLlinkProtocolError(f"The message body is not valid msgpack ({type(err).__name__}: {err}).") from None
    if not isinstance(message, dict):
        raise RLlinkProtocolError(f"An RLlink message must be a map, got a {type(message).__name__}.")
    if "type" not in message:
        raise RLlinkProtocolError(f"The message has no 'type' field (fields: {sorted(map(str, message))[:8]}).")
    kind = message.pop("type")
    try:
        return RLlink(kind), message
    except ValueError:
        names = ", ".join(m.name for m in RLlink if m is not RLlink.PROTOCOL_VERSION)
        raise RLlinkProtocolError(f"Unknown message type {kind!r:.40}; RLlink types are {names}.") from None


# ---------------------------------------------------------------- socket I/O


def send_rllink_message(sock_: socket.socket, message: dict, timeout_s: float | None = None) -> None:
    """Send `message` (a dict with a "type") as one frame; RLlinkError when the peer is gone,
    RLlinkTimeoutError when it does not take the bytes within `timeout_s` (None: no limit)."""
    frame = pack_message(message)
    previous = sock_.gettimeout()
    try:
        if timeout_s is not None:
            sock_.settimeout(timeout_s)
        sock_.sendall(frame)
    except socket.timeout:
        raise RLlinkTimeoutError(f"Sending a {message['type']} message took more than {timeout_s:g} s "
                                 "(the peer is not reading).") from None
    except OSError as err:
        raise RLlinkError(f"Error sending a {message['type']} message to the peer: {err}") from None
    finally:
        if timeout_s is not None:
            _restore_timeout(sock_, previous)


def get_rllink_message(sock_: socket.socket, timeout_s: float | None = None,
                       max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> tuple[RLlink, dict]:
    """Receive one message: (its RLlink type, its other fields).

    `timeout_s` bounds the whole message (None: wait as long as it takes, RLlib's behaviour);
    `max_bytes` the body. Raises RLlinkTimeoutError, RLlinkProtocolError for a malformed
    frame, or RLlinkError when the peer closes the connection.
    """
    deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
    header = recv_exact(sock_, HEADER_BYTES, deadline)
    return read_body(sock_, header, deadline, max_bytes)


def read_body(sock_: socket.socket, header: bytes, deadline: float | None,
              max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> tuple[RLlink, dict]:
    """The message whose 8-byte `header` was read: its body read by `deadline` and decoded."""
    if len(header) != HEADER_BYTES or not header.isdigit():
        raise RLlinkProtocolError(f"Bad message header {header!r:.30}: RLlink frames start with the body's "
                                  f"length as {HEADER_BYTES} ASCII digits.")
    length = int(header)
    if length > max_bytes:
        raise RLlinkProtocolError(f"The message announces {length} bytes, more than the {max_bytes} accepted.")
    return unpack_body(recv_exact(sock_, length, deadline))


def recv_exact(sock_: socket.socket, num_bytes: int, deadline: float | None) -> bytes:
    """Exactly `num_bytes` bytes from the socket, by `deadline` (a time.monotonic() value, None:
    no limit)."""
    chunks, received = [], 0
    previous = sock_.gettimeout()
    try:
        while received < num_bytes:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                sock_.settimeout(left)
            try:
                packet = sock_.recv(min(num_bytes - received, 1 << 20))
            except socket.timeout:
                raise RLlinkTimeoutError(f"Timed out after {received} of {num_bytes} bytes of an RLlink "
                                         "message.") from None
            except OSError as err:
                raise RLlinkError(f"Error receiving an RLlink message: {err}") from None
            if not packet:
                raise RLlinkError("The peer closed the connection" + (
                    f" in the middle of a message ({received} of {num_bytes} bytes)." if received else "."))
            chunks.append(packet)
            received += len(packet)
    except socket.timeout:
        raise RLlinkTimeoutError(f"Timed out after {received} of {num_bytes} bytes of an RLlink message.") from None
    finally:
        if deadline is not None:
            _restore_timeout(sock_, previous)
    return b"".join(chunks)


def _restore_timeout(sock_: socket.socket, timeout: float | None) -> None:
    try:
        sock_.settimeout(timeout)
    except OSError:  # closed meanwhile
        pass

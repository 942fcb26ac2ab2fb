"""JSON bodies of the policy server's protocol: values checked against the spaces.

Nothing is ever unpickled: requests are JSON objects, observations and actions nested
lists of numbers, and every value a client sends is checked against the server's
observation or action space before it touches a batch (`RequestError` names what is wrong).
"""
from __future__ import annotations

import json
import math
from typing import Any, Literal, overload

import numpy as np

#: Longest episode id a client may choose.
MAX_EPISODE_ID_LEN = 128


class RequestError(ValueError):
    """A request the server refuses: `status` is the HTTP status (4xx), the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def loads(body: bytes) -> dict:
    """The JSON object of a request body (RequestError 400 when it is not one)."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as err:
        raise RequestError(400, f"the request body is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise RequestError(400, f"the request body must be a JSON object, not {type(value).__name__}.")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number the server accepts")


def dumps(value: Any) -> bytes:
    """JSON bytes of a response (NumPy values as plain numbers and lists)."""
    return json.dumps(to_jsonable(value), allow_nan=False, separators=(",", ":")).encode("utf-8")


def to_jsonable(value: Any) -> Any:
    """`value` with NumPy arrays and scalars (also nested in dicts, lists, tuples) as Python values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def field(request: dict, name: str, required: bool = True) -> Any:
    """A field of a request (RequestError 400 naming it when required and absent)."""
    if name not in request or (required and request[name] is None):
        if required:
            raise RequestError(400, f"the request has no {name!r} field.")
        return None
    return request[name]


@overload
def episode_id(value: Any, allow_none: Literal[False] = False) -> str: ...


@overload
def episode_id(value: Any, allow_none: bool) -> str | None: ...


def episode_id(value: Any, allow_none: bool = False) -> str | None:
    """A checked episode id: a non-empty string of at most MAX_EPISODE_ID_LEN characters."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_EPISODE_ID_LEN:
        raise RequestError(400, f"episode_id must be a non-empty string of at most {MAX_EPISODE_ID_LEN} "
                                f"characters, got {_short(value)}.")
    return value


#: Agents one multi-agent request may name.
MAX_AGENTS = 1024


def agent_id(key: Any) -> Any:
    """A checked agent id of a JSON object key: a non-empty string of at most MAX_EPISODE_ID_LEN
    characters; one that writes an integer in its plain decimal form ("0", "12") is that
    integer, since JSON turned the client's integer ids into such strings."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise RequestError(422, f"agent ids must be strings or integers, got {_short(key)}.")
    text = str(key)
    if not text or len(text) > MAX_EPISODE_ID_LEN:
        raise RequestError(422, f"agent ids must have 1 to {MAX_EPISODE_ID_LEN} characters, got {_short(key)}.")
    if text == "__all__":
        raise RequestError(422, "'__all__' is not an agent id; it only ends every agent in a done dict.")
    if isinstance(key, int):
        return key
    try:
        number = int(text)
    except ValueError:
        return text
    return number if str(number) == text else text


def agent_dict(value: Any, what: str, allow_empty: bool = False, allow_all: bool = False) -> dict:
    """A checked JSON object keyed by agent id (keys as `agent_id` reads them); `allow_all`
    keeps an "__all__" key (done dicts)."""
    if not isinstance(value, dict):
        raise RequestError(422, f"{what} must be an object keyed by agent id (this server trains several "
                                f"policies), got {_short(value)}.")
    if not value and not allow_empty:
        raise RequestError(422, f"{what} names no agent.")
    if len(value) > MAX_AGENTS:
        raise RequestError(422, f"{what} names {len(value)} agents; a request may name at most {MAX_AGENTS}.")
    out = {}
    for key, item in value.items():
        out["__all__" if allow_all and key == "__all__" else agent_id(key)] = item
    if len(out) != len(value):
        raise RequestError(422, f"{what} names an agent twice (as a number and as its decimal string).")
    return out


def reward(value: Any) -> float:
    """A checked reward: one number that is finite in float32 (the dtype of the batch's rewards)."""
    return batch_float(value, "reward")


def log_prob(value: Any, what: str = "action_logp") -> float:
    """A checked log-probability: a number <= 0 (up to rounding) that is finite in float32."""
    number = batch_float(value, what)
    if number > 1e-4:
        raise RequestError(422, f"{what} must be a finite log-probability (<= 0), got {_short(value)}.")
    return number


def batch_float(value: Any, what: str) -> float:
    """`value` as a float that stays finite when stored in a float32 batch column (RequestError
    422 naming `what` otherwise: 1e39 is finite in float64 but inf in float32, and 10**400 is no
    float at all)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(422, f"{what} must be a finite number, got {_short(value)}.")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or abs(number) > FLOAT32_MAX:
        raise RequestError(422, f"{what} must be a finite number within float32's range (|x| <= {FLOAT32_MAX:.4g}), "
                                f"got {_short(value)}.")
    return number


#: The largest finite float32: rewards, log-probabilities and float observations beyond it
#: would become inf in the batch and fail the next update.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def cast(array: np.ndarray, dtype: Any, what: str) -> np.ndarray:
    """`array` (float64, finite) cast to `dtype`, checked after the cast: RequestError 422 naming
    `what` when a value does not survive it (inf in float32, wrapped or truncated in an integer
    dtype)."""
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        out = array.astype(dtype)
    if dtype.kind == "f":
        ok = np.isfinite(out)
    elif dtype.kind in "iu":
        bits = dtype.itemsize * 8
        low, high = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if dtype.kind == "i" else (0.0, 2.0 ** bits)
        ok = (array >= low) & (array < high) & (array == np.round(array))
    elif dtype.kind == "b":
        ok = (array == 0) | (array == 1)
    else:
        ok = np.ones(array.shape, bool)
    if not np.all(ok):
        index = tuple(int(i) for i in np.argwhere(~np.asarray(ok))[0])
        where = f" at index {list(index)}" if index else ""
        raise RequestError(422, f"{what} holds {float(array[index])!r}{where}, which the space's dtype {dtype} "
                                "cannot hold (it would become inf or wrap around).")
    return out


def flag(value: Any, name: str, default: bool) -> bool:
    """A checked boolean field (None gives `default`)."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(400, f"{name} must be true or false, got {_short(value)}.")
    return value


def info(value: Any) -> dict:
    """A checked info: a JSON object or null."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(422, f"info must be a JSON object, got {type(value).__name__}.")
    return value


def from_space(value: Any, space: Any, what: str, check_bounds: bool) -> Any:
    """`value` (decoded JSON) as a value of `space` (arrays with the space's dtype, ints for
    Discrete, tuples/dicts for Tuple/Dict spaces); RequestError 422 naming `what` when it does
    not fit. `check_bounds`: refuse values outside Box bounds (actions) too."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise RequestError(422, f"{what} must be one integer for {space}, got {_short(value)}.")
        if not space.start <= value < space.start + space.n:
            raise RequestError(422, f"{what} {value} is outside {space}.")
        return value
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            keys = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
            raise RequestError(422, f"{what} must be an object with the keys {sorted(space.spaces)}, got {keys}.")
        return {k: from_space(value[k], s, f"{what}[{k!r}]", check_bounds) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise RequestError(422, f"{what} must be a list of {len(space.spaces)} parts, got {_short(value)}.")
        return tuple(from_space(v, s, f"{what}[{i}]", check_bounds) for i, (v, s) in enumerate(zip(value, space.spaces)))
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return _array(value, space, what, check_bounds)
    raise RequestError(422, f"{what}: the server cannot read values of {type(space).__name__} spaces.")


def _array(value: Any, space: Any, what: str, check_bounds: bool) -> np.ndarray:
    import gymnasium as gym

    if not _numeric_nested(value):
        raise RequestError(422, f"{what} must be numbers (nested lists of shape {space.shape}), got {_short(value)}.")
    try:
        array = np.asarray(value, dtype=np.float64)
    except OverflowError:
        raise RequestError(422, f"{what} holds an integer too large for any float.") from None
    except (ValueError, TypeError):
        raise RequestError(422, f"{what} must be a rectangular array of shape {space.shape}.") from None
    if array.shape != space.shape:
        raise RequestError(422, f"{what} has shape {array.shape}; the space {space} expects shape {space.shape}.")
    if not np.all(np.isfinite(array)):
        raise RequestError(422, f"{what} holds NaN or infinite values.")
    if isinstance(space, gym.spaces.Box):
        if check_bounds and not (np.all(array >= space.low) and np.all(array <= space.high)):
            raise RequestError(422, f"{what} is outside the bounds of {space}.")
        return cast(array, space.dtype, what)
    if not np.all(array == np.round(array)):
        raise RequestError(422, f"{what} must hold integers for {space}.")
    high = np.asarray(space.nvec) + np.asarray(getattr(space, "start", 0)) if isinstance(
        space, gym.spaces.MultiDiscrete) else 2
    low = np.asarray(getattr(space, "start", 0))
    if np.any(array < low) or np.any(array >= high):  # compared as floats: no int64 overflow
        raise RequestError(422, f"{what} is outside {space}.")
    return cast(array, space.dtype, what)


def _numeric_nested(value: Any, depth: int = 0) -> bool:
    if depth > 32:
        return False
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, list):
        return all(_numeric_nested(v, depth + 1) for v in value)
    return False


def float_row(value: Any, size: int | None, what: str) -> np.ndarray:
    """A checked flat row of finite floats (of `size` numbers when given)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not _numeric_nested(value):
        raise RequestError(422, f"{what} must be a list of numbers, got {_short(value)}.")
    try:
        with np.errstate(over="ignore"):  # 1e39 becomes inf here, refused below
            row = np.asarray(value, dtype=np.float32).reshape(-1)
    except (ValueError, TypeError, OverflowError):
        raise RequestError(422, f"{what} must be a flat list of numbers.") from None
    if size is not None and row.size != size:
        raise RequestError(422, f"{what} holds {row.size} numbers; this policy has {size}.")
    if not np.all(np.isfinite(row)):
        raise RequestError(422, f"{what} holds NaN or values that are infinite in float32 (|x| > {FLOAT32_MAX:.4g}).")
    return row


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

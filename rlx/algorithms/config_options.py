"""Declarative option table for AlgorithmConfig: names, defaults, sections, checks, aliases.

Every option an AlgorithmConfig accepts is one `Option` row. The config class reads the
table to set defaults, to validate values (with a "did you mean" for unknown names), to
map legacy flat-dict keys to current names, and to refuse values for features that are
not built yet.
"""
from __future__ import annotations

import math
import numbers
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, cast

from rlx.utils.errors import ConfigError, did_you_mean

Check = Callable[[str, Any], Any]


@dataclass(frozen=True)
class Option:
    """One configuration option.

    `later` names the feature an option needs when that feature is not built yet: the
    option then accepts only its default. `tf_only` options belong to TensorFlow, which
    rlx does not have, and likewise accept only their default. `no_effect` says why an
    option that takes any value changes nothing in rlx (e.g. a switch between RLlib's API
    stacks: rlx has one); the configuration reference prints these statuses, and
    tests/test_docs.py checks them against the code that reads each option.
    """

    name: str
    default: Any
    sections: tuple[str, ...]
    check: Check | None = None
    aliases: tuple[str, ...] = ()
    later: str | None = None
    tf_only: bool = False
    no_effect: str = ""
    doc: str = ""


# ---------------------------------------------------------------- value checks


def _type_name(value: Any) -> str:
    return type(value).__name__


def any_value(name: str, value: Any) -> Any:
    """Accept any value."""
    return value


def boolean(name: str, value: Any) -> bool:
    """Accept True/False only (not 0/1 or strings)."""
    if isinstance(value, bool):
        return value
    try:
        import numpy as np

        if isinstance(value, np.bool_):
            return bool(value)
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    raise ConfigError(f"'{name}' must be True or False, got {show(value)} ({_type_name(value)}).")


#: The largest value an integer option holds: rlx stores counts in int64 arrays and tensors.
INT64_MAX = 2 ** 63 - 1
#: The largest magnitude of a number option: rlx computes with float32 tensors, where larger
#: values become infinite.
FLOAT32_MAX = 3.4028234663852886e38
#: The largest count of repetitions within one iteration (epochs, updates per step, ...): more
#: than two billion passes cannot finish.
INT32_MAX = 2 ** 31 - 1


def show(value: Any) -> str:
    """`value` for an error message, short even for a 5,000-digit int (whose str() Python refuses)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > 10 ** 30:
        return f"an integer of {len(format(abs(int(value)), 'x')) * 4} bits"
    try:
        text = repr(value)
    except ValueError:  # a container holding an int too long for str()
        return f"a {_type_name(value)} holding an integer too long to print"
    return text if len(text) <= 200 else text[:200] + "..."


def integer(min_value: int | None = None, max_value: int | None = INT64_MAX, allow_none: bool = False) -> Check:
    """Accept an int within [min_value, max_value] (bools are refused); `max_value` defaults to
    the int64 limit, since larger counts cannot be stored."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        given = value
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                extra = " or None" if allow_none else ""
                raise ConfigError(f"'{name}' must be an integer{extra}, got {show(value)} ({_type_name(value)}).")
        value = int(value)
        if min_value is not None and value < min_value:
            raise ConfigError(f"'{name}' must be >= {min_value}, got {show(given)}.")
        if max_value is not None and value > max_value:
            raise ConfigError(f"'{name}' must be <= {max_value}, got {show(given)}.")
        return value

    return check


def count(min_value: int = 1, allow_none: bool = False) -> Check:
    """An integer count of repetitions within one iteration (epochs, passes, updates): at most
    INT32_MAX, since more could not finish."""
    return integer(min_value, INT32_MAX, allow_none=allow_none)


def number(
    min_value: float | None = None,
    max_value: float | None = None,
    allow_none: bool = False,
    exclusive_min: bool = False,
    allow_inf: bool = False,
) -> Check:
    """Accept a real number within the given bounds; never NaN, and infinity only with
    `allow_inf` (options where it means "no limit", such as timeouts). Finite values must fit
    float32 (|value| <= FLOAT32_MAX) unless `max_value` allows more: larger ones turn infinite
    in the tensors rlx computes with."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            extra = " or None" if allow_none else ""
            raise ConfigError(f"'{name}' must be a number{extra}, got {show(value)} ({_type_name(value)}).")
        try:
            value = float(value)
        except OverflowError:  # an int beyond float64
            raise ConfigError(f"'{name}' must be a finite number within float32's range (+-{FLOAT32_MAX:.4g}), "
                              f"got {show(value)}.") from None
        if math.isnan(value):
            raise ConfigError(f"'{name}' must be a number, got NaN.")
        if math.isinf(value) and not allow_inf:
            raise ConfigError(f"'{name}' must be finite, got {value}.")
        if min_value is not None:
            if exclusive_min and value <= min_value:
                raise ConfigError(f"'{name}' must be > {min_value}, got {value}.")
            if not exclusive_min and value < min_value:
                raise ConfigError(f"'{name}' must be >= {min_value}, got {value}.")
        if max_value is not None and value > max_value:
            raise ConfigError(f"'{name}' must be <= {max_value}, got {value}.")
        limit = max(FLOAT32_MAX, max_value if max_value is not None else FLOAT32_MAX)
        if math.isfinite(value) and abs(value) > limit:
            raise ConfigError(f"'{name}' must be within float32's range (+-{FLOAT32_MAX:.4g}; larger values turn "
                              f"infinite in rlx's float32 tensors), got {value:g}.")
        return value

    return check


#: The longest wait a timeout option may ask for: threading's limit (Python raises OverflowError
#: for longer waits); about 292 years on Linux.
MAX_SECONDS = float(threading.TIMEOUT_MAX)


def seconds(allow_none: bool = False, exclusive_min: bool = False, unit: float = 1.0) -> Check:
    """A duration in seconds (or in `unit` seconds, e.g. 0.001 for milliseconds): >= 0 and at
    most MAX_SECONDS, the longest wait Python's threading can do."""
    return number(0.0, MAX_SECONDS / unit, allow_none=allow_none, exclusive_min=exclusive_min)


def choice(*choices: Any, normalize: Callable[[Any], Any] | None = None) -> Check:
    """Accept one of the listed values."""

    def check(name: str, value: Any) -> Any:
        v = normalize(value) if (normalize and value is not None) else value
        if v not in choices:
            hint = did_you_mean(str(value), [str(c) for c in choices]) if isinstance(value, str) else ""
            raise ConfigError(
                f"'{name}' must be one of {', '.join(repr(c) for c in choices)}; got {show(value)}.{hint}"
            )
        return v

    return check


def dictionary(allow_none: bool = False) -> Check:
    """Accept a dict (copied, so later changes to the caller's dict do not leak in)."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if not isinstance(value, dict):
            raise ConfigError(f"'{name}' must be a dict, got {show(value)} ({_type_name(value)}).")
        return dict(value)

    return check


def resource_amounts() -> Check:
    """Accept a dict of Ray custom resources: names (str) to finite amounts >= 0 (copied)."""

    def check(name: str, value: Any) -> Any:
        value = dictionary()(name, value)
        for key, amount in value.items():
            if not isinstance(key, str) or not key:
                raise ConfigError(f"'{name}' names Ray resources by non-empty strings, got the key {show(key)}.")
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) \
                    or amount < 0:
                raise ConfigError(f"'{name}'[{key!r}] must be a finite number >= 0 (an amount of the Ray resource "
                                  f"{key!r}), got {show(amount)}.")
        return value

    return check


def string(allow_none: bool = False) -> Check:
    """Accept a str."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"'{name}' must be a string, got {show(value)} ({_type_name(value)}).")
        return value

    return check


_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*|\.[A-Za-z_]\w*)$")


def _import_path(name: str, value: str, kind: str) -> str:
    """`value` when it has the form of an import path ('package.module:Name'), else a ConfigError."""
    if not _IMPORT_PATH.match(value):
        raise ConfigError(f"'{name}' must be {kind} or an import path of the form 'package.module:Name'; "
                          f"got the string {show(value)}.")
    return value


def callable_or_none(name: str, value: Any) -> Any:
    """Accept a callable, an import path string 'module:attr', or None."""
    if isinstance(value, str):
        return _import_path(name, value, "a callable")
    if value is None or callable(value):
        return value
    raise ConfigError(f"'{name}' must be a callable (or an import path string), got {show(value)}.")


def callable_only(name: str, value: Any) -> Any:
    """Accept a callable or None (options rlx calls as given, never imports from a path)."""
    if value is None or callable(value):
        return value
    raise ConfigError(f"'{name}' must be a callable (a function or class) or None, got {show(value)} "
                      f"({_type_name(value)}).")


def class_or_none(name: str, value: Any) -> Any:
    """Accept a class, an import path string, or None."""
    if isinstance(value, str):
        return _import_path(name, value, "a class")
    if value is None or isinstance(value, type):
        return value
    raise ConfigError(f"'{name}' must be a class (or an import path string), got {show(value)}.")


def schedule_or_number(min_value: float | None = 0.0, allow_none: bool = False) -> Check:
    """Accept a number or a piecewise schedule [[timestep, value], ...] starting at timestep 0,
    every value finite and at least `min_value`."""
    num = number(min_value=min_value)

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if isinstance(value, (list, tuple)):
            schedule = validate_schedule(name, value)
            for i, (t, v) in enumerate(schedule):
                if min_value is not None and v < min_value:
                    raise ConfigError(f"'{name}' schedule entry {i} has value {v}; values must be >= {min_value}.")
            return schedule
        return num(name, value)

    return check


def validate_schedule(name: str, value: Sequence) -> list[list[float]]:
    """Check a piecewise schedule [[t0=0, v0], [t1, v1], ...] with increasing timesteps and finite numbers."""
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"'{name}' must be a schedule [[timestep, value], ...], got {show(value)}.")
    if len(value) == 0:
        raise ConfigError(f"'{name}' schedule must not be empty; use [[0, value], ...].")
    out: list[list[float]] = []
    last_t: float = -1
    for i, entry in enumerate(value):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise ConfigError(
                f"'{name}' schedule entry {i} must be a [timestep, value] pair, got {show(entry)}."
            )
        t, v = entry
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not isinstance(v, numbers.Real) \
                or isinstance(v, bool):
            raise ConfigError(f"'{name}' schedule entry {i} must hold numbers, got {show(entry)}.")
        if abs(cast(float, t)) > INT64_MAX or abs(cast(float, v)) > FLOAT32_MAX \
                or not (math.isfinite(t) and math.isfinite(v)):
            raise ConfigError(f"'{name}' schedule entry {i} must hold finite numbers (timesteps up to {INT64_MAX}, "
                              f"values within float32's range), got {show(entry)}.")
        if i == 0 and t != 0:
            raise ConfigError(
                f"'{name}' schedule must start at timestep 0 (e.g. [[0, {v}], ...]); it starts at {t}."
            )
        t_num = int(t) if isinstance(t, numbers.Integral) else float(t)  # (integers kept exact)
        if t_num <= last_t:
            raise ConfigError(f"'{name}' schedule timesteps must increase; entry {i} has {t} after {last_t}.")
        last_t = t_num
        out.append([int(t_num) if float(t_num).is_integer() else t_num, float(v)])
    return out


def int_or_literal(*literals: str, min_value: int = 1) -> Check:
    """Accept an int >= min_value or one of the given string literals (e.g. 'auto')."""
    as_int = integer(min_value=min_value)

    def check(name: str, value: Any) -> Any:
        if isinstance(value, str):
            if value in literals:
                return value
            raise ConfigError(
                f"'{name}' must be an integer >= {min_value} or one of {', '.join(map(repr, literals))}; got {show(value)}."
            )
        return as_int(name, value)

    return check


def clip_rewards_check(name: str, value: Any) -> Any:
    """clip_rewards: None, bool, a positive float, or a (low, high) pair."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Real):
        value = number(0.0, exclusive_min=True)(name, value)
        return value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(x, numbers.Real) for x in value):
        low, high = (number()(name, x) for x in value)
        if low >= high:
            raise ConfigError(f"'{name}' (low, high) needs low < high, got {show(value)}.")
        return (low, high)
    raise ConfigError(f"'{name}' must be None, True/False, a positive number or a (low, high) pair; got {show(value)}.")


def space_or_none(name: str, value: Any) -> Any:
    """Accept a gymnasium Space or None."""
    if value is None:
        return None
    import gymnasium as gym

    if isinstance(value, gym.spaces.Space):
        return value
    raise ConfigError(f"'{name}' must be a gymnasium.spaces.Space or None, got {show(value)}.")


def env_spec(name: str, value: Any) -> Any:
    """Accept an env id string, an env class, a creator callable, or None."""
    if value is None or isinstance(value, str) or isinstance(value, type) or callable(value):
        return value
    raise ConfigError(
        f"'{name}' must be a registered env name, a Gymnasium id, an import path "
        f"('package.module:Class') or an env class; got {show(value)}."
    )


def sections_of(options: Iterable[Option]) -> dict[str, list[Option]]:
    """Group options by the section methods that accept them."""
    out: dict[str, list[Option]] = {}
    for opt in options:
        for s in opt.sections:
            out.setdefault(s, []).append(opt)
    return out


@dataclass
class OptionTable:
    """Lookup structure over a list of options: by name, by alias, by section."""

    options: dict[str, Option] = field(default_factory=dict)
    alias_to_name: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, options: Iterable[Option]) -> "OptionTable":
        """Index options by canonical name and alias; later rows override earlier ones."""
        table = cls()
        for opt in options:
            table.options[opt.name] = opt
            for alias in opt.aliases:
                table.alias_to_name[alias] = opt.name
        return table

    def resolve(self, key: str) -> str | None:
        """Canonical name for a key or alias, or None if unknown."""
        if key in self.options:
            return key
        return self.alias_to_name.get(key)

    def all_names(self) -> list[str]:
        """Every accepted name, canonical and alias."""
        return list(self.options) + list(self.alias_to_name)

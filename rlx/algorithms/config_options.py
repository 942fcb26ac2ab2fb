"""Declarative option table for AlgorithmConfig: names, defaults, sections, checks, aliases.

Every option an AlgorithmConfig accepts is one `Option` row. The config class reads the
table to set defaults, to validate values (with a "did you mean" for unknown names), to
map legacy flat-dict keys to current names, and to refuse values for features that are
not built yet.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

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
    raise ConfigError(f"'{name}' must be True or False, got {value!r} ({_type_name(value)}).")


def integer(min_value: int | None = None, max_value: int | None = None, allow_none: bool = False) -> Check:
    """Accept an int within [min_value, max_value] (bools are refused)."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                extra = " or None" if allow_none else ""
                raise ConfigError(f"'{name}' must be an integer{extra}, got {value!r} ({_type_name(value)}).")
        value = int(value)
        if min_value is not None and value < min_value:
            raise ConfigError(f"'{name}' must be >= {min_value}, got {value}.")
        if max_value is not None and value > max_value:
            raise ConfigError(f"'{name}' must be <= {max_value}, got {value}.")
        return value

    return check


def number(
    min_value: float | None = None,
    max_value: float | None = None,
    allow_none: bool = False,
    exclusive_min: bool = False,
    allow_inf: bool = False,
) -> Check:
    """Accept a real number within the given bounds; never NaN, and infinity only with
    `allow_inf` (options where it means "no limit", such as timeouts)."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            extra = " or None" if allow_none else ""
            raise ConfigError(f"'{name}' must be a number{extra}, got {value!r} ({_type_name(value)}).")
        value = float(value)
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
        return value

    return check


def choice(*choices: Any, normalize: Callable[[Any], Any] | None = None) -> Check:
    """Accept one of the listed values."""

    def check(name: str, value: Any) -> Any:
        v = normalize(value) if (normalize and value is not None) else value
        if v not in choices:
            hint = did_you_mean(str(value), [str(c) for c in choices]) if isinstance(value, str) else ""
            raise ConfigError(
                f"'{name}' must be one of {', '.join(repr(c) for c in choices)}; got {value!r}.{hint}"
            )
        return v

    return check


def dictionary(allow_none: bool = False) -> Check:
    """Accept a dict (copied, so later changes to the caller's dict do not leak in)."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if not isinstance(value, dict):
            raise ConfigError(f"'{name}' must be a dict, got {value!r} ({_type_name(value)}).")
        return dict(value)

    return check


def string(allow_none: bool = False) -> Check:
    """Accept a str."""

    def check(name: str, value: Any) -> Any:
        if value is None and allow_none:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"'{name}' must be a string, got {value!r} ({_type_name(value)}).")
        return value

    return check


def callable_or_none(name: str, value: Any) -> Any:
    """Accept a callable, an import path string 'module:attr', or None."""
    if value is None or callable(value) or isinstance(value, str):
        return value
    raise ConfigError(f"'{name}' must be a callable (or an import path string), got {value!r}.")


def class_or_none(name: str, value: Any) -> Any:
    """Accept a class, an import path string, or None."""
    if value is None or isinstance(value, type) or isinstance(value, str):
        return value
    raise ConfigError(f"'{name}' must be a class (or an import path string), got {value!r}.")


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
    if len(value) == 0:
        raise ConfigError(f"'{name}' schedule must not be empty; use [[0, value], ...].")
    out: list[list[float]] = []
    last_t: float = -1
    for i, entry in enumerate(value):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise ConfigError(
                f"'{name}' schedule entry {i} must be a [timestep, value] pair, got {entry!r}."
            )
        t, v = entry
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not isinstance(v, numbers.Real) \
                or isinstance(v, bool):
            raise ConfigError(f"'{name}' schedule entry {i} must hold numbers, got {entry!r}.")
        if not (math.isfinite(t) and math.isfinite(v)):
            raise ConfigError(f"'{name}' schedule entry {i} must hold finite numbers, got {entry!r}.")
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
                f"'{name}' must be an integer >= {min_value} or one of {', '.join(map(repr, literals))}; got {value!r}."
            )
        return as_int(name, value)

    return check


def clip_rewards_check(name: str, value: Any) -> Any:
    """clip_rewards: None, bool, a positive float, or a (low, high) pair."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Real):
        if value <= 0:
            raise ConfigError(f"'{name}' as a number must be > 0 (clip to [-v, v]), got {value}.")
        return float(value)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(x, numbers.Real) for x in value):
        low, high = float(value[0]), float(value[1])
        if low >= high:
            raise ConfigError(f"'{name}' (low, high) needs low < high, got {value!r}.")
        return (low, high)
    raise ConfigError(f"'{name}' must be None, True/False, a positive number or a (low, high) pair; got {value!r}.")


def space_or_none(name: str, value: Any) -> Any:
    """Accept a gymnasium Space or None."""
    if value is None:
        return None
    import gymnasium as gym

    if isinstance(value, gym.spaces.Space):
        return value
    raise ConfigError(f"'{name}' must be a gymnasium.spaces.Space or None, got {value!r}.")


def env_spec(name: str, value: Any) -> Any:
    """Accept an env id string, an env class, a creator callable, or None."""
    if value is None or isinstance(value, str) or isinstance(value, type) or callable(value):
        return value
    raise ConfigError(
        f"'{name}' must be a registered env name, a Gymnasium id, an import path "
        f"('package.module:Class') or an env class; got {value!r}."
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

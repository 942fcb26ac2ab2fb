"""Stop criteria of `rlx train`: {result_key: value}, met when any result value reaches its bound."""
from __future__ import annotations

import math
from typing import Any

from rlx.utils.errors import ConfigError, did_you_mean

#: Keys that only appear once evaluation has run; missing from early results is normal.
_LATE_PREFIXES = ("evaluation/", "evaluation")


def lookup(result: dict[str, Any], key: str) -> Any:
    """The value of `key` in a result dict; nested keys are written 'a/b'. A bare key that
    is not at the top level is also looked up under `env_runners/` (the new stack's place
    for episode statistics). Returns None when absent."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, dict) or part not in node:
            node = None
            break
        node = node[part]
    if node is None and "/" not in key:
        runners = result.get("env_runners")
        if isinstance(runners, dict):
            return runners.get(key)
    return node


def _flat_keys(result: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for k, v in result.items():
        name = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            keys.extend(_flat_keys(v, name))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            keys.append(name)
    return keys


class StopCriteria:
    """Stop criteria {key: bound}: `met(result)` names the criteria a result reaches
    (`result[key] >= bound`); an empty set of criteria never stops."""

    def __init__(self, criteria: dict[str, Any] | None):
        self.criteria: dict[str, float] = {}
        for key, bound in (criteria or {}).items():
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise ConfigError(f"Stop criterion '{key}' must be a number, got {bound!r}.")
            self.criteria[str(key)] = float(bound) if isinstance(bound, float) else bound
        self._checked = False

    def __bool__(self) -> bool:
        return bool(self.criteria)

    def met(self, result: dict[str, Any]) -> list[str]:
        """Descriptions ('key >= bound') of the criteria `result` reaches; raises ConfigError
        on the first result if a key is not a result key at all."""
        if not self._checked:
            self._check_keys(result)
            self._checked = True
        reached = []
        for key, bound in self.criteria.items():
            value = lookup(result, key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) \
                    and value >= bound:
                reached.append(f"{key} >= {_fmt(bound)}")
        return reached

    def _check_keys(self, result: dict[str, Any]) -> None:
        for key in self.criteria:
            if lookup(result, key) is None and not key.startswith(_LATE_PREFIXES):
                raise ConfigError(
                    f"Stop criterion '{key}' is not a key of the training results.{did_you_mean(key, _flat_keys(result))}"
                    " Nested keys are written a/b, e.g. env_runners/episode_return_mean."
                )

    def describe(self) -> str:
        """'a >= 1 or b >= 2', or 'Ctrl-C' when there are no criteria."""
        if not self.criteria:
            return "Ctrl-C (no stop criteria)"
        return " or ".join(f"{k} >= {_fmt(v)}" for k, v in self.criteria.items())


def _fmt(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:g}"

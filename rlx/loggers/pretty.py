"""pretty_print: a result dict as readable YAML (Tune's `pretty_print`)."""
from __future__ import annotations

from typing import Any

from rlx.loggers.logger import json_safe


def pretty_print(result: dict[str, Any], exclude: set[str] | None = None) -> str:
    """`result` as indented YAML, without long per-episode lists (`hist_stats`) or the
    keys named in `exclude`."""
    import yaml

    skip = {"hist_stats", "config"} | set(exclude or ())
    cleaned = {k: v for k, v in json_safe(_drop(result, skip)).items()}
    return yaml.safe_dump(cleaned, default_flow_style=False, sort_keys=False)


def _drop(value: Any, skip: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _drop(v, skip) for k, v in value.items() if k not in skip}
    return value

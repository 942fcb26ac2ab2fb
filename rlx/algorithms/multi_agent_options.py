"""The checks of the `multi_agent()` settings: policies, policies to train, per-module overrides.

`policies` is normalised to `{policy_id: PolicySpec}`. The pieces that run with them
(`PolicySpec`, `AgentMapper`, which calls `policy_mapping_fn`, `is_trainable`, which turns
`policies_to_train` into a predicate, and `resolve_callable`) live in the core layer,
`rlx.core.rl_module.agent_mapping`, and are importable from here too.
"""
from __future__ import annotations

from typing import Any

from rlx.core.rl_module.agent_mapping import DEFAULT_POLICY_ID, AgentMapper, PolicySpec, is_trainable, resolve_callable
from rlx.utils.errors import ConfigError

__all__ = ["DEFAULT_POLICY_ID", "AgentMapper", "PolicySpec", "check_overrides_per_module", "check_policies",
           "check_policies_to_train", "is_trainable", "resolve_callable"]


def check_policies(name: str, value: Any) -> dict[str, Any] | None:
    """`policies` as {policy_id: PolicySpec}: from a set/list of ids, a dict of PolicySpecs,
    4-tuples (policy_class, observation_space, action_space, config) or None values."""
    if value is None:
        return None
    if isinstance(value, str):
        raise ConfigError(f"'{name}' must be a set/list of policy ids or a dict {{policy_id: PolicySpec}}, got the "
                          f"string {value!r}; write {{{value!r}}}.")
    if isinstance(value, (set, frozenset)) and all(isinstance(pid, str) for pid in value):
        # A set has no order, and iterating one follows the process's string hashes: sorted, the
        # modules are built (and their weights drawn) in the same order whenever the seed is the same.
        value = sorted(value)
    if isinstance(value, (set, frozenset, list, tuple)):
        value = {pid: None for pid in value}
    if not isinstance(value, dict):
        raise ConfigError(f"'{name}' must be a set/list of policy ids or a dict {{policy_id: PolicySpec}}, got "
                          f"{type(value).__name__}.")
    if not value:
        raise ConfigError(f"'{name}' is empty; give at least one policy id.")
    out: dict[str, PolicySpec] = {}
    for pid, spec in value.items():
        if not isinstance(pid, str) or not pid:
            raise ConfigError(f"Policy ids are non-empty strings; '{name}' has {pid!r}.")
        if spec is None:
            spec = PolicySpec()
        elif isinstance(spec, (tuple, list)):
            if len(spec) != 4:
                raise ConfigError(f"'{name}': policy {pid!r}: the old tuple form is (policy_class, observation_space, "
                                  f"action_space, config); got {len(spec)} items.")
            spec = PolicySpec(*spec)
        elif isinstance(spec, dict) and set(spec) <= {"policy_class", "observation_space", "action_space", "config"}:
            spec = PolicySpec(**spec)
        elif not isinstance(spec, PolicySpec):
            raise ConfigError(f"'{name}': policy {pid!r}: expected a PolicySpec, a 4-tuple or None, got {spec!r:.80}.")
        cls = spec.policy_class
        if cls is not None and not _is_rlx_policy_view(cls) and getattr(cls, "rl_module_class", None) is None:
            raise ConfigError(
                f"'{name}': policy {pid!r} names policy_class {getattr(cls, '__name__', cls)!r}; rlx builds every policy from "
                "its RLModule, so custom Policy classes are not supported (unless the class names the RLModule that "
                "plays it as `rl_module_class`). Leave policy_class=None and customise the network with "
                "config.rl_module(...) or the model config.")
        if spec.config is not None and not isinstance(spec.config, dict):
            raise ConfigError(f"'{name}': policy {pid!r}: PolicySpec.config must be a dict of config overrides, got "
                              f"{type(spec.config).__name__}.")
        out[pid] = spec
    return out


def check_policies_to_train(name: str, value: Any) -> Any:
    """None (train every policy), a collection of policy ids, or a callable (policy_id, batch) -> bool."""
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        raise ConfigError(f"'{name}' must be a list of policy ids or a callable, got the string {value!r}; "
                          f"write [{value!r}].")
    if isinstance(value, (set, frozenset, list, tuple)):
        ids = list(value)
        bad = [pid for pid in ids if not isinstance(pid, str)]
        if bad:
            raise ConfigError(f"'{name}' holds non-string policy ids {bad!r}.")
        return ids
    raise ConfigError(f"'{name}' must be None, a list of policy ids or a callable (policy_id, batch) -> bool; "
                      f"got {type(value).__name__}.")


def check_overrides_per_module(name: str, value: Any) -> dict:
    """{module_id: {config key: value}}."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f"'{name}' must be a dict {{module_id: {{config key: value}}}}, got {value!r:.100}.")
    return {str(k): dict(v) for k, v in value.items()}


def _is_rlx_policy_view(cls: Any) -> bool:
    """Whether `cls` is rlx's own Policy view (told by name and package: importing it would load
    the sampling layer and torch just to check a config)."""
    return isinstance(cls, type) and cls.__name__ == "Policy" and cls.__module__.split(".")[0] == "rlx"

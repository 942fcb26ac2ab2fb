"""The `multi_agent()` settings: policies, mapping of agents to policies, which ones train.

`policies` is normalised to `{policy_id: PolicySpec}`; `policy_mapping_fn` is called once per
agent per episode through `map_agent` (both RLlib's signatures work); `policies_to_train`
becomes a predicate through `is_trainable`.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from rlx.utils.errors import ConfigError

DEFAULT_POLICY_ID = "default_policy"


def check_policies(name: str, value: Any) -> dict[str, Any] | None:
    """`policies` as {policy_id: PolicySpec}: from a set/list of ids, a dict of PolicySpecs,
    4-tuples (policy_class, observation_space, action_space, config) or None values."""
    from rlx.policy.policy import Policy, PolicySpec

    if value is None:
        return None
    if isinstance(value, str):
        raise ConfigError(f"'{name}' must be a set/list of policy ids or a dict {{policy_id: PolicySpec}}, got the "
                          f"string {value!r}; write {{{value!r}}}.")
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
                raise ConfigError(f"Policy {pid!r}: the old tuple form is (policy_class, observation_space, "
                                  f"action_space, config); got {len(spec)} items.")
            spec = PolicySpec(*spec)
        elif isinstance(spec, dict) and set(spec) <= {"policy_class", "observation_space", "action_space", "config"}:
            spec = PolicySpec(**spec)
        elif not isinstance(spec, PolicySpec):
            raise ConfigError(f"Policy {pid!r}: expected a PolicySpec, a 4-tuple or None, got {spec!r:.80}.")
        cls = spec.policy_class
        if cls is not None and cls is not Policy:
            raise ConfigError(
                f"Policy {pid!r} names policy_class {getattr(cls, '__name__', cls)!r}; rlx builds every policy from "
                "its RLModule, so custom Policy classes are not supported. Leave policy_class=None and customise "
                "the network with config.rl_module(...) or the model config.")
        if spec.config is not None and not isinstance(spec.config, dict):
            raise ConfigError(f"Policy {pid!r}: PolicySpec.config must be a dict of config overrides, got "
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


def resolve_callable(value: Any, name: str) -> Any:
    """A function given as an import path string ('module:function', as YAML files give it)
    imported; anything else as it is."""
    if not isinstance(value, str):
        return value
    from rlx.env.registry import import_object

    try:
        target = import_object(value)
    except Exception as err:
        raise ConfigError(f"{name}={value!r} is not an importable function ('package.module:function'): "
                          f"{type(err).__name__}: {err}") from err
    if not callable(target):
        raise ConfigError(f"{name}={value!r} names {type(target).__name__}, not a function.")
    return target


def is_trainable(policies_to_train: Any, policy_id: str, batch: Any = None) -> bool:
    """Whether `policy_id` trains: every policy when policies_to_train is None."""
    if policies_to_train is None:
        return True
    if callable(policies_to_train):
        return bool(policies_to_train(policy_id, batch))
    return policy_id in policies_to_train


def _takes_episode(fn: Callable) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


class AgentMapper:
    """Calls `policy_mapping_fn` as RLlib does: `fn(agent_id, episode, worker=..., **kw)`, or the
    old one-argument `fn(agent_id)`; checks that the answer is a known policy."""

    def __init__(self, mapping_fn: Callable | str | None, policy_ids: list[str]):
        mapping_fn = resolve_callable(mapping_fn, "policy_mapping_fn")
        if mapping_fn is None:
            if len(policy_ids) != 1 and DEFAULT_POLICY_ID not in policy_ids:
                raise ConfigError(
                    f"policies has {len(policy_ids)} policies ({', '.join(policy_ids)}) but no policy_mapping_fn; "
                    "set config.multi_agent(policy_mapping_fn=lambda agent_id, episode, **kw: ...) to say which "
                    "policy each agent uses.")
            only = policy_ids[0] if len(policy_ids) == 1 else DEFAULT_POLICY_ID
            mapping_fn = lambda agent_id, episode, **kw: only  # noqa: E731
        self.fn = mapping_fn
        self.policy_ids = set(policy_ids)
        self._with_episode = _takes_episode(mapping_fn)
        self._with_worker = self._accepts_worker(mapping_fn)

    @staticmethod
    def _accepts_worker(fn: Callable) -> bool:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return True
        return any(p.kind == p.VAR_KEYWORD or p.name == "worker" for p in params)

    def __call__(self, agent_id: Any, episode: Any, worker: Any = None) -> str:
        pid = self.raw(agent_id, episode, worker)
        if pid not in self.policy_ids:
            raise ConfigError(
                f"policy_mapping_fn mapped agent {agent_id!r} to {pid!r}, which is not one of the policies "
                f"({', '.join(sorted(self.policy_ids))}); add it to config.multi_agent(policies=...) or fix the "
                "mapping function.")
        return pid

    def raw(self, agent_id: Any, episode: Any, worker: Any = None) -> Any:
        """What the mapping function returns, unchecked."""
        if not self._with_episode:
            pid = self.fn(agent_id)
        elif self._with_worker:
            pid = self.fn(agent_id, episode, worker=worker)
        else:
            pid = self.fn(agent_id, episode)
        return pid

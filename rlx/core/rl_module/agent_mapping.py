"""Which module each agent uses: PolicySpec, the policy-mapping function and `is_trainable`.

`config.multi_agent(policies=..., policy_mapping_fn=..., policies_to_train=...)` is checked by
the algorithm layer (rlx.algorithms.multi_agent_options); the pieces the runners, learners and
the Policy view run live here, in the core layer: `AgentMapper` calls `policy_mapping_fn` once
per agent per episode (both RLlib's signatures work), `is_trainable` turns
`policies_to_train` into a predicate, `resolve_callable` imports a function given as a path.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from rlx.utils.errors import ConfigError
from rlx.utils.registry import import_object

__all__ = ["DEFAULT_POLICY_ID", "AgentMapper", "PolicySpec", "is_trainable", "resolve_callable"]

DEFAULT_POLICY_ID = "default_policy"


@dataclasses.dataclass
class PolicySpec:
    """One policy of a multi-agent config: `config.multi_agent(policies={"p0": PolicySpec(...)})`.

    Spaces left as None are taken from the env (the first agent mapped to the policy); `config`
    overrides the algorithm config for this policy (lr, gamma, model, ...). `policy_class` may
    only be None or rlx's own Policy: rlx builds every policy from its RLModule.
    """

    policy_class: Any = None
    observation_space: Any = None
    action_space: Any = None
    config: dict | None = None


def resolve_callable(value: Any, name: str) -> Any:
    """A function given as an import path string ('module:function', as YAML files give it)
    imported; anything else as it is."""
    if not isinstance(value, str):
        return value
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
        fn: Callable[..., Any] | None = resolve_callable(mapping_fn, "policy_mapping_fn")
        if fn is None:
            if len(policy_ids) != 1 and DEFAULT_POLICY_ID not in policy_ids:
                raise ConfigError(
                    f"policies has {len(policy_ids)} policies ({', '.join(policy_ids)}) but no policy_mapping_fn; "
                    "set config.multi_agent(policy_mapping_fn=lambda agent_id, episode, **kw: ...) to say which "
                    "policy each agent uses.")
            only = policy_ids[0] if len(policy_ids) == 1 else DEFAULT_POLICY_ID
            fn = lambda agent_id, episode, **kw: only  # noqa: E731
        self.fn: Callable[..., Any] = fn
        self.policy_ids = set(policy_ids)
        self._with_episode = _takes_episode(fn)
        self._with_worker = self._accepts_worker(fn)

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

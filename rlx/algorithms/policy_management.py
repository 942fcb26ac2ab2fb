"""The policies (modules) of a running Algorithm: looking them up, their weights, and adding
and removing them in multi-agent runs (self-play, leagues).

`add_policy` / `add_module` build the new module on the driver's runner (whose modules the
learner trains), give it a Learner, and add it to every remote and evaluation runner with the
same weights; `remove_policy` / `remove_module` undo that. The mapping function and
`policies_to_train` can change in the same call.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.multi_agent_options import check_policies, check_policies_to_train
from rlx.core import DEFAULT_POLICY_ID
from rlx.core.rl_module.agent_mapping import PolicySpec
from rlx.utils.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm


def policy_ids(algo: "Algorithm") -> list[str]:
    """The ids of the policies (modules) `algo` holds."""
    return list(algo.learner_by_module())


def check_policy_id(algo: "Algorithm", policy_id: str) -> None:
    """KeyError naming the known ids unless `algo` holds policy `policy_id`."""
    ids = policy_ids(algo)
    if policy_id not in ids:
        raise KeyError(f"Unknown policy/module id {policy_id!r}; this Algorithm has {', '.join(ids)}."
                       f"{did_you_mean(str(policy_id), ids)}")


def get_module(algo: "Algorithm", module_id: str) -> Any:
    """The RLModule of `module_id` that `algo`'s learner trains."""
    check_policy_id(algo, module_id)
    return algo.learners.get_module(module_id)


def get_weights(algo: "Algorithm", policies: list[str] | None) -> dict[str, dict[str, np.ndarray]]:
    """{policy_id: weights} of `algo`'s trained modules (all, or those in `policies`)."""
    for pid in policies or []:
        check_policy_id(algo, pid)
    learners = algo.learner_by_module()
    return {pid: learners[pid].get_weights() for pid in (policies or learners)}


def set_weights(algo: "Algorithm", weights: dict[str, Any]) -> None:
    """Load `weights` ({policy_id: weights}, or a single-agent run's plain weights) into `algo`'s
    learner and send them to the EnvRunners."""
    sole = algo.learners.sole_module_id
    if sole is not None:  # a single-agent run also takes its one module's plain weights
        weights = {sole: weights[sole] if isinstance(weights.get(sole), dict) else weights}
    for pid in weights:
        check_policy_id(algo, pid)
    learners = algo.learner_by_module()
    for pid, module_weights in weights.items():
        learners[pid].set_weights(module_weights)
    algo.weights_version += 1
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner, weights_seq_no=algo.weights_version)


def _require_multi_agent(algo: Any, what: str) -> None:
    if algo.learners.sole_module_id is not None:  # a single-agent run trains one module
        raise ConfigError(f"{what} needs a multi-agent Algorithm: configure it with config.multi_agent(policies=...) "
                          "(or a MultiAgentEnv).")


def _groups(algo: Any, evaluation: bool) -> list[Any]:
    groups = [algo.env_runner_group]
    if evaluation and algo.eval_env_runner_group is not None:
        groups.append(algo.eval_env_runner_group)
    return groups


def _set_training_options(algo: Any, policies: dict, policy_mapping_fn: Callable | None,
                          policies_to_train: Any) -> None:
    # The config is frozen for users; the Algorithm keeps its own settings current (as it does
    # for the resolved number of sub-envs).
    values = algo.config._values
    values["policies"] = policies
    algo.config.__dict__.pop("_module_configs", None)
    if policy_mapping_fn is not None:
        values["policy_mapping_fn"] = policy_mapping_fn
    if policies_to_train is not None:
        values["policies_to_train"] = check_policies_to_train("policies_to_train", policies_to_train)
        algo.learner.policies_to_train = values["policies_to_train"]


def add_policy(algo: Any, policy_id: str, spec: Any, weights: dict | None,
               policy_mapping_fn: Callable | None, policies_to_train: Any, evaluation: bool) -> Any:
    """Add policy `policy_id` (a PolicySpec) with `weights` (default: freshly initialised)."""
    _require_multi_agent(algo, "add_policy()")
    if policy_id in algo.policy_ids:
        raise ValueError(f"Policy {policy_id!r} already exists; remove it first or pick another id.")
    policies = dict(algo.config.policies or {DEFAULT_POLICY_ID: None})
    policies[policy_id] = spec
    checked = check_policies("policies", policies)
    assert checked is not None  # (check_policies returns None only for None)
    policies = checked
    local = algo.env_runner
    values = algo.config._values
    saved = {key: values[key] for key in ("policies", "policy_mapping_fn", "policies_to_train")}
    saved_runner = (dict(local.policies), local._mapper, algo.learner.policies_to_train)
    try:
        _set_training_options(algo, policies, policy_mapping_fn, policies_to_train)
        local.add_policy(policy_id, policies[policy_id], policy_mapping_fn=policy_mapping_fn)
        algo.learner.add_module(policy_id)
        if weights is not None:
            algo.learner.module[policy_id].set_state(weights)
    except BaseException:
        # Nothing of the new policy stays behind: later checkpoints would name it.
        values.update(saved)
        algo.config.__dict__.pop("_module_configs", None)
        local.policies, local._mapper, algo.learner.policies_to_train = saved_runner
        local.slots.pop(policy_id, None)
        if policy_id in local.module:
            local.module.remove_module(policy_id)
        algo.learner.remove_module(policy_id)
        raise
    new_weights = algo.learner.module[policy_id].get_state()
    call = _AddPolicyCall(policy_id, policies[policy_id], new_weights, policy_mapping_fn)
    algo.env_runner_group.foreach_env_runner(call, local_env_runner=False)
    for group in _groups(algo, evaluation)[1:]:
        group.foreach_env_runner(call)
    algo.weights_version += 1
    return algo.get_policy(policy_id)


def add_policy_from(algo: "Algorithm", policy_id: str, policy_cls: Any, policy: Any, observation_space: Any,
                    action_space: Any, config: AlgorithmConfig | dict | None, policy_state: dict | None, policy_mapping_fn: Callable | None,
                    policies_to_train: Any, evaluation: bool, module_spec: Any) -> Any:
    """`Algorithm.add_policy`: the new policy's spec from its arguments, its weights from
    `policy` (an existing Policy), `policy_state` (a Policy's get_state() or plain weights) or a
    fresh initialisation; returns its Policy view."""
    if module_spec is not None and observation_space is None and action_space is None:
        observation_space, action_space = env_spaces_like(algo, module_spec)
    spec = policy_spec_from(policy_cls, observation_space, action_space, config, module_spec)
    weights = None
    if policy is not None:
        weights = policy.get_weights()
    elif policy_state is not None:
        weights = policy_state.get("weights", policy_state) if isinstance(policy_state, dict) else policy_state
    return add_policy(algo, policy_id, spec, weights, policy_mapping_fn, policies_to_train, evaluation)


def add_module(algo: "Algorithm", module_id: str, module_spec: Any, config_overrides: dict | None,
               mapping_fn: Callable | None, should_module_be_updated: Any, add_to_env_runners: bool,
               add_to_eval_env_runners: bool) -> Any:
    """`Algorithm.add_module`: a module built from `module_spec`'s spaces and model config,
    freshly initialised; returns the new RLModule."""
    if not add_to_env_runners:
        raise ConfigError("add_module(add_to_env_runners=False): rlx's driver EnvRunner shares its modules with "
                          "the learner, so a module is always added to the EnvRunners.")
    spec = policy_spec_from(None, *env_spaces_like(algo, module_spec), config_overrides, module_spec)
    add_policy(algo, module_id, spec, None, mapping_fn, should_module_be_updated, add_to_eval_env_runners)
    return get_module(algo, module_id)


def remove_policy(algo: Any, policy_id: str, policy_mapping_fn: Callable | None, policies_to_train: Any,
                  evaluation: bool) -> None:
    """Remove policy `policy_id` from the learner and every runner."""
    _require_multi_agent(algo, "remove_policy()")
    check_policy_id(algo, policy_id)
    if len(algo.policy_ids) == 1:
        raise ValueError(f"Policy {policy_id!r} is the only policy; an Algorithm needs at least one.")
    policies = {pid: spec for pid, spec in (algo.config.policies or {}).items() if pid != policy_id}
    to_train = algo.config.policies_to_train
    if policies_to_train is None and isinstance(to_train, list) and policy_id in to_train:
        policies_to_train = [pid for pid in to_train if pid != policy_id]
    _set_training_options(algo, policies, policy_mapping_fn, policies_to_train)
    call = _RemovePolicyCall(policy_id, policy_mapping_fn)
    algo.env_runner_group.foreach_env_runner(call)
    for group in _groups(algo, evaluation)[1:]:
        group.foreach_env_runner(call)
    algo.learner.remove_module(policy_id)
    buffers = getattr(algo, "local_replay_buffer", None)
    if buffers is not None and hasattr(buffers, "remove"):
        buffers.remove(policy_id)


def policy_spec_from(policy_cls: Any, observation_space: Any, action_space: Any,
                     config: AlgorithmConfig | dict | None,
                     module_spec: Any = None) -> Any:
    """The PolicySpec of add_policy's arguments (an AlgorithmConfig as `config` means: no overrides)."""
    if isinstance(config, AlgorithmConfig):
        config = None
    if module_spec is not None and module_spec.model_config:
        config = {**(config or {}), "model": dict(module_spec.model_config)}
    return PolicySpec(policy_cls, observation_space, action_space, config)


def env_spaces_like(algo: Any, module_spec: Any) -> tuple[Any, Any]:
    """The env spaces of an existing policy whose module has `module_spec`'s spaces (a module
    spec holds the module's spaces, which preprocessing may have changed); (None, None) if none."""
    if module_spec is None:
        return None, None
    for slot in algo.env_runner.slots.values():
        module = slot.module
        if module.observation_space == module_spec.observation_space and \
                module.action_space == module_spec.action_space:
            return slot.observation_space, slot.action_space
    return module_spec.observation_space, module_spec.action_space


class _AddPolicyCall:
    """Adds a policy to one runner (shipped to remote runners)."""

    def __init__(self, policy_id: str, spec: Any, weights: dict, mapping_fn: Callable | None):
        self.policy_id, self.spec, self.weights, self.mapping_fn = policy_id, spec, weights, mapping_fn

    def __call__(self, runner: Any) -> None:
        runner.add_policy(self.policy_id, self.spec, weights=self.weights, policy_mapping_fn=self.mapping_fn)


class _RemovePolicyCall:
    """Removes a policy from one runner (shipped to remote runners)."""

    def __init__(self, policy_id: str, mapping_fn: Callable | None):
        self.policy_id, self.mapping_fn = policy_id, mapping_fn

    def __call__(self, runner: Any) -> None:
        runner.remove_policy(self.policy_id, policy_mapping_fn=self.mapping_fn)

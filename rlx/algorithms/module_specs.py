"""The RLModuleSpec(s) an Algorithm builds its modules from: its default module, completed
with the user's `rl_module_spec` and the config's model settings.

These functions read only `algo.config`, whether `algo` is multi-agent, and the Algorithm's
`get_default_rl_module_spec()` (which subclasses override), so `AlgorithmConfig.
get_rl_module_spec()` can ask an Algorithm class for its spec without building one.

A default module that builds the memory `model['use_lstm']` asks for says so with a class
attribute `builds_use_lstm = True` (recurrent DQN's, SAC's, DDPG's); the base class knows no
specific algorithm's modules.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlx.core.action_masking import with_action_mask_key
from rlx.core.attention_models import AttentionActorCriticModule
from rlx.core.lstm_models import LSTMActorCriticModule
from rlx.core.model_defaults import merge_model_config
from rlx.core.models import ActorCriticModule
from rlx.core.models.v2.modelv2_rl_module import ModelV2RLModule
from rlx.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
from rlx.core.rl_module.rl_module import RLModuleSpec
from rlx.core.rl_module.default_model_config import DefaultModelConfig, model_dict
from rlx.utils.errors import ConfigError, NotSupportedYetError

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm

#: The model-config keys that give a default module a memory.
MEMORY_KEYS = ("use_lstm", "use_attention")


def _modelv2_module_class() -> type:
    """The RLModule that runs an old-API ModelV2 (`model['custom_model']`)."""
    return ModelV2RLModule


def default_rl_module_spec(algo: "Algorithm") -> RLModuleSpec:
    """The base Algorithm's default module: the actor-critic MLP (with an LSTM or attention
    memory when the model config asks for one), or a ModelV2RLModule running
    model['custom_model'] (an old-API ModelV2) when set."""
    model = algo.config.model
    if model.get("custom_model"):
        return RLModuleSpec(module_class=_modelv2_module_class())
    if model.get("use_lstm") and model.get("use_attention"):
        raise ConfigError("model['use_lstm'] and model['use_attention'] are both True; a default model has one "
                          "memory: set only one of them.")
    if model.get("use_lstm"):
        return RLModuleSpec(module_class=LSTMActorCriticModule)
    if model.get("use_attention"):
        return RLModuleSpec(module_class=AttentionActorCriticModule)
    return RLModuleSpec(module_class=ActorCriticModule)


def module_spec(algo: "Algorithm") -> RLModuleSpec | MultiRLModuleSpec:
    """The RLModuleSpec every module is built from, or (for a MultiRLModuleSpec in the config)
    a MultiRLModuleSpec of one completed spec per module id, with the default for others."""
    user = algo.config.get("rl_module_spec")  # the value given (the property completes it)
    multi_agent = algo.config.is_multi_agent
    if isinstance(user, MultiRLModuleSpec):
        if not multi_agent:
            raise ConfigError("rl_module_spec is a MultiRLModuleSpec, but the env and config are single-agent; "
                              "give an RLModuleSpec, or configure policies with config.multi_agent(...).")
        specs = user.rl_module_specs
        if isinstance(specs, RLModuleSpec) and user.multi_rl_module_class is MultiRLModule:
            return completed_spec(algo, specs)
        if isinstance(specs, RLModuleSpec):  # one spec for every policy, in the user's MultiRLModule
            return MultiRLModuleSpec(multi_rl_module_class=user.multi_rl_module_class,
                                     default_spec=completed_spec(algo, specs))
        # A MultiRLModule subclass (e.g. one whose forward runs a shared encoder before every policy)
        # is built on the EnvRunners with every module of the spec; see MultiRLModule.runs_modules_jointly.
        return MultiRLModuleSpec(multi_rl_module_class=user.multi_rl_module_class,
                                 rl_module_specs={mid: completed_spec(algo, s) for mid, s in (specs or {}).items()},
                                 default_spec=completed_spec(algo, None))
    return with_action_mask_key(completed_spec(algo, user), algo.config, multi_agent)


def with_policy_class_modules(algo: "Algorithm", config: Any, spec: Any) -> Any:
    """`spec` with the module of every policy of `config.policies` whose PolicySpec names an old-API
    policy class played by an RLModule (its `rl_module_class`, e.g. the examples' RandomPolicy)
    replaced by that module; `spec` itself when there is none."""
    played = {pid: policy.policy_class.rl_module_class for pid, policy in (config.policies or {}).items()
              if getattr(getattr(policy, "policy_class", None), "rl_module_class", None) is not None}
    if not played:
        return spec
    if isinstance(spec, MultiRLModuleSpec) and isinstance(spec.rl_module_specs, dict):
        specs, default = dict(spec.rl_module_specs), spec.default_spec
    else:
        specs, default = {}, spec.spec_for("") if isinstance(spec, MultiRLModuleSpec) else spec
    for pid, module_class in played.items():
        specs[pid] = completed_spec(algo, RLModuleSpec(module_class=module_class))
    module_class = spec.multi_rl_module_class if isinstance(spec, MultiRLModuleSpec) else MultiRLModule
    return MultiRLModuleSpec(multi_rl_module_class=module_class, rl_module_specs=specs, default_spec=default)


def _builds_memory(module_class: Any, memory_key: str) -> bool:
    """Whether a default module of `module_class` builds the memory `model[memory_key]` asks for."""
    if module_class in (LSTMActorCriticModule, AttentionActorCriticModule):
        return True
    if memory_key != "use_lstm":
        return False
    # A custom_model with use_lstm runs in an LSTMWrapper inside ModelV2RLModule.
    return getattr(module_class, "builds_use_lstm", False) or module_class is _modelv2_module_class()


def _user_written(module_class: Any) -> bool:
    """Whether a module class is a user's (or one of RLlib's examples): its model config may hold
    keys of its own, where rlx's default modules take only the known model keys."""
    module = getattr(module_class, "__module__", "") or ""
    return not module.startswith("rlx.") or module.startswith("rlx.examples.")


def completed_spec(algo: "Algorithm", user: Any) -> RLModuleSpec:
    """The user's RLModuleSpec (or RLModule class, or None) with `algo`'s defaults filled in."""
    model = algo.config.model
    spec = algo.get_default_rl_module_spec()
    memory_key = next((k for k in MEMORY_KEYS if model.get(k)), None)
    if memory_key and (user is None or getattr(user, "module_class", None) is None) \
            and not _builds_memory(spec.module_class, memory_key):
        raise NotSupportedYetError(
            f"model['{memory_key}'] with {type(algo).__name__}",
            "recurrent models train with PPO (and use_lstm with DQN, SAC, DDPG and TD3)",
            fix=f"Use PPO (or DQN) for recurrent policies, or leave {memory_key}=False.")
    if model.get("custom_model") and (user is None or (isinstance(user, RLModuleSpec) and user.module_class is None)) \
            and spec.module_class is not _modelv2_module_class():
        raise NotSupportedYetError(
            f"model['custom_model'] with {type(algo).__name__}",
            "old-API ModelV2 custom models run in the actor-critic module of policy-gradient algorithms (PPO)",
            fix="Remove custom_model, or give a custom RLModule with config.rl_module(rl_module_spec=...).")
    if user is None:
        return spec
    if isinstance(user, type):
        user = RLModuleSpec(module_class=user)
    if not isinstance(user, RLModuleSpec):
        raise ConfigError(f"rl_module_spec must be an RLModuleSpec, a MultiRLModuleSpec or an RLModule class, "
                          f"got {user!r}.")
    user_model = user.model_config
    if user_model is not None and not isinstance(user_model, dict):
        if not isinstance(user_model, DefaultModelConfig):
            raise ConfigError(f"RLModuleSpec.model_config must be a dict or a DefaultModelConfig, "
                              f"got {user_model!r:.80}.")
        user_model = model_dict(user_model)
    return RLModuleSpec(
        module_class=user.module_class or spec.module_class,
        observation_space=user.observation_space,
        action_space=user.action_space,
        model_config=None if user_model is None else merge_model_config(
            model, user_model, custom_keys=user.module_class not in (None, spec.module_class)
            or _user_written(spec.module_class)),
        inference_only=user.inference_only,
        learner_only=refuse_learner_only(user),
        catalog_class=user.catalog_class,
        load_state_path=user.load_state_path,
    )


def refuse_learner_only(spec: Any) -> bool:
    """NotSupportedYetError for RLModuleSpec(learner_only=True) in an Algorithm (its EnvRunners
    build every module); False otherwise."""
    if getattr(spec, "learner_only", False):
        raise NotSupportedYetError(
            "RLModuleSpec(learner_only=True) in an Algorithm",
            "rlx's EnvRunners build every module of the MultiRLModuleSpec",
            fix="Leave learner_only=False (a module no agent maps to is built on the EnvRunners but never run).")
    return False

"""What an AlgorithmConfig derives from its settings the way RLlib 2.60's config does: the
default Learner class and RLModuleSpec of its algorithm, the (multi-)module spec, whether the
env is an Atari game, the per-EnvRunner rollout fragment length and the check of the train
batch size against it; and the settings a user's config subclass declares by assigning them
in its `__init__`, as RLlib's custom configs do (`self.num_episodes_per_train_batch = 10`).

These read only the config (and, for the defaults, its algorithm class, asked without
building an Algorithm, as `config_module_spec` does).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable

import gymnasium as gym

from rlx.algorithms.config_options import Option
from rlx.algorithms.registry import get_algorithm_class
from rlx.core import DEFAULT_MODULE_ID
from rlx.utils.errors import ConfigError

if TYPE_CHECKING:  # (algorithm_config imports this module)
    from rlx.algorithms.algorithm_config import AlgorithmConfig

#: Entry-point prefixes of Gymnasium's registered Atari (ALE) games.
_ATARI_ENTRY_POINTS = ("ale_py", "gym.envs.atari", "gymnasium.envs.atari")


def algorithm_view(config: AlgorithmConfig) -> Any:
    """An unbuilt instance of the config's algorithm class holding only `config`: enough to ask
    the class for what it derives from the config alone (its learner class, module spec)."""
    algo_cls = config.algo_class
    if isinstance(algo_cls, str):
        algo_cls = get_algorithm_class(algo_cls)
    if algo_cls is None:
        raise ConfigError(f"{type(config).__name__} has no algorithm class to take defaults from: build the "
                          "config from an algorithm's config class (e.g. PPOConfig()).")
    view = object.__new__(algo_cls)
    view.config = config
    return view


def default_learner_class(config: AlgorithmConfig) -> Any:
    """The Learner class the config's algorithm uses when `learner_class` is not set."""
    return algorithm_view(config)._learner_class


def default_rl_module_spec(config: AlgorithmConfig) -> Any:
    """The RLModuleSpec of the config's algorithm's default module (no spaces filled in)."""
    return algorithm_view(config).get_default_rl_module_spec()


def multi_rl_module_spec(config: AlgorithmConfig, spec: Any, spaces: dict | None) -> Any:
    """`spec` (the config's RLModuleSpec) as a MultiRLModuleSpec: one spec per policy of a
    multi-agent config (with that module's spaces from `spaces` when given), or the single
    module under DEFAULT_MODULE_ID."""
    from rlx.core.rl_module.multi_rl_module import MultiRLModuleSpec  # torch: on first use

    if isinstance(spec, MultiRLModuleSpec):
        return spec
    module_ids = list(config.policies) if config.policies is not None else [DEFAULT_MODULE_ID]
    specs = {}
    for module_id in module_ids:
        module_spec = spec
        pair = (spaces or {}).get(module_id)
        if pair is not None:
            module_spec = dataclasses.replace(spec, observation_space=pair[0], action_space=pair[1])
        specs[module_id] = module_spec
    return MultiRLModuleSpec(rl_module_specs=specs)


def env_is_atari(env: Any) -> bool | None:
    """Whether a Gymnasium id names an Atari game, judged without creating the env; None when
    that cannot be told (an env class, a creator, a name registered with rlx)."""
    if not isinstance(env, str):
        return None
    if env.startswith(("ALE/", "ale_py:")) or "NoFrameskip" in env:
        return True
    spec = gym.envs.registry.get(env)
    if spec is None:
        return None
    entry_point = spec.entry_point if isinstance(spec.entry_point, str) else getattr(spec.entry_point, "__module__", "")
    return entry_point.startswith(_ATARI_ENTRY_POINTS)


def rollout_fragment_length(total_batch: int, runners: int, envs_per_runner: int, worker_index: int) -> int:
    """RLlib's 'auto' rollout fragment length of EnvRunner `worker_index`: the batch split over
    all sub-envs; when it does not divide evenly, the first EnvRunners take one step more, so
    that the fragments add up to exactly `total_batch` (the local runner, index 0, rounds up)."""
    sub_envs = envs_per_runner * max(1, runners)
    base = total_batch // sub_envs
    if base * sub_envs == total_batch:
        return base or 1
    remainder = total_batch - base * sub_envs
    if (worker_index - 1) * envs_per_runner >= remainder:
        return base or 1
    return base + 1


def check_train_batch_vs_fragment(config: AlgorithmConfig) -> None:
    """Raise ConfigError when a fixed rollout_fragment_length cannot add up to (within 10%) the
    total train batch size with the configured EnvRunners and sub-envs."""
    fragment = config.rollout_fragment_length
    if fragment == "auto" or config.in_evaluation:
        return
    runners, envs = config.num_env_runners, config.num_envs_per_env_runner
    total = config.total_train_batch_size
    per_round = max(runners, 1) * envs * int(fragment)
    collected = per_round
    while collected < total:
        collected += per_round
    if collected - total > 0.1 * total or collected - per_round - total > 0.1 * total:
        suggested = total // (envs * max(runners, 1))
        raise ConfigError(
            f"The total train batch size ({total}) cannot be collected within 10% with num_env_runners={runners}, "
            f"num_envs_per_env_runner={envs} and rollout_fragment_length={fragment} (each round of sampling "
            f"collects {per_round} steps). Set rollout_fragment_length='auto' or {suggested}."
        )


def declares_settings_in_init(config_class: type) -> bool:
    """Whether assignments of new names in `config_class.__init__` declare settings: for
    config classes written outside rlx's own algorithms (users', and rlx's ports of RLlib's
    examples); rlx's configs declare theirs as Options, and a new name there is a typo."""
    module = config_class.__module__ or ""
    return not module.startswith("rlx.") or module.startswith("rlx.examples.")


def declaring_init(init: Callable[..., None]) -> Callable[..., None]:
    """`init` (a config subclass's __init__) run with the instance in declaring mode, in which
    AlgorithmConfig.__setattr__ turns a new name into a setting of the class."""

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        depth = self.__dict__.get("_declaring", 0)
        object.__setattr__(self, "_declaring", depth + 1)
        try:
            init(self, *args, **kwargs)
        finally:
            object.__setattr__(self, "_declaring", depth)

    return wrapper


def declare_setting(config_class: type[AlgorithmConfig], name: str, default: Any) -> None:
    """Add setting `name` (default `default`) to `config_class`'s option table: it then reads,
    sets, copies and round-trips through to_dict() like a built-in option. Set it later with
    an attribute assignment or in the class's own section method (e.g. its `training()`)."""
    config_class._table.options[name] = Option(
        name, default, ("training",), None, doc=f"Declared by {config_class.__name__}.__init__.")

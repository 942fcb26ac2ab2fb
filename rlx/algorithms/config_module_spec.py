"""`AlgorithmConfig.get_rl_module_spec()`: the RLModuleSpec a config builds, from the config alone.

RLlib's external clients (the RLlink protocol's SET_CONFIG answer carries the server's
config) call `config.get_rl_module_spec().build()` to get a module like the server's. rlx
completes module specs in the Algorithm (`Algorithm._module_spec`, which reads only the
config), so this asks the config's algorithm class for the same spec without building an
Algorithm, and fills in what the EnvRunner would: the (preprocessed) observation space,
the env's action space and the model config.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rlx.algorithms.registry import get_algorithm_class
from rlx.core import DEFAULT_MODULE_ID
from rlx.core.preprocessors import NoPreprocessor, get_preprocessor
from rlx.utils.errors import ConfigError

if TYPE_CHECKING:  # (algorithm_config imports this module)
    from rlx.algorithms.algorithm_config import AlgorithmConfig


def rl_module_spec_of(config: AlgorithmConfig, spaces: dict | None = None, inference_only: bool | None = None) -> Any:
    """The RLModuleSpec (a MultiRLModuleSpec for multi-agent configs) `config` builds its module
    from, with spaces and model config filled in.

    `spaces`: RLlib's {module_id or "__env__": (observation_space, action_space)}; the
    default module's entry (or the env's) replaces the config's spaces. `inference_only`
    overrides the spec's flag.
    """
    from rlx.core.rl_module.multi_rl_module import MultiRLModuleSpec  # torch: on first use
    from rlx.core.rl_module.rl_module import RLModuleSpec

    algo_cls = config.algo_class
    if isinstance(algo_cls, str):
        algo_cls = get_algorithm_class(algo_cls)
    if algo_cls is None:
        raise ConfigError(f"{type(config).__name__}.get_rl_module_spec() needs the config's algorithm class: "
                          "build the config from an algorithm's config class (e.g. PPOConfig()).")
    # Algorithm._module_spec and the methods it calls read only `config`.
    view = object.__new__(algo_cls)
    view.config = config
    spec = algo_cls._module_spec(view)
    if isinstance(spec, MultiRLModuleSpec):
        return spec
    obs_space, act_space = _spaces(config, spaces)
    if spec.observation_space is None and obs_space is not None:
        spec = dataclasses.replace(spec, observation_space=_module_observation_space(config, obs_space))
    if spec.action_space is None and act_space is not None:
        spec = dataclasses.replace(spec, action_space=act_space)  # the env's, as the EnvRunner builds it
    if spec.model_config is None:
        spec = dataclasses.replace(spec, model_config=dict(config.model))
    if inference_only is not None:
        spec = dataclasses.replace(spec, inference_only=bool(inference_only))
    assert isinstance(spec, RLModuleSpec)
    return spec


def _spaces(config: AlgorithmConfig, spaces: dict | None) -> tuple[Any, Any]:
    if spaces:
        pair = spaces.get(DEFAULT_MODULE_ID) or spaces.get("__env__") or next(iter(spaces.values()))
        return pair[0], pair[1]
    return config.observation_space, config.action_space


def _module_observation_space(config: AlgorithmConfig, space: Any) -> Any:
    """The observation space the module reads: the env's after rlx's preprocessor (one-hot, flattening)."""
    if config.preprocessor_pref is None or config._disable_preprocessor_api:
        return NoPreprocessor(space, config.model).observation_space
    return get_preprocessor(space)(space, config.model).observation_space


"""Build Exploration objects from `exploration_config` dicts, and validate such dicts."""
from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym

from rlx.utils.registry import import_object
from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean
from rlx.utils.exploration.epsilon_greedy import EpsilonGreedy
from rlx.utils.exploration.exploration import RESERVED_KWARGS, Exploration, check_option
from rlx.utils.exploration.gaussian_noise import GaussianNoise
from rlx.utils.exploration.ornstein_uhlenbeck_noise import OrnsteinUhlenbeckNoise
from rlx.utils.exploration.per_worker_epsilon_greedy import PerWorkerEpsilonGreedy
from rlx.utils.exploration.per_worker_gaussian_noise import PerWorkerGaussianNoise
from rlx.utils.exploration.per_worker_ornstein_uhlenbeck_noise import PerWorkerOrnsteinUhlenbeckNoise
from rlx.utils.exploration.random import Random
from rlx.utils.exploration.soft_q import SoftQ
from rlx.utils.exploration.stochastic_sampling import StochasticSampling

#: Built-in exploration classes by the name `exploration_config["type"]` may give.
EXPLORATION_CLASSES: dict[str, type[Exploration]] = {
    cls.__name__: cls
    for cls in (
        StochasticSampling, EpsilonGreedy, PerWorkerEpsilonGreedy, SoftQ, Random, GaussianNoise,
        OrnsteinUhlenbeckNoise, PerWorkerGaussianNoise, PerWorkerOrnsteinUhlenbeckNoise,
    )
}

# RLlib exploration classes that have no rlx counterpart yet.
_NOT_BUILT = ("ParameterNoise", "Curiosity", "ThompsonSampling", "UpperConfidenceBound", "SlateEpsilonGreedy",
              "SlateSoftQ", "RE3")

_DEFAULT_TYPE = "StochasticSampling"


def _not_built(name: str) -> NotSupportedYetError:
    return NotSupportedYetError(
        f"exploration type {name!r}", "built-in exploration types are " + ", ".join(EXPLORATION_CLASSES)
    )


def _resolve_type(etype: Any) -> type[Exploration]:
    """The Exploration subclass named by a built-in name, a class, or an import path."""
    if isinstance(etype, type):
        if not issubclass(etype, Exploration):
            raise ConfigError(
                f"exploration_config['type']={etype.__name__} is not a subclass of "
                "rlx.utils.exploration.Exploration."
            )
        return etype
    if not isinstance(etype, str) or not etype:
        raise ConfigError(
            "exploration_config['type'] must be a built-in name (e.g. 'EpsilonGreedy'), an Exploration subclass "
            f"or a 'package.module.Class' path, got {etype!r}."
        )
    if etype in EXPLORATION_CLASSES:
        return EXPLORATION_CLASSES[etype]
    if "." not in etype and ":" not in etype:
        if etype in _NOT_BUILT:
            raise _not_built(etype)
        raise ConfigError(
            f"Unknown exploration type {etype!r}.{did_you_mean(etype, EXPLORATION_CLASSES)} Built-in types: "
            f"{', '.join(EXPLORATION_CLASSES)}; or give an Exploration subclass or a 'package.module.Class' path."
        )
    path = "rlx." + etype[len("ray.rllib."):] if etype.startswith("ray.rllib.") else etype
    name = path.replace(":", ".").rsplit(".", 1)[-1]
    try:
        obj = import_object(path)
    except (ImportError, AttributeError) as exc:
        if name in _NOT_BUILT:
            raise _not_built(name) from exc
        raise ConfigError(
            f"exploration_config['type']={etype!r} cannot be imported ({exc}).{did_you_mean(name, EXPLORATION_CLASSES)}"
        ) from exc
    if not isinstance(obj, type) or not issubclass(obj, Exploration):
        raise ConfigError(
            f"exploration_config['type']={etype!r} resolves to {obj!r}, which is not a subclass of "
            "rlx.utils.exploration.Exploration."
        )
    return obj


def _constructor_params(cls: type) -> tuple[dict[str, inspect.Parameter], list[str]]:
    """Keyword params accepted along the MRO's `__init__` chain, and the required ones.

    Walks `__init__`s from the most derived on while each takes **kwargs (its extra
    keywords flow to the next one). The first positional parameter of each is the
    action space, which rlx passes itself.
    """
    params: dict[str, inspect.Parameter] = {}
    required: list[str] = []
    first = True
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        sig_params = list(inspect.signature(init).parameters.values())[1:]
        if sig_params and sig_params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                 inspect.Parameter.POSITIONAL_OR_KEYWORD):
            sig_params = sig_params[1:]
        takes_var_kw = False
        for p in sig_params:
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                takes_var_kw = True
            elif p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
                params.setdefault(p.name, p)
                if first and p.default is inspect.Parameter.empty:
                    required.append(p.name)
        first = False
        if not takes_var_kw:
            break
    return params, required


def _check(exploration_config: Any) -> tuple[type[Exploration], dict[str, Any], Any]:
    if exploration_config is None:
        exploration_config = {}
    if not isinstance(exploration_config, dict):
        raise ConfigError(
            f"exploration_config must be a dict like {{'type': 'EpsilonGreedy', ...}}, got {exploration_config!r}."
        )
    kwargs = dict(exploration_config)
    etype = kwargs.pop("type", _DEFAULT_TYPE)
    cls = _resolve_type(etype)
    params, required = _constructor_params(cls)
    accepted = sorted(set(params) - set(RESERVED_KWARGS) - set(cls.fixed_kwargs))
    for key in kwargs:
        if key in RESERVED_KWARGS:
            raise ConfigError(
                f"exploration_config[{key!r}] is set by rlx itself (it passes {', '.join(RESERVED_KWARGS)}); "
                "remove it from exploration_config."
            )
        if key in cls.fixed_kwargs:
            raise ConfigError(f"exploration_config[{key!r}] cannot be set: {cls.__name__} fixes it itself.")
        if key not in accepted:
            raise ConfigError(
                f"Unknown exploration_config key {key!r} for {cls.__name__}.{did_you_mean(key, accepted)} "
                f"Accepted keys: {', '.join(accepted) or '(none)'}."
            )
    missing = [k for k in required if k not in kwargs and k not in RESERVED_KWARGS]
    if missing:
        raise ConfigError(f"exploration_config for {cls.__name__} is missing {', '.join(map(repr, missing))}.")
    for key, value in kwargs.items():
        check_option(key, value)
    return cls, kwargs, etype


def validate_exploration_config(exploration_config: dict) -> dict:
    """Check an exploration_config without building it; return it with its type (default filled in).

    Resolves `type` and checks every other key against the constructor signature and
    the known value ranges, raising ConfigError (with a "Did you mean" hint) otherwise.
    """
    _, kwargs, etype = _check(exploration_config)
    return {"type": etype, **kwargs}


def make_exploration(
    exploration_config: dict,
    *,
    action_space: gym.Space,
    policy_config: Any = None,
    model: Any = None,
    num_workers: int = 0,
    worker_index: int = 0,
    seed: int | None = None,
) -> Exploration:
    """Build the Exploration that `exploration_config` describes.

    `type` (default "StochasticSampling") is a built-in class name, an Exploration
    subclass, or an import path ("package.module.Class" or "package.module:Class"; a
    leading "ray.rllib." means "rlx."); the other keys are constructor kwargs.
    """
    cls, kwargs, _ = _check(exploration_config)
    return cls(
        action_space, framework="torch", policy_config=policy_config, model=model,
        num_workers=num_workers, worker_index=worker_index, seed=seed, **kwargs,
    )

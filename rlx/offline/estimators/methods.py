"""`off_policy_estimation_methods`: checking the option and building its estimators.

The option maps a name to a dict with a `type` (an OffPolicyEstimator subclass or its import
path; the old short names 'is', 'wis', 'dm' and 'dr' are accepted too) and the estimator's
keyword arguments, e.g. {"is": {"type": ImportanceSampling}, "dr": {"type": DoublyRobust,
"q_model_config": {"n_iters": 10}}}. The old `input_evaluation=["is", "wis"]` means
{"is": {"type": "is"}, "wis": {"type": "wis"}}.
"""
from __future__ import annotations

import importlib
import logging
from typing import Any

from rlx.utils.errors import ConfigError, did_you_mean

logger = logging.getLogger("rlx")

#: Old short names of the estimators, and their classes' import paths.
SHORT_NAMES = {
    "is": "rlx.offline.estimators.importance_sampling.ImportanceSampling",
    "wis": "rlx.offline.estimators.weighted_importance_sampling.WeightedImportanceSampling",
    "dm": "rlx.offline.estimators.direct_method.DirectMethod",
    "dr": "rlx.offline.estimators.doubly_robust.DoublyRobust",
}
#: input_evaluation entries that ask for no estimator (RLlib's "simulation" meant: none).
NO_ESTIMATOR = ("simulation",)


def import_class(path: str) -> Any:
    """The object an import path names ('pkg.module.Name' or 'pkg.module:Name')."""
    module, sep, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not module or not name:
        raise ConfigError(f"'{path}' is not an import path of a class ('package.module.ClassName').")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"Cannot import '{path}': {err}.") from err


def resolve_type(value: Any) -> type:
    """The estimator class `value` (a class, a short name or an import path) names."""
    from rlx.offline.estimators.off_policy_estimator import OffPolicyEstimator

    if isinstance(value, str):
        if value in SHORT_NAMES:
            value = SHORT_NAMES[value]
        elif "." not in value and ":" not in value:
            raise ConfigError(f"Unknown off-policy estimator type '{value}'.{did_you_mean(value, SHORT_NAMES)} Use "
                              f"one of {sorted(SHORT_NAMES)}, an OffPolicyEstimator subclass or its import path.")
        value = import_class(value)
    if not (isinstance(value, type) and issubclass(value, OffPolicyEstimator)):
        raise ConfigError(f"Unknown off_policy_estimation type: {value!r}! Must be either a class path or a sub-class "
                          "of rlx.offline.estimators.OffPolicyEstimator (e.g. ImportanceSampling).")
    return value


def check_methods(name: str, value: Any) -> dict:
    """The option check: {name: {'type': ..., **kwargs}}; the types are resolved when estimators
    are built, so the config stays serializable as given."""
    if not isinstance(value, dict):
        raise ConfigError(f"'{name}' must be a dict {{name: {{'type': EstimatorClass, ...}}}}, e.g. "
                          f"{{'is': {{'type': ImportanceSampling}}}}; got {value!r}.")
    out = {}
    for method, spec in value.items():
        if not isinstance(spec, dict) or "type" not in spec:
            raise ConfigError(f"'{name}[{method!r}]' must be a dict with a 'type' (an OffPolicyEstimator class or its "
                              f"import path) and the estimator's arguments; got {spec!r}.")
        if not isinstance(spec["type"], str):
            resolve_type(spec["type"])  # a class is checked now; names and import paths when the estimators are built
        out[str(method)] = dict(spec)
    return out


def check_input_evaluation(name: str, value: Any) -> Any:
    """The old option: None or a list of short names ('is', 'wis', 'dm', 'dr', 'simulation')."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ConfigError(f"'{name}' must be a list of estimator names such as ['is', 'wis'], got {value!r}.")
    for entry in value:
        if entry not in NO_ESTIMATOR and not isinstance(entry, type):
            if not isinstance(entry, str) or (entry not in SHORT_NAMES and "." not in entry):
                raise ConfigError(f"'{name}' has the unknown entry {entry!r}.{did_you_mean(str(entry), SHORT_NAMES)} "
                                  f"Use {sorted(SHORT_NAMES)}.")
    return list(value)


def configured_methods(config: Any) -> dict[str, dict]:
    """The estimators a config asks for: off_policy_estimation_methods, else the old
    input_evaluation names (with a deprecation warning)."""
    methods = dict(config.off_policy_estimation_methods or {})
    old = config.input_evaluation
    if not methods and old:
        methods = {str(getattr(e, "__name__", e)): {"type": e} for e in old if e not in NO_ESTIMATOR}
        if methods:
            logger.warning("input_evaluation=%s is deprecated: use config.evaluation(off_policy_estimation_methods="
                           "%s) (estimates are reported under result['evaluation']['off_policy_estimator']).",
                           list(old), {k: {"type": v["type"]} for k, v in methods.items()})
    return methods


def build_estimators(methods: dict[str, dict], policy: Any, gamma: float) -> dict[str, Any]:
    """{name: estimator} of `methods` for the target `policy`, each given `gamma`."""
    estimators = {}
    for name, spec in methods.items():
        kwargs = {k: v for k, v in spec.items() if k != "type"}
        kwargs.setdefault("gamma", gamma)
        cls = resolve_type(spec["type"])
        try:
            estimators[name] = cls(policy, **kwargs)
        except TypeError as err:
            raise ConfigError(f"off_policy_estimation_methods[{name!r}]: {cls.__name__} does not accept the given "
                              f"arguments {sorted(kwargs)}: {err}") from err
    return estimators

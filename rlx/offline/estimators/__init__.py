"""Off-policy estimators (`ray.rllib.offline.estimators`): judge a policy from data another policy
collected. ImportanceSampling, WeightedImportanceSampling, DirectMethod and DoublyRobust (the
last two with the Fitted-Q model FQETorchModel); OffPolicyEstimator is their base.

Use them through `config.evaluation(off_policy_estimation_methods={"is": {"type":
ImportanceSampling}})` (see rlx.offline.estimators.evaluation) or call `estimate(batch)`.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "OffPolicyEstimator": "rlx.offline.estimators.off_policy_estimator",
    "ImportanceSampling": "rlx.offline.estimators.importance_sampling",
    "WeightedImportanceSampling": "rlx.offline.estimators.weighted_importance_sampling",
    "DirectMethod": "rlx.offline.estimators.direct_method",
    "DoublyRobust": "rlx.offline.estimators.doubly_robust",
    "FQETorchModel": "rlx.offline.estimators.fqe_torch_model",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlx.offline.estimators' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)

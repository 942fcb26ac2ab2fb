"""The direct method (DM): the target policy's value from a fitted Q-model.

The model (FQETorchModel unless `q_model_config["type"]` names another class with `train`,
`estimate_q` and `estimate_v`) is trained on the logged data; an episode's estimate is the
model's V(s_0) = sum_a pi(a|s_0) Q(s_0, a) at its first state.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.core.sample_batch import SampleBatch
from rlx.offline.estimators.fqe_torch_model import FQETorchModel
from rlx.offline.estimators.methods import import_class
from rlx.offline.estimators.off_policy_estimator import (OffPolicyEstimator, discounted_return,
                                                          to_single_policy_batch)


def make_q_model(policy: Any, gamma: float, q_model_config: dict | None) -> Any:
    """The Q-model `q_model_config` describes: its 'type' (default FQETorchModel) built with the
    other keys as keyword arguments."""
    kwargs = dict(q_model_config or {})
    model_cls = kwargs.pop("type", FQETorchModel)
    if isinstance(model_cls, str):
        model_cls = import_class(model_cls)
    model = model_cls(policy=policy, gamma=gamma, **kwargs)
    for method in ("train", "estimate_q", "estimate_v"):
        if not callable(getattr(model, method, None)):
            raise ValueError(f"The Q-model {type(model).__name__} of q_model_config must implement `{method}`.")
    return model


class DirectMethod(OffPolicyEstimator):
    """The direct-method estimator.

    Args:
        policy, gamma, epsilon_greedy: as OffPolicyEstimator.
        q_model_config: the Q-model: a `type` (default FQETorchModel) and its keyword
            arguments (FQETorchModel: model_config, n_iters, lr, min_loss_threshold,
            clip_grad_norm, minibatch_size, polyak_coef).
    """

    def __init__(self, policy: Any, gamma: float = 0.0, epsilon_greedy: float = 0.0,
                 q_model_config: dict | None = None):
        super().__init__(policy, gamma, epsilon_greedy)
        self.model = make_q_model(policy, gamma, q_model_config)

    def estimate_on_single_episode(self, episode: SampleBatch) -> dict[str, Any]:
        """V_behavior = sum_t gamma^t r_t; V_target = V(s_0)."""
        first = SampleBatch({k: np.asarray(v)[:1] for k, v in episode.items()})
        return {"v_behavior": discounted_return(episode[Columns.REWARDS], self.gamma),
                "v_target": float(np.asarray(self.model.estimate_v(first)).reshape(-1)[0])}

    def estimate_on_single_step_samples(self, batch: SampleBatch) -> dict[str, Any]:
        """Per row: V_behavior = r; V_target = V(s)."""
        return {"v_behavior": np.asarray(batch[Columns.REWARDS], np.float64),
                "v_target": np.asarray(self.model.estimate_v(batch), np.float64).reshape(-1)}

    def train(self, batch: Any) -> dict[str, Any]:
        """Train the Q-model on `batch`; returns {'loss': mean training loss}."""
        losses = self.model.train(to_single_policy_batch(batch))
        return {"loss": float(np.mean(losses)) if np.size(losses) else float("nan")}

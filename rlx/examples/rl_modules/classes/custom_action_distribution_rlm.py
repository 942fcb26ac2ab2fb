"""CustomActionDistributionRLModule: a policy/value module whose Categorical divides its logits
by a temperature (`model_config["action_dist_temperature"]`), as RLlib's example shows custom
action distributions."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, Categorical
from rlx.core.rl_module.apis import ValueFunctionAPI
from rlx.core.rl_module.torch import TorchRLModule


def _make_categorical_with_temperature(temp: float) -> BoundDistribution:
    """The Categorical distribution class whose probabilities are softmax(logits / temp)."""
    if not temp > 0.0:
        raise ValueError(f"action_dist_temperature must be > 0 (low: near-greedy, high: near-uniform), got {temp}.")
    return BoundDistribution(Categorical, temperature=float(temp))


class CustomActionDistributionRLModule(TorchRLModule, ValueFunctionAPI):
    """obs -> Linear(hidden_dim) + ReLU embeddings -> action logits and a value; actions are
    drawn from a Categorical with temperature `action_dist_temperature` (required) in every
    mode (training, exploration, inference)."""

    def setup(self) -> None:
        """Build the encoder, the policy and value heads, and the tempered distribution class."""
        observation_space, action_space = self._spaces()
        if "action_dist_temperature" not in self.model_config:
            raise ValueError("CustomActionDistributionRLModule needs model_config={'action_dist_temperature': <float>}.")
        hidden_dim = int(self.model_config.get("hidden_dim", 256))
        self._encoder = nn.Sequential(nn.Linear(int(observation_space.shape[0]), hidden_dim), nn.ReLU())
        self._policy_net = nn.Linear(hidden_dim, int(action_space.n))
        self._vf = nn.Linear(hidden_dim, 1)
        self.action_dist_cls = _make_categorical_with_temperature(float(self.model_config["action_dist_temperature"]))

    def _embeddings_and_logits(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        embeddings = self._encoder(torch.as_tensor(batch[Columns.OBS], dtype=torch.float32))
        return embeddings, self._policy_net(embeddings)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._embeddings_and_logits(batch)[1]}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, logits = self._embeddings_and_logits(batch)
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: embeddings}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """Values [B] of the batch's observations (from `embeddings` when forward_train gave them)."""
        if embeddings is None:
            embeddings = self._encoder(torch.as_tensor(batch[Columns.OBS], dtype=torch.float32))
        return self._vf(embeddings).squeeze(-1)

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """The tempered Categorical."""
        return self.action_dist_cls

    def get_exploration_action_dist_cls(self) -> BoundDistribution:
        """The tempered Categorical."""
        return self.action_dist_cls

    def get_inference_action_dist_cls(self) -> BoundDistribution:
        """The tempered Categorical."""
        return self.action_dist_cls

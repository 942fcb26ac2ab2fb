"""VPG modules sharing one encoder inside a MultiRLModule (RLlib's shared-encoder example).

`VPGMultiRLModuleWithSharedEncoder` holds a `SharedEncoder` under SHARED_ENCODER_ID and one
`VPGPolicyAfterSharedEncoder` per policy: every forward pass first runs the encoder on the
policy's observations and hands its embeddings (under ENCODER_OUT) to the policy head, so the
encoder's weights are trained by all policies' losses. `VPGPolicyNoSharedEncoder` (with its
own `VPGIndividualEncoder`) is the same policy without sharing, for comparison.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.models.base import ENCODER_OUT
from rlx.core.rl_module.multi_rl_module import MultiRLModule
from rlx.core.rl_module.rl_module import RLModule
from rlx.core.rl_module.torch import TorchRLModule

#: Module id of the shared encoder inside the MultiRLModule.
SHARED_ENCODER_ID = "shared_encoder"


def _obs(batch: dict[str, Any]) -> torch.Tensor:
    return torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)


def _pi_head(embedding_dim: int, hidden_dim: int, num_actions: int) -> nn.Module:
    return nn.Sequential(nn.Linear(embedding_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, num_actions))


def _dims(module: RLModule, *keys: str) -> list[int]:
    missing = [k for k in keys if k not in module.model_config]
    if missing:
        raise ValueError(f"{type(module).__name__} needs model_config keys {missing} (got "
                         f"{sorted(module.model_config)}).")
    return [int(module.model_config[k]) for k in keys]


class SharedEncoder(TorchRLModule):
    """obs -> Linear(embedding_dim): the encoder every policy of the MultiRLModule uses."""

    def setup(self) -> None:
        """Build the linear encoder from `model_config["embedding_dim"]`."""
        (embedding_dim,) = _dims(self, "embedding_dim")
        self._net = nn.Sequential(nn.Linear(int(self._spaces()[0].shape[0]), embedding_dim))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {ENCODER_OUT: self._net(_obs(batch))}


class VPGPolicyAfterSharedEncoder(TorchRLModule):
    """A policy head reading the shared encoder's embeddings (batch[ENCODER_OUT]) and returning
    action logits; `model_config` needs `embedding_dim` and `hidden_dim`."""

    def setup(self) -> None:
        """Build the head: Linear(embedding_dim, hidden_dim) -> ReLU -> Linear(num actions)."""
        embedding_dim, hidden_dim = _dims(self, "embedding_dim", "hidden_dim")
        self._pi_head = _pi_head(embedding_dim, hidden_dim, int(self._spaces()[1].n))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if ENCODER_OUT not in batch:
            raise KeyError(f"{type(self).__name__} reads the shared encoder's output under {ENCODER_OUT!r}: put it "
                           "in a VPGMultiRLModuleWithSharedEncoder next to a SharedEncoder module.")
        return {Columns.ACTION_DIST_INPUTS: self._pi_head(batch[ENCODER_OUT])}


class VPGMultiRLModuleWithSharedEncoder(MultiRLModule):
    """A MultiRLModule whose policies all run after the SharedEncoder held under SHARED_ENCODER_ID.

    Batches are {policy id: batch}; the encoder itself is not a policy (map no agent to it).
    """

    def __init__(self, modules: dict[str, RLModule] | None = None, **kwargs: Any) -> None:
        super().__init__(modules)
        if SHARED_ENCODER_ID not in self._rl_modules or len(self._rl_modules) < 2:
            raise ValueError(f"VPGMultiRLModuleWithSharedEncoder needs a SharedEncoder under {SHARED_ENCODER_ID!r} "
                             f"and at least one policy module; got {sorted(self._rl_modules)}.")

    @property
    def encoder(self) -> RLModule:
        """The shared encoder module."""
        return self._rl_modules[SHARED_ENCODER_ID]

    def _run(self, batch: dict[str, Any], forward_type: str, **kwargs: Any) -> dict[str, Any]:
        out = {}
        for policy_id, policy_batch in batch.items():
            if policy_id == SHARED_ENCODER_ID:
                continue
            policy_batch = dict(policy_batch)
            policy_batch[ENCODER_OUT] = self.encoder._forward(policy_batch)[ENCODER_OUT]
            out[policy_id] = getattr(self[policy_id], forward_type)(policy_batch, **kwargs)
        return out

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Encoder, then each policy's forward_train (gradients reach the encoder)."""
        return self._run(batch, "forward_train", **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Encoder, then each policy's forward_exploration, without gradients."""
        with torch.no_grad():
            return self._run(batch, "forward_exploration", **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Encoder, then each policy's forward_inference, without gradients."""
        with torch.no_grad():
            return self._run(batch, "forward_inference", **kwargs)


class VPGIndividualEncoder(nn.Module):
    """A policy's own encoder (SharedEncoder's network, not shared), for comparisons."""

    def __init__(self, observation_space: Any, embedding_dim: int) -> None:
        super().__init__()
        self._net = nn.Sequential(nn.Linear(int(observation_space.shape[0]), int(embedding_dim)))

    def forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """{ENCODER_OUT: embeddings of batch["obs"]}."""
        return {ENCODER_OUT: self._net(_obs(batch))}


class VPGPolicyNoSharedEncoder(TorchRLModule):
    """VPGPolicyAfterSharedEncoder with its own encoder: obs -> encoder -> head -> logits."""

    def setup(self) -> None:
        """Build the individual encoder and the head from `embedding_dim` and `hidden_dim`."""
        embedding_dim, hidden_dim = _dims(self, "embedding_dim", "hidden_dim")
        observation_space, action_space = self._spaces()
        self.encoder = VPGIndividualEncoder(observation_space, embedding_dim)
        self._pi_head = _pi_head(embedding_dim, hidden_dim, int(action_space.n))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._pi_head(self.encoder(batch)[ENCODER_OUT])}

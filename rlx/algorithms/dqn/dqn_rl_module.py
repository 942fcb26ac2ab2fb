"""DQN's Q-network: an MLP encoder, then advantage (and, dueling, value) heads, optionally noisy
(NoisyNet) and distributional (C51 atoms)."""
from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlx.algorithms.dqn.q_model_view import DQNModelView
from rlx.core.action_masking import apply_action_mask, find_action_mask
from rlx.core.cnn import ImageEncoder, is_image_space
from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, Categorical
from rlx.core.models import flat_obs_dim, make_mlp, refuse_no_final_linear
from rlx.core.numpy_forward import as_float32_rows, keeps_methods, mlp_numpy_fn
from rlx.core.rl_module.rl_module import RLModule
from rlx.utils.errors import ConfigError, NotSupportedYetError

QF_PREDS = "qf_preds"
ATOM_LOGITS = "atom_logits"


class NoisyLinear(nn.Module):
    """Linear layer with factorized Gaussian parameter noise (Fortunato et al., 2018).

    The noise is redrawn on every noisy forward pass; `forward(x, noisy=False)` uses the
    mean weights (greedy evaluation).
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.generator = generator
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 / math.sqrt(in_features)))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 / math.sqrt(in_features)))

    def _scaled_noise(self, n: int) -> torch.Tensor:
        x = torch.randn(n, generator=self.generator)
        return x.sign() * x.abs().sqrt()

    def forward(self, x: torch.Tensor, noisy: bool = True) -> torch.Tensor:  # noqa: D102
        if not noisy:
            return F.linear(x, self.weight_mu, self.bias_mu)
        eps_in = self._scaled_noise(self.in_features)
        eps_out = self._scaled_noise(self.out_features)
        weight = self.weight_mu + self.weight_sigma * torch.outer(eps_out, eps_in)
        bias = self.bias_mu + self.bias_sigma * eps_out
        return F.linear(x, weight, bias)


class NoisyMLP(nn.Module):
    """An MLP of NoisyLinear layers (ReLU between them, none after the output)."""

    def __init__(self, in_dim: int, hiddens: list[int], out_dim: int, sigma0: float,
                 generator: torch.Generator | None = None):
        super().__init__()
        dims = [in_dim] + list(hiddens) + [out_dim]
        self.layers = nn.ModuleList(NoisyLinear(a, b, sigma0, generator) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor, noisy: bool = True) -> torch.Tensor:  # noqa: D102
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x, noisy)
            if i < last:
                x = torch.relu(x)
        return x


def _head(in_dim: int, hiddens: list[int], out_dim: int, noisy: bool, sigma0: float,
          generator: torch.Generator | None = None) -> nn.Module:
    if noisy:
        return NoisyMLP(in_dim, hiddens, out_dim, sigma0, generator)
    return make_mlp(in_dim, [], None, out_dim, out_gain=1.0, post_hiddens=hiddens, post_activation="relu")


class DQNRLModule(RLModule):
    """Q-network for Discrete actions.

    Model-config keys (DQNConfig fills them from its training options): `fcnet_hiddens`,
    `fcnet_activation` (encoder), `hiddens` (head layers), `dueling`, `num_atoms`,
    `v_min`, `v_max`, `noisy`, `sigma0`, `categorical_distribution_temperature`.
    `action_dist_inputs` are the (expected) Q-values, so exploration strategies read
    them as logits: argmax is the greedy action.
    """

    #: Distributional DQN (num_atoms > 1): the atoms' values, a buffer registered in setup().
    support: torch.Tensor

    def setup(self) -> None:
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"DQN needs a Discrete action space, got {self.action_space}. "
                "For continuous actions use SAC, DDPG or TD3."
            )
        cfg = self.model_config
        refuse_no_final_linear(cfg, "DQN")
        obs_space = self._spaces()[0]
        self.num_actions = int(self.action_space.n)
        self.num_atoms = int(cfg.get("num_atoms", 1))
        self.dueling = bool(cfg.get("dueling", True))
        self.noisy = bool(cfg.get("noisy", False))
        sigma0 = float(cfg.get("sigma0", 0.5))
        hiddens = list(cfg.get("hiddens", [64]))
        enc_hiddens = list(cfg.get("fcnet_hiddens", [64]))
        # With an action mask in the (Dict) observation, the Q-network reads only the other keys.
        self.action_mask = find_action_mask(obs_space, self.action_space, cfg)
        if self.action_mask is not None and self.num_atoms > 1:
            raise NotSupportedYetError("action masking with distributional DQN (num_atoms > 1)",
                                       "masks apply to expected Q-values", fix="Set num_atoms=1.")
        space = self.action_mask.input_space if self.action_mask is not None else obs_space
        self.encoder: nn.Module | None
        if is_image_space(space, cfg):
            # Image observations: a CNN (conv_filters, then post_fcnet_hiddens) replaces the MLP encoder.
            self._flatten = False
            self.encoder = ImageEncoder(space, cfg)
            feat_dim = self.encoder.out_dim
        else:
            in_dim = flat_obs_dim(space)
            self._flatten = len(space.shape or ()) != 1
            self.encoder = make_mlp(in_dim, enc_hiddens, cfg.get("fcnet_activation", "relu")) \
                if enc_hiddens else None
            feat_dim = enc_hiddens[-1] if enc_hiddens else in_dim
        # Noise comes from the module's own generator, seeded from torch's (seeded) RNG at
        # build time, so seeded runs repeat exactly.
        self.noise_generator = torch.Generator()
        self.noise_generator.manual_seed(int(torch.randint(0, 2**62, ())))
        gen = self.noise_generator
        self.advantage = _head(feat_dim, hiddens, self.num_actions * self.num_atoms, self.noisy, sigma0, gen)
        self.value = _head(feat_dim, hiddens, self.num_atoms, self.noisy, sigma0, gen) if self.dueling else None
        if self.num_atoms > 1:
            v_min, v_max = float(cfg.get("v_min", -10.0)), float(cfg.get("v_max", 10.0))
            if v_min >= v_max:
                raise ConfigError(f"Distributional DQN needs v_min < v_max, got v_min={v_min}, v_max={v_max}.")
            self.register_buffer("support", torch.linspace(v_min, v_max, self.num_atoms), persistent=False)
        self.temperature = float(cfg.get("categorical_distribution_temperature", 1.0))

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self._flatten:
            obs = obs.reshape(obs.shape[0], -1)
        # .forward directly: nn.Module.__call__'s hook handling costs as much as these small layers.
        return self.encoder.forward(obs) if self.encoder is not None else obs

    def _call_head(self, head: nn.Module, x: torch.Tensor, noisy: bool) -> torch.Tensor:
        return head.forward(x, noisy) if self.noisy else head.forward(x)

    def q_outputs(self, obs: torch.Tensor, noisy: bool = True) -> torch.Tensor:
        """Q-values [B, A] (num_atoms == 1; masked actions' are FLOAT_MIN) or atom logits [B, A, num_atoms]."""
        mask = None
        if self.action_mask is not None:
            obs, mask = self.action_mask.split(obs)
        x = self._features(obs)
        adv = self._call_head(self.advantage, x, noisy)
        if self.num_atoms == 1:
            if self.value is None:
                return apply_action_mask(adv, mask)
            v = self._call_head(self.value, x, noisy)
            return apply_action_mask(v + adv - adv.mean(dim=1, keepdim=True), mask)
        adv = adv.reshape(-1, self.num_actions, self.num_atoms)
        if self.value is None:
            return adv
        v = self._call_head(self.value, x, noisy).unsqueeze(1)
        return v + adv - adv.mean(dim=1, keepdim=True)

    def q_values(self, outputs: torch.Tensor) -> torch.Tensor:
        """Expected Q-values [B, A] from `q_outputs`."""
        if self.num_atoms == 1:
            return outputs
        return (torch.softmax(outputs, dim=-1) * self.support).sum(-1)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        q = self.q_values(self.q_outputs(batch[Columns.OBS], noisy=False))
        return {Columns.ACTION_DIST_INPUTS: q, QF_PREDS: q}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        q = self.q_values(self.q_outputs(batch[Columns.OBS], noisy=self.noisy))
        return {Columns.ACTION_DIST_INPUTS: q, QF_PREDS: q}

    def numpy_inference_fn(self) -> Any:
        """Expected Q-values in NumPy (see RLModule.numpy_inference_fn) for MLP networks without
        noisy layers, distributional atoms or an action mask; else None."""
        if self.noisy or self.num_atoms != 1 or self.action_mask is not None or not keeps_methods(
                self, DQNRLModule, ("forward_inference", "forward_exploration", "q_outputs", "q_values",
                                    "_features", "_call_head")):
            return None
        encoder = mlp_numpy_fn(self.encoder) if self.encoder is not None else None
        advantage = mlp_numpy_fn(self.advantage)
        value = mlp_numpy_fn(self.value) if self.value is not None else None
        if advantage is None or (self.encoder is not None and encoder is None) or \
                (self.value is not None and value is None):
            return None

        def forward(obs: np.ndarray) -> np.ndarray:
            x = as_float32_rows(obs)
            if encoder is not None:
                x = encoder(x)
            adv = advantage(x)
            if value is None:
                return adv
            return value(x) + adv - adv.mean(axis=1, keepdims=True)

        return forward

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        out = self.q_outputs(batch[Columns.OBS], noisy=self.noisy)
        q = self.q_values(out)
        result = {Columns.ACTION_DIST_INPUTS: q, QF_PREDS: q}
        if self.num_atoms > 1:
            result[ATOM_LOGITS] = out
        return result

    def old_api_model(self) -> Any:
        """`policy.model` of the old API: the Q-model view (`from_batch` -> base features,
        `get_q_value_distributions`, `get_state_value`, the heads), see `q_model_view`."""
        return DQNModelView(self)

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """Categorical over Q-values (tempered by categorical_distribution_temperature)."""
        return BoundDistribution(Categorical, temperature=self.temperature)

    def get_inference_action_dist_cls(self) -> BoundDistribution:
        """Categorical over Q-values; its deterministic sample is the greedy action."""
        return BoundDistribution(Categorical)

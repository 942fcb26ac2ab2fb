"""AutoregressiveActionsRLM: actions of a Tuple(Discrete(3), Box) space drawn in two steps, the
Box part conditioned on the Discrete part (RLlib's autoregressive-actions example module).

The prior net gives the Discrete part's logits; the posterior net reads the observation and
the one-hot prior action and gives the Box part's Gaussian (mean, log std). The module
returns the actions it drew (one flat vector per row, as rlx's Tuple actions travel: the
Discrete component, then the Box's) with their joint `action_logp`, and `action_dist_inputs`
= [prior logits, posterior outputs], which the default Tuple distribution reads in the loss.
In training the posterior is conditioned on the prior action that was taken (the batch's
`actions`), so the loss scores the actions the env saw.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.distributions import Categorical, DiagGaussian
from rlx.core.rl_module.apis import ValueFunctionAPI
from rlx.core.rl_module.torch import TorchRLModule


def _mlp(inputs: int, outputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, 256), nn.Tanh(), nn.Linear(256, outputs))


class AutoregressiveActionsRLM(TorchRLModule, ValueFunctionAPI):
    """Prior Categorical over Discrete(3), then a Gaussian over the Box conditioned on it; a
    value head for the algorithms that need ValueFunctionAPI (PPO, APPO, ...)."""

    def setup(self) -> None:
        """Build the prior, posterior and value nets (Tuple(Discrete(3), Box) actions only)."""
        observation_space, space = self._spaces()
        if not (isinstance(space, gym.spaces.Tuple) and len(space) == 2 and isinstance(space[0], gym.spaces.Discrete)
                and space[0].n == 3 and isinstance(space[1], gym.spaces.Box)):
            raise ValueError(f"AutoregressiveActionsRLM takes a Tuple(Discrete(3), Box) action space, got {space}.")
        obs_dim = int(observation_space.shape[0])
        self._num_prior = int(space[0].n)
        self._box_dim = int(space[1].shape[0])
        self._prior_net = _mlp(obs_dim, self._num_prior)
        self._posterior_net = _mlp(obs_dim + self._num_prior, 2 * self._box_dim)
        self._value_net = _mlp(obs_dim, 1)

    def _pi(self, batch: dict[str, Any], *, inference: bool, taken: torch.Tensor | None = None) -> dict[str, Any]:
        obs = torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)
        prior_out = self._prior_net(obs)
        prior = Categorical(prior_out)
        if taken is None:
            a1 = prior.deterministic_sample() if inference else prior.sample()
        else:
            a1 = taken[:, 0].round().long()
        one_hot = nn.functional.one_hot(a1, self._num_prior).to(obs.dtype)
        posterior_out = self._posterior_net(torch.cat([obs, one_hot], dim=-1))
        posterior = DiagGaussian(posterior_out)
        if taken is None:
            a2 = posterior.deterministic_sample() if inference else posterior.sample()
        else:
            a2 = taken[:, 1:]
        out = {Columns.ACTION_DIST_INPUTS: torch.cat([prior_out, posterior_out], dim=-1)}
        if taken is None:
            out[Columns.ACTIONS] = torch.cat([a1.to(obs.dtype).unsqueeze(-1), a2], dim=-1)
            out[Columns.ACTION_LOGP] = prior.logp(a1) + posterior.logp(a2)
        return out

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return self._pi(batch, inference=True)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return self._pi(batch, inference=False)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        taken = batch.get(Columns.ACTIONS)
        if taken is not None:
            taken = torch.as_tensor(taken, dtype=torch.float32).reshape(len(taken), -1)
        return self._pi(batch, inference=False, taken=taken)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """Values [B] of the batch's observations."""
        return self._value_net(torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)).squeeze(-1)

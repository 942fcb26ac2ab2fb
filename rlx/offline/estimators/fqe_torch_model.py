"""Fitted Q-Evaluation (Le et al., 2019): the Q-model of DirectMethod and DoublyRobust.

FQE fits Q(s, a) of the *target* policy pi from logged transitions by regressing
Q(s, a) onto r + gamma * (1 - terminated) * sum_a' pi(a'|s') Q_target(s', a'), with a target
network synced (Polyak-averaged by `polyak_coef`) after every pass over the batch. Discrete
action spaces only: V(s) = sum_a pi(a|s) Q(s, a) sums over the actions.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.models import make_mlp
from rlx.offline.estimators.target_policy import action_probabilities

DEFAULT_MODEL_CONFIG = {"fcnet_hiddens": [32, 32, 32], "fcnet_activation": "relu"}


class FQETorchModel:
    """The FQE Q-network of a target policy.

    Args:
        policy: the target policy (Discrete actions).
        gamma: the discount factor.
        model_config: the Q-network: `fcnet_hiddens`, `fcnet_activation`
            (default [32, 32, 32], relu).
        n_iters: passes over the batch per `train()` call.
        lr: Adam learning rate.
        min_loss_threshold: stop training early once a pass's mean loss is below this.
        clip_grad_norm: clip the gradients' global norm to this.
        minibatch_size: rows per gradient step (None: the whole batch).
        polyak_coef: target <- polyak_coef * Q + (1 - polyak_coef) * target after each pass.
        seed: seeds the network's initialization and the shuffling (None: random).
    """

    def __init__(self, policy: Any, gamma: float, model_config: dict | None = None, n_iters: int = 1,
                 lr: float = 1e-3, min_loss_threshold: float = 1e-4, clip_grad_norm: float = 100.0,
                 minibatch_size: int | None = None, polyak_coef: float = 1.0, seed: int | None = None):
        space = getattr(policy, "action_space", None)
        if not hasattr(space, "n"):
            raise ValueError(f"FQETorchModel needs a Discrete action space, the policy has {space}. Use "
                             "ImportanceSampling or WeightedImportanceSampling for other action spaces.")
        unknown = set(model_config or {}) - set(DEFAULT_MODEL_CONFIG)
        if unknown:
            raise ValueError(f"FQETorchModel's model_config has unknown key(s) {sorted(unknown)}; it accepts "
                             f"{sorted(DEFAULT_MODEL_CONFIG)}.")
        if int(n_iters) < 1:
            raise ValueError(f"FQETorchModel's n_iters must be >= 1, got {n_iters}.")
        self.policy = policy
        self.gamma = float(gamma)
        self.model_config = {**DEFAULT_MODEL_CONFIG, **(model_config or {})}
        self.n_iters = int(n_iters)
        self.lr = float(lr)
        self.min_loss_threshold = float(min_loss_threshold)
        self.clip_grad_norm = float(clip_grad_norm)
        self.minibatch_size = minibatch_size
        self.polyak_coef = float(polyak_coef)
        self.num_actions = int(space.n)
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self.q_model: nn.Module | None = None
        self.target_q_model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None

    def _build(self, obs_dim: int) -> None:
        """Create the networks once the observation size is known (from the first batch)."""
        if self.q_model is not None:
            return
        generator_state = torch.random.get_rng_state()
        if self._seed is not None:
            torch.manual_seed(int(self._seed))
        try:
            self.q_model = make_mlp(obs_dim, list(self.model_config["fcnet_hiddens"]),
                                    self.model_config["fcnet_activation"], self.num_actions)
        finally:
            if self._seed is not None:
                torch.random.set_rng_state(generator_state)
        self.target_q_model = copy.deepcopy(self.q_model)
        for p in self.target_q_model.parameters():
            p.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q_model.parameters(), lr=self.lr)

    @staticmethod
    def _obs(batch: Any, key: str = Columns.OBS) -> torch.Tensor:
        obs = np.asarray(batch[key], np.float32)
        return torch.from_numpy(obs.reshape(obs.shape[0], -1))

    def train(self, batch: Any) -> list[float]:
        """Fit the Q-network to the FQE targets on `batch`; returns each pass's mean loss."""
        obs, next_obs = self._obs(batch), self._obs(batch, Columns.NEXT_OBS)
        self._build(obs.shape[1])
        actions = torch.as_tensor(np.asarray(batch[Columns.ACTIONS]).reshape(-1), dtype=torch.long)
        rewards = torch.as_tensor(np.asarray(batch[Columns.REWARDS], np.float32).reshape(-1))
        not_done = 1.0 - torch.as_tensor(np.asarray(batch[Columns.TERMINATEDS], np.float32).reshape(-1))
        # The target policy does not change while FQE trains: its next-state probabilities once.
        next_probs = torch.as_tensor(action_probabilities(self.policy, next_obs.numpy()), dtype=torch.float32)
        n = obs.shape[0]
        size = int(self.minibatch_size or n)
        losses: list[float] = []
        for _ in range(self.n_iters):
            order = torch.from_numpy(self._rng.permutation(n))
            pass_losses = []
            for start in range(0, n, size):
                idx = order[start:start + size]
                with torch.no_grad():
                    next_v = (self.target_q_model(next_obs[idx]) * next_probs[idx]).sum(-1)
                    targets = rewards[idx] + self.gamma * not_done[idx] * next_v
                q = self.q_model(obs[idx]).gather(1, actions[idx, None]).squeeze(1)
                loss = (targets - q).pow(2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.q_model.parameters(), self.clip_grad_norm)
                self.optimizer.step()
                pass_losses.append(loss.item())
            losses.append(float(np.mean(pass_losses)))
            if losses[-1] < self.min_loss_threshold:
                break
            self.update_target()
        return losses

    def _q_all(self, batch: Any) -> torch.Tensor:
        obs = self._obs(batch)
        self._build(obs.shape[1])
        with torch.no_grad():
            return self.q_model(obs)

    def estimate_q(self, batch: Any) -> np.ndarray:
        """Q(s, a) of the batch's rows."""
        actions = torch.as_tensor(np.asarray(batch[Columns.ACTIONS]).reshape(-1), dtype=torch.long)
        return self._q_all(batch).gather(1, actions[:, None]).squeeze(1).double().numpy()

    def estimate_v(self, batch: Any) -> np.ndarray:
        """V(s) = sum_a pi(a|s) Q(s, a) of the batch's rows."""
        q = self._q_all(batch).double().numpy()
        return np.sum(q * action_probabilities(self.policy, np.asarray(batch[Columns.OBS])), axis=-1)

    def update_target(self, polyak_coef: float | None = None) -> None:
        """target <- c * Q + (1 - c) * target, c = polyak_coef (default: the model's)."""
        c = self.polyak_coef if polyak_coef is None else float(polyak_coef)
        with torch.no_grad():
            for target, online in zip(self.target_q_model.parameters(), self.q_model.parameters()):
                target.mul_(1.0 - c).add_(online, alpha=c)

    def get_state(self) -> dict[str, Any]:
        """The networks' weights (NumPy arrays) and the settings."""
        weights = None if self.q_model is None else {
            "q_model": {k: v.numpy().copy() for k, v in self.q_model.state_dict().items()},
            "target_q_model": {k: v.numpy().copy() for k, v in self.target_q_model.state_dict().items()},
        }
        return {"model_config": dict(self.model_config), "gamma": self.gamma, "weights": weights}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore `get_state()`."""
        weights = state.get("weights")
        if weights is None:
            return
        first = next(iter(weights["q_model"].values()))
        self._build(int(np.asarray(first).shape[1]))
        self.q_model.load_state_dict({k: torch.as_tensor(v) for k, v in weights["q_model"].items()})
        self.target_q_model.load_state_dict({k: torch.as_tensor(v) for k, v in weights["target_q_model"].items()})

"""Custom action distributions (model custom_action_dist), written the old API's way."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.models.catalog import ModelCatalog
from rlx.models.torch.torch_action_dist import TorchCategorical, TorchDistributionWrapper
from rlx.utils.errors import ConfigError


class TorchCategoricalDist(TorchDistributionWrapper):
    """A categorical on torch.distributions, with RLlib's old method signatures."""

    def __init__(self, inputs, model):
        super().__init__(inputs, model)
        self.dist = torch.distributions.Categorical(logits=self.inputs)

    def sample(self):
        self.last_sample = self.dist.sample()
        return self.last_sample

    def deterministic_sample(self):
        return self.dist.probs.argmax(dim=1)

    def logp(self, actions):
        return self.dist.log_prob(actions)

    def entropy(self):
        return self.dist.entropy()

    def kl(self, other):
        return torch.distributions.kl.kl_divergence(self.dist, other.dist)

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return action_space.n


class AlwaysLast(TorchCategoricalDist):
    """Samples the last action whatever the logits say."""

    def sample(self):
        self.last_sample = torch.full(self.inputs.shape[:1], self.inputs.shape[1] - 1, dtype=torch.long)
        return self.last_sample


def test_ppo_samples_from_the_custom_distribution():
    ModelCatalog.register_custom_action_dist("always_last", AlwaysLast)
    algo = PPOConfig().environment("CartPole-v1").training(
        model={"custom_action_dist": "always_last"}, train_batch_size=256, minibatch_size=128, num_epochs=1).build()
    batch = algo.env_runner.sample(num_timesteps=64)
    assert np.all(batch["actions"] == 1)
    assert np.allclose(batch["action_logp"], np.log(torch.softmax(torch.as_tensor(batch["action_dist_inputs"]), -1)
                                                      .numpy()[..., 1]), atol=1e-5)
    algo.stop()


@pytest.mark.slow
def test_ppo_learns_cartpole_with_a_custom_categorical():
    ModelCatalog.register_custom_action_dist("torch_cat", TorchCategoricalDist)
    algo = PPOConfig().environment("CartPole-v1").training(model={"custom_action_dist": "torch_cat"}).debugging(
        seed=0).build()
    best = 0.0
    for _ in range(20):
        best = max(best, algo.train()["env_runners"]["episode_return_mean"])
        if best >= 300:
            break
    assert best >= 300
    algo.stop()


def test_get_action_dist_returns_the_registered_class_and_its_output_size():
    ModelCatalog.register_custom_action_dist("torch_cat", TorchCategoricalDist)
    cls, outputs = ModelCatalog.get_action_dist(gym.spaces.Discrete(5), {"custom_action_dist": "torch_cat"})
    assert outputs == 5
    assert cls(torch.zeros(2, 5), None).entropy().shape == (2,)
    assert ModelCatalog.get_action_dist(gym.spaces.Discrete(3), {}, dist_type=TorchCategorical)[1] == 3


def test_unknown_or_wrong_distributions_are_clear_errors():
    ModelCatalog.register_custom_action_dist("torch_cat", TorchCategoricalDist)
    with pytest.raises(ConfigError, match="Unknown custom action distribution 'torch_ca'.*torch_cat"):
        PPOConfig().environment("CartPole-v1").training(model={"custom_action_dist": "torch_ca"}).build()
    with pytest.raises(ConfigError, match="TorchDistributionWrapper"):
        ModelCatalog.register_custom_action_dist("bad", dict)
    with pytest.raises(ConfigError, match="custom_action_dist"):
        PPOConfig().training(model={"custom_action_dist": 3}).validate()

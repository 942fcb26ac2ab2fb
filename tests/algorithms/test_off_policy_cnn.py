"""SAC, DDPG and TD3 read image observations with a CNN (rlx.core.cnn's ImageEncoder) in front of
the actor and of each critic; their learners train those networks unchanged."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ddpg import DDPGConfig
from rlx.algorithms.sac import SACConfig
from rlx.algorithms.td3 import TD3Config
from rlx.core.cnn import ImageEncoder
from rlx.core.columns import Columns

IMAGE = gym.spaces.Box(0, 255, (10, 10, 3), np.uint8)
FILTERS = {"conv_filters": [[4, [3, 3], 2], [8, [3, 3], 2]]}


class Frames(gym.Env):
    """10x10x3 uint8 frames; reward = -(action - mean brightness)^2 for a Box(-1, 1, (1,)) action
    (or 1 for action 1 on a bright frame, Discrete(2)). 10 steps per episode."""

    def __init__(self, config=None):
        self.observation_space = IMAGE
        self.discrete = bool((config or {}).get("discrete", False))
        self.action_space = gym.spaces.Discrete(2) if self.discrete else gym.spaces.Box(-1, 1, (1,), np.float32)

    def _frame(self):
        self.level = float(self.np_random.uniform(-1, 1))
        return np.full((10, 10, 3), int((self.level + 1) * 127), np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        if self.discrete:
            reward = float(int(action) == int(self.level > 0))
        else:
            reward = -float((np.asarray(action).reshape(-1)[0] - self.level) ** 2)
        self.t += 1
        return self._frame(), reward, False, self.t >= 10, {}


def _config(cls, discrete=False):
    config = (cls().environment(Frames, env_config={"discrete": discrete})
              .training(model=dict(FILTERS), train_batch_size=32, num_steps_sampled_before_learning_starts=64)
              .reporting(min_sample_timesteps_per_iteration=100).debugging(seed=0))
    if cls is SACConfig:
        config = config.training(policy_model_config={"fcnet_hiddens": [16]}, q_model_config={"fcnet_hiddens": [16]})
    else:
        config = config.training(actor_hiddens=[16], critic_hiddens=[16])
    return config


def _fixed_batch(algo, size=64):
    batch = algo.env_runner.sample(num_timesteps=size, explore=True)
    obs = batch[Columns.OBS].reshape((-1,) + IMAGE.shape)
    n = obs.shape[0]
    rng = np.random.default_rng(0)
    actions = batch[Columns.ACTIONS].reshape((n,) + batch[Columns.ACTIONS].shape[2:])
    return {
        Columns.OBS: obs,
        Columns.NEXT_OBS: obs[rng.permutation(n)],
        Columns.ACTIONS: actions,
        Columns.REWARDS: batch[Columns.REWARDS].reshape(n).astype(np.float32),
        Columns.TERMINATEDS: np.ones(n, np.float32),  # targets = rewards: a fixed regression problem
    }


@pytest.mark.parametrize("cls,discrete", [(SACConfig, False), (SACConfig, True), (DDPGConfig, False),
                                          (TD3Config, False)])
def test_image_observations_get_conv_encoders_and_train_steps_reduce_the_critic_loss(cls, discrete):
    algo = _config(cls, discrete).training(critic_lr=3e-3).build()
    try:
        module = algo.get_module()
        pi_convs = [m for m in module.pi.modules() if isinstance(m, torch.nn.Conv2d)]
        qf_encoders = [m for m in module.qf.modules() if isinstance(m, ImageEncoder)]
        assert len(pi_convs) == 2
        assert len(qf_encoders) == (2 if module.twin_q else 1)  # one CNN per critic
        # No weight matrix reads the flat 300-pixel frame: the MLPs sit behind the CNNs.
        assert all(p.shape[-1] != 300 and p.shape[-2:] != (300 + 1, 16) for p in module.parameters())
        batch = _fixed_batch(algo)
        learner = algo.learner
        conv = next(m for m in module.qf.modules() if isinstance(m, torch.nn.Conv2d))
        conv_before = conv.weight.detach().clone()
        first = float(learner.update_from_batch(dict(batch), 0)["critic_loss"])
        for i in range(100):
            last = float(learner.update_from_batch(dict(batch), i + 1)["critic_loss"])
        assert np.isfinite(first) and last < 0.6 * first, (first, last)
        assert not torch.equal(conv.weight, conv_before)  # the critic's CNN trains with it
        result = algo.train()
        assert result["num_env_steps_sampled_lifetime"] > 0
    finally:
        algo.stop()

"""MultiBinary and multi-dimensional Box action spaces: flat through module and batch, in the
env's shape and dtype at the env; random actions cover a normalized Box's bounds."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.core.distributions import DiagGaussian, MultiCategorical, dist_class_for_space
from rlx.env.env_runner import ActionAdapter


class CopyBits(gym.Env):
    """Observe a 2x3 bit pattern, answer with it as a MultiBinary((2, 3)) action: reward = the
    fraction of right bits, 10 steps per episode (random: 5, perfect: 10)."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0, 1, (6,), np.float32)
        self.action_space = gym.spaces.MultiBinary((2, 3))

    def _next(self):
        self.pattern = self.np_random.integers(0, 2, (2, 3))
        return self.pattern.reshape(-1).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._next(), {}

    def step(self, action):
        assert action.shape == (2, 3) and action.dtype == np.int8, (action.shape, action.dtype)
        reward = float((action == self.pattern).mean())
        self.t += 1
        return self._next(), reward, False, self.t >= 10, {}


class MatrixTarget(gym.Env):
    """Observe 4 numbers in [-1, 1], answer with twice them as a Box(-2, 2, (2, 2)) action:
    reward = -mean |action - target|, 10 steps per episode."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
        self.action_space = gym.spaces.Box(-2, 2, (2, 2), np.float32)

    def _next(self):
        self.obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return self.obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._next(), {}

    def step(self, action):
        assert action.shape == (2, 2), action.shape
        reward = -float(np.abs(action.reshape(-1) - 2 * self.obs).mean())
        self.t += 1
        return self._next(), reward, False, self.t >= 10, {}


def test_default_distributions():
    cls, kwargs = dist_class_for_space(gym.spaces.MultiBinary((2, 3)))
    assert cls is MultiCategorical and kwargs["input_lens"] == [2] * 6
    assert cls.required_input_dim(gym.spaces.MultiBinary((2, 3))) == 12
    box = gym.spaces.Box(-1, 1, (2, 3))
    cls, _ = dist_class_for_space(box)
    assert cls is DiagGaussian and cls.required_input_dim(box) == 12


def test_adapter_maps_flat_module_actions_to_the_env_shape():
    bits = ActionAdapter(gym.spaces.MultiBinary((2, 3)), normalize=True, clip=False)
    assert bits.batch_shape == (6,) and bits.batch_dtype == np.int64
    env_actions = bits.to_env(np.array([[1, 0, 1, 0, 1, 1]]))
    assert env_actions.shape == (1, 2, 3) and env_actions.dtype == np.int8
    assert env_actions[0].tolist() == [[1, 0, 1], [0, 1, 1]]
    box = ActionAdapter(gym.spaces.Box(np.zeros((2, 2)), np.full((2, 2), 4.0), dtype=np.float32), True, False)
    assert box.batch_shape == (4,)
    out = box.to_env(np.array([[-1.0, 0.0, 1.0, 3.0]]))
    assert out.shape == (1, 2, 2)
    assert out[0].tolist() == [[0.0, 2.0], [4.0, 4.0]]  # unsquashed from [-1, 1], then clipped


def test_random_actions_of_a_normalized_box_cover_its_bounds():
    adapter = ActionAdapter(gym.spaces.Box(-2.0, 2.0, (1,), np.float32), normalize=True, clip=False)
    adapter.space.seed(0)
    module_actions = adapter.sample_module_actions(2000)
    assert module_actions.min() >= -1.0 and module_actions.max() <= 1.0
    env_actions = adapter.to_env(module_actions)
    # Uniform over [-2, 2]: not piled up at the bounds by a second unsquashing.
    assert np.mean(np.abs(env_actions) >= 1.99) < 0.01
    assert env_actions.min() < -1.8 and env_actions.max() > 1.8


@pytest.mark.parametrize("env,threshold,iterations", [(CopyBits, 9.0, 30), (MatrixTarget, -6.5, 30)])
def test_ppo_learns_with_the_action_space(env, threshold, iterations):
    algo = PPOConfig().environment(env).debugging(seed=0).training(train_batch_size=1000).build()
    first = algo.train()["env_runners"]["episode_return_mean"]
    for _ in range(iterations - 1):
        result = algo.train()
    last = result["env_runners"]["episode_return_mean"]
    assert last >= threshold > first, (first, last)
    action = algo.compute_single_action(env().reset(seed=1)[0], explore=False)
    assert np.shape(action) == env().action_space.shape
    algo.stop()

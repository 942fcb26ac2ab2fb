"""Atari: 'ALE/...' ids, DeepMind preprocessing under preprocessor_pref='deepmind' (RLlib's
default), the new API stack's wrapper, and PPO stepping a real game. Needs ale-py (the dev
extra installs it)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402
from rlx.env.registry import make_env_creator  # noqa: E402
from rlx.env.wrappers.atari_wrappers import (  # noqa: E402
    EpisodicLifeEnv, FrameStack, is_atari, wrap_atari_for_new_api_stack, wrap_deepmind)

SMALL = dict(train_batch_size=128, minibatch_size=64, num_epochs=1)


def _make(env_id: str = "ALE/Breakout-v5", **kwargs):
    gym.register_envs(ale_py)
    return gym.make(env_id, **kwargs)


def test_ale_ids_resolve_without_the_package_prefix():
    creator, name = make_env_creator("ALE/Pong-v5")
    env = creator({})
    assert name == "ALE/Pong-v5"
    assert env.observation_space.shape == (210, 160, 3)
    assert is_atari(env) and is_atari("ALE/Pong-v5") and not is_atari(gym.make("CartPole-v1"))
    env.close()


def test_wrap_deepmind_gives_stacked_84x84_grayscale_frames():
    env = wrap_deepmind(_make())
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (84, 84, 4) and env.observation_space.dtype == np.uint8
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    first = obs
    for _ in range(3):
        obs, *_ = env.step(env.action_space.sample())
    # The newest frame enters on the right; the oldest leaves on the left.
    assert np.array_equal(obs[..., 0], first[..., 3]) or not np.array_equal(obs, first)
    env.close()


def test_a_lost_life_ends_the_episode_but_not_the_game():
    env = EpisodicLifeEnv(_make(repeat_action_probability=0.0))
    env.reset(seed=0)
    env.action_space.seed(0)
    assert env.unwrapped.ale.lives() == 5
    terminated = truncated = False
    for _ in range(5000):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            break
    assert terminated and env.unwrapped.ale.lives() == 4
    assert not env.was_real_done
    env.reset()
    assert env.unwrapped.ale.lives() == 4  # the game went on from the lost life
    env.close()


def test_new_api_stack_wrapper_scales_and_stacks():
    env = wrap_atari_for_new_api_stack(_make(frameskip=1), dim=42, framestack=4)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (42, 42, 4) and obs.dtype == np.float32
    assert obs.min() >= -1.0 and obs.max() <= 1.0
    assert isinstance(env, FrameStack)
    env.close()


def test_ppo_on_pong_uses_deepmind_preprocessing_and_a_cnn():
    algo = (PPOConfig().environment("ALE/Pong-v5").env_runners(num_envs_per_env_runner=2)
            .training(**SMALL).debugging(seed=0).build())
    runner = algo.env_runner_group.local_env_runner
    assert runner.module_observation_space.shape == (84, 84, 4)
    assert "FrameStack" in str(runner.env.envs[0])
    module = algo.get_module()
    assert any(type(m).__name__ == "Conv2d" for m in module.modules())
    result = algo.train()
    assert result["num_env_steps_sampled_lifetime"] >= 128
    assert np.isfinite(result["learners"]["default_policy"]["total_loss"])
    algo.stop()


def test_rllib_preprocessor_downsamples_raw_frames_instead():
    algo = (PPOConfig().environment("ALE/Pong-v5").env_runners(num_envs_per_env_runner=1, preprocessor_pref="rllib")
            .training(**SMALL).rl_module(model_config={"dim": 42, "grayscale": True}).debugging(seed=0).build())
    runner = algo.env_runner_group.local_env_runner
    assert runner.module_observation_space.shape == (42, 42, 1)
    assert algo.train()["num_env_steps_sampled_lifetime"] >= 128
    algo.stop()


def test_user_wrapped_atari_env_is_not_wrapped_twice():
    def creator(cfg):
        return wrap_atari_for_new_api_stack(_make("ALE/Pong-v5", frameskip=1), dim=42, framestack=4)

    algo = PPOConfig().environment(creator).env_runners(num_envs_per_env_runner=1).training(**SMALL).build()
    assert algo.env_runner_group.local_env_runner.module_observation_space.shape == (42, 42, 4)
    algo.stop()

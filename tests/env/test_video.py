"""Episode videos while training: render_env=True (old `"monitor": True`) and rlx.env.video."""
from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from conftest import small_config
from rlx.algorithms.ppo import PPO, PPOConfig
from rlx.env.video import VIDEO_NAME_PREFIX, gymnasium_id
from rlx.utils.errors import ConfigError, EnvError


class SquareEnv(gym.Env):
    """4-step episodes; renders an image when built with env_config {"render_mode": "rgb_array"}."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.render_mode = (config or {}).get("render_mode")
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), float(action), self.t >= 4, False, {}

    def render(self):
        return np.full((16, 16, 3), 60 * self.t, np.uint8)


def videos_of(algo) -> list[Path]:
    """The mp4 files under the Algorithm's `<logdir>/videos`."""
    return sorted((Path(algo.logdir) / "videos").glob("*.mp4"))


def train(config, iterations: int = 2):
    """Build from `config`, train, stop; return (algo, results)."""
    algo = config.build()
    results = [algo.train() for _ in range(iterations)]
    algo.stop()
    return algo, results


def test_render_env_records_episode_videos_under_the_logdir():
    algo, _ = train(small_config().environment(render_env=True))
    videos = videos_of(algo)
    assert videos, "no video was written"
    # The capped-cubic schedule always records the first episode.
    assert f"{VIDEO_NAME_PREFIX}-episode-0.mp4" in {p.name for p in videos}
    assert all(p.stat().st_size > 0 for p in videos)


def test_only_sub_env_zero_records_and_with_rgb_array():
    algo = small_config().environment(render_env=True).env_runners(num_envs_per_env_runner=3).build()
    try:
        envs = algo.env_runner.env.envs
        assert isinstance(envs[0], gym.wrappers.RecordVideo)
        assert envs[0].render_mode == "rgb_array"
        assert not any(isinstance(env, gym.wrappers.RecordVideo) for env in envs[1:])
    finally:
        algo.stop()


def test_old_monitor_key_records_videos():
    algo = PPO(config={"monitor": True, "train_batch_size": 256, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
                       "seed": 0}, env="CartPole-v1")
    try:
        assert algo.config.render_env is True
        algo.train()
        algo.train()
    finally:
        algo.stop()
    assert videos_of(algo)


def test_monitor_false_leaves_render_env_off():
    assert PPOConfig().update_from_dict({"monitor": False}).render_env is False
    assert PPOConfig().update_from_dict({"monitor": True}).render_env is True


def test_custom_env_with_rgb_array_render_mode_is_recorded():
    config = small_config(env=SquareEnv).environment(env_config={"render_mode": "rgb_array"}, render_env=True)
    algo, _ = train(config, iterations=1)
    assert videos_of(algo)


def test_custom_env_without_rgb_array_is_a_clear_env_error():
    with pytest.raises(EnvError, match=r"render_env=True .*render_mode='rgb_array'.*SquareEnv.render_mode is None"):
        small_config(env=SquareEnv).environment(render_env=True).build()


def test_missing_moviepy_is_a_config_error_naming_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "moviepy", None)  # `import moviepy` now raises ImportError
    with pytest.raises(ConfigError, match=r"render_env=True.*pip install -c constraints.txt -e '\.\[video\]'"):
        small_config().environment(render_env=True).build()


def test_recording_does_not_change_learning():
    _, plain = train(small_config(seed=3))
    recorded_algo, recorded = train(small_config(seed=3).environment(render_env=True))
    assert videos_of(recorded_algo)
    for a, b in zip(plain, recorded):
        assert a["env_runners"]["hist_stats"]["episode_reward"] == b["env_runners"]["hist_stats"]["episode_reward"]
        assert a["learners"]["default_policy"]["total_loss"] == b["learners"]["default_policy"]["total_loss"]


@pytest.mark.parametrize("spec, expected", [
    ("CartPole-v1", "CartPole-v1"),
    ("CartPole-v0", "CartPole-v0"),
    (SquareEnv, None),
    ("envs_for_tests:CountingEnv", None),
])
def test_gymnasium_id_tells_gymnasium_envs_from_custom_ones(spec, expected):
    assert gymnasium_id(spec) == expected


def test_a_name_registered_with_register_env_is_not_a_gymnasium_id():
    from rlx import register_env

    register_env("CartPole-v1-custom-video-test", lambda ctx: SquareEnv(ctx))
    assert gymnasium_id("CartPole-v1-custom-video-test") is None

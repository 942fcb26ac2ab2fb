"""model['log_std_init'] (rlx): the starting value of the free log-std parameter of Box actions,
as Stable-Baselines3's log_std_init (rl-zoo3's MuJoCo PPO starts at -2)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import ConfigError, NotSupportedYetError


@pytest.mark.parametrize("use_lstm", [False, True])
def test_the_free_log_std_starts_at_log_std_init_and_acting_samples_with_that_spread(use_lstm):
    model = {"free_log_std": True, "log_std_init": -2.0, "use_lstm": use_lstm, "max_seq_len": 4}
    algo = PPOConfig().environment("Pendulum-v1").training(model=model).debugging(seed=0).build()
    try:
        module = algo.get_module()
        torch.testing.assert_close(module.log_std.detach(), torch.full((1,), -2.0))
        batch = algo.env_runner.sample(num_timesteps=64)
        dist_inputs = np.asarray(batch["action_dist_inputs"]).reshape(-1, 2)
        np.testing.assert_allclose(dist_inputs[:, 1], -2.0)  # what the actions were sampled with
    finally:
        algo.stop()


def test_log_std_init_without_free_log_std_is_refused_with_the_fix():
    with pytest.raises(NotSupportedYetError, match="free_log_std"):
        PPOConfig().environment("Pendulum-v1").training(model={"log_std_init": -1.0}).build()


@pytest.mark.parametrize("value", ["-2", True, 50.0])
def test_log_std_init_must_be_a_number_in_range(value):
    with pytest.raises(ConfigError, match="log_std_init"):
        PPOConfig().training(model={"free_log_std": True, "log_std_init": value}).validate()

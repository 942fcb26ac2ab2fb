"""Where Learners compute: the device from num_gpus_per_learner / num_gpus / learner_device, a
Learner on its own device training a copy of the module, and the EnvRunner getting its weights.

CI has no GPU, so the copy path runs with learner_device="cpu" (an explicit device always gives
the Learner its own copy), and CUDA placement is checked with torch's device count patched.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.core.learner.device import learner_device, learner_trains_a_copy
from rlx.utils.errors import ConfigError


def _frozen(config):
    config.freeze()
    return config


@pytest.fixture
def two_fake_cuda_devices(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)


def test_cpu_unless_gpus_are_asked_for():
    assert learner_device(_frozen(PPOConfig())) == torch.device("cpu")
    assert not learner_trains_a_copy(_frozen(PPOConfig()))
    assert learner_device(_frozen(PPOConfig().resources(num_gpus=2, _fake_gpus=True))) == torch.device("cpu")


def test_gpu_settings_choose_a_cuda_device(two_fake_cuda_devices):
    assert learner_device(_frozen(PPOConfig().learners(num_gpus_per_learner=1, local_gpu_idx=1))) == \
        torch.device("cuda", 1)
    # The old stack's num_gpus means the driver's Learner.
    assert learner_device(_frozen(PPOConfig().resources(num_gpus=0.5))) == torch.device("cuda", 0)
    # A learner process uses the device its process group selected for its rank.
    config = _frozen(PPOConfig().learners(num_learners=2, num_gpus_per_learner=1))
    assert learner_device(config) == torch.device("cuda", 1)
    assert learner_trains_a_copy(_frozen(PPOConfig().learners(num_gpus_per_learner=1)))


def test_missing_devices_are_clear_errors():
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="num_gpus_per_learner.*CUDA device"):
            learner_device(_frozen(PPOConfig().learners(num_gpus_per_learner=1)))
    with pytest.raises(ConfigError, match="local_gpu_idx|CUDA"):
        learner_device(_frozen(PPOConfig().learners(learner_device="cuda:63")))
    with pytest.raises(ConfigError, match="torch device"):
        PPOConfig().learners(learner_device="gpu-please")


def _train_twice(config, iterations: int):
    algo = config.build()
    try:
        returns = [algo.train()["env_runners"]["episode_return_mean"] for _ in range(iterations)]
        learner_module = algo.learner.rl_module
        runner_module = algo.env_runner.module
        weights = {k: v.clone() for k, v in runner_module.state_dict().items()}
        return returns, weights, learner_module is runner_module, learner_module.state_dict()
    finally:
        algo.stop()


@pytest.mark.parametrize("make_config, iterations", [
    (lambda: PPOConfig().environment("CartPole-v1").training(train_batch_size=400, minibatch_size=100), 3),
    (lambda: DQNConfig().environment("CartPole-v1").training(num_steps_sampled_before_learning_starts=200)
     .reporting(min_sample_timesteps_per_iteration=300), 3),
    (lambda: SACConfig().environment("Pendulum-v1")
     .training(num_steps_sampled_before_learning_starts=200, q_model_config={"fcnet_hiddens": [32, 32]},
               policy_model_config={"fcnet_hiddens": [32, 32]})
     .reporting(min_sample_timesteps_per_iteration=200, min_time_s_per_iteration=0), 2),
], ids=["PPO", "DQN", "SAC"])
def test_a_learner_on_its_own_device_trains_a_copy_and_matches_the_shared_module_run(make_config, iterations):
    shared = _train_twice(make_config().debugging(seed=3), iterations)
    copied = _train_twice(make_config().learners(learner_device="cpu").debugging(seed=3), iterations)
    assert shared[2] and not copied[2]
    # The EnvRunner acted with the Learner's newest weights after every update: the same run.
    np.testing.assert_allclose(copied[0], shared[0])
    for key, value in shared[1].items():
        torch.testing.assert_close(copied[1][key], value)
        torch.testing.assert_close(copied[3][key], value)


def test_checkpoints_of_a_device_learner_restore(tmp_path):
    from rlx.algorithms.algorithm import Algorithm

    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=200, minibatch_size=100)
            .learners(learner_device="cpu").debugging(seed=1).build())
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt"))
        obs = np.zeros(4, np.float32)
        expected = algo.compute_single_action(obs, explore=False, full_fetch=True)[2]["action_dist_inputs"]
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(path)
    try:
        assert restored.learner.rl_module is not restored.env_runner.module
        got = restored.compute_single_action(obs, explore=False, full_fetch=True)[2]["action_dist_inputs"]
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        restored.train()
    finally:
        restored.stop()


def test_fake_gpus_with_learner_processes_run_on_the_cpu():
    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=200, minibatch_size=100)
            .learners(num_learners=1, num_gpus_per_learner=1).resources(_fake_gpus=True).build())
    try:
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()

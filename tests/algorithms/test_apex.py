"""APEX-DQN and APEX-DDPG: per-worker exploration, asynchronous sampling into prioritized replay,
a learner thread updating concurrently with priorities written back, config, names, learning."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from rlx.algorithms.apex_ddpg import ApexDDPG, ApexDDPGConfig
from rlx.algorithms.apex_dqn import ApexDQN, ApexDQNConfig
from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config
from rlx.utils.errors import ConfigError

SMALL = {"lr": 2e-3, "train_batch_size": 32, "target_network_update_freq": 500,
         "num_steps_sampled_before_learning_starts": 100, "replay_buffer_config": {"capacity": 5000}}


def small_dqn(num_env_runners: int = 0, **training) -> ApexDQNConfig:
    """A quick APEX-DQN config on CartPole."""
    config = (ApexDQNConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=num_env_runners, rollout_fragment_length=8)
              .training(**{**SMALL, "training_intensity": 4, **training})
              .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=200)
              .debugging(seed=0))
    config.model.update({"fcnet_hiddens": [32]})
    return config


def test_rllib_apex_defaults_and_options():
    c = ApexDQNConfig()
    assert c.num_env_runners == 32 and c.n_step == 3 and c.train_batch_size == 512
    assert c.training_intensity == 1 and c.target_network_update_freq == 500_000
    assert c.num_steps_sampled_before_learning_starts == 50_000 and c.rollout_fragment_length == 50
    assert c.replay_buffer_config["type"] == "MultiAgentPrioritizedReplayBuffer"
    assert c.replay_buffer_config["capacity"] == 2_000_000
    assert c.replay_buffer_config["prioritized_replay_alpha"] == 0.6
    assert c.exploration_config["type"] == "PerWorkerEpsilonGreedy"
    assert ApexDDPGConfig().exploration_config["type"] == "PerWorkerGaussianNoise"
    assert ApexDDPGConfig().n_step == 3
    # Accepted RLlib options; the sampler one is the old name of the runners' request limit.
    c = small_dqn().training(max_requests_in_flight_per_sampler_worker=3,
                             max_requests_in_flight_per_replay_worker=float("inf"), timeout_s_replay_manager=1.0)
    c.validate()
    assert c.max_requests_in_flight_per_env_runner == 3
    with pytest.raises(ConfigError, match="prioritized"):
        small_dqn().training(replay_buffer_config={"type": "ReplayBuffer", "capacity": 100}).validate()
    with pytest.raises(ConfigError, match="training_intensity"):
        small_dqn().training(training_intensity=None).validate()


def test_names_registry_and_old_import_paths():
    import rlx.agents.ddpg as ddpg_agents
    import rlx.agents.dqn as dqn_agents

    assert get_algorithm_class("APEX") is ApexDQN and isinstance(get_algorithm_config("APEX"), ApexDQNConfig)
    assert get_algorithm_class("APEX_DDPG") is ApexDDPG
    assert dqn_agents.ApexTrainer is ApexDQN and dqn_agents.APEX_DEFAULT_CONFIG["n_step"] == 3
    assert ddpg_agents.ApexDDPGTrainer is ApexDDPG
    from rlx.agents.ddpg.apex import ApexDDPGTrainer
    from rlx.agents.dqn.apex import APEX_DEFAULT_CONFIG, ApexTrainer

    assert ApexTrainer is ApexDQN and ApexDDPGTrainer is ApexDDPG and APEX_DEFAULT_CONFIG["num_env_runners"] == 32


def test_per_worker_epsilons_follow_the_apex_formula():
    algo = small_dqn(num_env_runners=4).env_runners(env_runner_backend="thread").build()
    try:
        eps = dict(algo.env_runner_group.foreach_env_runner(
            lambda r: (r.worker_index, r.exploration.epsilon(10**6)), local_env_runner=False))
    finally:
        algo.stop()
    n = 4
    expected = {i + 1: 0.4 ** (1 + 7 * i / (n - 1)) for i in range(n)}
    assert eps.keys() == expected.keys()
    for index, value in eps.items():
        assert value == pytest.approx(expected[index])


def test_per_worker_noise_scales_follow_the_apex_formula():
    config = (ApexDDPGConfig().environment("Pendulum-v1").env_runners(num_env_runners=3, env_runner_backend="thread")
              .training(actor_hiddens=[8], critic_hiddens=[8], replay_buffer_config={"capacity": 1000}))
    algo = config.build()
    try:
        scales = dict(algo.env_runner_group.foreach_env_runner(
            lambda r: (r.worker_index, r.exploration.scale(10**6)), local_env_runner=False))
    finally:
        algo.stop()
    assert scales == pytest.approx({1: 0.4, 2: 0.4 ** 4.5, 3: 0.4 ** 8})


def small_ddpg() -> ApexDDPGConfig:
    """A quick APEX-DDPG config on Pendulum."""
    return (ApexDDPGConfig().environment("Pendulum-v1").env_runners(num_env_runners=0, rollout_fragment_length=8)
            .training(**{**SMALL, "training_intensity": 4, "actor_hiddens": [16], "critic_hiddens": [16]})
            .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=200)
            .debugging(seed=0))


@pytest.mark.parametrize("make_config", [small_dqn, small_ddpg], ids=["apex_dqn", "apex_ddpg"])
def test_priorities_are_written_back_after_updates(make_config):
    algo = make_config().build()
    try:
        buffer = algo.local_replay_buffer
        algo.train()
        assert algo._counters["num_env_steps_trained_lifetime"] > 0
        rows = np.arange(len(buffer))
        leaves = buffer._sum_tree[rows]
        # New rows get max_priority ** alpha; replayed ones got (|TD error| + eps) ** alpha.
        initial = buffer.max_priority ** buffer.alpha
        assert not np.allclose(leaves, leaves[0])
        assert (leaves != initial).sum() > 0
        before = leaves.copy()
        algo.train()
        assert not np.array_equal(buffer._sum_tree[rows], before)
    finally:
        algo.stop()


def test_learner_thread_updates_while_runners_sample():
    """With remote runners the updates run on the learner thread while sample requests are in
    flight. (Thread runners keep this test cheap; the tuned examples' CI runs in
    tests/algorithms/test_tuned_examples.py use runner processes.)"""
    algo = small_dqn(num_env_runners=2).env_runners(env_runner_backend="thread").build()
    seen: list[tuple[bool, int]] = []
    learner = algo.learner
    update = learner.update_from_batch

    def recording_update(batch, timestep):
        seen.append((threading.current_thread() is threading.main_thread(),
                     algo.env_runner_group.num_sample_requests_in_flight()))
        return update(batch, timestep)

    learner.update_from_batch = recording_update
    try:
        result = algo.train()
        while algo._counters["num_env_steps_trained_lifetime"] < 1000:
            result = algo.train()
        assert seen and not any(on_main for on_main, _ in seen)
        assert max(in_flight for _, in_flight in seen) > 0
        apex = result["apex"]
        assert apex["num_learner_updates"] > 0 and apex["env_steps_replayed_per_s"] > 0
        assert 0 < apex["learner_busy_fraction"] <= 1
        assert apex["policy_lag_mean"] >= 0
        # The thread is paused between train() calls: nothing updates now.
        count = len(seen)
        threading.Event().wait(0.2)
        assert len(seen) == count
        # Replay stays at or below training_intensity replayed steps per sampled step.
        assert result["num_env_steps_trained_lifetime"] <= 4 * result["num_env_steps_sampled_lifetime"]
    finally:
        algo.stop()


def test_checkpoint_round_trip_keeps_weights_and_counters(tmp_path):
    algo = small_dqn().build()
    try:
        algo.train()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        weights = algo.get_weights()
        replayed = algo._replayed_steps
    finally:
        algo.stop()
    restored = ApexDQN.from_checkpoint(path)
    try:
        assert restored._replayed_steps == replayed > 0
        for key, value in weights["default_policy"].items():
            np.testing.assert_array_equal(restored.get_weights()["default_policy"][key], value)
        restored.train()
    finally:
        restored.stop()


def test_apex_dqn_learns_cartpole():
    """CI bar: mean return of the last 20 episodes >= 150 within 20k env steps (driver-side
    sampling, deterministic). The tuned examples' CI runs with remote runners (APEX-DQN on
    CartPole, APEX-DDPG on Pendulum) are in tests/algorithms/test_tuned_examples.py."""
    config = small_dqn(lr=2e-3, train_batch_size=64, training_intensity=8,
                       num_steps_sampled_before_learning_starts=1000,
                       replay_buffer_config={"capacity": 50000})
    config.env_runners(rollout_fragment_length=16).reporting(metrics_num_episodes_for_smoothing=20,
                                                             min_sample_timesteps_per_iteration=1000)
    config.model.update({"fcnet_hiddens": [64], "fcnet_activation": "tanh"})
    algo = config.build()
    progress = []
    try:
        while True:
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            progress.append((result["num_env_steps_sampled_lifetime"], round(ret, 1)))
            if not math.isnan(ret) and ret >= 150:
                break
            assert result["num_env_steps_sampled_lifetime"] < 20_000, f"did not reach 150: {progress}"
    finally:
        algo.stop()

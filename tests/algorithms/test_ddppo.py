"""DD-PPO: workers (LearnerGroup ranks) that each sample with their own EnvRunner and all-reduce
gradients; identical weights on every rank, per-worker sizes, config, names, learning."""
from __future__ import annotations

import numpy as np
import pytest

from rlx.algorithms.ddppo import DDPPO, DDPPOConfig
from rlx.algorithms.registry import get_algorithm_class
from rlx.core.learner_group import LearnerGroup
from rlx.utils.errors import ConfigError


def fast_config(num_env_runners: int = 2, **training) -> DDPPOConfig:
    """The tuned example's settings (tuned_examples/ddppo/cartpole-ddppo.yaml)."""
    return (DDPPOConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=4, rollout_fragment_length=64)
            .training(**{"lr": 2e-3, "minibatch_size": 64, "num_epochs": 6, **training})
            .debugging(seed=0))


def rank_weights(algo: DDPPO) -> list[dict[str, np.ndarray]]:
    return algo.learner.foreach_learner(lambda learner: {k: np.asarray(v) for k, v in learner.get_weights().items()})


def test_rllib_defaults_options_and_names():
    import rlx.agents.ppo as ppo_agents

    c = DDPPOConfig().environment("CartPole-v1")
    assert c.num_env_runners == 2 and c.num_envs_per_env_runner == 5 and c.rollout_fragment_length == 100
    assert c.minibatch_size == 50 and c.num_epochs == 10 and c.kl_coeff == 0.0
    assert c.keep_local_weights_in_sync is True and c.torch_distributed_backend == "gloo"
    c.validate()
    assert c.train_batch_size == 500  # per worker: rollout_fragment_length * num_envs_per_env_runner
    assert DDPPOConfig().training(sgd_minibatch_size=32).minibatch_size == 32
    assert get_algorithm_class("DDPPO") is DDPPO and ppo_agents.DDPPOTrainer is DDPPO
    from rlx.agents.ppo.ddppo import DEFAULT_CONFIG, DDPPOTrainer

    assert DDPPOTrainer is DDPPO and DEFAULT_CONFIG["keep_local_weights_in_sync"] is True
    with pytest.raises(ConfigError, match="rollout_fragment_length instead"):
        DDPPOConfig().environment("CartPole-v1").training(train_batch_size=4000).validate()
    with pytest.raises(ConfigError, match="num_env_runners"):
        DDPPOConfig().environment("CartPole-v1").learners(num_learners=2).validate()
    with pytest.raises(ConfigError, match="nccl"):
        DDPPOConfig().environment("CartPole-v1").env_runners(num_gpus_per_env_runner=1).validate()


def test_without_keep_local_weights_in_sync_the_driver_gets_weights_once_per_iteration():
    algo = fast_config(num_env_runners=1, keep_local_weights_in_sync=False).build()
    try:
        start = {k: np.array(v) for k, v in algo.get_weights()["default_policy"].items()}
        algo.training_step()
        unchanged = algo.get_weights()["default_policy"]
        assert all(np.array_equal(np.asarray(unchanged[k]), v) for k, v in start.items())
        algo.train()
        driver = algo.get_weights()["default_policy"]
        worker = rank_weights(algo)[0]
        assert any(not np.array_equal(np.asarray(driver[k]), start[k]) for k in start)
        for key, value in worker.items():
            np.testing.assert_array_equal(np.asarray(driver[key]), value)
    finally:
        algo.stop()


@pytest.mark.slow
def test_workers_sample_their_own_batches_and_keep_identical_weights():
    """Two workers, each sampling with its own EnvRunner, train in lockstep. (Learning to the
    tuned example's CI bar is tests/algorithms/test_tuned_examples.py's ddppo case.)"""
    algo = fast_config().build()
    try:
        assert isinstance(algo.learner, LearnerGroup) and algo.learner.num_learners == 2
        assert algo.env_runner_group.num_remote_env_runners() == 0  # the workers sample, not runner processes
        # Each worker's SGD minibatch is its own minibatch_size (64), not a share of it.
        assert algo.learner.foreach_learner(lambda learner: learner.config.minibatch_size) == [64, 64]
        before = rank_weights(algo)[0]
        for _ in range(3):
            result = algo.train()
            # Every worker sampled 4 sub-envs x 64 steps with its own EnvRunner (worker index rank + 1).
            assert result["num_env_steps_sampled_this_iter"] == 2 * 256
            weights = rank_weights(algo)
            for key, value in weights[0].items():
                np.testing.assert_array_equal(weights[1][key], value)
            # keep_local_weights_in_sync: the driver's module holds the workers' weights.
            driver = algo.get_weights()["default_policy"]
            for key, value in weights[0].items():
                np.testing.assert_array_equal(np.asarray(driver[key]), value)
        assert any(not np.array_equal(before[k], weights[0][k]) for k in before)
        assert algo.learner.foreach_learner(lambda learner: learner._ddppo_env_runner.worker_index) == [1, 2]
        assert result["env_runners"]["num_episodes"] > 0  # the workers' episode statistics reach the driver
        assert result["num_env_steps_trained_lifetime"] == 3 * 2 * 256
    finally:
        algo.stop()


def test_without_workers_the_driver_trains_as_ppo():
    algo = fast_config(num_env_runners=0).build()
    try:
        assert not isinstance(algo.learner, LearnerGroup)
        before = {k: np.array(v) for k, v in algo.get_weights()["default_policy"].items()}
        result = algo.train()
        assert result["num_env_steps_sampled_this_iter"] >= 256
        after = algo.get_weights()["default_policy"]
        assert any(not np.array_equal(np.asarray(after[k]), v) for k, v in before.items())
    finally:
        algo.stop()

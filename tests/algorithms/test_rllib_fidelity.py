"""Valid RLlib code that rlx refused or ran differently (issue 31, items 4 and 6), written as an
RLlib user writes it, with the prefix changed. Each test failed before the fix it covers."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.callbacks.callbacks import RLlibCallback


@pytest.mark.parametrize("config_class, env", [(DQNConfig, "CartPole-v1"), (SACConfig, "Pendulum-v1")])
def test_replay_algorithms_sample_whole_episodes_with_complete_episodes(config_class, env):
    lengths: list[int] = []

    class EpisodeLengths(RLlibCallback):
        def on_episode_end(self, *, episode, **kwargs):
            lengths.append(len(episode))

    config = (config_class().environment(env)
              .env_runners(batch_mode="complete_episodes", rollout_fragment_length=8)
              .callbacks(EpisodeLengths)
              .reporting(min_sample_timesteps_per_iteration=50)
              .debugging(seed=0))
    algo = config.build()
    try:
        result = algo.train()
        # Every sampled step belongs to an episode that ended inside the sample: nothing is cut.
        assert result["num_env_steps_sampled_lifetime"] == sum(lengths) > 0
        assert len(algo.local_replay_buffer) == sum(lengths)
    finally:
        algo.stop()


def test_exploration_config_is_accepted_in_env_runners_as_in_rllib():
    config = DQNConfig().environment("CartPole-v1").env_runners(
        exploration_config={"type": "EpsilonGreedy", "initial_epsilon": 0.7, "final_epsilon": 0.1,
                            "epsilon_timesteps": 1000})
    config.validate()
    assert config.exploration_config["initial_epsilon"] == 0.7


def test_the_generic_config_has_rllibs_minibatch_settings_and_ppo_keeps_its_own():
    config = AlgorithmConfig().training(minibatch_size=32, num_epochs=3, shuffle_batch_per_epoch=True)
    assert (config.minibatch_size, config.num_epochs, config.shuffle_batch_per_epoch) == (32, 3, True)
    assert (AlgorithmConfig().minibatch_size, AlgorithmConfig().num_epochs) == (None, 1)  # RLlib's base defaults
    DQNConfig().environment("CartPole-v1").training(minibatch_size=64).validate()
    assert PPOConfig().num_epochs > 1 and PPOConfig().minibatch_size is not None


def test_turning_rllibs_new_api_stack_off_runs_on_rlxs_stack_and_says_so(caplog):
    import rlx.algorithms.algorithm_config as algorithm_config

    algorithm_config._old_api_stack_logged = False
    with caplog.at_level(logging.WARNING):
        config = (PPOConfig()
                  .api_stack(enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False)
                  .environment("CartPole-v1")
                  .training(train_batch_size=200, minibatch_size=50, num_epochs=1))
        algo = config.build()
    try:
        assert algo.train()["training_iteration"] == 1
        assert algo.get_policy().compute_single_action(np.zeros(4, np.float32))[0] in (0, 1)
    finally:
        algo.stop()
    assert caplog.text.count("old API stack was asked for") == 1


def test_foreach_worker_with_index_passes_the_index_first_as_seed_003_shows():
    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=32).build()
    try:
        new_order = algo.workers.foreach_worker_with_index(lambda _id, worker: (_id, type(worker).__name__))
        old_order = algo.workers.foreach_worker_with_index(lambda ev, i: (i, type(ev).__name__))
        assert new_order == old_order and new_order[0][0] == 0 and isinstance(new_order[0][1], str)
        weights = algo.workers.foreach_worker_with_index(lambda _id, worker: worker.get_policy().get_weights())
        assert weights[0].keys() == algo.get_policy().get_weights().keys()
    finally:
        algo.stop()


def test_default_resource_request_reserves_custom_resources_and_learners():
    pytest.importorskip("ray.tune")
    from rlx.algorithms.ppo import PPO

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, num_cpus_per_env_runner=1)
              .resources(custom_resources_per_worker={"sensor": 0.5})
              .learners(num_learners=2, num_cpus_per_learner=2))
    bundles = PPO.default_resource_request(config).bundles
    assert bundles[0] == {"CPU": 1.0}
    assert bundles[1:3] == [{"CPU": 1.0, "sensor": 0.5}] * 2
    assert bundles[3:] == [{"CPU": 2.0}] * 2


def test_an_input_registered_with_tune_register_input_is_read():
    pytest.importorskip("ray.tune")
    from ray.tune.registry import register_input

    from rlx.algorithms.bc import BCConfig
    from rlx.offline.input_reader import InputReader
    from rlx.policy.sample_batch import SampleBatch

    class ConstantReader(InputReader):
        """Always the same 32 CartPole rows, all with action 1."""

        def __init__(self, ioctx):
            self.ioctx = ioctx

        def next(self):
            n = 32
            obs = np.zeros((n, 4), np.float32)
            return SampleBatch({"obs": obs, "new_obs": obs, "actions": np.ones(n, np.int64),
                                "rewards": np.ones(n, np.float32), "terminateds": np.zeros(n, bool),
                                "truncateds": np.zeros(n, bool), "eps_id": np.zeros(n, np.int64)})

    register_input("fidelity_constant_reader", lambda ioctx: ConstantReader(ioctx))
    algo = (BCConfig().environment("CartPole-v1").offline_data(input_="fidelity_constant_reader")
            .training(train_batch_size=32, lr=0.01).debugging(seed=0).build())
    try:
        for _ in range(20):
            result = algo.train()
        assert result["num_env_steps_trained_lifetime"] == 20 * 32
        # It learned the reader's data: action 1 everywhere.
        assert algo.compute_single_action(np.zeros(4, np.float32), explore=False) == 1
    finally:
        algo.stop()


def test_legacy_keys_that_act_are_documented_as_acting():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    for key in ("monitor", "multiagent", "evaluation_num_episodes"):
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{key}` |"))
        assert "no effect" not in row and "sets" in row, row
    config = PPOConfig().update_from_dict({"monitor": True, "evaluation_num_episodes": 5})
    assert config.render_env is True and config.evaluation_duration == 5



def test_ppo_takes_rllibs_common_config_dict_whole():
    from rlx.agents.trainer import COMMON_CONFIG

    config = PPOConfig.from_dict({**COMMON_CONFIG, "env": "CartPole-v1", "train_batch_size": 256})
    config.validate()
    # RLlib's base config has minibatch_size=None: the whole train batch is one minibatch.
    assert config.minibatch_size == 256

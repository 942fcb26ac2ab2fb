"""Config values the machine cannot hold, or that cannot run, are refused at validation with a
ConfigError naming the key (issue 33, items 4, 6 and 7); values RLlib accepts and that can run
stay accepted."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import show
from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.utils.errors import CheckpointError, ConfigError

NAN, INF = float("nan"), float("inf")
TOO_MANY = 64 * (os.cpu_count() or 1) + 1


def cartpole_ppo() -> PPOConfig:
    return PPOConfig().environment("CartPole-v1")


def within(seconds: float, fn):
    """Run fn() on a thread; fail if it does not end within `seconds` (a hang), else return or
    raise what it did."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"no answer within {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.mark.parametrize("section, key, value", [
    ("env_runners", "num_env_runners", 10 ** 4),
    ("env_runners", "num_env_runners", 10 ** 12),
    ("learners", "num_learners", 10 ** 4),
    ("evaluation", "evaluation_num_env_runners", 10 ** 12),
    ("env_runners", "num_env_runners", TOO_MANY),
])
def test_process_counts_the_machine_cannot_hold_are_refused_at_validate(section, key, value):
    config = getattr(cartpole_ppo(), section)(**{key: value})
    with pytest.raises(ConfigError, match=key) as info:
        within(10, config.validate)
    assert str(64 * (os.cpu_count() or 1)) in str(info.value)  # says the limit


def test_sub_env_processes_count_as_processes():
    config = cartpole_ppo().env_runners(num_envs_per_env_runner=TOO_MANY, remote_worker_envs=True)
    with pytest.raises(ConfigError, match="num_envs_per_env_runner"):
        config.validate()
    cartpole_ppo().env_runners(num_envs_per_env_runner=TOO_MANY).validate()  # sub-envs in one process


def test_counts_placed_by_ray_are_left_to_ray():
    config = cartpole_ppo().env_runners(num_env_runners=10 ** 4, env_runner_backend="ray")
    config.validate()  # Ray refuses what it cannot place; rlx does not guess its cluster


@pytest.mark.parametrize("section, kwargs, key", [
    ("training", {"train_batch_size": 10 ** 12}, "train_batch_size"),
    ("training", {"train_batch_size_per_learner": 10 ** 12}, "train_batch_size_per_learner"),
    ("env_runners", {"rollout_fragment_length": 10 ** 12}, "rollout_fragment_length"),
    ("env_runners", {"num_envs_per_env_runner": 10 ** 12}, "num_envs_per_env_runner"),
    ("framework", {"torch_num_threads": 10 ** 4}, "torch_num_threads"),
    ("learners", {"num_cpus_per_learner": 10 ** 12}, "num_cpus_per_learner"),
])
def test_sizes_beyond_the_machine_fail_at_validation_not_as_memory_errors(section, kwargs, key):
    config = getattr(cartpole_ppo(), section)(**kwargs)
    with pytest.raises(ConfigError, match=key):
        within(10, config.validate)


def test_a_huge_replay_capacity_is_refused_before_anything_is_allocated():
    with pytest.raises(ConfigError, match="capacity"):
        within(10, lambda: DQNConfig().training(replay_buffer_config={"capacity": 10 ** 12}))


@pytest.mark.parametrize("config_cls, section, key, value", [
    (DQNConfig, "training", "adam_epsilon", 1e308),
    (DQNConfig, "training", "target_network_update_freq", 2 ** 70),
    (SACConfig, "training", "target_entropy", NAN),
    (SACConfig, "training", "target_entropy", INF),
    (SACConfig, "training", "initial_alpha", 1e308),
    (PPOConfig, "training", "lr", 1e308),
    (PPOConfig, "training", "lr", [[0, 1e-3], [100, 1e308]]),
    (PPOConfig, "training", "num_epochs", 10 ** 12),
    (PPOConfig, "training", "gamma", 10 ** 5000),
    (PPOConfig, "training", "train_batch_size", 10 ** 5000),
    (PPOConfig, "env_runners", "sample_timeout_s", 1e308),
    (PPOConfig, "fault_tolerance", "delay_between_env_runner_restarts_s", 1e308),
    (PPOConfig, "environment", "clip_rewards", 10 ** 400),
    (PPOConfig, "debugging", "seed", 1e308),
    (DQNConfig, "training", "n_step", 2 ** 70),
    (DQNConfig, "training", "num_atoms", 10 ** 12),
], ids=lambda v: show(v)[:40] if not isinstance(v, type) else v.__name__)
def test_values_that_cannot_run_are_config_errors_naming_the_key(config_cls, section, key, value):
    def configure():
        config = getattr(config_cls(), section)(**{key: value})
        config.environment("CartPole-v1" if config_cls is not SACConfig else "Pendulum-v1").validate()

    with pytest.raises(ConfigError, match=key):
        within(10, configure)


@pytest.mark.parametrize("config_cls, section, key, value", [
    (DQNConfig, "training", "epsilon", 0.5),  # a schedule [[t, eps], ...] is needed
    (PPOConfig, "learners", "learner_device", 2 ** 70),
    (PPOConfig, "multi_agent", "policies", {"p0": 1}),
    (PPOConfig, "rl_module", "rl_module_spec", 3),
    (PPOConfig, "debugging", "logger_creator", "fast"),
    (PPOConfig, "env_runners", "module_to_env_connector", "fast"),
    (PPOConfig, "training", "learner_class", "fast"),
    (PPOConfig, "env_runners", "env_runner_cls", "not a path"),
    (PPOConfig, "experimental", "_torch_grad_scaler_class", "fast"),
])
def test_wrong_types_are_config_errors_naming_the_key_not_raw_errors(config_cls, section, key, value):
    with pytest.raises(ConfigError, match=key):
        getattr(config_cls(), section)(**{key: value})


def test_a_huge_num_envs_in_a_checkpoint_is_refused_not_a_hang(tmp_path: Path):
    config = cartpole_ppo().env_runners(num_env_runners=0).training(
        train_batch_size=32, minibatch_size=32, num_epochs=1)
    algo = config.build()
    try:
        checkpoint = Path(algo.save(str(tmp_path / "ckpt")).checkpoint.path)
    finally:
        algo.stop()
    config_file = checkpoint / "config.json"
    data = json.loads(config_file.read_text())
    data["num_envs_per_env_runner"] = 1e308
    config_file.write_text(json.dumps(data))
    with pytest.raises((ConfigError, CheckpointError), match="num_envs_per_env_runner"):
        within(30, lambda: Algorithm.from_checkpoint(checkpoint))


def test_a_huge_num_envs_in_a_config_dict_is_refused():
    with pytest.raises(ConfigError, match="num_envs_per_env_runner"):
        within(10, lambda: AlgorithmConfig.from_dict({"num_envs_per_env_runner": 1e308}))


@pytest.mark.parametrize("section, kwargs", [
    ("env_runners", {"num_env_runners": 4}),
    ("training", {"train_batch_size": 10 ** 6}),
    ("training", {"lr": 10.0, "grad_clip": 1e30}),  # unusual, but runs as RLlib would
    ("training", {"num_epochs": 10 ** 4}),
    ("env_runners", {"sample_timeout_s": None}),
    ("env_runners", {"num_envs_per_env_runner": 1000}),
    ("debugging", {"seed": 2 ** 40}),
    ("reporting", {"min_time_s_per_iteration": 10 ** 6}),
    ("fault_tolerance", {"max_num_env_runner_restarts": 10 ** 12}),
    ("env_runners", {"env_runner_cls": "rlx.env.single_agent_env_runner:SingleAgentEnvRunner"}),
])
def test_values_rllib_accepts_and_that_can_run_stay_accepted(section, kwargs):
    getattr(cartpole_ppo(), section)(**kwargs).validate()


def test_the_rows_limit_follows_the_machine_memory(monkeypatch):
    from rlx.algorithms import config_bounds

    monkeypatch.setattr(config_bounds, "machine_memory_bytes", lambda: 1024 * 1024)  # 1 MiB
    cartpole_ppo().training(train_batch_size=65536).validate()  # 1 MiB at 16 bytes a row
    with pytest.raises(ConfigError, match="train_batch_size.*1.0 MiB"):
        cartpole_ppo().training(train_batch_size=65537).validate()


@pytest.mark.parametrize("algo, key, value", [
    ("ES", "noise_size", 10 ** 12),  # a float32 noise table of 3.6 TiB
    ("ARS", "noise_size", 10 ** 12),
    ("CQL", "num_actions", 10 ** 12),
    ("ES", "episodes_per_batch", 10 ** 12),
    ("ARS", "num_rollouts", 10 ** 12),
    ("A3C", "grads_per_step", 10 ** 12),
    ("APPO", "circular_buffer_iterations_per_batch", 10 ** 12),
    ("DQN", "training_intensity", 1e12),
])
def test_algorithm_sizes_and_loop_counts_that_cannot_finish_are_refused(algo, key, value):
    from rlx.algorithms.registry import get_algorithm_class

    config = get_algorithm_class(algo).get_default_config()
    with pytest.raises(ConfigError, match=key):
        within(10, lambda: config.training(**{key: value}))


def test_a_train_batch_derived_from_the_fragment_names_the_fragment():
    from rlx.algorithms.ddppo import DDPPOConfig

    config = DDPPOConfig().environment("CartPole-v1").env_runners(rollout_fragment_length=10 ** 12)
    with pytest.raises(ConfigError, match="rollout_fragment_length"):
        config.validate()


def test_cpus_per_env_runner_count_only_for_remote_runners_rlx_starts():
    cartpole_ppo().env_runners(num_env_runners=0, num_cpus_per_env_runner=TOO_MANY).validate()
    with pytest.raises(ConfigError, match="num_cpus_per_env_runner"):
        cartpole_ppo().env_runners(num_env_runners=1, num_cpus_per_env_runner=10 ** 12).validate()

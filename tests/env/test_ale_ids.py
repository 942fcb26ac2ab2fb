"""'ALE/<Game>-v5' ids without the 'ale_py:' prefix: in Python, in a worker process that has
not registered ale-py's games, and on the CLI's path (`rlx train --env ALE/Pong-v5`); the
Atari tuned examples build; CartPole settings on an Atari game are told once, with the tuned
example to use. ale-py is in the dev extra."""
from __future__ import annotations

import logging
import os
import sys

import gymnasium as gym
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.cli.experiments import ExperimentSpec, load_experiment_file
from rlx.cli.main import parse_args
from rlx.cli.outcome import RunSettings
from rlx.cli.train import build_config
from rlx.cli.tuned_examples import list_tuned_examples

ATARI_EXAMPLES = ("pong-ppo", "breakout-ppo", "pong-dqn", "breakout-dqn", "pong-appo", "breakout-appo")


@pytest.fixture
def ale_unregistered(monkeypatch):
    """As in a fresh process: no ALE game registered and ale-py not imported (restored after)."""
    removed = {k: gym.registry.pop(k) for k in [k for k, spec in gym.registry.items() if _from_ale(spec)]}
    monkeypatch.delitem(sys.modules, "ale_py", raising=False)  # importing it registers the games again
    yield
    for key, spec in removed.items():  # (games the test registered again stay: ale-py stays imported)
        gym.registry.setdefault(key, spec)


def _from_ale(spec) -> bool:
    return str(spec.entry_point).startswith("ale_py")


def test_ale_id_builds_in_python_and_samples_in_a_worker_process(ale_unregistered):
    # The driver resolves the id to build the module; the EnvRunner process resolves it itself
    # (its registry is not the driver's), as Ray actors and Tune trials do.
    config = (PPOConfig().environment("ALE/Pong-v5")
              .env_runners(num_env_runners=1, num_envs_per_env_runner=1, rollout_fragment_length=8)
              .training(train_batch_size=8, minibatch_size=8, num_epochs=1))
    algo = config.build_algo()
    try:
        assert algo.get_module().observation_space.shape == (84, 84, 4)  # DeepMind preprocessing
        batch = algo.env_runner_group.sample(num_timesteps=8)
        assert batch["obs"].shape[-3:] == (84, 84, 4)
        [pid] = algo.env_runner_group.foreach_env_runner(lambda runner: os.getpid(), local_env_runner=False)
        assert pid != os.getpid()
    finally:
        algo.stop()


def test_cli_env_argument_takes_an_ale_id_without_prefix(ale_unregistered):
    args = parse_args(["train", "--algo", "PPO", "--env", "ALE/Pong-v5"])
    config = build_config(ExperimentSpec(name="default"), RunSettings(algo=args.algo, env=args.env))
    assert config.env == "ALE/Pong-v5" and config.is_atari


def test_atari_tuned_examples_are_listed():
    names = {e.name for e in list_tuned_examples()}
    assert set(ATARI_EXAMPLES) <= names


@pytest.mark.parametrize("name", ATARI_EXAMPLES)
def test_atari_tuned_example_is_a_valid_config(name):
    [example] = [e for e in list_tuned_examples() if e.name == name]
    [spec] = load_experiment_file(str(example.path))
    config = build_config(spec, RunSettings())
    assert config.is_atari and config.clip_rewards is True
    assert config.num_envs_per_env_runner >= 8
    assert config.model["conv_filters"][0][0] == 32  # the Nature CNN
    assert spec.stop["num_env_steps_sampled_lifetime"] == 10_000_000


@pytest.mark.parametrize("name", ["pong-ppo", "breakout-dqn", "pong-appo"])
def test_atari_tuned_example_builds_with_tiny_batches(name):
    [example] = [e for e in list_tuned_examples() if e.name == name]
    [spec] = load_experiment_file(str(example.path))
    tiny = {"num_env_runners": 0, "num_envs_per_env_runner": 1, "rollout_fragment_length": 4, "train_batch_size": 16}
    if name.endswith("ppo"):
        tiny["minibatch_size"] = 16
    if name.endswith("dqn"):
        tiny["replay_buffer_config"] = {"type": "ReplayBuffer", "capacity": 64}
    algo = build_config(spec, RunSettings(config=tiny)).build_algo()
    try:
        module = algo.get_module()
        assert any(isinstance(m, torch.nn.Conv2d) for m in module.modules())
        assert module.observation_space.shape == (84, 84, 4)
    finally:
        algo.stop()


def test_cartpole_batches_on_an_atari_game_warn_once_naming_the_tuned_example(caplog):
    from rlx.algorithms import image_env_advice

    image_env_advice._TOLD.clear()
    config = (PPOConfig().environment("ALE/Breakout-v5")
              .env_runners(num_envs_per_env_runner=1)
              .training(train_batch_size=64, minibatch_size=32))
    with caplog.at_level(logging.WARNING, logger="rlx"):
        for _ in range(2):
            config.build_algo().stop()
    told = [r.getMessage() for r in caplog.records if "look like CartPole's" in r.getMessage()]
    assert len(told) == 1
    assert "train batches of 64 env steps" in told[0] and "rlx train file breakout-ppo" in told[0]


def test_tuned_atari_settings_are_not_warned_about(caplog):
    from rlx.algorithms import image_env_advice

    image_env_advice._TOLD.clear()
    [example] = [e for e in list_tuned_examples() if e.name == "pong-ppo"]
    [spec] = load_experiment_file(str(example.path))
    config = build_config(spec, RunSettings(config={"num_envs_per_env_runner": 1}))
    with caplog.at_level(logging.WARNING, logger="rlx"):
        config.build_algo().stop()
    assert not [r for r in caplog.records if "look like CartPole's" in r.getMessage()]


def test_an_mlp_on_image_observations_is_a_cartpole_sign():
    from rlx.algorithms.image_env_advice import cartpole_signs

    class MLPOnFrames(torch.nn.Module):
        observation_space = gym.spaces.Box(0, 255, (84, 84, 4))

        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(84 * 84 * 4, 2))

    config = PPOConfig().environment("ALE/Pong-v5").training(train_batch_size=4000)
    assert cartpole_signs(config, MLPOnFrames()) == [
        "a model without convolutions (an MLP) on 84x84x4 image observations"]

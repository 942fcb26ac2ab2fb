"""rlx's speed defaults never make valid RLlib code fail or report differently.

- Defaults the user did not set adapt to what the user did set (minibatch_size to a small
  train batch or to the user's own lr, the number of sub-envs to the env's episode limit); explicit values stay.
- Remote EnvRunners start with the learner's weights and filter, and the driver's runner
  builds sub-envs only when it needs them (create_env_on_local_worker).
- Options with no effect refuse the values they would ignore; compute_single_action names
  the expected observation shape.
"""
from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPO, PPOConfig
from rlx.callbacks.callbacks import RLlibCallback
from rlx.utils.errors import ConfigError, NotSupportedYetError
from cli_helpers import run_rlx
from test_callbacks import LogAcrobotAngle  # seed 004, Example 2, verbatim

# ----------------------------------------------------------------------------- minibatch_size


@pytest.mark.parametrize("batch", [200, 400, 500])
def test_small_train_batch_trains_with_the_default_minibatch(batch):
    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=batch).debugging(seed=0).build()
    # RLlib's default of 128 where rlx's 512 does not fit.
    assert algo.config.minibatch_size == min(128, batch)
    result = algo.train()
    assert result["num_env_steps_sampled_lifetime"] >= batch
    assert result["learners"]["default_policy"]["num_minibatch_updates"] >= 1
    algo.stop()


def test_large_train_batch_keeps_rlx_default_minibatch():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=1024)
    config.validate()
    assert config.minibatch_size == 512


def test_user_learning_rate_brings_rllibs_minibatch_size():
    # rlx's 512 is tuned with rlx's lr; an lr tuned on RLlib gets RLlib's 128 (4x the updates).
    config = PPOConfig().environment("CartPole-v1").training(lr=3e-4, train_batch_size=4000)
    config.validate()
    assert config.minibatch_size == 128
    assert not config.is_user_set("minibatch_size")
    explicit = PPOConfig().environment("CartPole-v1").training(lr=3e-4, minibatch_size=256)
    explicit.validate()
    assert explicit.minibatch_size == 256


def test_explicit_contradictory_minibatch_is_an_error():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=400, minibatch_size=512)
    with pytest.raises(ConfigError, match=r"minibatch_size \(512\) is larger than the train batch \(400\)"):
        config.build()


def test_minibatch_adapts_again_when_the_batch_changes_after_validate():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=400)
    config.validate()
    assert config.minibatch_size == 128
    config.training(train_batch_size=4000)
    config.validate()
    assert config.minibatch_size == 512
    assert not config.is_user_set("minibatch_size")
    assert config.is_user_set("train_batch_size")


def test_old_dict_api_with_small_batch_trains():
    algo = PPO(config={"train_batch_size": 500, "seed": 0}, env="CartPole-v1")
    assert algo.config.minibatch_size == 128
    algo.train()
    algo.stop()


def test_to_dict_round_trip_keeps_defaults_adaptive():
    # Tune's param_space and checkpoints carry every key, defaults included.
    as_dict = PPOConfig().environment("CartPole-v1").training(train_batch_size=300).to_dict()
    config = PPOConfig.from_dict(as_dict)
    assert not config.is_user_set("minibatch_size")
    assert config.is_user_set("train_batch_size")
    config.validate()
    assert config.minibatch_size == 128


def test_cli_config_with_small_batch_trains(tmp_path):
    out = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", '{"train_batch_size": 500}',
                  "--stop", '{"training_iteration": 1}', "--no-progress", results_dir=tmp_path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    results = list(tmp_path.rglob("result.json"))
    assert len(results) == 1
    first = json.loads(results[0].read_text().splitlines()[0])
    assert first["num_env_steps_sampled_lifetime"] >= 500


def test_experiment_yaml_with_small_batch_trains(tmp_path):
    (tmp_path / "exp.yaml").write_text(
        "small-batch:\n  env: CartPole-v1\n  run: PPO\n  stop:\n    training_iteration: 1\n"
        "  config:\n    train_batch_size: 200\n")
    out = run_rlx("train", "file", "exp.yaml", "--no-progress", results_dir=tmp_path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr


# ----------------------------------------------------------------------------- sub-envs per runner


def test_sub_envs_keep_each_share_at_least_one_episode_limit():
    config = PPOConfig().environment("Acrobot-v1")
    config.validate()
    # 4000 steps over 8 sub-envs = 500 each: Acrobot-v1's limit.
    assert config.resolve_num_envs_per_env_runner(500) == 8
    config.training(train_batch_size=2000)
    assert config.resolve_num_envs_per_env_runner(500) == 4
    assert config.resolve_num_envs_per_env_runner(1000) == 2
    assert config.resolve_num_envs_per_env_runner(None) == 8
    config.training(train_batch_size=300)
    assert config.resolve_num_envs_per_env_runner(500) == 1


def test_sub_envs_respect_a_user_rollout_fragment_length():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=400) \
        .env_runners(rollout_fragment_length=200)
    assert config.resolve_num_envs_per_env_runner(None) == 2


def test_sub_envs_share_is_per_remote_runner():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=4000) \
        .env_runners(num_env_runners=2)
    assert config.resolve_num_envs_per_env_runner(500) == 4


def test_sub_envs_keep_one_column_per_learner():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256).learners(num_learners=2)
    assert config.resolve_num_envs_per_env_runner(500) == 2


def test_explicit_sub_env_count_is_kept():
    config = PPOConfig().environment("Acrobot-v1").training(train_batch_size=2000) \
        .env_runners(num_envs_per_env_runner=8)
    assert config.resolve_num_envs_per_env_runner(500) == 8


def test_built_algorithm_reports_the_sub_envs_it_uses():
    algo = PPOConfig().environment("Acrobot-v1").training(train_batch_size=1000).build()
    assert algo.env_runner.num_envs == 2
    assert algo.config.num_envs_per_env_runner == 2
    algo.stop()


def test_time_limit_of_a_registered_creator_is_found():
    from rlx import register_env

    register_env("short-cartpole", lambda ctx: gym.make("CartPole-v1", max_episode_steps=250))
    algo = PPOConfig().environment("short-cartpole").training(train_batch_size=1000).build()
    assert algo.env_runner.num_envs == 4
    algo.stop()


@pytest.mark.slow
def test_seed_log_acrobot_angle_example_runs_literally(capsys):
    config = (
        PPOConfig()
        .environment("Acrobot-v1")
        .callbacks(
            callbacks_class=LogAcrobotAngle,
        )
    )
    ppo = config.build()
    for i in range(10):
        results = ppo.train()
        print(
            f"iter={i} "
            f"theta1_mean={results['env_runners']['theta1_mean']} "
            f"R={results['env_runners']['episode_return_mean']}"
        )
    ppo.stop()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [f"iter={i}" for i in range(10)]
    first_theta = float(lines[0].split()[1].split("=")[1])
    assert -180.0 <= first_theta <= 180.0


def test_seed_log_acrobot_angle_with_rllib_batch_and_one_remote_runner():
    config = (PPOConfig().environment("Acrobot-v1").callbacks(callbacks_class=LogAcrobotAngle)
              .env_runners(num_env_runners=1).training(train_batch_size=2000, num_epochs=1))
    ppo = config.build()
    assert math.isfinite(ppo.train()["env_runners"]["theta1_mean"])
    ppo.stop()


# ----------------------------------------------------------------------------- remote runners at build


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def test_unseeded_remote_runners_start_with_the_learner_weights():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2, env_runner_backend="process") \
        .training(train_batch_size=256).build()
    learner = algo.get_weights()["default_policy"]
    remote = algo.env_runner_group.foreach_env_runner(lambda r: r.get_weights(), local_env_runner=False)
    assert len(remote) == 2 and all(_weights_equal(w, learner) for w in remote)
    algo.stop()


def test_sync_weights_without_arguments_pushes_the_local_weights():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1, env_runner_backend="process") \
        .training(train_batch_size=256).build()
    group = algo.env_runner_group
    local = group.local_env_runner
    changed = {k: np.asarray(v) + 1.0 for k, v in local.get_weights().items()}
    local.set_weights(changed)
    group.sync_weights()
    (remote,) = group.foreach_env_runner(lambda r: r.get_weights(), local_env_runner=False)
    assert _weights_equal(remote, changed)
    algo.stop()


def test_remote_runners_start_with_the_driver_filter_state():
    algo = PPOConfig().environment("CartPole-v1").env_runners(
        num_env_runners=1, env_runner_backend="process", observation_filter="MeanStdFilter",
        create_env_on_local_worker=True).training(train_batch_size=256).build()
    local = algo.env_runner_group.local_env_runner
    local.sample(num_timesteps=64)  # the driver's filter has seen observations; the remote one not
    algo.env_runner_group._sync_new_remotes()
    (state,) = algo.env_runner_group.foreach_env_runner(lambda r: r.filter.get_state(), local_env_runner=False)
    assert json.dumps(state, sort_keys=True, default=str) == \
        json.dumps(local.filter.get_state(), sort_keys=True, default=str)
    algo.stop()


class _CountEnvs(RLlibCallback):
    def on_environment_created(self, *, env_runner, env, **kwargs):
        env_runner.metrics.log_value("envs_created", env.num_envs, reduce="sum")


def test_driver_builds_no_sub_envs_beside_remote_runners():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1, env_runner_backend="process") \
        .callbacks(_CountEnvs).training(num_epochs=1).build()
    local = algo.env_runner_group.local_env_runner
    assert not local.has_envs
    assert local.foreach_env(lambda env: env) == []
    assert algo.config.num_envs_per_env_runner == 8  # what the remote runner built
    result = algo.train()
    assert not local.has_envs  # training samples on the remote runner only
    assert result["env_runners"]["envs_created"] == 8  # the remote runner's, none in the driver
    algo.compute_single_action(np.zeros(4, np.float32))
    algo.stop()


def test_create_env_on_local_worker_builds_driver_sub_envs():
    algo = PPOConfig().environment("CartPole-v1").env_runners(
        num_env_runners=1, env_runner_backend="process", create_env_on_local_worker=True) \
        .training(train_batch_size=256).build()
    assert algo.env_runner_group.local_env_runner.has_envs
    algo.stop()


def test_driver_sub_envs_are_built_on_first_use():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1, env_runner_backend="process") \
        .training(train_batch_size=256).build()
    local = algo.env_runner_group.local_env_runner
    batch = local.sample(num_timesteps=16)
    assert local.has_envs and batch["rewards"].size >= 16
    algo.stop()


def test_synchronize_filters_false_keeps_the_driver_filter_untouched():
    algo = PPOConfig().environment("CartPole-v1").env_runners(
        num_env_runners=1, env_runner_backend="process", observation_filter="MeanStdFilter",
        synchronize_filters=False).training(train_batch_size=256).build()
    before = json.dumps(algo.env_runner.filter.get_state(), sort_keys=True, default=str)
    algo.train()
    assert json.dumps(algo.env_runner.filter.get_state(), sort_keys=True, default=str) == before
    algo.stop()


# ----------------------------------------------------------------------------- options without effect


class _FramesEnv(gym.Env):
    observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros((210, 160, 3), np.uint8), {}

    def step(self, action):
        return np.zeros((210, 160, 3), np.uint8), 0.0, True, False, {}


def test_deepmind_preprocessing_wraps_only_real_atari_games():
    # An env that only says it is Atari (is_atari=True) is no ALE game: no DeepMind wrappers
    # (tests/env/test_atari.py covers real games); both preferences downsample its raw frames.
    config = (PPOConfig().environment(_FramesEnv, is_atari=True).training(train_batch_size=64)
              .env_runners(num_envs_per_env_runner=1))
    algo = config.build()
    assert "FrameStack" not in str(algo.env_runner.env.envs[0])
    assert algo.env_runner.preprocessor.shape == (84, 84, 3)
    algo.stop()
    algo = config.env_runners(preprocessor_pref="rllib").build()
    assert algo.env_runner.preprocessor.shape == (84, 84, 3)
    algo.stop()


def test_local_gpu_idx_is_a_device_index():
    # Which CUDA device it picks is tested in test_learner_device.py.
    assert PPOConfig().learners(local_gpu_idx=1).local_gpu_idx == 1
    with pytest.raises(ConfigError, match="local_gpu_idx"):
        PPOConfig().learners(local_gpu_idx=-1)


# ----------------------------------------------------------------------------- compute_single_action


def test_compute_single_action_names_the_expected_shape():
    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=256).build()
    with pytest.raises(ValueError, match=r"has shape \(5,\).*expects shape \(4,\)"):
        algo.compute_single_action(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match=r"has shape \(1, 4\).*compute_actions"):
        algo.compute_single_action(np.zeros((1, 4), np.float32))
    assert algo.compute_single_action(np.zeros(4, np.float32)) in (0, 1)
    algo.stop()


def test_compute_single_action_checks_discrete_observations():
    algo = PPOConfig().environment("FrozenLake-v1").training(train_batch_size=256).build()
    with pytest.raises(ValueError, match="expected one integer"):
        algo.compute_single_action(np.zeros(16, np.float32))
    assert algo.compute_single_action(3) in range(4)
    algo.stop()


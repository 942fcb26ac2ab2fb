"""The helpers of RLlib's example scripts: rlx.examples.utils (flags, the experiment runner)
and rlx.utils.test_utils (check, check_learning_achieved, ...).

The runs train tiny PPO configs (256-step batches) for one to three iterations; one test
runs through Ray Tune (skipped without Ray).
"""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.examples.utils import (
    add_rllib_example_script_args,
    apply_args_to_config,
    run_rllib_example_script_experiment,
    should_stop,
)
from rlx.utils import test_utils
from rlx.utils.errors import ConfigError
from rlx.utils.test_utils import (
    check,
    check_learning_achieved,
    check_train_results,
    check_train_results_new_api_stack,
)

RETURN = "env_runners/episode_return_mean"

#: Every flag of RLlib's add_rllib_example_script_args, by its argparse name.
RLLIB_FLAGS = {
    "algo", "framework", "env", "num_env_runners", "num_envs_per_env_runner", "num_agents",
    "evaluation_num_env_runners", "evaluation_interval", "evaluation_duration", "evaluation_duration_unit",
    "evaluation_parallel_to_training", "output", "log_level", "no_tune", "num_samples", "max_concurrent_trials",
    "verbose", "checkpoint_freq", "checkpoint_at_end", "tune_max_report_freq", "wandb_key", "wandb_project",
    "wandb_run_name", "stop_reward", "stop_iters", "stop_timesteps", "as_test", "as_release_test", "num_learners",
    "num_cpus_per_learner", "num_gpus_per_learner", "num_aggregator_actors_per_learner", "num_cpus", "num_gpus",
    "old_api_stack", "enable_new_api_stack", "local_mode",
}


def parse(*argv: str, **defaults):
    return add_rllib_example_script_args(**defaults).parse_args(list(argv))


def tiny_config(env: str | None = "CartPole-v1") -> PPOConfig:
    config = PPOConfig().training(train_batch_size=256, minibatch_size=64, num_epochs=1).debugging(seed=0)
    return config.environment(env) if env else config


# ---------------------------------------------------------------------- flags


def test_parser_has_every_rllib_flag_with_rllibs_defaults():
    args = parse(default_reward=450.0, default_iters=7, default_timesteps=1234)
    assert set(vars(args)) == RLLIB_FLAGS
    assert (args.stop_reward, args.stop_iters, args.stop_timesteps) == (450.0, 7, 1234)
    assert args.algo == "PPO" and args.framework == "torch" and args.env is None
    assert args.num_env_runners is None and args.num_envs_per_env_runner is None and args.num_agents == 0
    assert (args.evaluation_interval, args.evaluation_duration, args.evaluation_duration_unit) == (0, 10, "episodes")
    assert args.verbose == 2 and args.num_samples == 1 and args.checkpoint_freq == 0 and args.num_cpus == 0
    assert not (args.no_tune or args.as_test or args.as_release_test or args.checkpoint_at_end)
    assert parse("--evaluation-duration=auto").evaluation_duration == "auto"
    assert parse("--evaluation-duration=5").evaluation_duration == 5


def test_parser_extends_a_given_parser_and_keeps_the_scripts_own_flags():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--num-policies", type=int, default=2)
    returned = add_rllib_example_script_args(parser)
    assert returned is parser
    args = parser.parse_args(["--num-policies=3", "--num-agents=2", "--no-tune"])
    assert (args.num_policies, args.num_agents, args.no_tune) == (3, 2, True)


def test_flags_set_the_config():
    args = parse("--num-env-runners=2", "--num-envs-per-env-runner=3", "--num-learners=1", "--num-cpus-per-learner=2",
                 "--evaluation-interval=2", "--evaluation-num-env-runners=1", "--evaluation-duration=50",
                 "--evaluation-duration-unit=timesteps", "--log-level=ERROR", "--env=Pendulum-v1")
    config = apply_args_to_config(PPOConfig(), args)
    assert (config.num_env_runners, config.num_envs_per_env_runner) == (2, 3)
    assert (config.num_learners, config.num_cpus_per_learner, config.num_gpus) == (1, 2, 0)
    assert (config.evaluation_interval, config.evaluation_num_env_runners) == (2, 1)
    assert (config.evaluation_duration, config.evaluation_duration_unit) == (50, "timesteps")
    assert config.log_level == "ERROR" and config.env == "Pendulum-v1" and config.framework_str == "torch"
    for name in ("num_env_runners", "num_envs_per_env_runner", "num_learners", "evaluation_interval"):
        assert config.is_user_set(name), name


def test_flags_at_their_defaults_leave_the_config_alone():
    config = apply_args_to_config(tiny_config("Acrobot-v1"), parse("--env=CartPole-v1"))
    assert config.env == "Acrobot-v1"  # --env only fills in a missing env, as in RLlib
    for name in ("num_env_runners", "num_envs_per_env_runner", "num_learners", "evaluation_interval", "log_level"):
        assert not config.is_user_set(name), name
    assert config.evaluation_interval is None


@pytest.mark.parametrize("argv, flag", [
    (["--framework=tf2"], "--framework"),
    (["--num-gpus=1"], "--num-gpus"),  # RLlib refuses it on the new stack too
])
def test_flags_rlx_cannot_honour_are_refused_naming_the_flag(argv, flag):
    with pytest.raises(ConfigError, match=flag):
        apply_args_to_config(tiny_config(), parse(*argv))


def test_gpu_per_learner_flag_follows_the_machine_as_in_rllib(monkeypatch):
    import rlx.examples.utils as example_utils

    monkeypatch.setattr(example_utils, "_num_cuda_devices", lambda: 0)
    assert apply_args_to_config(tiny_config(), parse()).num_gpus_per_learner == 0
    with pytest.raises(ConfigError, match="--num-gpus-per-learner=1 .* this machine has 0"):
        apply_args_to_config(tiny_config(), parse("--num-gpus-per-learner=1"))
    monkeypatch.setattr(example_utils, "_num_cuda_devices", lambda: 2)
    assert apply_args_to_config(tiny_config(), parse()).num_gpus_per_learner == 1
    assert apply_args_to_config(tiny_config(), parse("--num-learners=2", "--num-gpus-per-learner=1")) \
        .num_gpus_per_learner == 1


def test_old_api_stack_output_and_aggregator_flags_set_the_config_as_in_rllib(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        config = apply_args_to_config(tiny_config(), parse("--old-api-stack", "--num-gpus=0",
                                                           f"--output={tmp_path}"))
    assert config.enable_rl_module_and_learner is False and config.enable_env_runner_and_connector_v2 is False
    assert config.output == str(tmp_path)
    config = apply_args_to_config(tiny_config(), parse("--num-aggregator-actors-per-learner=2"))
    assert config.num_aggregator_actors_per_learner == 2


def test_old_api_stack_flag_trains_on_rlxs_one_stack_and_says_so_once(caplog):
    import rlx.algorithms.algorithm_config as algorithm_config

    algorithm_config._old_api_stack_logged = False
    with caplog.at_level(logging.WARNING):
        result = run_rllib_example_script_experiment(tiny_config(), parse("--old-api-stack", "--no-tune",
                                                                          "--stop-iters=1"))
        tiny_config().api_stack(enable_rl_module_and_learner=False)
    assert result["training_iteration"] == 1
    assert caplog.text.count("old API stack was asked for") == 1


def test_deprecated_flags_as_in_rllib(caplog):
    with pytest.raises(ValueError, match="--local-mode"):
        run_rllib_example_script_experiment(tiny_config(), parse("--local-mode", "--no-tune"))
    with caplog.at_level(logging.WARNING):
        run_rllib_example_script_experiment(tiny_config(), parse("--enable-new-api-stack", "--no-tune",
                                                                 "--stop-iters=1"))
    assert "--enable-new-api-stack has no effect" in caplog.text


def test_wandb_key_without_tune_is_refused():
    with pytest.raises(ConfigError, match="--wandb-key"):
        run_rllib_example_script_experiment(tiny_config(), parse("--no-tune", "--wandb-key=abc"))


# ---------------------------------------------------------------------- --no-tune runs


def test_no_tune_trains_until_stop_iters_and_returns_the_last_result(capsys, results_dir):
    result = run_rllib_example_script_experiment(tiny_config(), parse("--no-tune", "--stop-iters=2",
                                                                      "--checkpoint-at-end"))
    assert result["training_iteration"] == 2
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] == 512
    out = capsys.readouterr().out
    assert "iter=0 R=" in out and "iter=1 R=" in out and "iter=2" not in out
    assert "Stop criterion (training_iteration=2) fulfilled!" in out
    # Results and the final checkpoint land under RLX_RESULTS_DIR (~/rlx_results by default).
    checkpoints = list(results_dir.glob("PPO_CartPole-v1_*/checkpoint_000002"))
    assert len(checkpoints) == 1, list(results_dir.rglob("*"))
    check_train_results_new_api_stack(result)
    check_train_results(result)


def test_no_tune_stops_at_stop_timesteps():
    result = run_rllib_example_script_experiment(tiny_config(), parse("--no-tune", "--stop-timesteps=300"))
    assert result["training_iteration"] == 2  # 512 sampled steps >= 300


def test_no_tune_takes_custom_stop_criteria_in_rllibs_older_names(capsys):
    result = run_rllib_example_script_experiment(tiny_config(), parse("--no-tune"), stop={"timesteps_total": 700})
    assert result["training_iteration"] == 3
    assert "Stop criterion (timesteps_total=700) fulfilled!" in capsys.readouterr().out


def test_no_tune_keep_config_leaves_the_config_as_it_is():
    config = tiny_config()
    result = run_rllib_example_script_experiment(config, parse("--no-tune", "--stop-iters=1", "--num-env-runners=1",
                                                               "--framework=tf"), keep_config=True)
    assert result["training_iteration"] == 1
    assert config.num_env_runners == 0 and not config.is_user_set("num_env_runners")
    assert result["fault_tolerance"]["num_healthy_workers"] == 0


def test_as_test_raises_when_the_reward_is_not_reached():
    with pytest.raises(ValueError, match=r"`env_runners/episode_return_mean` of 10000.0 not reached! Best value "
                                         r"reached is \d"):
        run_rllib_example_script_experiment(tiny_config(), parse("--no-tune", "--stop-iters=1", "--as-test",
                                                                 "--stop-reward=10000"))


def test_as_test_passes_and_stops_once_the_reward_is_reached(capsys):
    result = run_rllib_example_script_experiment(tiny_config(), parse("--no-tune", "--stop-iters=5", "--as-test",
                                                                      "--stop-reward=1"))
    assert result["training_iteration"] == 1
    out = capsys.readouterr().out
    assert f"Stop criterion ({RETURN}=1.0) fulfilled!" in out and f"`{RETURN}` of 1.0 reached! ok" in out


def test_as_release_test_writes_the_summary_instead_of_raising(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    monkeypatch.setenv("TEST_OUTPUT_JSON", str(path))
    run_rllib_example_script_experiment(tiny_config(), parse("--no-tune", "--stop-iters=1", "--as-release-test",
                                                             "--stop-reward=10000"),
                                        success_metric={"training_iteration": 5})
    summary = json.loads(path.read_text())
    assert summary["passed"] == [False] and summary["not_passed"] == [True]
    assert summary["success_metric"] == "training_iteration"
    assert (summary["best_value"], summary["target_value"]) == (1.0, 5.0)
    assert summary["stats"]["training_iteration"] == 1


def test_runner_fills_in_flags_a_scripts_own_parser_lacks():
    import argparse

    args = argparse.Namespace(no_tune=True, stop_iters=1)
    result = run_rllib_example_script_experiment(tiny_config(), args)
    assert result["training_iteration"] == 1
    assert args.stop_reward == 100.0 and args.num_agents == 0


# ---------------------------------------------------------------------- Tune


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:fail_fast='raise' detected")  # RLlib's runner uses fail_fast="raise" too
def test_tune_run_returns_the_result_grid_and_checks_the_success_metric(results_dir, monkeypatch):
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.tune")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_AIR_NEW_OUTPUT", "1")  # the runner sets it to 0; restored afterwards
    if ray.is_initialized():
        ray.shutdown()
    # One CPU fits the one trial; Ray prestarts a Python worker per CPU, so more would cost more.
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        results = run_rllib_example_script_experiment(
            tiny_config(), parse("--stop-iters=2", "--as-test", "--stop-reward=100000", "--verbose=0"),
            success_metric={"training_iteration": 2},
        )
    finally:
        if ray.is_initialized():  # the runner shuts Ray down itself (keep_ray_up=False)
            ray.shutdown()
            pytest.fail("run_rllib_example_script_experiment left Ray running")
    assert type(results).__name__ == "ResultGrid" and len(results) == 1
    result = results[0]
    assert result.error is None
    assert result.metrics["training_iteration"] == 2
    assert result.metrics["env_runners"]["num_env_steps_sampled_lifetime"] == 512
    assert result.config["train_batch_size"] == 256
    # Tune's experiment directory lies under RLX_RESULTS_DIR, like rlx's own runs.
    assert str(result.path).startswith(str(results_dir.resolve())), result.path
    check_learning_achieved(results, 2, metric="training_iteration")
    with pytest.raises(ValueError, match="not reached"):
        check_learning_achieved(results, 100000)


# ---------------------------------------------------------------------- should_stop


def test_should_stop_checks_nested_keys_and_skips_missing_or_nan_values(capsys):
    results = {"training_iteration": 3, "env_runners": {"episode_return_mean": float("nan")}}
    assert not should_stop({RETURN: 10, "training_iteration": 5, "not/there": 1}, results)
    assert should_stop({RETURN: 10, "training_iteration": 3}, results)
    assert "Stop criterion (training_iteration=3) fulfilled!" in capsys.readouterr().out
    assert should_stop({"episode_reward_mean": 10}, {"env_runners": {"episode_return_mean": 12.0}})


# ---------------------------------------------------------------------- check()


def test_check_compares_nested_structures_numerically():
    check({"a": [1.0, (2, "x")], "b": None, "c": True}, {"a": (1.000001, [2, "x"]), "b": None, "c": 1})
    check(np.array([1.0, 2.0]), [1.0, 2.0])
    check(torch.tensor([0.5, 0.25]), np.array([0.5, 0.25]))
    check(1, 1.0)  # int vs float: numeric
    check(np.array(["a", "b"]), np.array(["a", "b"]))
    check(b"abc", b"abc")
    check(1.0, 1.01, decimals=1)
    check(100.0, 101.0, rtol=0.02)
    check(100.0, 100.5, atol=1)


@pytest.mark.parametrize("x, y, kwargs", [
    ({"a": 1}, {"a": 1, "b": 2}, {}),  # a key only in y
    ({"a": 1, "b": 2}, {"a": 1}, {}),  # a key only in x
    ([1, 2], [1, 2, 3], {}),
    ({"a": 1}, [1], {}),
    (1.0, 1.001, {}),  # 5 decimals by default
    (1.0, 1.2, {"decimals": 1}),
    (100.0, 103.0, {"rtol": 0.02}),
    (1, 2, {}),
    ("a", "b", {}),
    (True, False, {}),
    (None, 0, {}),
    (torch.tensor([1.0, 2.0]), np.array([1.0, 2.5]), {}),
    (np.array(["a"]), np.array(["b"]), {}),
])
def test_check_raises_on_differences(x, y, kwargs):
    with pytest.raises(AssertionError):
        check(x, y, **kwargs)


def test_check_false_asserts_that_values_differ():
    check(1.0, 2.0, false=True)
    check({"a": [1, 2]}, {"a": [3, 4]}, false=True)
    check(True, False, false=True)
    check("a", "b", false=True)
    check(np.array(["a"]), np.array(["b"]), false=True)
    check(1.0, 1.5, atol=0.1, false=True)
    for same in (1.0, True, "a"):
        with pytest.raises(AssertionError):
            check(same, same, false=True)
    with pytest.raises(AssertionError):
        check(np.zeros(3), np.zeros(3), false=True)
    with pytest.raises(AssertionError):  # as in RLlib: with false=True every leaf must differ
        check({"a": [1, 2]}, {"a": [1, 3]}, false=True)


def test_check_reads_stats_objects():
    from rlx.utils.metrics import Stats

    stats = Stats(reduce="sum")
    stats.push(2.0)
    stats.push(3.0)
    check(stats, 5.0)


# ---------------------------------------------------------------------- result checks


def test_check_learning_achieved_takes_result_dicts_and_prefers_evaluation():
    results = [{"env_runners": {"episode_return_mean": 50.0}},
               {"env_runners": {"episode_return_mean": 150.0}}]
    check_learning_achieved(results, 150.0)
    with pytest.raises(ValueError, match="of 151.0 not reached! Best value reached is 150.0"):
        check_learning_achieved(results, 151.0)
    with_eval = {"env_runners": {"episode_return_mean": 200.0},
                 "evaluation": {"env_runners": {"episode_return_mean": 20.0}}}
    with pytest.raises(ValueError):  # evaluation=None uses the evaluation value when there is one
        check_learning_achieved(with_eval, 100.0)
    check_learning_achieved(with_eval, 100.0, evaluation=False)
    with pytest.raises(ValueError):
        check_learning_achieved(results, 1.0, evaluation=True)  # no evaluation results at all


def test_check_train_results_refuse_malformed_results():
    with pytest.raises(AssertionError, match="'learners' not found"):
        check_train_results_new_api_stack({"env_runners": {}, "fault_tolerance": {}, "training_iteration": 1})
    with pytest.raises(AssertionError, match="`config` in results not a python dict"):
        check_train_results_new_api_stack({"env_runners": {}, "fault_tolerance": {}, "learners": {},
                                           "training_iteration": 1, "config": PPOConfig()})
    with pytest.raises(AssertionError, match="not a scalar"):
        check_train_results_new_api_stack({"env_runners": {}, "fault_tolerance": {}, "training_iteration": 1,
                                           "learners": {"default_policy": {"loss_max": [1.0, 2.0]}}})
    with pytest.raises(AssertionError, match="'default_policy' not found"):
        check_train_results_new_api_stack({"env_runners": {}, "fault_tolerance": {}, "training_iteration": 1,
                                           "config": {"policies": None}, "learners": {"p0": {}}})


def test_moved_helpers_still_work_from_test_utils(caplog):
    with caplog.at_level(logging.WARNING):
        parser = test_utils.add_rllib_example_script_args(default_iters=3)
    assert parser.parse_args([]).stop_iters == 3
    assert "`rlx.utils.test_utils.add_rllib_example_script_args` has been deprecated" in caplog.text
    assert test_utils.should_stop({"training_iteration": 1}, {"training_iteration": 1}, keep_ray_up=True)

"""Evaluation during training (seed 000): which iterations evaluate, which weights they use,
how the work is split over evaluation runners, overrides, custom functions and misuse."""
from __future__ import annotations

import logging
import math

import gymnasium as gym
import numpy as np
import pytest

from conftest import small_config
from envs_for_tests import CounterEnv
from rlx.callbacks.callbacks import RLlibCallback
from rlx.evaluation.metrics import collect_metrics
from rlx.utils.errors import ConfigError


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


class EvalWeightsRecorder(RLlibCallback):
    """On evaluation runners, records (weights version, weights) at every sample() end."""

    seen: list = []

    def on_sample_end(self, *, env_runner, **kwargs):
        if env_runner.config.in_evaluation:
            EvalWeightsRecorder.seen.append((env_runner.weights_seq_no, env_runner.module.get_state()))


def _weights_after_each_iteration(algo, iterations: int) -> list[dict]:
    """Learner weights before training (index 0) and after each iteration (index k)."""
    snapshots = [algo.learner.get_weights()]
    for _ in range(iterations):
        algo.train()
        snapshots.append(algo.learner.get_weights())
    return snapshots


@pytest.mark.parametrize("interval, expected", [(1, [1, 2, 3, 4]), (2, [2, 4])])
def test_sequential_evaluation_uses_the_weights_the_iteration_produced(interval, expected):
    EvalWeightsRecorder.seen = []
    algo = (small_config().callbacks(EvalWeightsRecorder)
            .evaluation(evaluation_interval=interval, evaluation_duration=1).build())
    snapshots = _weights_after_each_iteration(algo, 4)
    versions = sorted({v for v, _ in EvalWeightsRecorder.seen})
    assert versions == expected
    for version, weights in EvalWeightsRecorder.seen:
        assert _weights_equal(weights, snapshots[version])
    algo.stop()


def test_parallel_evaluation_uses_the_weights_from_before_the_training_step():
    EvalWeightsRecorder.seen = []
    algo = (small_config().callbacks(EvalWeightsRecorder)
            .evaluation(evaluation_interval=1, evaluation_duration=1, evaluation_parallel_to_training=True)
            .build())
    snapshots = _weights_after_each_iteration(algo, 3)
    # train(0->1) + eval(0), train(1->2) + eval(1), train(2->3) + eval(2)
    assert sorted({v for v, _ in EvalWeightsRecorder.seen}) == [0, 1, 2]
    for version, weights in EvalWeightsRecorder.seen:
        assert _weights_equal(weights, snapshots[version])
    assert not _weights_equal(snapshots[0], snapshots[1])  # the check above can tell versions apart
    algo.stop()


def test_results_carry_evaluation_only_when_it_ran_unless_always_attached():
    algo = small_config().evaluation(evaluation_interval=2, evaluation_duration=2).build()
    has_eval = ["evaluation" in algo.train() for _ in range(4)]
    assert has_eval == [False, True, False, True]
    algo.stop()

    algo = (small_config().evaluation(evaluation_interval=2, evaluation_duration=2,
                                      always_attach_evaluation_results=True).build())
    first, second, third = algo.train(), algo.train(), algo.train()
    assert math.isnan(first["evaluation"]["env_runners"]["episode_return_mean"])
    assert second["evaluation"]["env_runners"]["num_episodes"] == 2
    assert third["evaluation"] == second["evaluation"]
    algo.stop()


class WorkerEpisodes(RLlibCallback):
    """Counts evaluation episodes per evaluation runner index."""

    counts: dict = {}

    def on_episode_end(self, *, env_runner, **kwargs):
        if env_runner.config.in_evaluation:
            index = env_runner.worker_index
            WorkerEpisodes.counts[index] = WorkerEpisodes.counts.get(index, 0) + 1


def test_episodes_are_spread_over_runners_with_the_remainder_on_the_first(caplog):
    WorkerEpisodes.counts = {}
    algo = (small_config().callbacks(WorkerEpisodes).debugging(log_level="INFO")
            .evaluation(evaluation_interval=1, evaluation_duration=10, evaluation_num_env_runners=7,
                        evaluation_config={"num_envs_per_env_runner": 1}).build())
    with caplog.at_level(logging.INFO, logger="rlx"):
        result = algo.train()
    assert result["evaluation"]["env_runners"]["num_episodes"] == 10
    assert result["evaluation"]["episodes_this_iter"] == 10
    # A round of 7 (one per runner), then a round of 3 on runners 1-3.
    assert WorkerEpisodes.counts == {1: 2, 2: 2, 3: 2, 4: 1, 5: 1, 6: 1, 7: 1}
    messages = [r.getMessage() for r in caplog.records if r.name == "rlx"]
    assert "Evaluating current policy for 10 episodes." in messages
    assert "Running round 0 of parallel evaluation (7/10 episodes)" in messages
    assert "Running round 1 of parallel evaluation (10/10 episodes)" in messages
    algo.stop()


def test_timesteps_are_rounded_up_to_a_multiple_of_the_runner_count():
    algo = (small_config().evaluation(evaluation_interval=1, evaluation_duration=200,
                                      evaluation_duration_unit="timesteps", evaluation_num_env_runners=3,
                                      evaluation_config={"num_envs_per_env_runner": 1})
            .build())
    result = algo.train()
    assert result["evaluation"]["env_runners"]["num_env_steps_sampled"] == 201
    algo.stop()


def test_auto_duration_evaluates_while_the_training_step_runs():
    algo = (small_config().evaluation(evaluation_interval=1, evaluation_parallel_to_training=True,
                                      evaluation_duration="auto", evaluation_duration_unit="timesteps")
            .build())
    result = algo.train()
    assert result["evaluation"]["env_runners"]["num_env_steps_sampled"] > 0
    algo.stop()


def test_auto_duration_without_parallel_evaluation_is_refused():
    with pytest.raises(ConfigError, match="evaluation_parallel_to_training=True"):
        small_config().evaluation(evaluation_interval=1, evaluation_duration="auto").build()


class RewardAction1(gym.Env):
    """Rewards action 1 with 1.0; the env_config's `length` sets the episode length."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.length = int((config or {}).get("length", 5))
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), float(action == 1), self.t >= self.length, False, {}


def test_evaluation_config_overrides_apply_to_evaluation_runners_only():
    algo = (small_config(env=RewardAction1).environment(env_config={"length": 5})
            .evaluation(evaluation_interval=1, evaluation_duration=4,
                        evaluation_config={"explore": False, "env_config": {"length": 3}}).build())
    result = algo.train()
    assert result["evaluation"]["env_runners"]["episode_len_mean"] == 3
    assert result["env_runners"]["episode_len_mean"] == 5
    # Greedy evaluation: every evaluation episode repeats the module's argmax action.
    eval_returns = result["evaluation"]["hist_stats"]["episode_reward"]
    assert len(set(eval_returns)) == 1 and eval_returns[0] in (0.0, 3.0)
    assert algo.evaluation_config.explore is False and algo.config.explore is True
    algo.stop()


def test_unknown_key_in_evaluation_config_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match="Did you mean 'explore'"):
        small_config().evaluation(evaluation_interval=1, evaluation_config={"explor": False}).build()


def test_driver_evaluation_leaves_the_training_episodes_alone():
    algo = (small_config(env=CounterEnv).env_runners(num_envs_per_env_runner=1, rollout_fragment_length=50)
            .training(train_batch_size=50, minibatch_size=50)
            .evaluation(evaluation_interval=1, evaluation_duration=20, evaluation_duration_unit="timesteps")
            .build())
    algo.train()
    eval_envs = algo.eval_env_runner_group.local_env_runner.env.envs
    assert not set(map(id, eval_envs)) & set(map(id, algo.env_runner.env.envs))
    # CounterEnv never ends, so the training episode must go on counting after evaluation.
    batch = algo.env_runner.sample(num_timesteps=5)
    assert batch["obs"][0, 0, 0] == 50
    algo.stop()


def test_evaluate_is_public_without_an_interval_and_fires_its_events():
    events = []
    algo = (small_config()
            .callbacks(on_evaluate_start=lambda algorithm, **kw: events.append("start"),
                       on_evaluate_end=lambda evaluation_metrics, **kw: events.append(evaluation_metrics))
            .evaluation(evaluation_duration=3).build())
    assert algo.eval_env_runner_group is None
    results = algo.evaluate()
    assert results["env_runners"]["num_episodes"] == 3
    assert events == ["start", results]
    algo.stop()


def test_custom_evaluation_function_result_becomes_the_evaluation(caplog):
    calls = []

    def custom_eval(algorithm, eval_workers):
        calls.append(algorithm)
        eval_workers.foreach_env_runner(lambda runner: runner.sample(num_episodes=2))
        metrics = collect_metrics(eval_workers)
        metrics["foo"] = 1
        return metrics

    algo = (small_config().debugging(log_level="INFO")
            .evaluation(evaluation_interval=1, evaluation_num_env_runners=2,
                        evaluation_config={"num_envs_per_env_runner": 1},
                        custom_evaluation_function=custom_eval).build())
    with caplog.at_level(logging.INFO, logger="rlx"):
        result = algo.train()
    assert calls == [algo]
    assert result["evaluation"]["foo"] == 1
    assert result["evaluation"]["env_runners"]["num_episodes"] == 4
    assert any(r.getMessage().startswith("Running custom eval function") for r in caplog.records)
    algo.stop()


def test_custom_evaluation_function_must_return_a_dict():
    algo = small_config().evaluation(evaluation_interval=1, custom_evaluation_function=lambda a, w: 3).build()
    with pytest.raises(TypeError, match="must return a dict"):
        algo.train()
    algo.stop()


class SlowOnWorker2(gym.Env):
    """CartPole-like episodes of 5 steps; on evaluation runner 2 each step sleeps `delay` s."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config):
        self.delay = config.get("delay", 0.0) if config.worker_index == 2 else 0.0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if self.delay:
            import time

            time.sleep(self.delay)
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 5, False, {}


def _slow_eval_config(**evaluation):
    return (small_config(env=SlowOnWorker2)
            .evaluation(evaluation_interval=1, evaluation_num_env_runners=2, evaluation_duration=4,
                        evaluation_config={"num_envs_per_env_runner": 1, "env_config": {"delay": 0.2}},
                        **evaluation))


def test_sample_timeout_warns_with_the_fix_and_training_goes_on(caplog):
    algo = _slow_eval_config(evaluation_sample_timeout_s=0.3).build()
    with caplog.at_level(logging.WARNING, logger="rlx"):
        result = algo.train()
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "evaluation_sample_timeout_s" in warning and "enable_async_evaluation" in warning
    assert result["evaluation"]["env_runners"]["num_episodes"] < 4
    algo.stop()


def test_async_evaluation_lets_idle_runners_take_over_a_slow_runners_work():
    algo = _slow_eval_config(enable_async_evaluation=True).build()
    result = algo.train()
    assert result["evaluation"]["env_runners"]["num_episodes"] == 4
    algo.stop()


class FailsOnWorker2(SlowOnWorker2):
    """Raises in step() on evaluation runner 2 (after the env checker's first reset and step);
    env_config["worker_1_delay"] slows runner 1's steps down (seconds a step)."""

    def __init__(self, config):
        super().__init__(config)
        self.fail = config.worker_index == 2 and config.get("fail", False)
        if config.worker_index == 1:
            self.delay = config.get("worker_1_delay", 0.0)
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.fail and self.resets > 1:
            raise RuntimeError("env crashed")
        return super().step(action)


def test_async_evaluation_recovers_from_a_failing_runner_and_restarts_it():
    recreated = []
    algo = (small_config(env=FailsOnWorker2)
            .callbacks(on_env_runners_recreated=lambda **kw: recreated.append(
                (kw["env_runner_indices"], kw["is_evaluation"])))
            .fault_tolerance(restart_failed_env_runners=True)
            .evaluation(evaluation_interval=1, evaluation_num_env_runners=2, evaluation_duration=4,
                        enable_async_evaluation=True,
                        # Runner 1 takes 2 s for the 4 episodes: on a loaded machine it could otherwise
                        # finish them all before runner 2's first call runs (and fails).
                        evaluation_config={"num_envs_per_env_runner": 1,
                                           "env_config": {"fail": True, "worker_1_delay": 0.1}})
            .build())
    result = algo.train()
    assert result["evaluation"]["env_runners"]["num_episodes"] == 4
    assert recreated == [([2], True)]
    assert algo.eval_env_runner_group.num_healthy_remote_workers() == 2
    algo.stop()


def test_a_failing_evaluation_runner_without_fault_tolerance_raises_its_error():
    algo = (small_config(env=FailsOnWorker2)
            .evaluation(evaluation_interval=1, evaluation_num_env_runners=2, evaluation_duration=4,
                        evaluation_config={"num_envs_per_env_runner": 1, "env_config": {"fail": True}})
            .build())
    with pytest.raises(Exception, match="env crashed"):
        algo.train()
    algo.stop()

"""Evaluation during training, as seed 000 ("Customized Evaluation During Training") describes it.

Covers when evaluation runs and on which weights (sequential and parallel to training),
how episodes and timesteps are split over evaluation runners, `evaluation_config`
overrides, evaluation in the driver, custom evaluation functions, the INFO log lines,
sample timeouts, asynchronous evaluation with slow or failing runners, and misuse.

Evaluation runners are in-process EnvRunners each driven by its own thread, so the tests
record what happens on them through EnvRunner callbacks (`env_runner.config.in_evaluation`
tells evaluation runners from training ones) into plain lists.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

from conftest import small_config
from envs_for_tests import CounterEnv
from rlx.callbacks.callbacks import RLlibCallback
from rlx.env.threaded_env_runner import ThreadedEnvRunner
from rlx.evaluation.metrics import collect_metrics
from rlx.utils.errors import ConfigError, EnvError

#: Upper bound for anything a test waits on; the tests' own runs take a small fraction of it.
WAIT_S = 5.0


class EvalEnv(gym.Env):
    """Episodes of `length` steps (env_config, default 5); obs = [t, worker_index]; reward 1.0
    for action 1, else 0.

    Misbehaviour is switched on through env_config keys, normally only in the evaluation
    env_config, and only once the test sets `EvalEnv.armed` (so building the Algorithm, whose
    env checker steps each env once, is unaffected):
    `gate_worker`: on that runner, step() blocks until `EvalEnv.gate` is set;
    `fail_worker`: on that runner, step() raises while `EvalEnv.failures_left` > 0;
    `delay`: every step sleeps that many seconds.
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    armed = threading.Event()
    gate = threading.Event()
    failures_left = 0

    def __init__(self, config=None):
        config = config if config is not None else {}
        self.config = config
        self.worker_index = getattr(config, "worker_index", 0)
        self.length = int(config.get("length", 5))
        self.delay = float(config.get("delay", 0.0))
        self.gated = config.get("gate_worker") == self.worker_index
        self.failing = config.get("fail_worker") == self.worker_index
        self.t = 0

    def _obs(self):
        return np.array([self.t, self.worker_index], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        if EvalEnv.armed.is_set():
            if self.gated:
                EvalEnv.gate.wait(WAIT_S)
            if self.failing and EvalEnv.failures_left > 0:
                EvalEnv.failures_left -= 1
                raise RuntimeError("env crashed")
        if self.delay:
            time.sleep(self.delay)
        self.t += 1
        return self._obs(), float(action == 1), self.t >= self.length, False, {}


@pytest.fixture(autouse=True)
def fresh_eval_env_state():
    """Give every test unarmed EvalEnv switches; afterwards open the gate so no runner thread
    stays blocked."""
    EvalEnv.armed = threading.Event()
    EvalEnv.gate = threading.Event()
    EvalEnv.failures_left = 0
    yield
    EvalEnv.gate.set()


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def _eval_config(env=EvalEnv, eval_env_config=None, num_envs=1, **evaluation):
    """small_config on `env` with the evaluation settings given (one sub-env per eval runner
    unless `num_envs` says otherwise)."""
    overrides = {"num_envs_per_env_runner": num_envs}
    if eval_env_config is not None:
        overrides["env_config"] = eval_env_config
    overrides.update(evaluation.pop("evaluation_config", {}))
    return small_config(env=env).evaluation(evaluation_config=overrides, **evaluation)


class Recorder:
    """Records EnvRunner and Algorithm events from all runners (thread-safe list appends)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.eval_samples: list[dict] = []
        self.eval_episodes: list[int] = []  # worker_index per finished evaluation episode
        self.train_sample_ends: list[float] = []
        self.eval_sample_ends: list[float] = []
        self.evaluate_ends: list[dict] = []
        self.evaluate_starts = 0

    def on_sample_end(self, *, env_runner, samples, **kw) -> None:
        """Training: time and an ("train",) event; evaluation: also weights version, weights, steps."""
        now = time.monotonic()
        if env_runner.config.in_evaluation:
            self.eval_sample_ends.append(now)
            self.events.append(("eval", env_runner.weights_seq_no))
            self.eval_samples.append({
                "worker": env_runner.worker_index,
                "seq": env_runner.weights_seq_no,
                "weights": env_runner.module.get_state(),
                "steps": int(samples["valid"].sum()) if "valid" in samples else int(samples["rewards"].size),
            })
        else:
            self.train_sample_ends.append(now)
            self.events.append(("train",))

    def on_episode_end(self, *, env_runner, metrics_logger, **kw) -> None:
        """Evaluation episodes: the runner index, and the weights version as evaluation metrics."""
        if env_runner.config.in_evaluation:
            self.eval_episodes.append(env_runner.worker_index)
            metrics_logger.log_value("weights_seq_min", env_runner.weights_seq_no, reduce="min")
            metrics_logger.log_value("weights_seq_max", env_runner.weights_seq_no, reduce="max")

    def on_train_result(self, *, algorithm, result, **kw) -> None:
        """Marks the end of a train() call."""
        self.events.append(("result", result["training_iteration"]))

    def on_evaluate_start(self, **kw) -> None:
        """Counts evaluations started."""
        self.evaluate_starts += 1

    def on_evaluate_end(self, *, evaluation_metrics, **kw) -> None:
        """Keeps each evaluation's metrics."""
        self.evaluate_ends.append(evaluation_metrics)

    def callbacks(self) -> dict:
        """The event callables for config.callbacks(**...)."""
        return {name: getattr(self, name) for name in (
            "on_sample_end", "on_episode_end", "on_train_result", "on_evaluate_start", "on_evaluate_end")}


def _segments(events: list[tuple]) -> list[list[tuple]]:
    """Split the event list into one list per train() call (each ends with its 'result')."""
    out, current = [], []
    for event in events:
        if event[0] == "result":
            out.append(current)
            current = []
        else:
            current.append(event)
    return out


def _train_with_snapshots(algo, iterations: int) -> tuple[list[dict], list[dict]]:
    """(results, learner weights before training [index 0] and after each iteration [index k])."""
    snapshots = [algo.get_weights()["default_policy"]]
    results = []
    for _ in range(iterations):
        results.append(algo.train())
        snapshots.append(algo.get_weights()["default_policy"])
    for a, b in zip(snapshots, snapshots[1:]):
        assert not _weights_equal(a, b), "training must change the weights for the checks to tell versions apart"
    return results, snapshots


def _wait_idle(handle: ThreadedEnvRunner) -> None:
    deadline = time.monotonic() + WAIT_S
    while handle.busy and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not handle.busy


# ---------------------------------------------------------------- schedule: sequential


@pytest.mark.parametrize("interval, runners", [(1, 0), (2, 0), (1, 2)])
def test_sequential_evaluation_follows_training_and_uses_the_new_weights(interval, runners):
    rec = Recorder()
    algo = (_eval_config(evaluation_interval=interval, evaluation_duration=2, evaluation_num_env_runners=runners)
            .callbacks(**rec.callbacks()).build())
    results, snapshots = _train_with_snapshots(algo, 4)
    for k, (segment, result) in enumerate(zip(_segments(rec.events), results), start=1):
        evaluates = k % interval == 0
        assert ("evaluation" in result) == evaluates
        evals = [e for e in segment if e[0] == "eval"]
        if not evaluates:
            assert evals == []
            continue
        # train(k-1 -> k), then eval(k): every evaluation sample comes after the training samples.
        first_eval = segment.index(evals[0])
        assert all(e[0] == "eval" for e in segment[first_eval:])
        assert any(e[0] == "train" for e in segment[:first_eval])
        assert {seq for _, seq in evals} == {k}
        assert result["evaluation"]["env_runners"]["num_episodes"] == 2
        assert result["evaluation"]["env_runners"]["weights_seq_min"] == k
    for sample in rec.eval_samples:
        assert _weights_equal(sample["weights"], snapshots[sample["seq"]])
    algo.stop()


def test_evaluation_runners_hold_the_learner_weights_after_the_iteration():
    algo = _eval_config(evaluation_interval=1, evaluation_duration=1, evaluation_num_env_runners=2).build()
    algo.train()
    learner_weights = algo.get_weights()["default_policy"]
    for handle in algo.eval_env_runner_group.runner_handles():
        assert handle.runner.module is not algo.learner.module
        assert _weights_equal(handle.runner.module.get_state(), learner_weights)
        assert handle.runner.weights_seq_no == algo.iteration == 1
    algo.stop()


def test_results_carry_evaluation_only_when_it_ran_unless_always_attached():
    algo = _eval_config(evaluation_interval=2, evaluation_duration=2).build()
    assert ["evaluation" in algo.train() for _ in range(4)] == [False, True, False, True]
    algo.stop()

    algo = _eval_config(evaluation_interval=2, evaluation_duration=2, always_attach_evaluation_results=True).build()
    first, second, third, fourth = (algo.train() for _ in range(4))
    before = first["evaluation"]["env_runners"]
    assert math.isnan(before["episode_return_mean"]) and before["num_episodes"] == 0
    assert math.isnan(first["evaluation"]["episode_reward_mean"])
    assert second["evaluation"]["env_runners"]["num_episodes"] == 2
    assert third["evaluation"] == second["evaluation"]  # repeated, not re-run
    assert fourth["evaluation"]["env_runners"]["num_episodes"] == 2
    algo.stop()


def test_no_evaluation_key_without_an_interval_even_when_always_attached():
    algo = small_config().evaluation(always_attach_evaluation_results=True).build()
    assert "evaluation" not in algo.train()
    assert algo.eval_env_runner_group is None
    algo.stop()


# ---------------------------------------------------------------- schedule: parallel


@pytest.mark.parametrize("interval, runners", [(1, 0), (2, 0), (1, 2)])
def test_parallel_evaluation_uses_the_weights_from_before_the_training_step(interval, runners):
    rec = Recorder()
    algo = (_eval_config(evaluation_interval=interval, evaluation_duration=2, evaluation_parallel_to_training=True,
                         evaluation_num_env_runners=runners)
            .callbacks(**rec.callbacks()).build())
    results, snapshots = _train_with_snapshots(algo, 4)
    for k, (segment, result) in enumerate(zip(_segments(rec.events), results), start=1):
        evaluates = k % interval == 0
        assert ("evaluation" in result) == evaluates
        seqs = {e[1] for e in segment if e[0] == "eval"}
        # train(k-1 -> k) + eval(k-1); eval(0) uses the initial weights.
        assert seqs == ({k - 1} if evaluates else set())
        if evaluates:
            assert result["evaluation"]["env_runners"]["num_episodes"] == 2
            assert result["evaluation"]["env_runners"]["weights_seq_max"] == k - 1
    assert rec.eval_samples
    for sample in rec.eval_samples:
        assert _weights_equal(sample["weights"], snapshots[sample["seq"]])
    algo.stop()


def test_parallel_evaluation_runs_while_the_training_step_runs():
    eval_stepped = threading.Event()
    seen_during_training = []

    class SignalEnv(EvalEnv):
        def step(self, action):
            if self.config.get("signal"):
                eval_stepped.set()
            return super().step(action)

    def on_sample_end(*, env_runner, **kw):
        if not env_runner.config.in_evaluation:
            # The training runner waits (briefly) for an evaluation step: it only comes while
            # training is still in progress if evaluation runs at the same time.
            seen_during_training.append(eval_stepped.wait(WAIT_S))

    algo = (_eval_config(env=SignalEnv, eval_env_config={"signal": True}, evaluation_interval=1,
                         evaluation_duration=1, evaluation_parallel_to_training=True)
            .callbacks(on_sample_end=on_sample_end).build())
    result = algo.train()
    assert seen_during_training and all(seen_during_training)
    assert result["evaluation"]["env_runners"]["num_episodes"] == 1
    algo.stop()


def test_parallel_evaluation_errors_surface_in_train():
    algo = _eval_config(eval_env_config={"fail_worker": 1}, evaluation_interval=1, evaluation_num_env_runners=1,
                        evaluation_parallel_to_training=True).build()
    EvalEnv.armed.set()
    EvalEnv.failures_left = 1
    with pytest.raises(EnvError, match="EnvRunner 1 raised RuntimeError: env crashed"):
        algo.train()
    algo.stop()


# ---------------------------------------------------------------- durations


def _seed_episode_split(total: int, runners: int, envs: int) -> Counter:
    """The seed's rule: rounds over runners 1..n (0 for the driver), each runner running one
    episode per sub-env per round, the remainder going to the first runners."""
    indices = list(range(1, runners + 1)) if runners else [0]
    counts, left = Counter(), total
    while left:
        for index in indices:
            take = min(envs, left)
            if take == 0:
                break
            counts[index] += take
            left -= take
    return counts


@pytest.mark.parametrize("total, runners, envs", [(10, 7, 1), (10, 2, 1), (10, 7, 2), (3, 2, 2), (5, 0, 1), (5, 0, 2)])
def test_episode_duration_is_exact_and_split_as_the_seed_says(total, runners, envs):
    rec = Recorder()
    algo = (_eval_config(env=EvalEnv, num_envs=envs, evaluation_interval=1, evaluation_duration=total,
                         evaluation_num_env_runners=runners)
            .environment(env_config={"length": 3}).callbacks(**rec.callbacks()).build())
    evaluation = algo.train()["evaluation"]
    assert evaluation["env_runners"]["num_episodes"] == total
    assert evaluation["episodes_this_iter"] == total
    assert len(evaluation["hist_stats"]["episode_lengths"]) == total
    assert Counter(rec.eval_episodes) == _seed_episode_split(total, runners, envs)
    algo.stop()


def test_ten_episodes_on_seven_runners_run_a_round_of_seven_then_three_on_runners_one_to_three():
    rec = Recorder()
    algo = (_eval_config(evaluation_interval=1, evaluation_duration=10, evaluation_num_env_runners=7)
            .callbacks(**rec.callbacks()).build())
    algo.train()
    # Each sample() is one round's unit: runners 1-3 sample twice, 4-7 once.
    samples = Counter(s["worker"] for s in rec.eval_samples)
    assert samples == Counter({1: 2, 2: 2, 3: 2, 4: 1, 5: 1, 6: 1, 7: 1})
    algo.stop()


@pytest.mark.parametrize("total, runners", [(200, 3), (200, 0), (10, 4), (9, 3)])
def test_timestep_duration_is_rounded_up_to_a_multiple_of_the_runner_count(total, runners):
    rec = Recorder()
    algo = (_eval_config(evaluation_interval=1, evaluation_duration=total, evaluation_duration_unit="timesteps",
                         evaluation_num_env_runners=runners)
            .callbacks(**rec.callbacks()).build())
    evaluation = algo.train()["evaluation"]
    n = max(runners, 1)
    expected = math.ceil(total / n) * n
    assert evaluation["env_runners"]["num_env_steps_sampled"] == expected
    per_runner = Counter()
    for sample in rec.eval_samples:
        per_runner[sample["worker"]] += sample["steps"]
    assert set(per_runner.values()) == {expected // n}
    assert len(per_runner) == n
    algo.stop()


def test_timestep_duration_with_several_sub_envs_is_close_to_the_request():
    runners, envs, total = 3, 2, 200
    algo = _eval_config(num_envs=envs, evaluation_interval=1, evaluation_duration=total,
                        evaluation_duration_unit="timesteps", evaluation_num_env_runners=runners).build()
    sampled = algo.train()["evaluation"]["env_runners"]["num_env_steps_sampled"]
    rounded = math.ceil(total / runners) * runners
    # Sub-envs step together, so each runner may overshoot by less than one step per sub-env.
    assert rounded <= sampled <= rounded + runners * (envs - 1)
    algo.stop()


@pytest.mark.parametrize("unit", ["timesteps", "episodes"])
def test_auto_duration_evaluates_until_the_training_step_ends(unit):
    rec = Recorder()
    algo = (_eval_config(evaluation_interval=1, evaluation_duration="auto", evaluation_duration_unit=unit,
                         evaluation_parallel_to_training=True, evaluation_config={"rollout_fragment_length": 5})
            .reporting(min_time_s_per_iteration=0.3).callbacks(**rec.callbacks()).build())
    evaluation = algo.train()["evaluation"]
    assert evaluation["env_runners"]["num_env_steps_sampled"] > 0
    # Evaluation kept going while training ran (several units), and its last unit ended only
    # after the training step's last sample.
    assert len(rec.eval_sample_ends) > 1
    assert max(rec.eval_sample_ends) >= max(rec.train_sample_ends)
    if unit == "episodes":
        assert evaluation["env_runners"]["num_episodes"] == len(rec.eval_sample_ends)
    algo.stop()


def test_auto_duration_in_a_direct_evaluate_call_runs_one_unit_per_runner():
    algo = _eval_config(evaluation_interval=1, evaluation_duration="auto", evaluation_duration_unit="episodes",
                        evaluation_parallel_to_training=True, evaluation_num_env_runners=2).build()
    out: list = []
    thread = threading.Thread(target=lambda: out.append(algo.evaluate()), daemon=True)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "evaluate() with evaluation_duration='auto' outside train() must return"
    assert out[0]["env_runners"]["num_episodes"] == 2
    algo.stop()


def test_auto_duration_without_parallel_evaluation_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="evaluation_parallel_to_training=True"):
        small_config().evaluation(evaluation_interval=1, evaluation_duration="auto").build()
    with pytest.raises(ConfigError, match="evaluation_parallel_to_training=True"):
        small_config().evaluation(evaluation_interval=1, evaluation_duration="auto").validate()


def test_evaluation_episode_custom_metrics_are_reported_under_evaluation_only():
    def on_episode_end(*, env_runner, episode, **kw):
        if env_runner.config.in_evaluation:
            episode.custom_metrics["eval_worker"] = env_runner.worker_index

    algo = (_eval_config(evaluation_interval=1, evaluation_duration=4, evaluation_num_env_runners=2)
            .callbacks(on_episode_end=on_episode_end).build())
    result = algo.train()
    custom = result["evaluation"]["custom_metrics"]
    assert (custom["eval_worker_min"], custom["eval_worker_max"], custom["eval_worker_mean"]) == (1, 2, 1.5)
    assert result["evaluation"]["env_runners"]["custom_metrics"] == custom
    assert not any(k.startswith("eval_worker") for k in result["custom_metrics"])
    algo.stop()


# ---------------------------------------------------------------- evaluation_config


def test_explore_false_in_evaluation_config_makes_evaluation_actions_greedy():
    eval_actions, train_actions = [], []

    def on_sample_end(*, env_runner, samples, **kw):
        valid = samples["valid"] if "valid" in samples else np.ones(samples["rewards"].shape, bool)
        greedy = samples["action_dist_inputs"].argmax(-1)
        pairs = list(zip(samples["actions"][valid], greedy[valid]))
        (eval_actions if env_runner.config.in_evaluation else train_actions).extend(pairs)

    algo = (_eval_config(evaluation_interval=1, evaluation_duration=4, evaluation_config={"explore": False})
            .callbacks(on_sample_end=on_sample_end).build())
    algo.train()
    assert eval_actions and all(a == g for a, g in eval_actions)
    assert any(a != g for a, g in train_actions)  # training still samples stochastically
    assert algo.evaluation_config.explore is False and algo.config.explore is True
    algo.stop()


def test_env_config_override_reaches_the_evaluation_env_only():
    algo = (_eval_config(eval_env_config={"length": 3}, evaluation_interval=1, evaluation_duration=4,
                         evaluation_num_env_runners=2, evaluation_config={"num_envs_per_env_runner": 2})
            .environment(env_config={"length": 5}).build())
    result = algo.train()
    assert result["evaluation"]["env_runners"]["episode_len_mean"] == 3
    assert result["env_runners"]["episode_len_mean"] == 5
    for handle in algo.eval_env_runner_group.runner_handles():
        envs = handle.runner.env.envs
        assert len(envs) == 2
        assert [e.unwrapped.length for e in envs] == [3, 3]
        assert all(e.unwrapped.worker_index == handle.index for e in envs)
    train_envs = algo.env_runner.env.envs
    assert len(train_envs) == algo.config.num_envs_per_env_runner
    assert {e.unwrapped.length for e in train_envs} == {5}
    algo.stop()


def test_callbacks_in_evaluation_config_run_on_evaluation_runners_only():
    seen = []

    class EvalOnly(RLlibCallback):
        def on_episode_end(self, *, env_runner, **kw):
            seen.append(env_runner.config.in_evaluation)

    algo = _eval_config(evaluation_interval=1, evaluation_duration=3, evaluation_config={"callbacks": EvalOnly}).build()
    result = algo.train()
    assert result["env_runners"]["num_episodes"] > 0
    assert seen == [True] * 3
    algo.stop()


def test_unknown_key_in_evaluation_config_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"explor.*[Dd]id you mean 'explore'"):
        small_config().evaluation(evaluation_interval=1, evaluation_config={"explor": False}).build()


def test_evaluation_config_must_be_a_dict():
    with pytest.raises(ConfigError, match="evaluation_config"):
        small_config().evaluation(evaluation_interval=1, evaluation_config=[("explore", False)])


# ---------------------------------------------------------------- evaluation in the driver


@pytest.mark.parametrize("parallel", [False, True])
def test_driver_evaluation_leaves_the_training_episodes_alone(parallel):
    firsts, lasts = [], []

    def on_sample_end(*, env_runner, samples, **kw):
        if not env_runner.config.in_evaluation:
            firsts.append(float(samples["obs"][0, 0, 0]))
            lasts.append(float(samples["new_obs"][-1, 0, 0]))

    algo = (small_config(env=CounterEnv).env_runners(num_envs_per_env_runner=1, rollout_fragment_length=40)
            .training(train_batch_size=40, minibatch_size=40, num_epochs=1)
            .evaluation(evaluation_interval=1, evaluation_duration=15, evaluation_duration_unit="timesteps",
                        evaluation_parallel_to_training=parallel)
            .callbacks(on_sample_end=on_sample_end).build())
    for _ in range(3):
        assert algo.train()["evaluation"]["env_runners"]["num_env_steps_sampled"] == 15
    eval_runner = algo.eval_env_runner_group.local_env_runner
    assert eval_runner is not algo.env_runner and eval_runner.config.in_evaluation
    assert not set(map(id, eval_runner.env.envs)) & set(map(id, algo.env_runner.env.envs))
    # CounterEnv never ends: every training sample goes on from where the last one stopped.
    assert firsts[0] == 0 and len(firsts) == 3
    assert firsts[1:] == lasts[:-1]
    algo.stop()


# ---------------------------------------------------------------- custom evaluation function


class Corridor(EvalEnv):
    """An EvalEnv whose episode length (the corridor length) can be changed from outside."""

    def set_corridor_length(self, length: int) -> None:
        print(f"Update corridor length to {length}")
        self.length = length


def test_custom_evaluation_function_as_in_the_seed_example(caplog, capsys):
    seen_state = []

    def custom_eval_function(algorithm, eval_workers):
        # The Algorithm guarantees that the evaluation runners hold the latest policy state.
        seen_state.extend(eval_workers.foreach_worker(
            lambda w: (w.weights_seq_no, _weights_equal(w.get_weights(), algorithm.get_weights()["default_policy"]),
                       w.filter.get_state() == algorithm.env_runner.filter.get_state())))
        eval_workers.foreach_worker(
            func=lambda w: w.foreach_env(lambda env: env.set_corridor_length(4 if w.worker_index == 1 else 7)))
        for i in range(1, 5):
            print("Custom evaluation round", i)
            # One sample() is exactly one episode per runner with this evaluation config.
            eval_workers.foreach_worker(func=lambda w: w.sample(), local_worker=False)
        metrics = collect_metrics(eval_workers)
        metrics["foo"] = 1
        return metrics

    algo = (small_config(env=Corridor).env_runners(observation_filter="MeanStdFilter")
            .debugging(log_level="INFO")
            .evaluation(evaluation_interval=1, evaluation_num_env_runners=2,
                        evaluation_config={"batch_mode": "complete_episodes", "rollout_fragment_length": 1,
                                           "num_envs_per_env_runner": 1},
                        custom_evaluation_function=custom_eval_function)
            .build())
    with caplog.at_level(logging.INFO, logger="rlx"):
        result = algo.train()
    assert seen_state == [(1, True, True), (1, True, True)]
    evaluation = result["evaluation"]
    assert evaluation["foo"] == 1
    assert Counter(evaluation["hist_stats"]["episode_lengths"]) == Counter({4: 4, 7: 4})
    assert evaluation["env_runners"]["num_episodes"] == evaluation["episodes_this_iter"] == 8
    assert evaluation["episode_len_mean"] == evaluation["env_runners"]["episode_len_mean"] == 5.5
    messages = [r.getMessage() for r in caplog.records if r.name == "rlx"]
    assert any(m.startswith("Running custom eval function") and "custom_eval_function" in m for m in messages)
    assert not any(m.startswith("Running round") for m in messages)  # no built-in evaluation
    out = capsys.readouterr().out
    assert "Update corridor length to 4" in out and "Update corridor length to 7" in out
    assert "Custom evaluation round 4" in out
    algo.stop()


def test_custom_evaluation_function_runs_only_on_evaluation_iterations():
    calls = []

    def custom(algorithm, eval_workers):
        calls.append(algorithm.iteration)
        return {"iteration": algorithm.iteration}

    rec = Recorder()
    algo = (small_config().callbacks(**rec.callbacks())
            .evaluation(evaluation_interval=2, custom_evaluation_function=custom).build())
    results = [algo.train() for _ in range(4)]
    assert calls == [2, 4]
    assert [r.get("evaluation") for r in results] == [None, {"iteration": 2}, None, {"iteration": 4}]
    assert rec.evaluate_starts == 2 and rec.evaluate_ends == [{"iteration": 2}, {"iteration": 4}]
    algo.stop()


def test_custom_evaluation_function_must_return_a_dict():
    def not_a_dict(algorithm, eval_workers):
        return 3

    algo = small_config().evaluation(evaluation_interval=1, custom_evaluation_function=not_a_dict).build()
    with pytest.raises(TypeError, match=r"not_a_dict.*int.*must return a dict"):
        algo.train()
    algo.stop()


# ---------------------------------------------------------------- log lines


def test_info_log_lines_match_the_seed_sample_output(caplog):
    algo = (small_config().debugging(log_level="INFO")
            .evaluation(evaluation_interval=1, evaluation_duration=10, evaluation_num_env_runners=2,
                        evaluation_config={"num_envs_per_env_runner": 1}).build())
    with caplog.at_level(logging.INFO, logger="rlx"):
        algo.train()
    lines = [r.getMessage() for r in caplog.records
             if r.name == "rlx" and r.levelno == logging.INFO and r.getMessage().startswith(("Evaluating", "Running"))]
    assert lines == ["Evaluating current policy for 10 episodes."] + [
        f"Running round {i} of parallel evaluation ({2 * (i + 1)}/10 episodes)" for i in range(5)
    ]
    algo.stop()


def test_info_lines_are_not_logged_at_the_default_log_level(caplog):
    algo = small_config().evaluation(evaluation_interval=1, evaluation_duration=2).build()
    with caplog.at_level(logging.DEBUG):
        algo.train()
    assert not [r for r in caplog.records if r.name == "rlx" and r.levelno == logging.INFO]
    algo.stop()


# ---------------------------------------------------------------- timeouts and stuck runners


def test_sample_timeout_warns_with_the_fix_and_train_returns(caplog):
    algo = _eval_config(eval_env_config={"gate_worker": 2}, evaluation_interval=1, evaluation_num_env_runners=2,
                        evaluation_duration=2, evaluation_sample_timeout_s=0.3).build()
    EvalEnv.armed.set()
    with caplog.at_level(logging.WARNING, logger="rlx"):
        result = algo.train()
    stuck = algo.eval_env_runner_group.runner_handles()[1]
    assert stuck.busy  # train() returned while runner 2 was still inside its episode
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "rlx"]
    assert len(warnings) == 1
    assert "evaluation_sample_timeout_s=0.3" in warnings[0]
    assert "raise evaluation_sample_timeout_s" in warnings[0]
    assert "episodes end" in warnings[0] and "evaluation_duration_unit='timesteps'" in warnings[0]
    assert result["evaluation"]["env_runners"]["num_episodes"] == 1  # runner 1's episode
    EvalEnv.gate.set()
    _wait_idle(stuck)
    algo.stop()


def test_async_evaluation_times_out_when_every_runner_is_stuck(caplog):
    algo = _eval_config(eval_env_config={"gate_worker": 1}, evaluation_interval=1, evaluation_num_env_runners=1,
                        evaluation_duration=2, evaluation_sample_timeout_s=0.1, enable_async_evaluation=True).build()
    EvalEnv.armed.set()
    with caplog.at_level(logging.WARNING, logger="rlx"):
        result = algo.train()
    handle = algo.eval_env_runner_group.runner_handles()[0]
    assert handle.busy
    assert any("evaluation_sample_timeout_s=0.1" in r.getMessage() for r in caplog.records)
    assert result["evaluation"]["env_runners"]["num_episodes"] == 0
    EvalEnv.gate.set()
    _wait_idle(handle)
    algo.stop()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_runner_freed_during_a_later_evaluation_does_not_evaluate_stale_weights(asynchronous):
    holder = {}

    def on_sample_end(*, env_runner, **kw):
        # In evaluation 2, runner 1 lets the runner stuck since evaluation 1 finish and waits
        # until it is idle, so the rest of evaluation 2 could hand it work.
        if env_runner.config.in_evaluation and env_runner.worker_index == 1 and env_runner.weights_seq_no == 2:
            EvalEnv.gate.set()
            _wait_idle(holder["stuck"])

    algo = (_eval_config(eval_env_config={"gate_worker": 2, "length": 3}, evaluation_interval=1,
                         evaluation_num_env_runners=2, evaluation_duration=4, evaluation_sample_timeout_s=0.3,
                         enable_async_evaluation=asynchronous)
            .callbacks(on_sample_end=on_sample_end, on_episode_end=Recorder().on_episode_end).build())
    holder["stuck"] = algo.eval_env_runner_group.runner_handles()[1]
    EvalEnv.armed.set()
    first = algo.train()
    assert holder["stuck"].busy and holder["stuck"].runner.weights_seq_no == 1
    second = algo.train()
    assert second["evaluation"]["env_runners"]["num_episodes"] == 4
    # Every episode counted in evaluation 2 ran on the weights of iteration 2.
    assert second["evaluation"]["env_runners"]["weights_seq_min"] == 2
    if asynchronous:
        assert first["evaluation"]["env_runners"]["num_episodes"] == 4  # runner 1 covered runner 2
    third = algo.train()
    assert third["evaluation"]["env_runners"]["weights_seq_min"] == 3
    algo.stop()


def test_a_stuck_driver_evaluation_runner_keeps_its_weights_until_it_is_free(caplog):
    algo = _eval_config(eval_env_config={"gate_worker": 0}, evaluation_interval=1, evaluation_duration=1,
                        evaluation_sample_timeout_s=0.3).build()
    EvalEnv.armed.set()
    algo.train()
    eval_runner = algo.eval_env_runner_group.local_env_runner
    handle = algo.eval_env_runner_group.runner_handles()[0]
    weights_during_episode = eval_runner.module.get_state()
    with caplog.at_level(logging.WARNING, logger="rlx"):
        second = algo.train()
    # The runner is still inside its iteration-1 episode: nothing may swap its weights.
    assert handle.busy
    assert eval_runner.weights_seq_no == 1
    assert _weights_equal(eval_runner.module.get_state(), weights_during_episode)
    assert second["evaluation"]["env_runners"]["num_episodes"] == 0
    assert any("No evaluation EnvRunner is free" in r.getMessage() for r in caplog.records)
    EvalEnv.gate.set()
    _wait_idle(handle)
    third = algo.train()
    assert third["evaluation"]["env_runners"]["num_episodes"] == 1
    assert eval_runner.weights_seq_no == 3
    algo.stop()


# ---------------------------------------------------------------- asynchronous evaluation and failures


def test_async_evaluation_lets_idle_runners_take_over_a_stuck_runners_work():
    algo = _eval_config(eval_env_config={"gate_worker": 2}, evaluation_interval=1, evaluation_num_env_runners=3,
                        evaluation_duration=6, enable_async_evaluation=True).build()
    EvalEnv.armed.set()
    result = algo.train()
    evaluation = result["evaluation"]["env_runners"]
    assert evaluation["num_episodes"] == 6
    assert set(evaluation["hist_stats"]["episode_lengths"]) == {5}
    assert algo.eval_env_runner_group.runner_handles()[1].busy  # runner 2 never finished
    EvalEnv.gate.set()
    _wait_idle(algo.eval_env_runner_group.runner_handles()[1])
    algo.stop()


@pytest.mark.parametrize("asynchronous", [True, False])
def test_evaluation_recovers_from_a_failing_runner_and_restarts_it(asynchronous):
    recreated = []
    rec = Recorder()
    algo = (_eval_config(eval_env_config={"fail_worker": 2}, evaluation_interval=1, evaluation_num_env_runners=2,
                         evaluation_duration=4, enable_async_evaluation=asynchronous)
            .fault_tolerance(restart_failed_env_runners=True)
            .callbacks(on_env_runners_recreated=lambda **kw: recreated.append(
                (kw["env_runner_indices"], kw["is_evaluation"], kw["env_runner_group"])),
                **rec.callbacks())
            .build())
    old_runner = algo.eval_env_runner_group.runner_handles()[1].runner
    EvalEnv.armed.set()
    EvalEnv.failures_left = 1
    result = algo.train()
    assert result["evaluation"]["env_runners"]["num_episodes"] == 4
    assert recreated == [([2], True, algo.eval_env_runner_group)]
    group = algo.eval_env_runner_group
    assert group.num_healthy_remote_workers() == 2 and group.num_remote_worker_restarts == 1
    new_runner = group.runner_handles()[1].runner
    assert new_runner is not old_runner
    # The training runners were not touched, and the next evaluation uses the new runner on
    # the current weights.
    assert algo.env_runner_group.num_remote_worker_restarts == 0
    rec.eval_samples.clear()
    second = algo.train()
    assert second["evaluation"]["env_runners"]["num_episodes"] == 4
    # Asynchronous evaluation ends as soon as every episode is in, possibly with the slower
    # runner's copy of one still running: wait for both before looking at who sampled.
    for handle in group.runner_handles():
        _wait_idle(handle)
    assert {s["worker"] for s in rec.eval_samples} == {1, 2}
    assert {s["seq"] for s in rec.eval_samples} == {2}
    algo.stop()


def test_rounds_with_ignored_failures_give_the_failed_runners_work_to_the_others():
    algo = (_eval_config(eval_env_config={"fail_worker": 2}, evaluation_interval=1, evaluation_num_env_runners=3,
                         evaluation_duration=6)
            .fault_tolerance(ignore_env_runner_failures=True).build())
    EvalEnv.armed.set()
    EvalEnv.failures_left = 1
    evaluation = algo.train()["evaluation"]
    assert evaluation["env_runners"]["num_episodes"] == 6
    assert evaluation["num_healthy_workers"] == 2
    assert algo.eval_env_runner_group.healthy_worker_ids() == [1, 3]
    algo.stop()


def test_a_failed_runners_timesteps_are_redone_by_the_others_to_the_exact_total():
    total, runners = 200, 3
    algo = (_eval_config(eval_env_config={"fail_worker": 2}, evaluation_interval=1, evaluation_num_env_runners=runners,
                         evaluation_duration=total, evaluation_duration_unit="timesteps")
            .fault_tolerance(ignore_env_runner_failures=True).build())
    EvalEnv.armed.set()
    EvalEnv.failures_left = 1
    evaluation = algo.train()["evaluation"]
    assert evaluation["env_runners"]["num_env_steps_sampled"] == math.ceil(total / runners) * runners
    assert evaluation["num_healthy_workers"] == runners - 1
    algo.stop()


def test_a_failing_evaluation_runner_without_fault_tolerance_raises_its_error():
    algo = _eval_config(eval_env_config={"fail_worker": 2}, evaluation_interval=1, evaluation_num_env_runners=2,
                        evaluation_duration=4).build()
    EvalEnv.armed.set()
    EvalEnv.failures_left = 1
    with pytest.raises(EnvError, match="EnvRunner 2 raised RuntimeError: env crashed"):
        algo.train()
    algo.stop()


# ---------------------------------------------------------------- evaluate() and its events


def test_evaluate_is_public_and_creates_the_evaluation_runners_lazily():
    rec = Recorder()
    algo = (small_config().callbacks(**rec.callbacks())
            .evaluation(evaluation_duration=3, evaluation_config={"explore": False}).build())
    assert algo.eval_env_runner_group is None
    # The evaluation config is there before any evaluation runner is.
    assert algo.evaluation_config.in_evaluation and algo.evaluation_config.explore is False
    assert algo.eval_env_runner_group is None
    results = algo.evaluate()
    assert algo.eval_env_runner_group is not None
    assert results["env_runners"]["num_episodes"] == 3
    assert rec.evaluate_starts == 1 and rec.evaluate_ends == [results]
    assert "evaluation" not in algo.train()  # no interval: train() does not evaluate
    assert rec.evaluate_starts == 1
    algo.stop()


@pytest.mark.parametrize("parallel", [False, True])
def test_evaluate_events_fire_once_per_evaluation_with_its_metrics(parallel):
    rec = Recorder()
    algo = (small_config().callbacks(**rec.callbacks())
            .evaluation(evaluation_interval=1, evaluation_duration=2, evaluation_parallel_to_training=parallel)
            .build())
    results = [algo.train() for _ in range(3)]
    assert rec.evaluate_starts == 3
    assert rec.evaluate_ends == [r["evaluation"] for r in results]
    algo.stop()


def test_parallel_evaluation_fires_algorithm_callbacks_on_the_train_thread():
    threads = []

    def on_evaluate_end(*, metrics_logger, evaluation_metrics, **kw):
        threads.append(threading.current_thread())
        # The Algorithm's MetricsLogger is in use by the training step on the main thread, so a
        # callback may only log into it from that thread.
        metrics_logger.log_value("eval_return", evaluation_metrics["env_runners"]["episode_return_mean"])

    algo = (small_config()
            .callbacks(on_evaluate_start=lambda **kw: threads.append(threading.current_thread()),
                       on_evaluate_end=on_evaluate_end)
            .evaluation(evaluation_interval=1, evaluation_duration=2, evaluation_parallel_to_training=True)
            .build())
    result = algo.train()
    assert threads == [threading.current_thread()] * 2
    assert result["eval_return"] == result["evaluation"]["env_runners"]["episode_return_mean"]
    algo.stop()


def test_an_algorithm_restored_from_a_checkpoint_evaluates_the_restored_weights(tmp_path):
    algo = _eval_config(evaluation_interval=1, evaluation_duration=2, evaluation_num_env_runners=1).build()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    trained = algo.get_weights()["default_policy"]
    algo.stop()

    restored = type(algo).from_checkpoint(path)
    assert restored.evaluate()["env_runners"]["num_episodes"] == 2
    runner = restored.eval_env_runner_group.runner_handles()[0].runner
    assert runner.weights_seq_no == 1
    assert _weights_equal(runner.module.get_state(), trained)
    result = restored.train()
    assert result["training_iteration"] == 2 and result["evaluation"]["env_runners"]["num_episodes"] == 2
    assert runner.weights_seq_no == 2
    assert _weights_equal(runner.module.get_state(), restored.get_weights()["default_policy"])
    restored.stop()


def test_old_option_names_still_configure_evaluation():
    rec = Recorder()
    algo = (small_config().callbacks(**rec.callbacks())
            .evaluation(evaluation_interval=1, evaluation_duration=4, evaluation_num_workers=2,
                        evaluation_config={"num_envs_per_env_runner": 1}).build())
    algo.train()
    assert algo.evaluation_workers is algo.eval_env_runner_group
    assert algo.eval_env_runner_group.num_remote_workers() == 2
    assert Counter(rec.eval_episodes) == Counter({1: 2, 2: 2})
    algo.stop()


# ---------------------------------------------------------------- ThreadedEnvRunner


def test_threaded_runner_is_idle_as_soon_as_its_result_is_delivered():
    handle = ThreadedEnvRunner(object(), 1)
    busy_when_done = []
    future = handle.submit(lambda runner: 42)
    future.add_done_callback(lambda f: busy_when_done.append(handle.busy))
    assert future.result(WAIT_S) == 42
    failing = handle.submit(lambda runner: 1 / 0)
    failing.add_done_callback(lambda f: busy_when_done.append(handle.busy))
    with pytest.raises(ZeroDivisionError):
        failing.result(WAIT_S)
    assert busy_when_done == [False, False]
    assert handle.submit(lambda runner: "still works").result(WAIT_S) == "still works"
    handle.stop(close_runner=False)


def test_stopping_a_busy_threaded_runner_closes_it_once_its_call_ends():
    class FakeRunner:
        stopped = threading.Event()

        def stop(self):
            self.stopped.set()

    runner = FakeRunner()
    release = threading.Event()
    handle = ThreadedEnvRunner(runner, 1)
    future = handle.submit(lambda r: release.wait(WAIT_S))
    handle.stop()
    assert not runner.stopped.is_set()  # never close envs under a running call
    release.set()
    assert future.result(WAIT_S) is True
    assert runner.stopped.wait(WAIT_S)

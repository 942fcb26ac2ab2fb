"""Callbacks, episodes, custom metrics and curriculum, end to end through a real Algorithm.

Covers every example of seed 004 (RLlibCallback on the current API) and the sections
"Curriculum Learning", "Callbacks and Custom Metrics", "Chaining Callbacks" and "Rewriting
Trajectories" of seeds 000/002, with `ray.rllib` replaced by `rlx`. The dispatcher alone is
unit-tested in test_callbacks_module.py and the episode class in test_single_agent_episode.py.
"""
from __future__ import annotations

import math
import re

import gymnasium as gym
import numpy as np
import pytest

from conftest import small_config
from envs_for_tests import CountingEnv, StepInfoEnv
from rlx.agents.callbacks import DefaultCallbacks
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPO, PPOConfig
from rlx.callbacks.callbacks import RLlibCallback
from rlx.env.apis.task_settable_env import TaskSettableEnv
from rlx.env.env_context import EnvContext
from rlx.env.single_agent_episode import SingleAgentEpisode
from rlx.evaluation.rollout_worker import get_global_worker
from rlx.policy.sample_batch import SampleBatch
from rlx.utils.errors import ConfigError

#: Old-style (Trainer-era) settings that keep a PPO built from a config dict small.
SMALL_DICT = {"train_batch_size": 256, "sgd_minibatch_size": 64, "num_sgd_iter": 1, "seed": 0}


def episodes_by_column(batch: dict, key: str = "rewards") -> list[list[float]]:
    """Split a time-major batch into per-episode lists of `key`, for batches sampled with
    batch_mode='complete_episodes' (every sub-env starts at an episode boundary).

    Rows marked invalid (padding after a sub-env finished) are skipped; steps after a sub-env's
    last done belong to no complete episode and are dropped.
    """
    values, dones = np.asarray(batch[key]), np.asarray(batch["terminateds"]) | np.asarray(batch["truncateds"])
    valid = np.asarray(batch["valid"]) if "valid" in batch else np.ones(dones.shape, bool)
    episodes = []
    for b in range(dones.shape[1]):
        current: list[float] = []
        for t in range(dones.shape[0]):
            if not valid[t, b]:
                continue
            current.append(float(values[t, b]))
            if dones[t, b]:
                episodes.append(current)
                current = []
    return episodes


# ============================================================================ seed 004 examples


def test_lambda_prints_the_return_of_every_finished_episode(capsys):
    ppo = (
        small_config()
        .callbacks(on_episode_end=(lambda episode, **kw: print(f"Episode done. R={episode.get_return()}")))
        .build()
    )
    result = ppo.train()
    lines = capsys.readouterr().out.splitlines()
    returns = [float(m.group(1)) for line in lines if (m := re.fullmatch(r"Episode done\. R=(\S+)", line))]
    assert len(returns) == result["env_runners"]["num_episodes"] > 0
    # In the order the episodes finished, and equal to what the results report for them.
    assert returns == result["hist_stats"]["episode_reward"]
    # CartPole pays 1 per step: each return is its episode's length.
    assert returns == [float(n) for n in result["hist_stats"]["episode_lengths"]]
    ppo.stop()


class EpisodeReturn(RLlibCallback):
    """Seed 004's stateful callback, verbatim: global state kept between events."""

    def __init__(self):
        super().__init__()
        # Keep some global state in between individual callback events.
        self.overall_sum_of_rewards = 0.0

    def on_episode_end(self, *, episode, **kwargs):
        self.overall_sum_of_rewards += episode.get_return()
        print(f"Episode done. R={episode.get_return()} Global SUM={self.overall_sum_of_rewards}")


def test_stateful_callback_sums_the_returns_of_all_episodes(capsys):
    ppo = small_config().callbacks(EpisodeReturn).build()
    all_returns = []
    for _ in range(2):
        result = ppo.train()
        all_returns += result["hist_stats"]["episode_reward"][-result["episodes_this_iter"]:]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Episode done.")]
    printed = [re.fullmatch(r"Episode done\. R=(\S+) Global SUM=(\S+)", line).groups() for line in lines]
    assert [float(r) for r, _ in printed] == all_returns
    # The running sum printed after each episode is the sum of the returns so far.
    assert [float(s) for _, s in printed] == pytest.approx(np.cumsum(all_returns).tolist())
    (instance,) = ppo.env_runner.callbacks.instances
    assert isinstance(instance, EpisodeReturn)
    assert instance.overall_sum_of_rewards == pytest.approx(sum(all_returns))
    ppo.stop()


class MyCallbacks(RLlibCallback):
    """Seed 004's resolution-order example."""

    def on_train_result(self, *, algorithm, metrics_logger, result, **kwargs):
        print("RLlibCallback subclass")


class MyDebugCallbacks(RLlibCallback):
    """Seed 004's resolution-order example."""

    def on_train_result(self, *, algorithm, metrics_logger, result, **kwargs):
        print("debug subclass")


def test_chained_callbacks_run_subclasses_in_list_order_then_lambdas(capsys):
    config = small_config()
    # Define the callbacks order through the config.
    # Subclasses first, then individual `on_train_result` (or other events) callables:
    config.callbacks(
        callbacks_class=[MyDebugCallbacks, MyCallbacks],  # <- note: debug class first
        on_train_result=[
            lambda algorithm, **kw: print('lambda 1'),
            lambda algorithm, **kw: print('lambda 2'),
        ],
    )
    algo = config.build()
    capsys.readouterr()
    for _ in range(2):
        algo.train()
    expected = ["debug subclass", "RLlibCallback subclass", "lambda 1", "lambda 2"]
    assert capsys.readouterr().out.splitlines() == expected * 2
    algo.stop()


def _unpacked_equal(unpacked, state) -> bool:
    """Whether `unpacked` (from ormsgpack, arrays as lists) holds the same data as `state`."""
    if isinstance(state, dict):
        return isinstance(unpacked, dict) and unpacked.keys() == state.keys() and all(
            _unpacked_equal(unpacked[k], v) for k, v in state.items())
    if isinstance(state, np.ndarray):
        return np.array_equal(np.asarray(unpacked, dtype=state.dtype).reshape(state.shape), state)
    if isinstance(state, (list, tuple)):
        return len(unpacked) == len(state) and all(_unpacked_equal(u, s) for u, s in zip(unpacked, state))
    return unpacked == state


def test_dqn_on_train_result_writes_the_replay_buffer_every_second_iteration(tmp_path, monkeypatch):
    ormsgpack = pytest.importorskip("ormsgpack")
    from rlx.algorithms.dqn import DQNConfig

    monkeypatch.chdir(tmp_path)

    # Seed 004, Example 1, verbatim.
    def _write_buffer_if_necessary(algorithm, metrics_logger, result):
        # Write the buffer contents only every ith iteration.
        if algorithm.training_iteration % 2 == 0:
            # python dict
            buffer_contents = algorithm.local_replay_buffer.get_state()

            # binary
            msgpacked = ormsgpack.packb(
                buffer_contents,
                option=ormsgpack.OPT_SERIALIZE_NUMPY,
            )

            # Open some file and write the buffer contents into it using `ormsgpack`.
            with open("replay_buffer_contents.msgpack", "wb") as f:
                f.write(msgpacked)

    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .callbacks(
            on_train_result=_write_buffer_if_necessary,
        )
        .reporting(min_sample_timesteps_per_iteration=100)  # keeps the test fast
        .debugging(seed=0)
    )
    dqn = config.build()
    path = tmp_path / "replay_buffer_contents.msgpack"
    written = {}
    for i in range(1, 5):
        dqn.train()
        if i % 2 == 1:
            assert path.exists() is (i > 1)  # nothing written in iteration 1
            continue
        state = dqn.local_replay_buffer.get_state()
        unpacked = ormsgpack.unpackb(path.read_bytes())
        assert unpacked["size"] == len(dqn.local_replay_buffer) > 0
        assert _unpacked_equal(unpacked, state)
        written[i] = path.read_bytes()
    assert written[4] != written[2]  # rewritten in iteration 4 with the grown buffer
    # What was written restores a buffer.
    restored = type(dqn.local_replay_buffer)(capacity=unpacked["capacity"])
    restored.set_state(unpacked)
    assert len(restored) == len(dqn.local_replay_buffer)
    dqn.stop()


class LogAcrobotAngle(RLlibCallback):
    """Seed 004, Example 2, verbatim."""

    def on_episode_step(self, *, episode, env, **kwargs):
        # First get the angle from the env (note that `env` is a VectorEnv).
        # See https://github.com/Farama-Foundation/Gymnasium/blob/main/gymnasium/envs/classic_control/acrobot.py
        # for the env's source code.
        cos_theta1, sin_theta1 = env.envs[0].unwrapped.state[0], env.envs[0].unwrapped.state[1]
        # Convert cos/sin/tan into degree.
        deg_theta1 = math.degrees(math.atan2(sin_theta1, cos_theta1))

        # Log the theta1 degree value in the episode object, temporarily.
        episode.add_temporary_timestep_data("theta1", deg_theta1)

    def on_episode_end(self, *, episode, metrics_logger, **kwargs):
        # Get all the logged theta1 degree values and average them.
        theta1s = episode.get_temporary_timestep_data("theta1")
        avg_theta1 = np.mean(theta1s)

        # Log the final result - per episode - to the MetricsLogger.
        # Report with a sliding/smoothing window of 50.
        metrics_logger.log_value("theta1_mean", avg_theta1, reduce="mean", window=50)


class RecordAcrobotAngles(LogAcrobotAngle):
    """Also keeps every episode's theta1 values, to check what the results report."""

    def __init__(self):
        super().__init__()
        self.episode_means = []

    def on_episode_end(self, *, episode, metrics_logger, **kwargs):
        theta1s = episode.get_temporary_timestep_data("theta1")
        assert len(theta1s) == len(episode)  # one value per step, the last one included
        self.episode_means.append(float(np.mean(theta1s)))
        super().on_episode_end(episode=episode, metrics_logger=metrics_logger, **kwargs)


def test_acrobot_angle_is_reported_under_env_runners(capsys):
    config = (
        PPOConfig()
        .environment("Acrobot-v1")
        .callbacks(
            callbacks_class=RecordAcrobotAngles,
        )
        # rlx's default batch (2000 steps over 8 envs) ends no 500-step Acrobot episode in the
        # first iteration; 4000 steps do. One SGD pass keeps the test fast.
        .training(train_batch_size=4000, num_epochs=1)
        .debugging(seed=0)
    )
    ppo = config.build()
    for i in range(2):
        results = ppo.train()
        print(
            f"iter={i} "
            f"theta1_mean={results['env_runners']['theta1_mean']} "
            f"R={results['env_runners']['episode_return_mean']}"
        )
    theta1_mean = results["env_runners"]["theta1_mean"]
    assert -180.0 <= theta1_mean <= 180.0
    # The smoothing window of 50 holds every episode so far: its mean is the plain mean.
    means = ppo.env_runner.callbacks.instances[0].episode_means
    assert 0 < len(means) <= 50
    assert theta1_mean == pytest.approx(np.mean(means))
    assert math.isfinite(results["env_runners"]["episode_return_mean"])
    assert "theta1_mean=" in capsys.readouterr().out
    ppo.stop()


def test_in_evaluation_flag_tells_evaluation_runners_from_training_runners():
    seen = []

    def record(env_runner, episode, **kw):
        seen.append((env_runner, env_runner.config.in_evaluation))

    algo = (small_config().callbacks(on_episode_end=record)
            .evaluation(evaluation_interval=1, evaluation_duration=2).build())
    algo.train()
    training = [flag for runner, flag in seen if runner is algo.env_runner]
    evaluation = [flag for runner, flag in seen if runner is not algo.env_runner]
    assert training and not any(training)
    assert evaluation == [True, True]  # evaluation_duration=2 episodes
    eval_runners = algo.eval_env_runner_group.foreach_env_runner(lambda r: r)
    assert all(runner in eval_runners for runner, flag in seen if flag)
    algo.stop()


# ============================================================================ what events receive


class InspectEpisodes(RLlibCallback):
    """Checks, at every episode event, the arguments against the sub-env they describe."""

    def __init__(self):
        super().__init__()
        self.finished: list[dict] = []
        self.events: list[tuple] = []

    def on_episode_created(self, *, episode, env, env_index, **kwargs):
        assert isinstance(episode, SingleAgentEpisode) and not episode.is_reset
        sub_env = env.envs[env_index]
        self.events.append(("created", env_index, episode.id_, sub_env.num_resets))

    def on_episode_start(self, *, episode, env, env_index, env_runner, **kwargs):
        sub_env = env.envs[env_index]
        assert sub_env.t == 0 and len(episode) == 0
        assert episode.get_infos(-1) == {"t": 0, "resets": sub_env.num_resets}
        assert episode.last_observation_for()[0] == 0.0
        episode.user_data["started_by"] = (env_runner.worker_index, env_index)
        episode.user_data["rewards"] = []
        self.events.append(("start", env_index, episode.id_, sub_env.num_resets))

    def on_episode_step(self, *, episode, env, env_index, **kwargs):
        sub_env = env.envs[env_index]
        # The episode holds what the sub-env just returned.
        assert len(episode) == sub_env.t
        assert episode.get_observations(-1)[0] == sub_env.t
        assert episode.get_infos(-1) == {"t": sub_env.t, "action": episode.get_actions(-1)}
        assert episode.get_rewards(-1) == 1.0 + episode.get_actions(-1)
        assert episode.last_action_for() == episode.get_actions(-1)
        assert episode.last_reward_for() == episode.get_rewards(-1)
        assert episode.last_info_for() is episode.get_infos(-1)
        episode.user_data["rewards"].append(episode.get_rewards(-1))
        episode.add_temporary_timestep_data("t", sub_env.t)
        self.events.append(("step", env_index, episode.id_))

    def on_episode_end(self, *, episode, env, env_index, env_runner, **kwargs):
        assert episode.is_done and len(episode) == env.envs[env_index].t
        self.finished.append({
            "id": episode.id_,
            "env_index": env_index,
            "length": len(episode),
            "return": episode.get_return(),
            "user_data": dict(episode.user_data),
            "temporary": episode.get_temporary_timestep_data("t"),
            "worker_index": env_runner.worker_index,
        })
        self.events.append(("end", env_index, episode.id_))


def test_episode_events_receive_the_vector_env_and_a_consistent_episode():
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 5})
            .env_runners(num_envs_per_env_runner=3).callbacks(InspectEpisodes).build())
    result = algo.train()
    cb = algo.env_runner.callbacks.instances[0]
    assert len(cb.finished) == result["env_runners"]["num_episodes"] > 0
    assert sorted(f["return"] for f in cb.finished) == sorted(result["hist_stats"]["episode_reward"])
    assert len({f["id"] for f in cb.finished}) == len(cb.finished)  # a new id_ per episode
    for f in cb.finished:
        assert f["length"] == 5
        assert f["temporary"] == [1, 2, 3, 4, 5]
        # user_data set in on_episode_start is still there in on_episode_end.
        assert f["user_data"]["started_by"] == (0, f["env_index"])
        assert f["return"] == pytest.approx(sum(f["user_data"]["rewards"]))
    assert {f["env_index"] for f in cb.finished} == {0, 1, 2}
    algo.stop()


def test_episode_events_come_in_order_per_sub_env_created_before_reset():
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 4})
            .env_runners(num_envs_per_env_runner=2).callbacks(InspectEpisodes).build())
    algo.train()
    events = algo.env_runner.callbacks.instances[0].events
    for env_index in (0, 1):
        mine = [e for e in events if e[1] == env_index]
        # created (before the env's reset), start (after it), 4 steps, end; again and again.
        kinds = [e[0] for e in mine]
        pattern = ["created", "start", "step", "step", "step", "step", "end"]
        n_full = kinds.count("end")
        assert n_full > 0 and kinds[: 7 * n_full] == pattern * n_full
        assert kinds[7 * n_full:][:2] == ["created", "start"]
        resets_at = [(e[0], e[3]) for e in mine if e[0] in ("created", "start")]
        for (c, before), (s, after) in zip(resets_at[::2], resets_at[1::2]):
            assert (c, s) == ("created", "start") and after == before + 1
        # All events of one episode carry its id.
        for k in range(n_full):
            assert len({e[2] for e in mine[7 * k: 7 * k + 7]}) == 1
    algo.stop()


def test_episode_data_matches_the_sampled_batch():
    """What episodes record is what the Learner trains on."""
    seen_batches = []
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 5})
            .env_runners(num_envs_per_env_runner=2, batch_mode="complete_episodes")
            .callbacks(InspectEpisodes,
                       on_learn_on_batch=lambda train_batch, **kw: seen_batches.append(dict(train_batch)))
            .build())
    algo.train()
    cb = algo.env_runner.callbacks.instances[0]
    batch_episodes = episodes_by_column(seen_batches[0], "rewards")
    assert sorted(map(tuple, batch_episodes)) == sorted(tuple(f["user_data"]["rewards"]) for f in cb.finished)
    algo.stop()


def test_algorithm_init_environment_created_and_sample_end_events():
    log = []

    class Events(RLlibCallback):
        def on_algorithm_init(self, *, algorithm, metrics_logger, **kwargs):
            # Fires after setup: the runners and the learner exist.
            log.append(("init", algorithm, algorithm.env_runner is not None, algorithm.learner is not None))

        def on_environment_created(self, *, env_runner, env, env_context, metrics_logger, **kwargs):
            assert isinstance(env_context, EnvContext) and env_context["length"] == 3
            assert env_context.worker_index == env_runner.worker_index
            assert env is env_runner.env and len(env.envs) == 2
            log.append(("env", env_runner.worker_index, env_runner.config.in_evaluation))

        def on_sample_end(self, *, env_runner, samples, metrics_logger, **kwargs):
            log.append(("sample_end", env_runner, samples))

    algo = (small_config(env=CountingEnv).environment(env_config={"length": 3})
            .env_runners(num_envs_per_env_runner=2)
            .evaluation(evaluation_interval=1, evaluation_duration=1)
            .callbacks(Events).build())
    inits = [e for e in log if e[0] == "init"]
    assert inits == [("init", algo, True, True)] and log[-1] == inits[0]
    envs_created = sorted(e[1:] for e in log if e[0] == "env")
    n_eval = algo.eval_env_runner_group.num_remote_env_runners() or 1
    # One per EnvRunner: the training one and the evaluation runner(s).
    assert envs_created[:1] == [(0, False)]
    assert [flag for _, flag in envs_created[1:]] == [True] * n_eval
    log.clear()

    runner = algo.env_runner
    returned = []
    original_sample = runner.sample
    runner.sample = lambda *a, **kw: returned.append(original_sample(*a, **kw)) or returned[-1]
    algo.train()
    ends = [e for e in log if e[0] == "sample_end" and e[1] is runner]
    # Once per sample() call, with the batch that call returned.
    assert len(ends) == len(returned) > 0
    assert all(e[2] is batch for e, batch in zip(ends, returned))
    assert not [e for e in log if e[0] == "init"]
    algo.stop()


def test_no_episode_objects_are_built_without_episode_handlers(monkeypatch):
    built = []
    original_init = SingleAgentEpisode.__init__

    def counting_init(self, *args, **kwargs):
        built.append(1)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(SingleAgentEpisode, "__init__", counting_init)
    ends = []
    algo = small_config().callbacks(on_sample_end=lambda samples, **kw: ends.append(1),
                                    on_train_result=lambda result, **kw: None).build()
    algo.train()
    assert ends and built == []
    algo.stop()
    algo = small_config().callbacks(on_episode_end=lambda episode, **kw: None).build()
    algo.train()
    assert built
    algo.stop()


# ============================================================================ custom metrics


class ReturnMetrics(RLlibCallback):
    """Reports each episode's return as a custom metric and a histogram, old-API style."""

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["ret"] = episode.get_return()
        episode.hist_data["ret_hist"] = [episode.get_return()]


@pytest.mark.parametrize("keep_per_episode", [False, True])
def test_custom_metrics_summarize_the_episodes_of_the_results(keep_per_episode):
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 5}).callbacks(ReturnMetrics)
            .reporting(keep_per_episode_custom_metrics=keep_per_episode).build())
    for _ in range(3):
        result = algo.train()
        returns = result["hist_stats"]["episode_reward"]
        custom = result["custom_metrics"]
        assert result["env_runners"]["custom_metrics"] == custom
        assert result["hist_stats"]["ret_hist"] == returns
        if keep_per_episode:
            assert custom == {"ret": returns}
        else:
            assert custom == pytest.approx({"ret_mean": np.mean(returns), "ret_min": min(returns),
                                            "ret_max": max(returns)})
            assert custom["ret_mean"] == pytest.approx(result["env_runners"]["episode_return_mean"])
    algo.stop()


def test_custom_metrics_cover_the_same_episodes_as_the_returns_when_an_iteration_has_many():
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 1}).callbacks(ReturnMetrics)
            .reporting(metrics_num_episodes_for_smoothing=10).build())
    result = algo.train()
    returns = result["hist_stats"]["episode_reward"]
    assert len(returns) == result["episodes_this_iter"] > 10  # seed 003: excess episodes are never cut
    assert result["hist_stats"]["ret_hist"] == returns
    assert result["custom_metrics"]["ret_mean"] == pytest.approx(result["env_runners"]["episode_return_mean"])
    algo.stop()


def test_custom_metrics_keep_their_episodes_through_a_checkpoint(tmp_path):
    class ReturnMetricsHere(RLlibCallback):
        def on_episode_end(self, *, episode, **kwargs):
            episode.custom_metrics["ret"] = episode.get_return()
            episode.hist_data["ret_hist"] = np.array([episode.get_return()])
            episode.custom_metrics["note"] = "not a number"  # reported, but not checkpointed

    config = small_config(env=StepInfoEnv).environment(env_config={"length": 5}).callbacks(ReturnMetricsHere)
    algo = config.build()
    for _ in range(2):
        before = algo.train()
    assert before["custom_metrics"]["note"] == ["not a number"] * len(before["hist_stats"]["episode_reward"])
    algo.save(str(tmp_path / "ckpt"))
    algo.stop()
    restored = config.build()
    restored.restore(str(tmp_path / "ckpt"))
    result = restored.train()
    restored.stop()
    returns = result["hist_stats"]["episode_reward"]
    # The window holds the restored episodes as well as this iteration's, and so do the custom metrics.
    assert len(returns) > result["episodes_this_iter"]
    assert result["hist_stats"]["ret_hist"] == returns
    assert result["custom_metrics"]["ret_mean"] == pytest.approx(result["env_runners"]["episode_return_mean"])
    assert len(result["custom_metrics"]["note"]) == result["episodes_this_iter"]


class LogFromEpisodes(RLlibCallback):
    """Logs to the EnvRunner's MetricsLogger with different reduce settings."""

    def on_episode_step(self, *, metrics_logger, **kwargs):
        metrics_logger.log_value("steps_seen", 1, reduce="sum")
        metrics_logger.log_value("steps_this_iter", 1, reduce="sum", clear_on_reduce=True)

    def on_episode_end(self, *, episode, metrics_logger, **kwargs):
        metrics_logger.log_value("longest", len(episode), reduce="max")
        metrics_logger.log_value("ret_mean", episode.get_return(), reduce="mean", window=1000)


def test_values_logged_on_env_runners_appear_under_env_runners():
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 5})
            .env_runners(num_envs_per_env_runner=2).callbacks(LogFromEpisodes).build())
    total, all_returns = 0, []
    for _ in range(2):
        result = algo.train()
        runners = result["env_runners"]
        total += runners["num_env_steps_sampled"]
        all_returns += result["hist_stats"]["episode_reward"][-result["episodes_this_iter"]:]
        assert runners["steps_this_iter"] == runners["num_env_steps_sampled"]
        assert runners["steps_seen"] == total  # reduce="sum" accumulates over the run
        assert runners["longest"] == 5
        assert runners["ret_mean"] == pytest.approx(np.mean(all_returns))
        assert "steps_seen" not in result  # EnvRunner values are not at the top level
    algo.stop()


class LogFromAlgorithm(RLlibCallback):
    """Logs to the Algorithm's MetricsLogger from Algorithm events."""

    def on_algorithm_init(self, *, algorithm, metrics_logger, **kwargs):
        metrics_logger.log_value("num_inits", 1, reduce="sum")

    def on_train_result(self, *, algorithm, metrics_logger, result, **kwargs):
        metrics_logger.log_value("num_train_results", 1, reduce="sum")
        metrics_logger.log_value("iteration_mean", algorithm.training_iteration, reduce="mean", window=2)
        metrics_logger.log_value(("custom", "last_iteration"), algorithm.training_iteration, reduce=None,
                                 clear_on_reduce=True)


def test_values_logged_in_algorithm_events_appear_at_the_top_level():
    algo = small_config().callbacks(LogFromAlgorithm).build()
    for i in range(1, 4):
        result = algo.train()
        assert result["num_inits"] == 1
        assert result["num_train_results"] == i  # in the result of the call that logged it
        assert result["iteration_mean"] == pytest.approx(np.mean([max(1, i - 1), i]))
        assert result["custom"]["last_iteration"] == [i]  # reduce=None: the values since the last result
        assert "num_train_results" not in result["env_runners"]
    algo.stop()


CALLBACKS_MODULE = """
from rlx.callbacks.callbacks import RLlibCallback


class CountEpisodes(RLlibCallback):
    def on_episode_end(self, *, metrics_logger, **kwargs):
        metrics_logger.log_value("episodes_counted", 1, reduce="sum")
"""


@pytest.mark.parametrize("separator", [".", ":"])
def test_a_callbacks_class_named_by_its_import_path_runs(tmp_path, monkeypatch, separator):
    # Experiment files and `rlx train --config` can only name a class: "package.module.Name"
    # (or "package.module:Name"), as RLlib's update_from_dict accepts for callbacks_class.
    (tmp_path / "my_callbacks_for_test.py").write_text(CALLBACKS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = small_config(env=StepInfoEnv).environment(env_config={"length": 5})
    config.update_from_dict({"callbacks": f"my_callbacks_for_test{separator}CountEpisodes"})
    algo = config.build()
    result = algo.train()
    assert result["env_runners"]["episodes_counted"] == result["env_runners"]["num_episodes_lifetime"] > 0
    algo.stop()


@pytest.mark.parametrize("path, missing", [("no_such_module_xyz.Callbacks", "no_such_module_xyz"),
                                           ("rlx.callbacks.callbacks.NoSuchClass", "NoSuchClass")])
def test_a_callbacks_import_path_that_does_not_import_names_itself(path, missing):
    with pytest.raises(ConfigError, match=re.escape(path)) as info:
        small_config().callbacks(path)
    assert missing in str(info.value) and "package.module.Name" in str(info.value)


def test_an_import_path_naming_something_that_is_not_a_callbacks_class_is_refused():
    with pytest.raises(ConfigError, match="does not subclass RLlibCallback"):
        small_config().callbacks("collections.OrderedDict")


# ============================================================================ old API (seeds 000/002)


class OldTrainResult(DefaultCallbacks):
    """Trainer-era positional-style signature."""

    def on_train_result(self, algorithm, result, **kwargs):
        result.setdefault("order", []).append("A")
        result["algorithm_seen"] = algorithm


class OtherOldTrainResult(DefaultCallbacks):
    """Trainer-era callback that still names the algorithm `trainer`."""

    def on_train_result(self, *, trainer, result, **kwargs):
        result.setdefault("order", []).append("B")
        result["trainer_seen"] = trainer


def test_multicallbacks_in_an_old_config_dict():
    from rlx.algorithms.callbacks import MultiCallbacks

    algo = PPO(config={
        "env": "CartPole-v1",
        **SMALL_DICT,
        "callbacks": MultiCallbacks([
            OldTrainResult,
            OtherOldTrainResult,
        ]),
    })
    for _ in range(2):
        result = algo.train()
        assert result["order"] == ["A", "B"]
        assert result["algorithm_seen"] is algo and result["trainer_seen"] is algo
    algo.stop()


class OldEpisodeCallbacks(DefaultCallbacks):
    """Old-API episode callbacks: worker, base_env, policies, episode, env_index."""

    def on_episode_start(self, worker, base_env, policies, episode, env_index, **kwargs):
        episode.user_data["in_evaluation"] = worker.policy_config["in_evaluation"]
        episode.user_data["sub_env"] = base_env.get_sub_environments()[env_index]
        assert "default_policy" in policies

    def on_episode_end(self, worker, base_env, policies, episode, env_index, **kwargs):
        assert episode.user_data["sub_env"] is base_env.get_sub_environments()[env_index]
        key = "eval_length" if episode.user_data["in_evaluation"] else "train_length"
        episode.custom_metrics[key] = episode.length
        assert episode.total_reward == episode.get_return()


def test_old_episode_callbacks_and_policy_config_in_evaluation():
    algo = PPO(config={
        "env": CountingEnv, "env_config": {"length": 4}, **SMALL_DICT,
        "evaluation_interval": 1, "evaluation_duration": 2,
        "callbacks": OldEpisodeCallbacks,
    })
    result = algo.train()
    assert result["custom_metrics"] == {"train_length_mean": 4.0, "train_length_min": 4.0,
                                        "train_length_max": 4.0}
    assert result["evaluation"]["custom_metrics"] == {"eval_length_mean": 4.0, "eval_length_min": 4.0,
                                                      "eval_length_max": 4.0}
    algo.stop()


def test_old_dict_form_calls_functions_with_an_info_dict():
    infos = {"on_train_result": [], "on_episode_end": [], "on_sample_end": []}
    algo = PPO(config={
        "env": CountingEnv, **SMALL_DICT,
        "callbacks": {event: infos[event].append for event in infos},
    })
    result = algo.train()
    (train,) = infos["on_train_result"]
    assert train["result"] is result and train["trainer"] is algo and train["algorithm"] is algo
    assert len(infos["on_episode_end"]) == result["episodes_this_iter"]
    assert all(isinstance(i["episode"], SingleAgentEpisode) and i["episode"].is_done
               for i in infos["on_episode_end"])
    assert all(i["env"] is algo.env_runner.env for i in infos["on_episode_end"])
    assert infos["on_sample_end"] and all("samples" in i for i in infos["on_sample_end"])
    algo.stop()


def test_get_global_worker_is_the_latest_training_runner_in_use():
    first = small_config().build()
    second = small_config().build()
    assert get_global_worker() is second.env_runner
    second.stop()
    assert get_global_worker() is first.env_runner
    first.stop()
    assert get_global_worker() not in (first.env_runner, second.env_runner)


def test_get_global_worker_in_on_environment_created_is_the_new_runner():
    found = []

    def record(env_runner, **kw):
        found.append((get_global_worker() is env_runner, env_runner.config.in_evaluation))

    algo = (small_config().evaluation(evaluation_interval=1, evaluation_duration=1)
            .callbacks(on_environment_created=record).build())
    assert found and {flag for _, flag in found} == {False, True}
    assert all(same for same, _ in found)
    assert get_global_worker() is algo.env_runner
    algo.stop()


def test_get_global_worker_is_the_runner_that_samples():
    found = []

    def record(env_runner, **kw):
        found.append((get_global_worker() is env_runner, env_runner.config.in_evaluation))

    algo = (small_config()
            .evaluation(evaluation_interval=1, evaluation_duration=1)
            .callbacks(on_sample_end=record, on_episode_end=record).build())
    algo.train()
    assert {flag for _, flag in found} == {False, True}
    assert all(same for same, _ in found)
    # From the driver: the training runner of this process.
    assert get_global_worker() is algo.env_runner
    assert get_global_worker().get_policy() is algo.get_policy()
    algo.stop()


# ============================================================================ rewriting trajectories


class MoveFinalRewardToStart(RLlibCallback):
    """Backdates rewards based on values in info: each episode's final reward moves to its first step."""

    def on_postprocess_trajectory(self, *, worker, episode, agent_id, policy_id, policies,
                                  postprocessed_batch, original_batches, **kwargs):
        policy = policies[policy_id]
        assert policy is worker.get_policy()
        assert isinstance(postprocessed_batch, SampleBatch)
        # The model is there, e.g. for a curiosity bonus: logits for every row.
        logits, _ = policy.model({"obs": postprocessed_batch["obs"]})
        assert tuple(logits.shape) == (len(postprocessed_batch), 2)
        infos, rewards = postprocessed_batch["infos"], postprocessed_batch["rewards"]
        assert [info["t"] for info in infos] == (postprocessed_batch["t"] + 1).tolist()
        if postprocessed_batch["dones"][-1] and infos[0]["t"] == 1:  # the whole episode is here
            rewards[0] += rewards[-1]
            rewards[-1] = 0.0
        # The original batch keeps the rewards as sampled.
        _, pre_batch = original_batches[policy_id]
        assert [info["t"] for info in pre_batch["infos"]] == [info["t"] for info in infos]
        assert pre_batch["rewards"].tolist() == [1.0 + info["action"] for info in infos]


def test_backdating_rewards_changes_what_the_learner_sees():
    seen = []
    algo = (small_config(env=StepInfoEnv).environment(env_config={"length": 5})
            .env_runners(num_envs_per_env_runner=2, batch_mode="complete_episodes")
            .callbacks([MoveFinalRewardToStart, InspectEpisodes],
                       on_learn_on_batch=lambda train_batch, **kw: seen.append(dict(train_batch)))
            .build())
    algo.train()
    cb = algo.env_runner.callbacks.instances[1]
    trained = sorted(map(tuple, episodes_by_column(seen[0], "rewards")))
    originals = [f["user_data"]["rewards"] for f in cb.finished]
    backdated = sorted(tuple([r[0] + r[-1], *r[1:-1], 0.0]) for r in originals)
    assert len(trained) == len(originals) > 0
    assert trained == backdated
    algo.stop()


def test_old_dict_form_on_postprocess_traj_gets_pre_and_post_batch():
    calls = []

    def on_postprocess_traj(info):
        policy, pre_batch = info["pre_batch"]
        post_batch = info["post_batch"]
        calls.append((policy, np.array(pre_batch["rewards"])))
        logits, _ = policy.model({"obs": pre_batch["obs"]})
        assert tuple(logits.shape) == (len(pre_batch), 2)
        post_batch["rewards"] = post_batch["rewards"] * 2.0  # replacing the column works too

    trained = []
    algo = PPO(config={
        "env": CountingEnv, **SMALL_DICT,
        "callbacks": {"on_postprocess_traj": on_postprocess_traj,
                      "on_learn_on_batch": lambda info: trained.append(np.array(info["train_batch"]["rewards"]))},
    })
    algo.train()
    assert calls and all(policy is algo.get_policy() for policy, _ in calls)
    assert all(np.all(rewards == 1.0) for _, rewards in calls)  # the batch before the change
    assert np.all(trained[0] == 2.0)
    algo.stop()


def test_on_learn_on_batch_runs_before_each_update_and_its_changes_reach_it():
    order = []

    def scale_rewards(policy, train_batch, result):
        order.append("callback")
        assert policy is algo.get_policy()
        train_batch["rewards"] *= 3.0  # in place
        result["scaled"] = 3.0

    algo = small_config(env=CountingEnv).callbacks(on_learn_on_batch=scale_rewards).build()
    updated = []
    original_update = algo.learner.update_from_batch

    def update(batch, timestep):
        order.append("update")
        updated.append(np.array(batch["rewards"]))
        return original_update(batch, timestep)

    algo.learner.update_from_batch = update
    for _ in range(2):
        result = algo.train()
        assert result["learners"]["default_policy"]["scaled"] == 3.0
    assert order == ["callback", "update"] * 2
    assert all(np.all(rewards == 3.0) for rewards in updated)
    algo.stop()


def test_columns_assigned_in_on_learn_on_batch_reach_the_update():
    def replace_rewards(policy, train_batch, result):
        train_batch["rewards"] = np.full_like(train_batch["rewards"], -1.0)

    algo = small_config(env=CountingEnv).callbacks(on_learn_on_batch=replace_rewards).build()
    updated = []
    original_update = algo.learner.update_from_batch
    algo.learner.update_from_batch = lambda batch, timestep: updated.append(np.array(batch["rewards"])) or \
        original_update(batch, timestep)
    algo.train()
    assert len(updated) == 1 and np.all(updated[0] == -1.0)
    algo.stop()


def test_on_learn_on_batch_fires_for_every_dqn_update():
    from rlx.algorithms.dqn import DQNConfig

    batches = []
    algo = (DQNConfig().environment(CountingEnv).debugging(seed=0)
            .training(num_steps_sampled_before_learning_starts=32, train_batch_size=16)
            .reporting(min_sample_timesteps_per_iteration=64)
            .callbacks(on_learn_on_batch=lambda policy, train_batch, result: batches.append(len(train_batch)))
            .build())
    updates = []
    original_update = algo.learner.update_from_batch
    algo.learner.update_from_batch = lambda batch, timestep: updates.append(1) or original_update(batch, timestep)
    algo.train()
    assert len(batches) == len(updates) > 0
    assert set(batches) == {16}
    algo.stop()


# ============================================================================ curriculum (seed 000)


class MyEnv(TaskSettableEnv):
    """Seed 000's curriculum env, completed: its observation is its difficulty."""

    observation_space = gym.spaces.Box(-100.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.config = config
        self.current_difficulty = int((config or {}).get("start", 0))
        self.t = 0

    def get_task(self):
        return self.current_difficulty

    def set_task(self, task):
        self.current_difficulty = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.current_difficulty], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.current_difficulty], np.float32), 1.0, self.t >= 3, False, {}


def curriculum_fn(train_results, task_settable_env, env_ctx):
    """Seed 000's curriculum function, verbatim."""
    # Very simple curriculum function.
    current_task = task_settable_env.get_task()
    new_task = current_task + 1
    return new_task


def all_tasks(algo) -> list[list[int]]:
    """The task of every sub-env of every training runner."""
    return algo.env_runner_group.foreach_env_runner(lambda runner: runner.foreach_env(lambda env: env.get_task()))


def test_env_task_fn_sets_every_sub_env_after_every_train_call():
    calls = []

    def fn(train_results, task_settable_env, env_ctx):
        calls.append((train_results, env_ctx))
        return curriculum_fn(train_results, task_settable_env, env_ctx)

    trained_obs = []
    algo = (small_config(env=MyEnv).environment(env_config={"start": 0}, env_task_fn=fn)
            .env_runners(num_envs_per_env_runner=3)
            .callbacks(on_learn_on_batch=lambda train_batch, **kw: trained_obs.append(
                np.unique(train_batch["new_obs"])))
            .build())
    assert all_tasks(algo) == [[0, 0, 0]]
    for i in range(1, 4):
        result = algo.train()
        assert all_tasks(algo) == [[i] * 3]  # one step per iteration on every sub-env
        this_call = calls[-3:]
        assert all(r is result for r, _ in this_call)
        ctxs = sorted((ctx.worker_index, ctx.vector_index) for _, ctx in this_call)
        assert ctxs == [(0, 0), (0, 1), (0, 2)]
        assert all(isinstance(ctx, EnvContext) and ctx["start"] == 0 for _, ctx in this_call)
    assert len(calls) == 9
    # Each iteration steps the envs in the task set after the one before.
    assert [obs.tolist() for obs in trained_obs] == [[0.0], [1.0], [2.0]]
    algo.stop()


def test_env_task_fn_reaches_a_task_settable_env_under_gymnasium_wrappers():
    from rlx import register_env

    register_env("wrapped_curriculum_env", lambda ctx: gym.wrappers.TimeLimit(MyEnv(ctx), max_episode_steps=50))
    seen = []

    def fn(train_results, task_settable_env, env_ctx):
        seen.append(type(task_settable_env))
        return curriculum_fn(train_results, task_settable_env, env_ctx)

    algo = small_config(env="wrapped_curriculum_env").environment(env_task_fn=fn).build()
    algo.train()
    assert set(seen) == {MyEnv}
    assert set(algo.env_runner.foreach_env(lambda env: env.unwrapped.get_task())) == {1}
    algo.stop()


def test_env_task_fn_in_the_seed_config_dict():
    # Setup your Algorithm's config like so:
    config = {
        "env": MyEnv,
        "env_task_fn": curriculum_fn,
    }
    algo = PPO(config={**config, **SMALL_DICT, "num_envs_per_worker": 2})
    for i in range(1, 3):
        algo.train()
        assert all_tasks(algo) == [[i, i]]
    algo.stop()


class CurriculumCallbacks(DefaultCallbacks):
    """Seed 000's callbacks-based curriculum, with its lost lines completed."""

    def on_train_result(self, algorithm, result, **kwargs):
        if result["episode_reward_mean"] > 200:
            task = 2
        elif result["episode_reward_mean"] > 100:
            task = 1
        else:
            task = 0
        algorithm.workers.foreach_worker(
            lambda ev: ev.foreach_env(
                lambda env: env.set_task(task)))


def test_curriculum_through_on_train_result():
    algo = PPO(config={"env": MyEnv, "env_config": {"start": 7}, **SMALL_DICT,
                       "callbacks": CurriculumCallbacks})
    assert {t for tasks in all_tasks(algo) for t in tasks} == {7}
    result = algo.train()
    assert result["episode_reward_mean"] == 3.0
    assert {t for tasks in all_tasks(algo) for t in tasks} == {0}
    algo.stop()


def test_curriculum_through_the_old_dict_form_on_train_result():
    def on_train_result(info):
        result = info["result"]
        if result["episode_reward_mean"] > 200:
            task = 2
        elif result["episode_reward_mean"] > 100:
            task = 1
        else:
            task = 0
        trainer = info["trainer"]
        trainer.workers.foreach_worker(
            lambda ev: ev.foreach_env(
                lambda env: env.set_task(task)))

    algo = PPO(config={"env": MyEnv, "env_config": {"start": 7}, **SMALL_DICT,
                       "callbacks": {"on_train_result": on_train_result}})
    algo.train()
    assert {t for tasks in all_tasks(algo) for t in tasks} == {0}
    algo.stop()


def test_curriculum_from_the_training_loop():
    # The body of the seed's `train(config, reporter)` loop, for two iterations (without the
    # seed's num_workers=2: rlx samples in the driver until remote EnvRunners arrive).
    config = {"num_gpus": 0, "env_config": {"start": 7}, **SMALL_DICT}
    algo = PPO(config=config, env=MyEnv)
    num_envs = algo.config.num_envs_per_env_runner
    for _ in range(2):
        result = algo.train()
        if result["episode_reward_mean"] > 200:
            task = 2
        elif result["episode_reward_mean"] > 100:
            task = 1
        else:
            task = 0
        algo.workers.foreach_worker(
            lambda ev: ev.foreach_env(
                lambda env: env.set_task(task)))
        assert all_tasks(algo) == [[0] * num_envs]
    # The current API's spelling of the same update; the next samples see the new task.
    algo.env_runner_group.foreach_env_runner(lambda env_runner: env_runner.foreach_env(lambda env: env.set_task(5)))
    assert all_tasks(algo) == [[5] * num_envs]
    batch = algo.env_runner.sample(num_timesteps=num_envs)
    assert np.unique(batch["new_obs"]).tolist() == [5.0]
    algo.stop()


def test_env_task_fn_needs_a_task_settable_env():
    with pytest.raises(ConfigError, match=r"CartPoleEnv is not task-settable(.|\n)*TaskSettableEnv"):
        small_config().environment(env_task_fn=curriculum_fn).build()
    with pytest.raises(ConfigError, match=r"CountingEnv is not task-settable(.|\n)*get_task\(\)"):
        PPO(config={"env": CountingEnv, "env_task_fn": curriculum_fn, **SMALL_DICT})


# ============================================================================ errors and checkpoints


def test_unknown_event_names_are_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"on_episode_ends(.|\n)*[Dd]id you mean(.|\n)*'on_episode_end'"):
        small_config().callbacks(on_episode_ends=lambda episode, **kw: None)
    with pytest.raises(ConfigError, match=r"on_train_results(.|\n)*'on_train_result'"):
        PPO(config={"env": "CartPole-v1", "callbacks": {"on_train_results": lambda info: None}})


def test_misspelled_method_in_a_subclass_is_refused():
    class Misspelled(RLlibCallback):
        def on_episode_ended(self, *, episode, **kwargs):
            pass

    with pytest.raises(ConfigError, match=r"Misspelled\.on_episode_ended(.|\n)*'on_episode_end'"):
        small_config().callbacks(Misspelled)


def test_other_on_methods_in_a_subclass_get_a_warning():
    class WithHelper(RLlibCallback):
        def on_something_else_entirely(self):
            pass

    with pytest.warns(UserWarning, match=r"WithHelper\.on_something_else_entirely is not a callback event"):
        small_config().callbacks(WithHelper)


def test_handler_asking_for_an_argument_the_event_does_not_pass_is_refused():
    class WrongArgument(RLlibCallback):
        def on_train_result(self, *, algo, result, **kwargs):
            pass

    with pytest.raises(ConfigError, match=r"'algo'(.|\n)*'algorithm'"):
        small_config().callbacks(WrongArgument).build()


def test_a_class_that_is_not_a_callback_is_refused():
    class NotACallback:
        def on_train_result(self, **kwargs):
            pass

    with pytest.raises(ConfigError, match=r"NotACallback does not subclass RLlibCallback"):
        small_config().callbacks(NotACallback)
    with pytest.raises(ConfigError, match="RLlibCallback"):
        PPO(config={"env": "CartPole-v1", "callbacks": NotACallback})


class RecordCheckpointLoads(RLlibCallback):
    """At module level so a checkpoint can store it by its import path."""

    loads: list = []

    def on_checkpoint_loaded(self, *, algorithm, **kwargs):
        # Fires after the state is loaded: the counters are the checkpoint's.
        RecordCheckpointLoads.loads.append((algorithm, algorithm.training_iteration))


def test_on_checkpoint_loaded_fires_after_restore_and_from_checkpoint(tmp_path):
    RecordCheckpointLoads.loads = []
    algo = small_config().callbacks(RecordCheckpointLoads).build()
    algo.train()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
    assert RecordCheckpointLoads.loads == []

    fresh = small_config().callbacks(RecordCheckpointLoads).build()
    fresh.restore(path)
    assert RecordCheckpointLoads.loads == [(fresh, 2)]

    restored = Algorithm.from_checkpoint(path)
    assert RecordCheckpointLoads.loads == [(fresh, 2), (restored, 2)]
    assert isinstance(restored.callbacks.instances[0], RecordCheckpointLoads)
    for a in (algo, fresh, restored):
        a.stop()

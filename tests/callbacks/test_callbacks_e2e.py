"""Callbacks, episodes, custom metrics and curriculum through a real Algorithm (seeds 000, 004)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from conftest import small_config
from envs_for_tests import CountingEnv
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.callbacks import DefaultCallbacks, MultiCallbacks
from rlx.algorithms.ppo import PPO
from rlx.callbacks.callbacks import RLlibCallback
from rlx.env.apis.task_settable_env import TaskSettableEnv
from rlx.evaluation.rollout_worker import get_global_worker
from rlx.utils.errors import ConfigError

# ---------------------------------------------------------------------------- seed 004


def test_episode_end_lambda_sees_every_finished_episode(capsys):
    algo = small_config().callbacks(
        on_episode_end=lambda episode, **kw: print(f"Episode done. R={episode.get_return()}")
    ).build()
    result = algo.train()
    printed = [float(line.split("R=")[1]) for line in capsys.readouterr().out.splitlines() if "R=" in line]
    assert len(printed) == result["env_runners"]["num_episodes"] > 0
    assert sorted(printed) == sorted(result["hist_stats"]["episode_reward"])
    algo.stop()


class EpisodeReturn(RLlibCallback):
    """Seed 004's stateful callback: sums every episode's return."""

    def __init__(self):
        super().__init__()
        self.overall_sum_of_rewards = 0.0

    def on_episode_end(self, *, episode, **kwargs):
        self.overall_sum_of_rewards += episode.get_return()


def test_stateful_callback_keeps_state_across_events():
    algo = small_config().callbacks(EpisodeReturn).build()
    algo.train()
    result = algo.train()
    assert result["episodes_total"] < 100  # so hist_stats (the smoothing window) holds every episode
    returns = result["hist_stats"]["episode_reward"]
    total = algo.env_runner.callbacks.instances[0].overall_sum_of_rewards
    assert total == pytest.approx(sum(returns))
    algo.stop()


def test_subclasses_run_first_in_list_order_then_callables(capsys):
    class MyCallbacks(RLlibCallback):
        def on_train_result(self, *, algorithm, metrics_logger, result, **kwargs):
            print("RLlibCallback subclass")

    class MyDebugCallbacks(RLlibCallback):
        def on_train_result(self, *, algorithm, metrics_logger, result, **kwargs):
            print("debug subclass")

    config = small_config().callbacks(
        callbacks_class=[MyDebugCallbacks, MyCallbacks],
        on_train_result=[lambda algorithm, **kw: print("lambda 1"), lambda algorithm, **kw: print("lambda 2")],
    )
    algo = config.build()
    capsys.readouterr()
    algo.train()
    algo.train()
    lines = capsys.readouterr().out.split()
    assert " ".join(lines) == " ".join(["debug", "subclass", "RLlibCallback", "subclass", "lambda", "1", "lambda",
                                        "2"] * 2)
    algo.stop()


def test_dqn_on_train_result_writes_the_replay_buffer_every_second_iteration(tmp_path, monkeypatch):
    ormsgpack = pytest.importorskip("ormsgpack")
    from rlx.algorithms.dqn import DQNConfig

    monkeypatch.chdir(tmp_path)
    written = []

    def _write_buffer_if_necessary(algorithm, metrics_logger, result):
        if algorithm.training_iteration % 2 == 0:
            buffer_contents = algorithm.local_replay_buffer.get_state()
            msgpacked = ormsgpack.packb(buffer_contents, option=ormsgpack.OPT_SERIALIZE_NUMPY)
            with open("replay_buffer_contents.msgpack", "wb") as f:
                f.write(msgpacked)
            written.append(algorithm.training_iteration)

    config = (DQNConfig().environment("CartPole-v1").debugging(seed=0)
              .reporting(min_sample_timesteps_per_iteration=100)
              .callbacks(on_train_result=_write_buffer_if_necessary))
    dqn = config.build()
    for _ in range(4):
        dqn.train()
    assert written == [2, 4]
    contents = ormsgpack.unpackb((tmp_path / "replay_buffer_contents.msgpack").read_bytes())
    assert isinstance(contents, dict) and contents
    dqn.stop()


class LogFirstObs(RLlibCallback):
    """Logs through the MetricsLogger from EnvRunner events, checking what the events pass."""

    def on_episode_step(self, *, episode, env, env_index, **kwargs):
        assert hasattr(env, "envs") and 0 <= env_index < len(env.envs)
        # The episode's latest observation is what the sub-env reports now.
        assert episode.get_observations(-1)[0] == env.envs[env_index].unwrapped.t
        episode.add_temporary_timestep_data("t", episode.get_observations(-1)[0])

    def on_episode_end(self, *, episode, metrics_logger, **kwargs):
        ts = episode.get_temporary_timestep_data("t")
        assert ts == list(range(1, len(episode) + 1))
        metrics_logger.log_value("mean_t", np.mean(ts), reduce="mean", window=50)
        metrics_logger.log_value("episodes_seen", 1, reduce="sum")


def test_values_logged_in_env_runner_events_appear_under_env_runners():
    algo = small_config(env=CountingEnv).environment(env_config={"length": 5}).callbacks(LogFirstObs).build()
    first = algo.train()
    second = algo.train()
    assert first["env_runners"]["mean_t"] == pytest.approx(3.0)  # mean of 1..5
    # reduce="sum" without clear_on_reduce counts over the whole run.
    assert second["env_runners"]["episodes_seen"] == first["episodes_total"] + second["episodes_this_iter"]
    algo.stop()


class AlgorithmLogger(RLlibCallback):
    """Logs from Algorithm events; these values go to the top level of the result."""

    def on_algorithm_init(self, *, algorithm, metrics_logger, **kwargs):
        metrics_logger.log_value("inits", 1, reduce="sum")

    def on_train_result(self, *, algorithm, metrics_logger, result, **kwargs):
        metrics_logger.log_value("train_calls", 1, reduce="sum")
        metrics_logger.log_value(("nested", "iteration"), algorithm.training_iteration, reduce="max")


def test_values_logged_in_algorithm_events_appear_at_the_top_level():
    algo = small_config().callbacks(AlgorithmLogger).build()
    algo.train()
    result = algo.train()
    assert result["inits"] == 1
    assert result["train_calls"] == 2
    assert result["nested"]["iteration"] == 2
    algo.stop()


class LengthMetric(RLlibCallback):
    """Stores each episode's length as a custom metric."""

    def on_episode_start(self, *, episode, **kwargs):
        episode.user_data["steps"] = 0

    def on_episode_step(self, *, episode, **kwargs):
        episode.user_data["steps"] += 1

    def on_episode_end(self, *, episode, **kwargs):
        assert episode.user_data["steps"] == len(episode)
        episode.custom_metrics["length"] = len(episode)
        episode.hist_data["lengths_again"] = [len(episode)]


@pytest.mark.parametrize("keep_per_episode", [False, True])
def test_custom_metrics_are_summarized_or_kept_per_episode(keep_per_episode):
    algo = (small_config().callbacks(LengthMetric)
            .reporting(keep_per_episode_custom_metrics=keep_per_episode).build())
    result = algo.train()
    lengths = result["hist_stats"]["episode_lengths"]
    assert result["hist_stats"]["lengths_again"] == lengths
    if keep_per_episode:
        assert result["custom_metrics"]["length"] == lengths
    else:
        assert result["custom_metrics"]["length_mean"] == pytest.approx(np.mean(lengths))
        assert result["custom_metrics"]["length_min"] == min(lengths)
        assert result["custom_metrics"]["length_max"] == max(lengths)
    algo.stop()


def test_in_evaluation_is_true_on_evaluation_runners_only():
    seen = {}

    def record(env_runner, **kw):
        seen.setdefault(env_runner.config.in_evaluation, set()).add(env_runner.policy_config["in_evaluation"])

    algo = (small_config().callbacks(on_episode_end=record)
            .evaluation(evaluation_interval=1, evaluation_duration=2).build())
    algo.train()
    assert seen == {False: {False}, True: {True}}
    algo.stop()


def test_events_fire_in_order_with_their_arguments():
    log = []

    class Order(RLlibCallback):
        def on_algorithm_init(self, *, algorithm, **kwargs):
            log.append(("init", algorithm.iteration))

        def on_environment_created(self, *, env_runner, env, env_context, **kwargs):
            log.append(("env", env_context.worker_index, len(env.envs)))

        def on_episode_created(self, *, episode, **kwargs):
            log.append(("created", episode.is_reset))

        def on_episode_start(self, *, episode, **kwargs):
            log.append(("start", episode.is_reset))

        def on_sample_end(self, *, samples, **kwargs):
            log.append(("sample_end", samples["rewards"].size))

    algo = small_config().env_runners(num_envs_per_env_runner=2).callbacks(Order).build()
    assert log[0] == ("env", 0, 2) and log[-1] == ("init", 0)
    log.clear()
    algo.train()
    assert log[:4] == [("created", False), ("start", True), ("created", False), ("start", True)]
    assert [e for e in log if e[0] == "sample_end"] == [("sample_end", algo.config.total_train_batch_size)]
    algo.stop()


# ---------------------------------------------------------------------------- old API (seeds 000/002)


class OldStyle(DefaultCallbacks):
    """Positional-or-keyword signature, as in the Trainer-era docs."""

    def on_train_result(self, algorithm, result, **kwargs):
        result["callback_ok"] = True


class OtherOldStyle(DefaultCallbacks):
    def on_train_result(self, algorithm, result, **kwargs):
        result["second_ok"] = result.get("callback_ok", False)


def test_multicallbacks_in_an_old_config_dict_run_in_order():
    algo = PPO(config={"env": "CartPole-v1", "train_batch_size": 256, "sgd_minibatch_size": 64,
                       "num_sgd_iter": 1, "callbacks": MultiCallbacks([OldStyle, OtherOldStyle])})
    result = algo.train()
    assert result["callback_ok"] is True and result["second_ok"] is True
    algo.stop()


def test_old_dict_form_passes_an_info_dict():
    infos = []
    algo = PPO(config={"env": "CartPole-v1", "train_batch_size": 256, "sgd_minibatch_size": 64,
                       "callbacks": {"on_train_result": infos.append}})
    result = algo.train()
    assert infos[0]["result"] is result and infos[0]["trainer"] is algo and infos[0]["algorithm"] is algo
    algo.stop()


def test_get_global_worker_is_the_sampling_runner():
    found = []
    algo = small_config().callbacks(on_sample_end=lambda env_runner, **kw: found.append(
        get_global_worker() is env_runner)).build()
    algo.train()
    assert found == [True]
    assert get_global_worker() is algo.env_runner
    algo.stop()


class MoveFinalRewardToStart(RLlibCallback):
    """Backdates rewards: every step's reward is added to the previous step (seed 000)."""

    def on_postprocess_trajectory(self, *, postprocessed_batch, original_batches, policies, **kwargs):
        policy, pre_batch = original_batches["default_policy"]
        assert policy is policies["default_policy"] and policy.model is not None
        np.testing.assert_array_equal(pre_batch["rewards"], postprocessed_batch["rewards"])
        postprocessed_batch["rewards"] = postprocessed_batch["rewards"] * 10.0


def test_rewriting_trajectories_changes_what_the_loss_sees():
    seen = []
    algo = (small_config().callbacks(
        MoveFinalRewardToStart,
        on_learn_on_batch=lambda policy, train_batch, result: seen.append(np.array(train_batch["rewards"])),
    ).build())
    algo.train()
    assert len(seen) == 1 and np.all(seen[0] == 10.0)  # CartPole's reward is 1 per step
    algo.stop()


def test_on_learn_on_batch_changes_reach_the_update_and_its_result_the_metrics():
    def double_rewards(policy, train_batch, result):
        train_batch["rewards"] *= 2.0
        result["callback_metric"] = 7

    seen = []
    algo = small_config().callbacks(on_learn_on_batch=double_rewards).build()
    original = algo.learner.update_from_batch
    algo.learner.update_from_batch = lambda batch, timestep: (seen.append(np.array(batch["rewards"])),
                                                              original(batch, timestep))[1]
    result = algo.train()
    assert np.all(seen[0] == 2.0)
    assert result["learners"]["default_policy"]["callback_metric"] == 7
    algo.stop()


# ---------------------------------------------------------------------------- errors and checkpoints


def test_misspelled_event_names_are_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match="Did you mean .*'on_episode_end'"):
        small_config().callbacks(on_episode_ends=lambda **kw: None)

    class Misspelled(RLlibCallback):
        def on_episode_ended(self, **kwargs):
            pass

    with pytest.raises(ConfigError, match="on_episode_end"):
        small_config().callbacks(Misspelled)


def test_a_class_that_is_not_a_callback_is_refused():
    class NotACallback:
        pass

    with pytest.raises(ConfigError, match="RLlibCallback"):
        small_config().callbacks(NotACallback)


LOADED: list = []


class RecordLoads(RLlibCallback):
    """Module level, so a checkpoint can store it by import path."""

    def on_checkpoint_loaded(self, *, algorithm, **kwargs):
        LOADED.append(algorithm)


def test_on_checkpoint_loaded_fires_after_restore_and_from_checkpoint(tmp_path):
    LOADED.clear()
    algo = small_config().callbacks(RecordLoads).build()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    assert LOADED == []
    algo.restore(path)
    assert LOADED == [algo]
    restored = Algorithm.from_checkpoint(path)
    assert LOADED == [algo, restored]
    algo.stop()
    restored.stop()


# ---------------------------------------------------------------------------- curriculum (seed 000)


class Difficulty(TaskSettableEnv):
    """A task-settable env: the task is a difficulty integer, stepping ends after 3 steps."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.current_difficulty = 0
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


def test_env_task_fn_sets_every_sub_env_after_every_train_call():
    calls = []

    def curriculum_fn(train_results, task_settable_env, env_ctx):
        calls.append((train_results["training_iteration"], env_ctx.worker_index, env_ctx.vector_index))
        return task_settable_env.get_task() + 1

    algo = (small_config(env=Difficulty).env_runners(num_envs_per_env_runner=3)
            .environment(env_task_fn=curriculum_fn).build())
    for _ in range(2):
        algo.train()
    assert algo.env_runner.foreach_env(lambda env: env.get_task()) == [2, 2, 2]
    assert calls == [(1, 0, 0), (1, 0, 1), (1, 0, 2), (2, 0, 0), (2, 0, 1), (2, 0, 2)]
    algo.stop()


def test_env_task_fn_in_the_old_config_dict():
    algo = PPO(config={"env": Difficulty, "env_task_fn": lambda r, env, ctx: 5, "train_batch_size": 256,
                       "sgd_minibatch_size": 64})
    algo.train()
    assert set(algo.workers.local_worker().foreach_env(lambda env: env.get_task())) == {5}
    algo.stop()


def test_env_task_fn_needs_a_task_settable_env():
    with pytest.raises(ConfigError, match="not task-settable.*TaskSettableEnv"):
        small_config().environment(env_task_fn=lambda r, env, ctx: 1).build()


class CurriculumCallbacks(DefaultCallbacks):
    """Seed 000's callbacks-based curriculum."""

    def on_train_result(self, algorithm, result, **kwargs):
        task = 2 if result["episode_reward_mean"] > 200 else 1
        algorithm.workers.foreach_worker(lambda ev: ev.foreach_env(lambda env: env.set_task(task)))


def test_curriculum_from_a_callback():
    algo = small_config(env=Difficulty).callbacks(CurriculumCallbacks).build()
    algo.train()
    assert set(algo.env_runner_group.foreach_env_runner(lambda r: tuple(r.foreach_env(lambda e: e.get_task())))) \
        == {(1,) * algo.config.num_envs_per_env_runner}
    batch = algo.env_runner.sample(num_timesteps=algo.config.num_envs_per_env_runner * 4)
    assert np.all(batch["obs"][-1] == 1.0)  # episodes started after the change see task 1
    algo.stop()


class TrainResultOnly(RLlibCallback):
    """Handles an Algorithm event only."""

    def on_train_result(self, *, result, **kwargs):
        result["seen"] = True


@pytest.mark.parametrize("callbacks", [None, TrainResultOnly])
def test_runners_build_no_episode_objects_when_no_episode_event_is_handled(callbacks):
    config = small_config()
    if callbacks is not None:
        config = config.callbacks(callbacks)
    algo = config.build()
    result = algo.train()
    assert result.get("seen", False) is (callbacks is not None)
    runner = algo.env_runner
    assert runner.callbacks.handled_events.isdisjoint({"on_episode_created", "on_episode_start", "on_episode_step",
                                                       "on_episode_end", "on_sample_end"})
    assert runner._episodes == [None] * runner.num_envs  # the per-step episode path never ran
    algo.stop()

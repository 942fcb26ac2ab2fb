"""NaN, inf and None never pass silently.

- EnvRunners check every step's reward, observation and info: a NaN/inf/None value, an
  observation of the wrong shape, a reward that is not a number or an info that is not a
  dict raises an EnvError naming the sub-env and the step; with
  restart_failed_sub_environments the sub-env is rebuilt and its episode dropped instead.
- Learners refuse an optimizer step whose loss or gradient norm is not finite
  (NonFiniteUpdateError, weights unchanged), or skip and count it with
  training(skip_nonfinite_updates=True), in one process or in a LearnerGroup.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.ppo.ppo_learner import PPOLearner
from rlx.algorithms.sac import SACConfig
from rlx.core.learner_group import LearnerGroup
from rlx.utils.errors import EnvError, EnvOutputError, NonFiniteUpdateError

from conftest import small_config


class BadOutputEnv(gym.Env):
    """Returns 0.1-observations and reward 1 for 10-step episodes, except that sub-env `on` returns
    `value` as its `what` ('reward', 'obs' or 'info') at step `at` of an episode, or ('reset_obs')
    from its `at`-th reset, while `bad_episodes_left` (counted over every instance, so that a
    rebuilt sub-env behaves) lasts."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)
    bad_episodes_left = 0

    def __init__(self, config):
        self.what = config["what"]
        self.value = config["value"]
        self.at = config.get("at", 3)
        self.bad = config.vector_index == config.get("on", 1)
        self.t = 0
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.resets += 1
        if self.bad and self.what == "reset_obs" and self.resets == self.at and BadOutputEnv.bad_episodes_left > 0:
            BadOutputEnv.bad_episodes_left -= 1
            return self.value, {}
        return np.full(3, 0.1, np.float32), {}

    def step(self, action):
        self.t += 1
        obs, reward, info = np.full(3, 0.1, np.float32), 1.0, {}
        if self.bad and self.what != "reset_obs" and self.t == self.at and BadOutputEnv.bad_episodes_left > 0:
            BadOutputEnv.bad_episodes_left -= 1
            if self.what == "reward":
                reward = self.value
            elif self.what == "obs":
                obs = self.value
            elif self.what == "info":
                info = self.value
        return obs, reward, False, self.t >= 10, info


@pytest.fixture(autouse=True)
def one_bad_episode():
    BadOutputEnv.bad_episodes_left = 1
    yield
    BadOutputEnv.bad_episodes_left = 0


def bad_env_config(what, value, **env_config) -> PPOConfig:
    return (small_config(env=BadOutputEnv, train_batch_size=80, minibatch_size=40, num_epochs=1)
            .environment(env_config={"what": what, "value": value, **env_config})
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=40))


def weights_finite(learner) -> bool:
    return all(np.isfinite(w).all() for w in learner.get_weights().values())


NAN_OBS = np.array([0.1, np.nan, 0.1], np.float32)
INF_OBS = np.array([0.1, np.inf, 0.1], np.float32)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the 1e39 reward
@pytest.mark.parametrize("what, value, message", [
    ("reward", np.nan, "returned reward nan"),
    ("reward", np.inf, "returned reward inf"),
    ("reward", -np.inf, "returned reward -inf"),
    ("reward", None, "returned reward NoneType None"),
    ("reward", "1.5", "returned reward str '1.5'"),
    ("reward", np.array([1.0]), r"returned reward array of shape \(1,\)"),
    ("reward", 1e39, "returned reward inf \\(as stored in the float32"),  # finite, but not in float32
    ("obs", NAN_OBS, "returned an observation with 1 NaN and 0 infinite values"),
    ("obs", INF_OBS, "returned an observation with 0 NaN and 1 infinite values"),
    ("obs", None, "returned observation NoneType None"),
    ("obs", np.zeros(4, np.float32), r"returned an observation of shape \(4,\)"),
    ("obs", np.zeros(1, np.float32), r"returned an observation of shape \(1,\)"),  # would broadcast
    ("obs", np.array(["a", "b", "c"]), "returned observation array of shape"),
    ("info", ["not", "a", "dict"], "returned info list"),
])
def test_bad_env_output_raises_env_error_naming_sub_env_and_step(what, value, message):
    algo = bad_env_config(what, value).build()
    try:
        with pytest.raises(EnvOutputError, match=message) as info:
            algo.env_runner.sample()
        text = str(info.value)
        assert "Sub-env 1 of EnvRunner 0 (env " in text and "BadOutputEnv" in text
        assert "at step 3 of its episode" in text
        assert "restart_failed_sub_environments=True" in text
        assert isinstance(info.value, EnvError)
    finally:
        algo.stop()


@pytest.mark.parametrize("at", [1, 2])  # the first reset (before sampling) or one after an episode
@pytest.mark.parametrize("value", [NAN_OBS, INF_OBS, None])
def test_bad_reset_observation_raises_env_error(at, value):
    algo = bad_env_config("reset_obs", value, at=at).build()
    message = "returned observation NoneType None" if value is None else "returned an observation with"
    try:
        with pytest.raises(EnvOutputError, match=rf"Sub-env 1 of EnvRunner 0 .* {message}.* from reset\(\)"):
            algo.env_runner.sample()
    finally:
        algo.stop()


def test_env_checker_refuses_nan_reward_and_observation_at_build():
    with pytest.raises(EnvError, match="returned reward nan; rewards must be finite"):
        bad_env_config("reward", np.nan, on=0, at=1).build()
    BadOutputEnv.bad_episodes_left = 1
    with pytest.raises(EnvError, match="It holds NaN or infinite values"):
        bad_env_config("obs", NAN_OBS, on=0, at=1).build()


def test_disable_env_checking_turns_off_the_info_check_but_not_the_nan_check():
    algo = bad_env_config("reward", np.nan).environment(disable_env_checking=True).build()
    try:
        with pytest.raises(EnvOutputError, match="returned reward nan"):
            algo.env_runner.sample()
    finally:
        algo.stop()
    BadOutputEnv.bad_episodes_left = 1
    algo = bad_env_config("info", ["not", "a", "dict"]).environment(disable_env_checking=True).build()
    try:
        assert algo.env_runner.sample()["rewards"].shape == (40, 2)
    finally:
        algo.stop()


@pytest.mark.parametrize("what, value", [("reward", np.nan), ("reward", None), ("obs", NAN_OBS),
                                         ("obs", np.zeros(4, np.float32)), ("info", [1])])
def test_restart_failed_sub_environments_rebuilds_the_sub_env_and_drops_its_episode(what, value):
    algo = bad_env_config(what, value).fault_tolerance(restart_failed_sub_environments=True).build()
    runner = algo.env_runner
    try:
        batch = runner.sample()
        assert runner.num_sub_env_restarts == 1
        for column in ("obs", "new_obs", "rewards"):
            assert np.isfinite(batch[column]).all(), column
        # Sub-env 1's episode ends as a truncation at step 3 and is not reported; sub-env 0's
        # episodes are whole (10 steps).
        assert batch["truncateds"][2, 1] and not batch["terminateds"][2, 1]
        assert batch["rewards"][2, 1] == 0.0
        lengths = runner.get_metrics()["hist_stats"]["episode_lengths"].peek()
        assert lengths and set(lengths) == {10}
        results = [algo.train() for _ in range(2)]  # training goes on
        assert np.isfinite(results[-1]["learners"]["default_policy"]["total_loss"])
        assert weights_finite(algo.learner)
    finally:
        algo.stop()


# ---------------------------------------------------------------------- learners


def ppo_algo(**training):
    opts = dict(train_batch_size=64, minibatch_size=32, num_epochs=1)
    opts.update(training)
    return (small_config(**opts).env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32).build())


def nan_reward_batch(algo):
    batch = algo.env_runner.sample()
    batch["rewards"][3, 1] = np.nan
    return batch


def test_ppo_learner_refuses_nan_loss_before_the_weights_change():
    algo = ppo_algo()
    try:
        before = algo.learner.get_weights()
        with pytest.raises(NonFiniteUpdateError) as info:
            algo.learner.update_from_batch(nan_reward_batch(algo), timestep=64)
        text = str(info.value)
        for part in ("PPOLearner (module ActorCriticModule, optimizer 'default')", "policy_loss=nan",
                     "total_loss=nan", "at env step 64", "non-finite values in 'rewards' (1 of 64 values)",
                     "lr=", "observation_filter", "skip_nonfinite_updates=True"):
            assert part in text, part
        after = algo.learner.get_weights()
        assert all(np.array_equal(before[k], after[k]) for k in before)
        assert weights_finite(algo.learner)
    finally:
        algo.stop()


def test_huge_learning_rate_raises_before_the_weights_turn_nan():
    algo = ppo_algo(lr=1e30)
    try:
        with pytest.raises(NonFiniteUpdateError, match=r"lr=1e\+30"):
            for _ in range(10):
                algo.train()
        assert weights_finite(algo.learner)
    finally:
        algo.stop()


def test_sac_learner_refuses_nan_critic_loss():
    algo = (SACConfig().environment("Pendulum-v1").training(train_batch_size=32).debugging(seed=0).build())
    try:
        rng = np.random.default_rng(0)
        n = 32
        batch = {
            "obs": rng.normal(size=(n, 3)).astype(np.float32),
            "new_obs": rng.normal(size=(n, 3)).astype(np.float32),
            "actions": rng.uniform(-1, 1, size=(n, 1)).astype(np.float32),
            "rewards": rng.normal(size=n).astype(np.float32),
            "terminateds": np.zeros(n, bool),
        }
        batch["rewards"][5] = np.inf
        before = algo.learner.get_weights()
        with pytest.raises(NonFiniteUpdateError, match="optimizer 'critic'.*critic_loss=inf"):
            algo.learner.update_from_batch(batch, timestep=100)
        after = algo.learner.get_weights()
        assert all(np.array_equal(before[k], after[k]) for k in before)
    finally:
        algo.stop()


def test_skip_nonfinite_updates_skips_and_counts():
    algo = ppo_algo(skip_nonfinite_updates=True)
    try:
        before = algo.learner.get_weights()
        metrics = algo.learner.update_from_batch(nan_reward_batch(algo), timestep=64)
        assert metrics["num_nonfinite_updates_skipped"] == metrics["num_minibatch_updates"] == 2
        after = algo.learner.get_weights()
        assert all(np.array_equal(before[k], after[k]) for k in before)
        assert algo.learner.num_grad_updates == 0
        result = algo.train()  # finite batches train as usual; the count stays in the results
        learner = result["learners"]["default_policy"]
        assert learner["num_nonfinite_updates_skipped"] == 2
        assert np.isfinite(learner["total_loss"]) and algo.learner.num_grad_updates > 0
        assert algo.learner.get_extra_state()["num_nonfinite_updates_skipped"] == 2
    finally:
        algo.stop()


def test_skip_nonfinite_updates_is_a_checked_training_option():
    assert PPOConfig().skip_nonfinite_updates is False
    with pytest.raises(ValueError, match="skip_nonfinite_updates"):
        PPOConfig().training(skip_nonfinite_updates=1)


@pytest.mark.slow
@pytest.mark.parametrize("skip", [True, False])
def test_learner_group_ranks_agree_on_a_nonfinite_update(skip):
    """The NaN is in one rank's shard only; the all-reduced gradient makes both ranks skip (or raise)."""
    algo = ppo_algo(skip_nonfinite_updates=skip)
    try:
        batch = nan_reward_batch(algo)  # env column 1: rank 1's shard
        group = LearnerGroup(algo.config, PPOLearner, algo.learner.module, num_learners=2)
        try:
            before = group.get_weights()
            if skip:
                metrics = group.update_from_batch(batch, timestep=64)
                assert metrics["num_nonfinite_updates_skipped"] == 2
                counts = group.foreach_learner(lambda learner: learner.num_nonfinite_updates_skipped)
                assert counts == [2, 2]
            else:
                # Whichever rank's error arrives first is raised: rank 1 saw the NaN loss, rank 0 only
                # the averaged gradient.
                with pytest.raises(NonFiniteUpdateError, match="policy_loss=nan|averaged over the LearnerGroup"):
                    group.update_from_batch(batch, timestep=64)
            after = group.get_weights()
            assert all(np.array_equal(before[k], after[k]) for k in before)
        finally:
            group.stop()
    finally:
        algo.stop()

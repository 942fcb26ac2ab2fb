"""Fault tolerance of remote EnvRunners that does not stall training.

A runner whose env raises is restarted beside training (in its own worker, at once when it
had been sampling; backing off only when it fails again without sampling), the rows it
sampled before the error are kept, nothing samples zero runners while one can be restarted,
ignore_env_runner_failures carries on with the runners that work, and a runner whose env
fails on every start fails train() after a bounded number of tries, quickly, with the env's
error. The flaky envs are defined inside each test, as a user would write them.
"""
from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.core.columns import Columns
from rlx.env.runner_restarts import EnvRunnerFailureError


@pytest.fixture(scope="module")
def ray_cluster(local_ray):
    """The shared local Ray instance for the module's Ray cases (connected on first use)."""
    return local_ray


def small_ppo(env, env_config: dict, runners: int = 2, backend: str = "process") -> PPOConfig:
    """PPO with `runners` remote runners of one sub-env each, 50-step fragments, 100-step batches."""
    return (PPOConfig().environment(env, env_config=env_config, disable_env_checking=True)
            .env_runners(num_env_runners=runners, num_envs_per_env_runner=1, rollout_fragment_length=50,
                         env_runner_backend=backend)
            .training(train_batch_size=100, minibatch_size=50, num_epochs=1)
            .debugging(seed=0))


@pytest.mark.slow
def test_the_first_restart_of_a_runner_that_was_sampling_is_not_delayed(tmp_path):
    class CrashesOnceEnv(gym.Env):
        """Runner 1's env raises at its 30th step, once (a flag file remembers it)."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            self.crashes = config.worker_index == 1
            self.flag = config["flag"]
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            if self.crashes and self.steps == 30 and not os.path.exists(self.flag):
                open(self.flag, "w").close()
                raise RuntimeError("simulator lost its connection")
            return np.zeros(2, np.float32), 1.0, self.steps % 10 == 0, False, {}

    # delay_between_env_runner_restarts_s stays at its default, 60 s.
    algo = small_ppo(CrashesOnceEnv, {"flag": str(tmp_path / "crashed")}) \
        .fault_tolerance(restart_failed_env_runners=True).build()
    try:
        start = time.monotonic()
        while True:
            result = algo.train()
            if result["fault_tolerance"]["num_healthy_workers"] == 2 and (tmp_path / "crashed").exists():
                break
            assert time.monotonic() - start < 30, result["fault_tolerance"]
        assert result["fault_tolerance"] == {"num_healthy_workers": 2, "num_remote_worker_restarts": 1,
                                             "num_remote_workers_waiting_for_restart": 0}
    finally:
        algo.stop()


@pytest.mark.slow
def test_no_runner_left_sampling_restarts_at_once_without_the_backoff(tmp_path):
    class FailsTwiceEnv(gym.Env):
        """Each runner's env raises at its first step on the runner's first two starts."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            self.marks = os.path.join(config["dir"], f"runner{config.worker_index}-")
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            failures = sum(os.path.exists(f"{self.marks}{n}") for n in range(2))
            if self.steps == 1 and failures < 2:
                open(f"{self.marks}{failures}", "w").close()
                raise RuntimeError("simulator not ready")
            return np.zeros(2, np.float32), 1.0, self.steps % 10 == 0, False, {}

    # A second failure in a row would wait 120 / 8 = 15 s, were another runner sampling.
    marks = tmp_path / "failures"
    marks.mkdir()
    algo = small_ppo(FailsTwiceEnv, {"dir": str(marks)}) \
        .fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=120).build()
    try:
        start = time.monotonic()
        result = algo.train()
        assert time.monotonic() - start < 12
        # A runner failed twice in a row (a 15 s backoff) while the other was down too: it was
        # restarted at once, and the iteration went on with the first runner back.
        assert any(name.endswith("-1") for name in os.listdir(marks))
        assert result["num_env_steps_sampled_this_iter"] >= 100
        ft = result["fault_tolerance"]
        assert ft["num_remote_worker_restarts"] >= 3 and ft["num_healthy_workers"] >= 1
    finally:
        algo.stop()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", "thread", "ray"])
def test_rows_sampled_before_an_env_error_are_kept(tmp_path, backend, ray_cluster):
    if backend == "ray":
        ray_cluster()

    class CrashesOnceEnv(gym.Env):
        """Observations are [worker_index, steps taken]; runner 1's env raises at step 30, once."""

        observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            self.worker = float(config.worker_index)
            self.flag = config["flag"]
            self.steps = 0

        def _obs(self):
            return np.array([self.worker, self.steps], np.float32)

        def reset(self, *, seed=None, options=None):
            return self._obs(), {}

        def step(self, action):
            if self.worker == 1 and self.steps == 29 and not os.path.exists(self.flag):
                open(self.flag, "w").close()
                raise RuntimeError("simulator lost its connection")
            self.steps += 1
            return self._obs(), 1.0, False, self.steps % 40 == 0, {}

    algo = small_ppo(CrashesOnceEnv, {"flag": str(tmp_path / "crashed")}, backend=backend) \
        .fault_tolerance(restart_failed_env_runners=True).build()
    try:
        batch = algo.env_runner_group.sample()
        valid = batch["valid"] if "valid" in batch else np.ones(batch["rewards"].shape, bool)
        runner1 = (batch["obs"][..., 0] == 1) & valid
        # Runner 1's 29 steps before the crash are in the batch, ending as a truncation.
        assert int(runner1.sum()) == 29
        column = int(np.flatnonzero(runner1.any(axis=0))[0])
        rows = np.flatnonzero(runner1[:, column])
        np.testing.assert_array_equal(batch[Columns.NEXT_OBS][rows, column, 1], np.arange(1, 30))
        assert batch["truncateds"][rows[-1], column] and not batch["truncateds"][rows[:-1], column].any()
        assert int(valid.sum()) == 50 + 29
        # It was restarted at once, and its next fragment starts a new episode.
        algo.env_runner_group.probe_unhealthy_env_runners()
        batch = algo.env_runner_group.sample()
        runner1 = batch["obs"][..., 0] == 1
        assert batch["obs"][runner1][0, 1] == 0.0
    finally:
        algo.stop()


def test_every_step_the_envs_took_is_counted_once_despite_crashes():
    import threading

    class CountedSteps(gym.Env):
        """Counts every step taken (all runners are threads of this process); sub-env 1 of each
        runner raises at its 23rd step, on every start."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)
        taken = 0
        lock = threading.Lock()

        def __init__(self, config):
            self.crashes = config.vector_index == 1
            self.steps = self.t = 0

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            if self.crashes and self.steps == 22:
                raise RuntimeError("simulator lost its connection")
            self.steps += 1
            self.t += 1
            with CountedSteps.lock:
                CountedSteps.taken += 1
            return np.full(2, 0.01 * self.t, np.float32), 1.0, self.t >= 15, False, {}

    algo = (PPOConfig().environment(CountedSteps, disable_env_checking=True)
            .env_runners(num_env_runners=2, num_envs_per_env_runner=3, rollout_fragment_length=50,
                         env_runner_backend="thread")
            .training(train_batch_size=300, minibatch_size=150, num_epochs=1)
            .fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=0)
            .debugging(seed=0).build())
    try:
        results = [algo.train() for _ in range(3)]
        # The rows of every crashed fragment, the crash's own row included, are trained on once.
        assert results[-1]["fault_tolerance"]["num_remote_worker_restarts"] >= 6
        assert results[-1]["num_env_steps_sampled_lifetime"] == CountedSteps.taken
        assert sum(r["num_env_steps_sampled_this_iter"] for r in results) == CountedSteps.taken
    finally:
        algo.stop()


@pytest.mark.slow
def test_a_multi_agent_runner_keeps_its_rows_the_same_way(tmp_path):
    from rlx.env.multi_agent_env import MultiAgentEnv

    class TwoAgentsCrashOnce(MultiAgentEnv):
        """Two agents act every step; runner 1's env raises at step 30, once."""

        def __init__(self, config):
            super().__init__()
            self.agents = self.possible_agents = ["a", "b"]
            space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
            self.observation_spaces = {aid: space for aid in self.agents}
            self.action_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}
            self.worker = float(config.worker_index)
            self.flag = config["flag"]
            self.steps = 0

        def _obs(self):
            return {aid: np.array([self.worker, self.steps], np.float32) for aid in self.agents}

        def reset(self, *, seed=None, options=None):
            return self._obs(), {}

        def step(self, action_dict):
            if self.worker == 1 and self.steps == 29 and not os.path.exists(self.flag):
                open(self.flag, "w").close()
                raise RuntimeError("simulator lost its connection")
            self.steps += 1
            done = self.steps % 40 == 0
            return (self._obs(), {aid: 1.0 for aid in self.agents}, {"__all__": False},
                    {"__all__": done}, {})

    algo = (small_ppo(TwoAgentsCrashOnce, {"flag": str(tmp_path / "crashed")})
            .multi_agent(policies={"shared"}, policy_mapping_fn=lambda aid, *args, **kwargs: "shared")
            .fault_tolerance(restart_failed_env_runners=True).build())
    try:
        batch = algo.env_runner_group.sample()
        shared = batch["shared"]
        valid = shared["valid"] if "valid" in shared else np.ones(shared["rewards"].shape, bool)
        runner1 = (shared["obs"][..., 0] == 1) & valid
        assert int(runner1.sum()) == 2 * 29  # both agents' 29 steps before the crash
        assert batch.env_steps() == 50 + 29 and batch.agent_steps() == 2 * (50 + 29)
        for column in np.flatnonzero(runner1.any(axis=0)):
            rows = np.flatnonzero(runner1[:, column])
            assert len(rows) == 29 and shared["truncateds"][rows[-1], column]
    finally:
        algo.stop()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", "ray"])
def test_ignore_env_runner_failures_carries_on_with_the_runners_that_work(backend, ray_cluster):
    if backend == "ray":
        ray_cluster()

    class NoSimulatorOnRunner1(gym.Env):
        """Cannot be built on runner 1; elsewhere a plain env."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            if config.worker_index == 1:
                raise RuntimeError("no simulator licence on this node")
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            self.steps = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            return np.zeros(2, np.float32), 1.0, self.steps >= 10, False, {}

    algo = small_ppo(NoSimulatorOnRunner1, {}, backend=backend) \
        .fault_tolerance(ignore_env_runner_failures=True).build()
    try:
        results = [algo.train() for _ in range(3)]
        assert all(r["num_env_steps_sampled_this_iter"] >= 100 for r in results)
        assert results[-1]["fault_tolerance"] == {"num_healthy_workers": 1, "num_remote_worker_restarts": 0,
                                                  "num_remote_workers_waiting_for_restart": 0}
        assert algo.env_runner_group.healthy_env_runner_ids() == [2]
        assert results[-1]["env_runners"]["episode_len_mean"] == 10.0
    finally:
        algo.stop()


@pytest.mark.slow
def test_an_env_that_fails_on_every_start_fails_train_quickly_with_its_error():
    class NeverConnects(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            pass

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            raise ConnectionRefusedError("simulator at 10.0.0.7:2000 refused the connection")

    # Default delay (60 s) and num_consecutive_env_runner_failures_tolerance (100).
    algo = small_ppo(NeverConnects, {}).fault_tolerance(restart_failed_env_runners=True).build()
    try:
        start = time.monotonic()
        with pytest.raises(EnvRunnerFailureError, match="refused the connection") as info:
            algo.train()
        assert time.monotonic() - start < 30
        assert "6 times in a row without sampling in between" in str(info.value)
        assert algo.env_runner_group.num_remote_worker_restarts <= 2 * 5
    finally:
        algo.stop()


@pytest.mark.slow
def test_a_restart_happens_beside_training_not_inside_it(tmp_path):
    class SlowToRestartEnv(gym.Env):
        """Takes 4 s to build on runner 1 once the flag file exists (a restarted runner)."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            if config.worker_index == 1 and os.path.exists(config["flag"]):
                time.sleep(4)
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            self.steps = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            return np.zeros(2, np.float32), 1.0, self.steps >= 10, False, {}

    flag = tmp_path / "restarted"
    algo = small_ppo(SlowToRestartEnv, {"flag": str(flag)}) \
        .fault_tolerance(restart_failed_env_runners=True).build()
    try:
        algo.train()
        flag.touch()
        algo.env_runner_group.remote_workers()[0].kill()
        time.sleep(0.5)
        start = time.monotonic()
        result = algo.train()
        assert time.monotonic() - start < 4  # did not wait for the new runner
        assert result["num_env_steps_sampled_this_iter"] >= 100  # runner 2 sampled meanwhile
        assert result["fault_tolerance"] == {"num_healthy_workers": 1, "num_remote_worker_restarts": 1,
                                             "num_remote_workers_waiting_for_restart": 1}
        assert algo.env_runner_group.probe_unhealthy_env_runners() == [1]
        assert algo.train()["fault_tolerance"]["num_healthy_workers"] == 2
    finally:
        algo.stop()

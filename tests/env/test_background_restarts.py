"""Restarts off the hot path, the local runner's sample_timeout_s, and sub-env restarts in the results.

- A runner whose process died is restarted in a spare worker process that the group started
  beforehand (after its first such restart), so the restart only builds the runner; sampling
  goes on with the runners that are up while a restart is in progress.
- The local EnvRunner's sample() is bounded by sample_timeout_s, as a remote runner's is: a
  step() that never returns fails train() with an error naming the setting.
- Sub-envs rebuilt by restart_failed_sub_environments reach result["env_runners"].

The envs are defined inside each test, as a user would write them.
"""
from __future__ import annotations

import os
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.env.runner_restarts import EnvRunnerFailureError


def _wait_until(predicate, timeout_s: float = 60.0) -> bool:
    """Poll `predicate` until it holds (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _kill_runner(algo, index: int) -> None:
    """SIGKILL remote runner `index` and wait until the group has seen its process die."""
    handle = next(h for h in algo.env_runner_group.remote_workers() if h.index == index)
    handle.kill()
    assert _wait_until(lambda: not handle.healthy), "the killed runner's death was not noticed"


def _runner_pids(algo) -> dict[int, int]:
    group = algo.env_runner_group
    return dict(group.foreach_env_runner_with_id(lambda i, runner: (i, os.getpid()), local_env_runner=False))


def _uptime_s() -> float:
    """Seconds since boot: the clock of a process's start time in /proc/PID/stat."""
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def _started_at_uptime_s(pid: int) -> float:
    """When process `pid` started, in seconds since boot (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _worker_processes_of(psutil, server_pid: int) -> list:
    """Live worker processes started from `server_pid` (the fork server, or this process with
    the spawn method), other than multiprocessing's resource tracker."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.ppid() == server_pid and proc.status() != psutil.STATUS_ZOMBIE \
                    and "resource_tracker" not in " ".join(proc.cmdline()):
                out.append(proc)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process start times from /proc")
def test_a_dead_runner_is_restarted_in_a_worker_process_started_before_it_died():
    psutil = pytest.importorskip("psutil")

    class QuickEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            self.steps = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            return np.zeros(2, np.float32), 1.0, self.steps >= 10, False, {}

    algo = (PPOConfig().environment(QuickEnv, disable_env_checking=True)
            .env_runners(num_env_runners=2, num_envs_per_env_runner=1, rollout_fragment_length=50,
                         env_runner_backend="process")
            .training(train_batch_size=100, minibatch_size=50, num_epochs=1)
            .fault_tolerance(restart_failed_env_runners=True).build())
    group = algo.env_runner_group
    server = None
    try:
        algo.train()
        first = _runner_pids(algo)
        server = psutil.Process(first[1]).ppid()
        for victim in (1, 2):
            before = _runner_pids(algo)
            algo.train()  # time for the spare to start
            killed_at = _uptime_s()
            _kill_runner(algo, victim)
            assert group.probe_unhealthy_env_runners(timeout_seconds=120) == [victim]
            after = _runner_pids(algo)
            # The runner now lives in a process that was already running before it died (the spare).
            assert after[victim] not in before.values()
            assert _started_at_uptime_s(after[victim]) <= killed_at
            other = 3 - victim
            assert after[other] == before[other]
        result = algo.train()
        assert result["fault_tolerance"]["num_healthy_workers"] == 2
        assert result["fault_tolerance"]["num_remote_worker_restarts"] == 2
    finally:
        algo.stop()
    # stop() ends the spare started for the next restart as well.
    assert _wait_until(lambda: not _worker_processes_of(psutil, server), 30), _worker_processes_of(psutil, server)


@pytest.mark.slow
def test_sample_returns_with_the_runners_that_are_up_while_a_restart_is_in_progress(tmp_path):
    class BlockedRestartEnv(gym.Env):
        """Runner 1's env, once restarted, is not built while the `hold` file exists (at most 60 s)."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config):
            if config.worker_index == 1 and os.path.exists(config["restarted"]):
                deadline = time.monotonic() + 60
                while os.path.exists(config["hold"]) and time.monotonic() < deadline:
                    time.sleep(0.05)
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            self.steps = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            return np.zeros(2, np.float32), 1.0, self.steps >= 10, False, {}

    restarted, hold = tmp_path / "restarted", tmp_path / "hold"
    algo = (PPOConfig().environment(BlockedRestartEnv, env_config={"restarted": str(restarted), "hold": str(hold)},
                                    disable_env_checking=True)
            .env_runners(num_env_runners=2, num_envs_per_env_runner=1, rollout_fragment_length=50,
                         env_runner_backend="process")
            .training(train_batch_size=100, minibatch_size=50, num_epochs=1)
            .fault_tolerance(restart_failed_env_runners=True).build())
    group = algo.env_runner_group
    try:
        algo.train()
        restarted.touch()
        hold.touch()
        _kill_runner(algo, 1)
        results = [algo.train() for _ in range(3)]
        # Every iteration sampled its batch with runner 2 while runner 1's restart was held.
        assert hold.exists() and group.num_remote_workers_waiting_for_restart() == 1
        for result in results:
            assert result["num_env_steps_sampled_this_iter"] >= 100
            assert result["fault_tolerance"]["num_healthy_workers"] == 1
            assert result["fault_tolerance"]["num_remote_workers_waiting_for_restart"] == 1
        hold.unlink()
        assert group.probe_unhealthy_env_runners(timeout_seconds=120) == [1]
        assert algo.train()["fault_tolerance"]["num_healthy_workers"] == 2
    finally:
        hold.unlink(missing_ok=True)
        algo.stop()


def test_a_local_step_that_never_returns_fails_train_after_sample_timeout_s():
    release = threading.Event()

    class HangsOnceEnv(gym.Env):
        """Its 30th step does not return until the test releases it (at most 30 s)."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            if self.steps == 30:
                release.wait(30)
            return np.zeros(2, np.float32), 1.0, False, self.steps % 10 == 0, {}

    algo = (PPOConfig().environment(HangsOnceEnv, disable_env_checking=True)
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=20,
                         sample_timeout_s=1.0)
            .training(train_batch_size=40, minibatch_size=20, num_epochs=1).build())
    try:
        start = time.monotonic()
        with pytest.raises(EnvRunnerFailureError, match=r"sample\(\) made no progress \(no env step or reset "
                                                                r"returned\) within sample_timeout_s=1 s"):
            algo.train()
        assert time.monotonic() - start < 25  # well before the env would have let go by itself
        assert not release.is_set()
        # The stuck call still holds the runner: the next train() says so at once.
        with pytest.raises(EnvRunnerFailureError, match="is still running"):
            algo.train()
        release.set()
        assert _wait_until(lambda: not algo.env_runner_group.runner_handles()[0].busy, 30)
        assert algo.train()["num_env_steps_sampled_this_iter"] >= 40  # usable again once it returned
    finally:
        release.set()
        algo.stop()


def _crashing_env_class():
    class CrashesEveryFifteenStepsEnv(gym.Env):
        """Each instance's step() raises at its 15th step (a freshly built one starts over)."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            self.steps = 0

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.steps += 1
            if self.steps == 15:
                raise RuntimeError("simulator crashed")
            return np.zeros(2, np.float32), 1.0, False, self.steps % 10 == 0, {}

    return CrashesEveryFifteenStepsEnv


@pytest.mark.parametrize("runners", [0, 2])
def test_sub_env_restarts_reach_the_results(runners):
    algo = (PPOConfig().environment(_crashing_env_class(), disable_env_checking=True)
            .env_runners(num_env_runners=runners, num_envs_per_env_runner=2, rollout_fragment_length=20,
                         env_runner_backend="thread")
            .training(train_batch_size=80, minibatch_size=40, num_epochs=1)
            .fault_tolerance(restart_failed_sub_environments=True).build())
    try:
        results = [algo.train() for _ in range(3)]
        runners_now = [algo.env_runner] if runners == 0 else algo.env_runner_group.remote_workers()
        counted = sum((r if runners == 0 else r.runner).num_sub_env_restarts for r in runners_now)
        assert counted >= 2
        per_iteration = [r["env_runners"]["num_sub_env_restarts"] for r in results]
        assert sum(per_iteration) == counted
        assert results[-1]["env_runners"]["num_sub_env_restarts_lifetime"] == counted
        assert results[0]["env_runners"]["num_sub_env_restarts_lifetime"] == per_iteration[0]
    finally:
        algo.stop()


def test_no_sub_env_restarts_report_zero():
    class FineEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            super().__init__()

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            return np.zeros(2, np.float32), 1.0, False, False, {}

    algo = (PPOConfig().environment(FineEnv, disable_env_checking=True)
            .env_runners(num_env_runners=0, rollout_fragment_length=20)
            .training(train_batch_size=20, minibatch_size=20, num_epochs=1).build())
    try:
        runners = algo.train()["env_runners"]
        assert runners["num_sub_env_restarts"] == 0 and runners["num_sub_env_restarts_lifetime"] == 0
    finally:
        algo.stop()

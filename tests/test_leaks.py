"""Failures leak nothing: restarted runners, failed builds and failed checkpoint loads leave
no file descriptors and no processes behind, and a hang or a failing reset() is explained.

Counts are taken from /proc (Linux) after a warm-up run, so what an import or the first
build opens for good (thread pools, logging handlers) is in the baseline.
"""
from __future__ import annotations

import gc
import json
import logging
import multiprocessing
import os
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

from envs_for_remote_tests import FailingEnv, WhereAmIEnv
from process_helpers import child_processes, open_fds
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import CheckpointError, EnvError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts fds and children in /proc")


def settled(count, expected: int, timeout: float = 10.0) -> int:
    """`count()` once it has come down to `expected` (or after `timeout` s): what a just-killed
    child or a closing reader thread holds is released asynchronously."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        value = count()
        if value <= expected or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def crashing_config(runners: int = 2) -> PPOConfig:
    """PPO whose remote runner 1 crashes at its 20th step, every time it is (re)started."""
    return (PPOConfig().environment(FailingEnv, env_config={"fail_on": 1, "fail_at": 20})
            .env_runners(num_env_runners=runners, num_envs_per_env_runner=1)
            .training(train_batch_size=120, minibatch_size=60, num_epochs=1)
            .fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=0,
                             max_num_env_runner_restarts=1000)
            .debugging(seed=0))


@pytest.mark.slow
def test_a_restart_loop_returns_fds_and_child_processes_to_their_starting_counts():
    warm = crashing_config().build()
    warm.train()
    warm.stop()
    fds_before, children_before = open_fds(), settled(_count_children, 0, 2)

    algo = crashing_config().build()
    try:
        restarts_seen = []
        fds_during = []
        for _ in range(7):  # runner 1 crashes and restarts (in its process) about once per iteration
            result = algo.train()
            restarts_seen.append(result["fault_tolerance"]["num_remote_worker_restarts"])
            fds_during.append(open_fds())
        assert restarts_seen[-1] >= 6, restarts_seen  # runner 1 did crash and restart, again and again
        # While training, what a restart opens is released with the runner it replaces.
        assert fds_during[-1] <= fds_during[2] + 2, fds_during
    finally:
        algo.stop()
    assert settled(open_fds, fds_before) <= fds_before
    assert settled(_count_children, children_before) == children_before
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("rlx-")]


def _count_children() -> int:
    # rlx's worker processes, direct children or forked by this process's fork server.
    return len(child_processes(spawned_only=True))


@pytest.mark.slow
def test_failed_checkpoint_loads_leave_no_processes_and_no_fds(tmp_path):
    algo = (PPOConfig().environment(WhereAmIEnv).env_runners(num_env_runners=2, num_envs_per_env_runner=1)
            .training(train_batch_size=120, minibatch_size=60, num_epochs=1).build())
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
    finally:
        algo.stop()
    # A state file that decodes but does not fit: the load fails after the runners started.
    state_file = next(p for p in (tmp_path / "ckpt").rglob("algorithm_state.json"))
    state = json.loads(state_file.read_text())
    state["counters"] = "not a dict"
    state_file.write_text(json.dumps(state))

    children_before = settled(_count_children, 0, 5)
    fds_before = open_fds()
    for _ in range(3):
        with pytest.raises(CheckpointError):
            Algorithm.from_checkpoint(path)
    assert settled(_count_children, children_before) == children_before
    assert settled(open_fds, fds_before) <= fds_before


@pytest.mark.slow
def test_a_failing_on_checkpoint_loaded_callback_stops_the_loaded_algorithm(tmp_path):
    algo = (PPOConfig().environment(WhereAmIEnv).env_runners(num_env_runners=2, num_envs_per_env_runner=1)
            .training(train_batch_size=120, minibatch_size=60, num_epochs=1).build())
    try:
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
    finally:
        algo.stop()
    children_before = settled(_count_children, 0, 5)

    def broken(**kwargs):
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        Algorithm.from_checkpoint(path, config_overrides={"callbacks_on_checkpoint_loaded": broken})
    assert settled(_count_children, children_before) == children_before


class ResetFailsEnv(gym.Env):
    """Raises in its second reset() (the first reset after an episode), once per process
    while `flag_file` does not exist."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.flag = (config or {}).get("flag_file")
        self.resets = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        self.t = 0
        if self.resets == 2 and (self.flag is None or not os.path.exists(self.flag)):
            if self.flag is not None:
                open(self.flag, "w").close()
            raise ValueError("reset exploded")
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 5, False, {}


def reset_config(**env_config) -> PPOConfig:
    return (PPOConfig().environment(ResetFailsEnv, env_config=env_config)
            .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
            .training(train_batch_size=40, minibatch_size=20, num_epochs=1))


def test_reset_raising_is_an_env_error_naming_the_sub_env():
    algo = reset_config().build()
    try:
        with pytest.raises(EnvError, match=r"(?i)sub-env \d.*reset\(\) raised ValueError: reset exploded"):
            algo.train()
    finally:
        algo.stop()


def test_reset_raising_is_covered_by_restart_failed_sub_environments(tmp_path):
    algo = (reset_config(flag_file=str(tmp_path / "failed"))
            .fault_tolerance(restart_failed_sub_environments=True).build())
    try:
        result = algo.train()
        assert (tmp_path / "failed").exists()  # the reset did fail
        assert result["num_env_steps_sampled_this_iter"] >= 40
        assert algo.env_runner.num_sub_env_restarts == 1
    finally:
        algo.stop()


class SlowStepEnv(gym.Env):
    """Each step sleeps `sleep` seconds."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.sleep = float((config or {}).get("sleep", 0.0))

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        time.sleep(self.sleep)
        return np.zeros(2, np.float32), 0.0, False, False, {}


def test_a_local_sample_slower_than_sample_timeout_s_that_keeps_stepping_is_not_cut_short():
    # The local runner's bound (issue 33) is on a step() or reset() that does not return, not on a
    # slow env: RLlib never cuts the local runner's sample() short.
    algo = (PPOConfig().environment(SlowStepEnv, env_config={"sleep": 0.05})
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1, sample_timeout_s=0.3,
                         rollout_fragment_length=20)
            .training(train_batch_size=20, minibatch_size=20, num_epochs=1).build())
    try:
        result = algo.train()  # 20 steps x 50 ms = 1 s > 0.3 s, each step well within it
        assert result["num_env_steps_sampled_this_iter"] >= 20
    finally:
        algo.stop()


def test_a_local_sample_within_sample_timeout_s_is_not_warned_about(caplog):
    algo = (PPOConfig().environment(SlowStepEnv, env_config={"sleep": 0.0})
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1, sample_timeout_s=5.0)
            .training(train_batch_size=64, minibatch_size=32, num_epochs=1).build())
    try:
        with caplog.at_level(logging.WARNING, logger="rlx"):
            algo.train()
        assert not [r for r in caplog.records if "sample_timeout_s" in r.getMessage()]
    finally:
        algo.stop()


def test_complete_episodes_that_never_end_are_explained_when_the_runner_times_out():
    algo = (PPOConfig().environment(SlowStepEnv, env_config={"sleep": 0.001})
            .env_runners(num_env_runners=1, num_envs_per_env_runner=1, sample_timeout_s=2.0,
                         batch_mode="complete_episodes")
            .training(train_batch_size=64, minibatch_size=32, num_epochs=1).build())
    try:
        with pytest.raises(Exception, match="episodes never end") as info:
            algo.train()
        assert "TimeLimit" in str(info.value)
    finally:
        algo.stop()


@pytest.mark.slow
def test_healthy_runners_keep_sampling_while_a_failed_one_waits_for_its_restart():
    # Runner 1 fails at its first sampled step (the env checker takes step 1), every time: its first
    # restart is at once, the next waits (a repeated failure backs off), and runner 2 samples meanwhile.
    algo = (PPOConfig().environment(FailingEnv, env_config={"fail_on": 1, "fail_at": 2})
            .env_runners(num_env_runners=2, num_envs_per_env_runner=1)
            .training(train_batch_size=120, minibatch_size=60, num_epochs=1)
            .fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=60)
            .debugging(seed=0).build())
    try:
        start = time.monotonic()
        results = [algo.train() for _ in range(3)]
        assert time.monotonic() - start < 30  # not stalled by the 60 s restart delay
        last = results[-1]["fault_tolerance"]
        assert last["num_healthy_workers"] == 1
        assert last["num_remote_workers_waiting_for_restart"] == 1
        assert last["num_remote_worker_restarts"] == 1
        assert all(r["num_env_steps_sampled_this_iter"] >= 120 for r in results)
    finally:
        algo.stop()

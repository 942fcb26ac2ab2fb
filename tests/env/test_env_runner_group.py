"""Remote EnvRunners: the same EnvRunnerGroup behaviour on every backend.

Each test runs with worker processes and with Ray actors (Ray's case is skipped only when
Ray is not installed; CI installs it). Runners sample in parallel, their batches sit side
by side with each column one sub-env's trajectory, metrics from callbacks and episodes
merge as with the local runner, weights travel only when they changed, observation
filters merge across runners, and failed runners are restarted, ignored or reported as
the fault-tolerance settings say.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

from envs_for_remote_tests import BrokenConstructorEnv, FailingEnv, FlakyConstructorEnv, HangingEnv, WhereAmIEnv
from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import EnvError

BACKENDS = ["process", "ray"]


@pytest.fixture(scope="module")
def ray_cluster(local_ray):
    """The shared local Ray instance for the module's Ray cases (connected on first use)."""
    state = {}

    def start():
        if "ray" not in state:
            ray = local_ray()
            # Ray's workers cannot import this directory's modules: ship the test envs and this
            # module's callbacks by value.
            import envs_for_remote_tests

            ray.cloudpickle.register_pickle_by_value(envs_for_remote_tests)
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
            state["ray"] = ray

    yield start
    if "ray" in state:
        import envs_for_remote_tests

        state["ray"].cloudpickle.unregister_pickle_by_value(envs_for_remote_tests)
        state["ray"].cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(params=BACKENDS)
def backend(request, ray_cluster):
    """The backend under test ("process" or "ray")."""
    if request.param == "ray":
        ray_cluster()
    return request.param


#: How long a restarted runner may take to be built: a Ray actor importing torch on one busy core
#: took over 60 s in a CI simulation (the default health-probe timeout is 30 s).
RESTART_BUILD_S = 180


def config_for(backend: str, env=WhereAmIEnv, runners: int = 2, **training) -> PPOConfig:
    """A small PPO config with `runners` remote EnvRunners on `backend`."""
    opts = dict(train_batch_size=240, minibatch_size=60, num_epochs=1)
    opts.update(training)
    return (PPOConfig().environment(env).env_runners(num_env_runners=runners, env_runner_backend=backend,
                                                      num_envs_per_env_runner=2)
            .training(**opts).debugging(seed=0))


@pytest.fixture(scope="module", params=BACKENDS)
def shared_algo(request, ray_cluster):
    """(backend, Algorithm, its on_episode_end callback) built from `config_for(backend)`, one per
    backend for the whole module. The callback, made here at run time as a user's would be, counts
    each episode ("episodes_seen") and the runner it ended on ("by_runner").

    Building one with Ray runners costs seconds of CPU (a fresh Python importing torch and rlx per
    runner), so the tests that keep its config and runners as they are share it: they look at its
    runners, sample, or train it and judge only what their own calls did."""
    def on_episode_end(*, metrics_logger, env_runner, **kwargs) -> None:
        metrics_logger.log_value("episodes_seen", 1, reduce="sum", clear_on_reduce=True)
        metrics_logger.log_value(("by_runner", str(env_runner.worker_index)), 1, reduce="sum", clear_on_reduce=True)

    if request.param == "ray":
        ray_cluster()
    algo = config_for(request.param).callbacks(on_episode_end=on_episode_end).build()
    yield request.param, algo, on_episode_end
    algo.stop()


@pytest.mark.slow
def test_runners_live_elsewhere_and_answer_foreach(shared_algo):
    backend, algo, _ = shared_algo
    group = algo.env_runner_group
    assert group.backend == backend
    assert group.num_remote_env_runners() == 2
    assert algo.env_runner_group.foreach_env_runner(lambda r: r.worker_index) == [0, 1, 2]
    pids = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert len(set(pids)) == 2 and os.getpid() not in pids


@pytest.mark.slow
def test_batches_of_runners_sit_side_by_side_one_trajectory_per_column(shared_algo):
    _, algo, _ = shared_algo
    batch = algo.env_runner_group.sample(num_timesteps=40)
    obs = batch["obs"]  # [T, B, 3]: worker_index, vector_index, t
    T, B = obs.shape[:2]
    assert B == 4 and T * B >= 40  # 2 runners x 2 sub-envs, side by side
    owners = {(int(obs[0, b, 0]), int(obs[0, b, 1])) for b in range(B)}
    assert owners == {(1, 0), (1, 1), (2, 0), (2, 1)}
    for b in range(B):
        assert (obs[:, b, :2] == obs[0, b, :2]).all(), "a column mixes sub-envs"
        # Within a column, t counts up by one and restarts at 0 after each episode's end.
        t, done = obs[:, b, 2], batch["terminateds"][:, b]
        for step in range(1, T):
            assert t[step] == (0 if done[step - 1] else t[step - 1] + 1)


@pytest.mark.slow
def test_training_merges_episode_and_callback_metrics_from_every_runner(shared_algo):
    _, algo, _ = shared_algo  # its runners run the fixture's on_episode_end
    total = before = algo._counters["num_env_steps_sampled_lifetime"]  # other tests may have trained it
    for _ in range(3):
        result = algo.train()
        total += result["num_env_steps_sampled_this_iter"]
        runners = result["env_runners"]
        assert runners["episodes_seen"] == runners["num_episodes"] > 0
        assert set(runners["by_runner"]) == {"1", "2"}
        assert runners["episode_len_mean"] == 7.0 and runners["episode_return_mean"] == 7.0
    assert result["num_env_steps_sampled_lifetime"] == total > before
    assert result["fault_tolerance"] == {"num_healthy_workers": 2, "num_remote_worker_restarts": 0,
        "num_remote_workers_waiting_for_restart": 0}


@pytest.mark.slow
def test_weights_reach_the_runners_only_when_they_changed(shared_algo):
    _, algo, _ = shared_algo
    algo.train()  # changes the weights (and their version), whatever the shared Algorithm did before
    learner = algo.learner.get_weights()
    versions = algo.env_runner_group.foreach_env_runner(lambda r: r.weights_seq_no, local_env_runner=False)
    assert versions == [algo.weights_version] * 2
    for weights in algo.env_runner_group.foreach_env_runner(lambda r: r.get_weights(), local_env_runner=False):
        for key, value in learner.items():
            np.testing.assert_array_equal(np.asarray(weights[key]), np.asarray(value))
    # The same version again: nothing is sent (a runner's weights set by hand survive). The next
    # train() of another test sends the new version over the -1 again.
    algo.env_runner_group.foreach_env_runner(lambda r: setattr(r, "weights_seq_no", -1), local_env_runner=False)
    algo.sync_env_runner_weights()
    assert algo.env_runner_group.foreach_env_runner(lambda r: r.weights_seq_no, local_env_runner=False) == [-1, -1]
    # The global env-step count travels with them, for exploration schedules.
    steps = algo.env_runner_group.foreach_env_runner(lambda r: r.num_env_steps_sampled_lifetime,
                                                     local_env_runner=False)
    assert all(s >= algo._counters["num_env_steps_sampled_lifetime"] for s in steps)


@pytest.mark.slow
@pytest.mark.parametrize("update_workers", [True, False])
def test_observation_filters_merge_across_runners(backend, update_workers):
    algo = (config_for(backend, env="CartPole-v1")
            .env_runners(observation_filter="MeanStdFilter", update_worker_filter_stats=update_workers).build())
    try:
        algo.train()
        algo.train()
        local = algo.env_runner.filter.get_state()
        remote = algo.env_runner_group.foreach_env_runner(lambda r: r.filter.get_state(), local_env_runner=False)
        sampled = algo._counters["num_env_steps_sampled_lifetime"]
        # Every observation any runner saw is in the driver's statistics.
        assert local["count"] >= sampled
        if update_workers:
            assert all(r["count"] == local["count"] and np.allclose(r["mean"], local["mean"]) for r in remote)
        else:
            assert sum(r["count"] for r in remote) == local["count"]
    finally:
        algo.stop()


def test_a_runner_that_cannot_be_built_fails_the_build_clearly(backend):
    with pytest.raises(Exception) as info:
        config_for(backend, env=BrokenConstructorEnv, runners=1).build()
    assert "cannot be built on a remote runner" in str(info.value)


@pytest.mark.slow
def test_killed_runner_is_restarted_with_current_weights_and_nothing_double_counted(backend):
    from rlx.env.process_env_runner import EnvRunnerDiedError

    recreated = []
    algo = (config_for(backend)
            .fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=0,
                             env_runner_health_probe_timeout_s=RESTART_BUILD_S)
            .callbacks(on_env_runners_recreated=lambda **kw: recreated.append(list(kw["env_runner_indices"])))
            .build())
    try:
        first = algo.train()
        victim = algo.env_runner_group.remote_workers()[0]
        old_pid = victim.pid
        victim.kill()
        # Restarts happen beside training; wait (bounded) until the group sees the death and
        # restarts the runner before checking what it did. A loaded machine can take seconds.
        deadline, restarted = time.monotonic() + RESTART_BUILD_S, []
        while not restarted and time.monotonic() < deadline:
            restarted = algo.env_runner_group.probe_unhealthy_env_runners()
            time.sleep(0.2)
        assert restarted == [1], f"the killed runner was not seen dead and restarted within {RESTART_BUILD_S} s"
        totals = [first["num_env_steps_sampled_this_iter"]]
        for _ in range(2):
            result = algo.train()
            totals.append(result["num_env_steps_sampled_this_iter"])
            assert result["fault_tolerance"]["num_healthy_workers"] == 2
        assert recreated == [[1]]
        assert result["fault_tolerance"] == {"num_healthy_workers": 2, "num_remote_worker_restarts": 1,
            "num_remote_workers_waiting_for_restart": 0}
        assert result["num_env_steps_sampled_lifetime"] == sum(totals)
        # The dead handle keeps why it died; a new handle (a new process or actor) took its index.
        assert isinstance(victim.last_error, EnvRunnerDiedError)
        replacement = algo.env_runner_group.remote_workers()[0]
        assert replacement is not victim and replacement.index == victim.index == 1 and replacement.pid != old_pid
        assert algo.env_runner_group.foreach_env_runner(lambda r: r.worker_index) == [0, 1, 2]
        # The new runner samples with the learner's current weights.
        assert algo.env_runner_group.foreach_env_runner(lambda r: r.weights_seq_no, local_env_runner=False) == \
            [algo.weights_version] * 2
    finally:
        algo.stop()


@pytest.mark.slow
def test_killed_runner_without_fault_tolerance_raises(backend):
    from rlx.env.process_env_runner import EnvRunnerDiedError

    algo = config_for(backend).build()
    try:
        algo.train()
        handle = algo.env_runner_group.remote_workers()[1]
        handle.kill()
        time.sleep(0.5)
        with pytest.raises(EnvRunnerDiedError, match="EnvRunner 2"):
            algo.train()
        assert not handle.healthy
    finally:
        algo.stop()


@pytest.mark.slow
def test_ignore_failures_trains_on_with_the_healthy_runners(backend):
    algo = (config_for(backend, env=FailingEnv).environment(env_config={"fail_on": 1, "fail_at": 30})
            .fault_tolerance(ignore_env_runner_failures=True).build())
    try:
        results = [algo.train() for _ in range(3)]
        assert results[-1]["fault_tolerance"]["num_healthy_workers"] == 1
        assert all(r["num_env_steps_sampled_this_iter"] >= 240 for r in results)
        assert results[-1]["num_env_steps_sampled_lifetime"] == sum(r["num_env_steps_sampled_this_iter"]
                                                                     for r in results)
    finally:
        algo.stop()


@pytest.mark.slow
def test_env_error_in_a_runner_surfaces_with_its_type(backend):
    algo = config_for(backend, env=FailingEnv).environment(env_config={"fail_on": 2, "fail_at": 5}).build()
    try:
        with pytest.raises(EnvError, match="simulated env crash"):
            algo.train()
    finally:
        algo.stop()


@pytest.mark.slow
def test_failed_sub_environment_is_restarted_alone(backend, tmp_path):
    flag = str(tmp_path / "failed_once")
    algo = (config_for(backend, env=FailingEnv)
            .environment(env_config={"fail_on": 1, "fail_at": 25, "flag_file": flag})
            .fault_tolerance(restart_failed_sub_environments=True).build())
    try:
        results = [algo.train() for _ in range(2)]
        assert os.path.exists(flag)  # the env did fail
        assert results[-1]["fault_tolerance"]["num_remote_worker_restarts"] == 0
        restarts = algo.env_runner_group.foreach_env_runner(lambda r: r.num_sub_env_restarts, local_env_runner=False)
        assert restarts == [1, 0]
        # Episodes of FailingEnv last 10 steps; the dropped one is not among the returns.
        assert results[0]["env_runners"]["episode_len_mean"] == 10.0
    finally:
        algo.stop()


@pytest.mark.slow
def test_remote_worker_envs_step_each_sub_env_in_its_own_process():
    algo = (PPOConfig().environment(WhereAmIEnv)
            .env_runners(num_envs_per_env_runner=3, remote_worker_envs=True)
            .training(train_batch_size=60, minibatch_size=30, num_epochs=1).debugging(seed=0).build())
    try:
        result = algo.train()
        assert result["env_runners"]["episode_len_mean"] == 7.0
        batch = algo.env_runner_group.sample(num_timesteps=30)
        assert sorted({int(v) for v in batch["obs"][0, :, 1]}) == [0, 1, 2]  # vector_index per column
        pids = algo.env_runner.foreach_env(lambda env: env.step(0)[4]["pid"])
        assert len(set(pids)) == 3 and os.getpid() not in pids
        processes = [env._process for env in algo.env_runner.env.envs]
    finally:
        algo.stop()
    assert not any(p.is_alive() for p in processes)


@pytest.mark.slow
def test_checkpoint_restores_into_remote_runners(shared_algo, tmp_path):
    from rlx.algorithms.algorithm import Algorithm

    _, algo, on_episode_end = shared_algo
    saved_iteration = algo.train()["training_iteration"]  # other tests may have trained it before
    path = algo.save(str(tmp_path / "ckpt"))
    weights = algo.learner.get_weights()
    # A callback made at run time has no import path for the checkpoint: it is given again.
    restored = Algorithm.from_checkpoint(path, config_overrides={"callbacks_on_episode_end": on_episode_end})
    try:
        assert restored.env_runner_group.num_remote_env_runners() == 2
        for remote in restored.env_runner_group.foreach_env_runner(lambda r: r.get_weights(), local_env_runner=False):
            for key, value in weights.items():
                np.testing.assert_array_equal(np.asarray(remote[key]), np.asarray(value))
        result = restored.train()
        assert result["training_iteration"] == saved_iteration + 1
        assert set(result["env_runners"]["by_runner"]) == {"1", "2"}  # the callback runs in the restored runners
    finally:
        restored.stop()


@pytest.mark.slow
def test_a_restart_that_cannot_build_the_runner_is_retried_later(tmp_path):
    # The replacement of runner 1 fails to build while the flag file exists; training goes on
    # with runner 2, and once the file is gone the next restart succeeds.
    flag = tmp_path / "broken"
    algo = (config_for("process", env=FlakyConstructorEnv).environment(env_config={"flag_file": str(flag)})
            .fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=0,
                             env_runner_health_probe_timeout_s=30).build())
    try:
        algo.train()
        flag.touch()
        algo.env_runner_group.remote_workers()[0].kill()
        time.sleep(0.5)
        result = algo.train()
        assert result["fault_tolerance"]["num_healthy_workers"] == 1
        # Restarts happen beside training: wait for the tries made while the flag exists.
        assert algo.env_runner_group.probe_unhealthy_env_runners() == []
        flag.unlink()
        assert algo.env_runner_group.probe_unhealthy_env_runners() == [1]
        result = algo.train()
        assert result["fault_tolerance"]["num_healthy_workers"] == 2
        assert result["fault_tolerance"]["num_remote_worker_restarts"] >= 2
    finally:
        algo.stop()


#: Long enough that a healthy runner's sample() never hits it on a loaded CI machine.
SAMPLE_TIMEOUT_S = 8


@pytest.mark.slow
@pytest.mark.parametrize("restart", [True, False])
def test_a_runner_stuck_in_sample_times_out(backend, tmp_path, restart):
    flag = tmp_path / "hung"
    config = (config_for(backend, env=HangingEnv).environment(env_config={"hang_at": 40, "flag_file": str(flag)})
              .env_runners(sample_timeout_s=SAMPLE_TIMEOUT_S))
    if restart:
        config.fault_tolerance(restart_failed_env_runners=True, delay_between_env_runner_restarts_s=0,
                               env_runner_health_probe_timeout_s=RESTART_BUILD_S)
    algo = config.build()
    try:
        if not restart:
            with pytest.raises(Exception, match=f"did not answer sample\\(\\) within {SAMPLE_TIMEOUT_S} s"):
                for _ in range(3):
                    algo.train()
            return
        results = [algo.train() for _ in range(3)]
        assert flag.exists()  # runner 1 did hang once
        # Its restart happens beside training: wait (bounded) until the rebuilt runner is back.
        group, deadline = algo.env_runner_group, time.monotonic() + RESTART_BUILD_S
        group.probe_unhealthy_env_runners()
        while group.num_remote_workers_waiting_for_restart() and time.monotonic() < deadline:
            time.sleep(0.2)
            group.probe_unhealthy_env_runners()
        results.append(algo.train())
        assert results[-1]["fault_tolerance"] == {"num_healthy_workers": 2, "num_remote_worker_restarts": 1,
            "num_remote_workers_waiting_for_restart": 0}
    finally:
        algo.stop()


@pytest.mark.slow
def test_a_build_that_fails_after_the_runners_started_stops_them():
    import multiprocessing

    from rlx.utils.errors import ConfigError

    def runner_processes():
        return [p for p in multiprocessing.active_children() if p.name.startswith("rlx-env-runner")]

    before = len(runner_processes())
    # WhereAmIEnv has no get_task/set_task, so the env_task_fn check fails after setup().
    with pytest.raises(ConfigError, match="not task-settable"):
        config_for("process").environment(env_task_fn=lambda result, env, ctx: 0).build()
    assert len(runner_processes()) == before

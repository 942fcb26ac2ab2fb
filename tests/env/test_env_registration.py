"""Env names registered in the driver resolve in every process rlx starts: EnvRunner
processes, sub-env processes (remote_worker_envs), evaluation runners, learner processes
and Ray actors; names registered with Ray Tune's register_env too. With Ray initialised in
the driver, env code in process-backend runners reaches the driver's named actors.

Every test registers its env inside the test function, with a closure creator: that is
what a user's script does, and what a module-global registry alone cannot ship."""
from __future__ import annotations

import os
import sys
import threading
import uuid

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx.algorithms.ppo import PPOConfig
from rlx.env import registry
from rlx.env.env_context import EnvContext
from rlx.env.registry import make_env_creator, registered_env_names
from rlx.utils.errors import EnvError
from rlx.utils.spawn import spawn_pipe, start_process


class StampedEnv(gym.Env):
    """A tiny env whose `stamp` says who built it, where, and which names that process knew."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, ctx: EnvContext, tag: str):
        self.stamp = {"tag": tag, "worker_index": int(ctx.worker_index), "vector_index": int(ctx.vector_index),
                      "pid": os.getpid(), "registered": registered_env_names()}
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 5, False, {}


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations of a test end with it."""
    monkeypatch.setattr(registry, "_ENV_REGISTRY", dict(registry._ENV_REGISTRY))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def small_config(env: str, **env_runners) -> PPOConfig:
    runners = dict(num_env_runners=2, num_envs_per_env_runner=1, env_runner_backend="process")
    runners.update(env_runners)
    return (PPOConfig().environment(env).env_runners(**runners)
            .training(train_batch_size=64, minibatch_size=32, num_epochs=1).debugging(seed=0))


def remote_stamps(group) -> list[dict]:
    """The stamps of every sub-env of the group's remote runners."""
    per_runner = group.foreach_env_runner(lambda r: r.foreach_env(lambda e: e.stamp), local_env_runner=False)
    return [stamp for stamps in per_runner for stamp in stamps]


# ---------------------------------------------------------------- the spawn mechanism itself


def _resolve_in_child(conn, name: str) -> None:
    """Worker body: build env `name` and send back its stamp, or the error's message."""
    try:
        creator, _ = make_env_creator(name)
        conn.send(("ok", creator(EnvContext({}, worker_index=7)).stamp))
    except Exception as err:
        conn.send(("err", f"{type(err).__name__}: {err}"))
    conn.close()


def resolve_in_spawned_process(name: str) -> tuple[str, object]:
    parent, child = spawn_pipe()
    process = start_process(_resolve_in_child, (child, name), name="rlx-test-resolver")
    child.close()
    try:
        return parent.recv()
    finally:
        process.join(timeout=30)


def test_spawned_process_gets_a_closure_registered_in_a_function():
    token = uuid.uuid4().hex  # captured by the closure: it must travel by value
    name = unique("closure")
    rlx.register_env(name, lambda ctx: StampedEnv(ctx, token))
    status, stamp = resolve_in_spawned_process(name)
    assert status == "ok", stamp
    assert stamp["tag"] == token
    assert stamp["worker_index"] == 7
    assert stamp["pid"] != os.getpid()
    assert name in stamp["registered"]


def test_unknown_name_in_a_worker_says_which_process_and_when_names_are_shipped():
    rlx.register_env(unique("known"), lambda ctx: StampedEnv(ctx, "known"))
    status, message = resolve_in_spawned_process("never-registered")
    assert status == "err"
    assert "Unknown env 'never-registered' in worker process rlx-test-resolver (pid " in message
    assert "when it starts" in message and "after build()" in message


def test_unpicklable_creator_is_named_in_the_worker_error():
    lock = threading.Lock()
    name = unique("locked")
    rlx.register_env(name, lambda ctx: (lock, StampedEnv(ctx, "locked"))[1])
    status, message = resolve_in_spawned_process(name)
    assert status == "err"
    assert f"Env '{name}' is registered in the driver, but its creator could not be sent" in message
    assert "does not pickle" in message


# ---------------------------------------------------------------- every kind of worker process


def test_process_env_runners_build_an_env_registered_in_the_test():
    name = unique("flaky")
    rlx.register_env(name, lambda ctx: StampedEnv(ctx, name))
    algo = small_config(name).build()
    try:
        algo.train()
        stamps = remote_stamps(algo.env_runner_group)
        assert sorted(s["worker_index"] for s in stamps) == [1, 2]
        assert all(s["tag"] == name and s["pid"] != os.getpid() for s in stamps)
        # A name registered after build() does not reach runners already started, and the error says so.
        late = unique("late")
        rlx.register_env(late, lambda ctx: StampedEnv(ctx, late))
        with pytest.raises(EnvError, match=r"in worker process rlx-env-runner-\d \(pid \d+\).*after build\(\)"):
            algo.env_runner_group.foreach_env_runner(lambda r: make_env_creator(late), local_env_runner=False)
    finally:
        algo.stop()


@pytest.mark.slow
def test_remote_worker_envs_build_an_env_registered_in_the_test():
    name = unique("sub-env")
    rlx.register_env(name, lambda ctx: StampedEnv(ctx, name))
    algo = small_config(name, num_env_runners=1, num_envs_per_env_runner=2, remote_worker_envs=True).build()
    try:
        algo.train()
        runner_pid = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)[0]
        stamps = remote_stamps(algo.env_runner_group)
        assert sorted(s["vector_index"] for s in stamps) == [0, 1]
        # Each sub-env lives in a process of its own, started by the runner, and knew the name.
        assert len({s["pid"] for s in stamps} | {runner_pid, os.getpid()}) == 4
        assert all(name in s["registered"] for s in stamps)
    finally:
        algo.stop()


def test_evaluation_runners_build_an_env_registered_in_the_test():
    # Evaluation runners are threads of the driver today (EnvRunnerGroup's remote_backend
    # "thread"); this keeps them building registered envs should they move to processes.
    name = unique("eval")
    rlx.register_env(name, lambda ctx: StampedEnv(ctx, name))
    config = small_config(name, num_env_runners=0).evaluation(
        evaluation_num_env_runners=1, evaluation_duration=2, evaluation_interval=1)
    algo = config.build()
    try:
        algo.evaluate()
        stamps = remote_stamps(algo.eval_env_runner_group)
        assert [(s["tag"], s["worker_index"]) for s in stamps] == [(name, 1)]
    finally:
        algo.stop()


def test_learner_processes_get_the_registry():
    name = unique("learned")
    rlx.register_env(name, lambda ctx: StampedEnv(ctx, name))
    algo = small_config(name, num_env_runners=0).learners(num_learners=1).build()
    try:
        (info,) = algo.learner.foreach_learner(
            lambda learner: (os.getpid(), make_env_creator(name)[0](EnvContext({})).stamp))
        pid, stamp = info
        assert pid != os.getpid() and stamp["pid"] == pid
        assert stamp["tag"] == name and name in stamp["registered"]
        algo.train()
    finally:
        algo.stop()


def test_tune_registry_names_resolve_in_the_driver_and_in_runners():
    tune_registry = pytest.importorskip("ray.tune.registry")
    name = unique("tune")
    tune_registry.register_env(name, lambda ctx: StampedEnv(ctx, name))
    try:
        assert name not in registered_env_names()
        assert make_env_creator(name)[0](EnvContext({})).stamp["tag"] == name
        algo = small_config(name, num_env_runners=1).build()
        try:
            algo.train()
            (stamp,) = remote_stamps(algo.env_runner_group)
            assert stamp["tag"] == name and stamp["worker_index"] == 1 and stamp["pid"] != os.getpid()
        finally:
            algo.stop()
    finally:
        tune_registry._global_registry.unregister(tune_registry.ENV_CREATOR, name)


def test_runner_that_cannot_reach_the_drivers_ray_fails_to_start_with_advice(monkeypatch: pytest.MonkeyPatch):
    import socket

    from rlx.utils import spawn
    from rlx.utils.errors import RLXError

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(spawn, "_driver_ray", lambda: {"address": address, "namespace": "lost"})
    name = unique("uses-ray")

    def make(ctx):
        if ctx.worker_index > 0:  # a runner process joins the driver's Ray when its env first uses it
            import ray

            ray.get_actor("global_counter")
        return StampedEnv(ctx, name)

    rlx.register_env(name, make)
    with pytest.raises(RLXError, match=r"could not connect to the driver's Ray cluster at .*env_runner_backend='ray'"):
        small_config(name, num_env_runners=1).build()


# ---------------------------------------------------------------- with Ray initialised (slow: kept few)


@pytest.fixture(scope="module")
def ray_session(local_ray):
    """The shared local Ray for the tests below. Ray actors cannot import this module (tests/ is not
    on their path): its env class travels by value, as a runtime_env would ship it on a cluster."""
    ray = local_ray()
    import cloudpickle

    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    ray.cloudpickle.register_pickle_by_value(module)
    yield ray
    ray.cloudpickle.unregister_pickle_by_value(module)
    cloudpickle.unregister_pickle_by_value(module)


def test_ray_actors_resolve_rlx_and_tune_registrations(ray_session):
    from ray.tune.registry import ENV_CREATOR, _global_registry
    from ray.tune.registry import register_env as tune_register_env

    name, tune_name = unique("ray"), unique("ray-tune")
    rlx.register_env(name, lambda ctx: StampedEnv(ctx, name))
    tune_register_env(tune_name, lambda ctx: StampedEnv(ctx, tune_name))
    try:
        algo = small_config(name, env_runner_backend="ray").build()
        try:
            algo.train()
            stamps = remote_stamps(algo.env_runner_group)
            assert sorted(s["worker_index"] for s in stamps) == [1, 2]
            assert all(s["tag"] == name and s["pid"] != os.getpid() for s in stamps)
            tags = algo.env_runner_group.foreach_env_runner(
                lambda r: make_env_creator(tune_name)[0](EnvContext({})).stamp["tag"], local_env_runner=False)
            assert tags == [tune_name, tune_name]
        finally:
            algo.stop()
    finally:
        _global_registry.unregister(ENV_CREATOR, name)
        _global_registry.unregister(ENV_CREATOR, tune_name)


@pytest.mark.slow
def test_process_runners_reach_a_named_actor_of_the_driver(ray_session):
    ray = ray_session

    @ray.remote
    class Counter:
        def __init__(self):
            self.count = 0

        def incr(self):
            self.count += 1
            return self.count

        def get(self):
            return self.count

    counter = Counter.options(name="global_counter").remote()
    name = unique("counted")

    def make(ctx):
        ray.get(ray.get_actor("global_counter").incr.remote())
        return StampedEnv(ctx, name)

    rlx.register_env(name, make)
    try:
        algo = small_config(name, env_runner_backend="process").build()
        try:
            algo.train()
            remote = remote_stamps(algo.env_runner_group)
            assert sorted(s["worker_index"] for s in remote) == [1, 2]
            assert all(s["pid"] != os.getpid() for s in remote)
            local_envs = len(algo.env_runner_group.local_env_runner.foreach_env(lambda e: e.stamp))
            # Every env built, in the driver or in a runner process, counted once in the driver's actor.
            assert ray.get(counter.get.remote()) == len(remote) + local_envs
        finally:
            algo.stop()
    finally:
        ray.kill(counter)
        from ray.tune.registry import ENV_CREATOR, _global_registry

        _global_registry.unregister(ENV_CREATOR, name)


def test_gymnasium_plugin_id_with_its_package_resolves_in_every_process(tmp_path, monkeypatch):
    """config.environment("package:NS/Env-v0"), Gymnasium's form for plugin envs (e.g.
    'ale_py:ALE/Pong-v5'): each process imports the package itself, remote runners included."""
    package = tmp_path / "fake_plugin_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import gymnasium\n"
        "gymnasium.register(id='FakePluginNS/Short-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv',"
        " max_episode_steps=20)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    from rlx.algorithms.ppo import PPOConfig

    config = PPOConfig().environment("fake_plugin_pkg:FakePluginNS/Short-v0").training(train_batch_size=128)
    algo = config.env_runners(num_env_runners=1, env_runner_backend="process").build()
    try:
        limits = algo.env_runner_group.foreach_env_runner(
            lambda r: r.foreach_env(lambda e: e.spec.max_episode_steps), local_env_runner=False)
        assert limits == [[20] * algo.config.num_envs_per_env_runner]
        assert algo.train()["env_runners"]["episode_len_max"] <= 20
    finally:
        algo.stop()

"""EnvRunners as Ray actors (env_runner_backend="ray"): sampling, metrics, named actors,
placement groups and build errors. One local Ray instance serves the whole module.

What every backend does alike (a killed runner restarted or reported, an env's error keeping
its type) is tested on Ray too in test_env_runner_group.py, parametrized over the backends."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402
from rlx.env.process_env_runner import EnvRunnerDiedError  # noqa: E402
from rlx.env.ray_env_runner import RayEnvRunner  # noqa: E402
from rlx.utils.errors import EnvError  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_cluster(local_ray):
    # Ray workers cannot import this test module (tests/ is no package on their sys.path):
    # ship its envs and callbacks by value, as one would with a runtime_env on a cluster.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    local_ray()
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def ray_config(num_env_runners: int = 2, env="CartPole-v1", backend="ray") -> PPOConfig:
    return (
        PPOConfig()
        .environment(env)
        .env_runners(num_env_runners=num_env_runners, env_runner_backend=backend)
        .training(train_batch_size=256, minibatch_size=64, num_epochs=1)
        .debugging(seed=0)
    )


# ---------------------------------------------------------------- helpers that run in the actors


def count_sample_steps(env_runner, samples, **kwargs):
    valid = samples["valid"] if "valid" in samples else np.ones(samples["rewards"].shape, dtype=bool)
    env_runner.test_steps = getattr(env_runner, "test_steps", 0) + int(valid.sum())


def count_episodes(env_runner, **kwargs):
    env_runner.test_episodes = getattr(env_runner, "test_episodes", 0) + 1


def runner_counts(runner):
    return runner.worker_index, getattr(runner, "test_steps", 0), getattr(runner, "test_episodes", 0)


@ray.remote
class Counter:
    def __init__(self):
        self.count = 0

    def inc(self, n):
        self.count += n

    def get(self):
        return self.count


class CountingCartPole(gym.Env):
    """CartPole whose every step increments the named actor "global_counter" (seed 000,
    "Global Coordination")."""

    def __init__(self, env_config=None):
        self.env = gym.make("CartPole-v1")
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.counter = None

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.counter is None:
            self.counter = ray.get_actor("global_counter")
        self.counter.inc.remote(1)  # async, as in the seed
        return self.env.step(action)


class FailingCartPole(gym.Env):
    """CartPole whose step() raises after a few steps."""

    def __init__(self, env_config=None):
        self.env = gym.make("CartPole-v1")
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.steps > 5:
            raise RuntimeError("the simulator crashed")
        return self.env.step(action)


class RemoteOnlyFailingEnv(FailingCartPole):
    """An env that cannot be created on remote EnvRunners."""

    def __init__(self, env_config=None):
        if env_config.worker_index > 0:
            raise ValueError("no simulator licence on this node")
        super().__init__(env_config)


class EchoRunner:
    """A stand-in EnvRunner: remembers the calls made on it."""

    def __init__(self, config, worker_index, num_workers, module_spec):
        self.worker_index = worker_index
        self.calls = []

    def stop(self):
        pass


def resource_config(num_cpus, strategy="PACK"):
    return SimpleNamespace(num_cpus_per_env_runner=num_cpus, num_gpus_per_env_runner=0,
                           custom_resources_per_env_runner={}, placement_strategy=strategy)


def live_placement_groups():
    return [pg for pg in ray.util.placement_group_table().values() if pg["state"] == "CREATED"]


# ---------------------------------------------------------------- tests


def test_importing_the_group_does_not_import_ray():
    code = ("import sys, rlx.env.env_runner_group, rlx.env.ray_env_runner, rlx.algorithms.ppo; "
            "assert 'ray' not in sys.modules, 'ray was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_handle_answers_in_order_and_translates_errors():
    config = resource_config(0.5)
    a, b = (RayEnvRunner(EchoRunner, config, i, 2) for i in (1, 2))
    other = RayEnvRunner(EchoRunner, config, 1, 2)  # a second group built from the same config
    free = RayEnvRunner(EchoRunner, resource_config(0, "SPREAD"), 1, 1)  # no resources: no placement group
    handles = (a, b, other, free)
    try:
        for h in handles:
            h.wait_ready()
        assert len({h.pid for h in handles}) == 4
        assert len(live_placement_groups()) == 2
        futures = [a.submit(lambda r, i=i: r.calls.append(i) or list(r.calls)) for i in range(20)]
        assert a.busy
        assert futures[-1].result(timeout=30) == list(range(20))
        assert not a.busy
        assert free.submit(lambda r: r.worker_index).result(timeout=30) == 1
        with pytest.raises(ZeroDivisionError):
            a.submit(lambda r: 1 / 0).result(timeout=30)
        assert a.healthy  # a call that raised does not mean the runner died
        slow = a.submit(lambda r: time.sleep(30))
        a.kill()  # returns once the actor is gone
        assert not a.healthy and isinstance(a.last_error, EnvRunnerDiedError)
        with pytest.raises(EnvRunnerDiedError, match="EnvRunner 1"):
            slow.result(timeout=30)
        with pytest.raises(EnvRunnerDiedError, match="EnvRunner 1"):
            a.submit(lambda r: None).result(timeout=1)
        assert not a.busy
    finally:
        for h in handles:
            h.stop()
    assert not live_placement_groups()


def test_auto_backend_picks_ray_whose_runners_sample_merge_metrics_and_reach_a_named_actor():
    # One build serves all these checks: each Ray runner costs seconds of CPU to start.
    counter = Counter.options(name="global_counter").remote()
    config = (ray_config(backend="auto").environment(CountingCartPole, disable_env_checking=True)
              .callbacks(on_sample_end=count_sample_steps, on_episode_end=count_episodes))
    started = time.perf_counter()
    algo = config.build()
    print(f"\nbuilt a 2-runner Ray group in {time.perf_counter() - started:.1f} s")
    try:
        group = algo.env_runner_group
        assert group.backend == "ray"  # "auto" picks Ray while Ray is initialised
        handles = group.remote_workers()
        assert len(handles) == 2 and all(isinstance(h, RayEnvRunner) for h in handles)
        assert all(h.pid is not None and h.pid != os.getpid() for h in handles)
        assert len({h.pid for h in handles}) == 2
        # The runners' resources are reserved in one placement group (PACK by default).
        created = live_placement_groups()
        assert len(created) == 1 and len(created[0]["bundles"]) == 2

        started = time.perf_counter()
        results = [algo.train() for _ in range(3)]
        print(f"3 train() calls in {time.perf_counter() - started:.1f} s")
        per_iter = [r["num_env_steps_sampled_this_iter"] for r in results]
        assert all(n >= 256 for n in per_iter)
        assert results[-1]["num_env_steps_sampled_lifetime"] == sum(per_iter)

        counts = group.foreach_env_runner(runner_counts, local_env_runner=False)
        assert [c[0] for c in counts] == [1, 2]
        assert all(steps > 0 for _, steps, _ in counts)  # both runners sampled
        assert sum(steps for _, steps, _ in counts) == results[-1]["num_env_steps_sampled_lifetime"]
        episodes = sum(eps for _, _, eps in counts)
        assert episodes > 0
        assert sum(r["env_runners"]["num_episodes"] for r in results) == episodes
        assert results[-1]["env_runners"]["num_episodes_lifetime"] == episodes
        assert results[-1]["fault_tolerance"] == {"num_healthy_workers": 2, "num_remote_worker_restarts": 0,
            "num_remote_workers_waiting_for_restart": 0}

        assert algo.env_runner_group.foreach_env_runner(lambda r: r.worker_index) == [0, 1, 2]

        # Every env step of every runner reached the named actor.
        sampled = results[-1]["num_env_steps_sampled_lifetime"]
        deadline = time.monotonic() + 10
        count = ray.get(counter.get.remote())
        while count < sampled and time.monotonic() < deadline:  # the increments are asynchronous
            time.sleep(0.05)
            count = ray.get(counter.get.remote())
        assert count == sampled

        # Batches arrive as arrays of the caller's own (Ray's zero-copy views are read-only).
        batch = group.sample(num_timesteps=32)
        assert batch["rewards"].size >= 32 and all(v.flags.writeable for v in batch.values())
    finally:
        algo.stop()
        ray.kill(counter)
    assert all(not h.healthy for h in handles)
    assert not live_placement_groups()  # the placement group went with the runners


@pytest.mark.slow
def test_build_error_in_a_ray_runner_keeps_its_type():
    config = ray_config(env=RemoteOnlyFailingEnv)
    with pytest.raises(EnvError, match="no simulator licence"):
        config.build()
    assert not live_placement_groups()  # the runners that were built are gone with their placement group


@pytest.mark.slow
def test_multi_agent_training_and_add_policy_on_ray_runners():
    import rlx
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    rlx.register_env("ray_ma_cartpole", lambda cfg: MultiAgentCartPole({"num_agents": 2}))
    config = (ray_config(env="ray_ma_cartpole")
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *args, **kw: f"p{aid}",
                           policies_to_train=["p0"]))
    algo = config.build()
    try:
        result = algo.train()
        assert set(result["learners"]) == {"p0"}
        assert set(result["env_runners"]["module_episode_returns_mean"]) == {"p0", "p1"}
        assert result["num_agent_steps_sampled_lifetime"] > result["num_env_steps_sampled_lifetime"]
        p0 = algo.get_policy("p0").get_weights()
        algo.add_policy("p2", policy=algo.get_policy("p0"), policy_mapping_fn=lambda aid, *args, **kw: "p2")
        remote = algo.env_runner_group.foreach_env_runner(
            lambda runner: (sorted(runner.module.keys()), runner.get_weights(["p2"])["p2"]), local_env_runner=False)
        assert len(remote) == 2
        for ids, weights in remote:
            assert ids == ["p0", "p1", "p2"]
            assert all(np.array_equal(weights[k], p0[k]) for k in p0)
        result = algo.train()
        assert set(result["env_runners"]["module_episode_returns_mean"]) >= {"p2"}
    finally:
        algo.stop()

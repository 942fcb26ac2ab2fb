"""Worker processes started while the driver is connected to Ray start no Ray job of their own:
they join the driver's cluster (in its namespace) only when their code first uses Ray."""
from __future__ import annotations

import os
import sys

import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402


@pytest.fixture(scope="module")
def ray_session(ray_for_module):
    """The shared local Ray, this module shipped to its workers."""
    return ray_for_module


def alive_jobs() -> list[str]:
    from ray._private import state

    return [job["JobID"] for job in state.jobs() if not job["IsDead"]]


def what_the_runner_sees(runner):
    joined = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    return {"joined": joined, "address": os.environ.get("RAY_ADDRESS"),
            "namespace": os.environ.get("RAY_NAMESPACE"), "pid": os.getpid()}


def test_process_runners_start_no_ray_job_and_learn_the_drivers_cluster(ray_session):
    assert len(alive_jobs()) == 1  # the driver's
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, num_envs_per_env_runner=1, env_runner_backend="process")
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        algo.train()
        seen = algo.env_runner_group.foreach_env_runner(what_the_runner_sees, local_env_runner=False)
        assert len(seen) == 2 and all(s["pid"] != os.getpid() for s in seen)
        context = ray.get_runtime_context()
        for s in seen:
            # Not connected, but handed where to connect on first use.
            assert not s["joined"]
            assert s["address"] == context.gcs_address and s["namespace"] == context.namespace
        assert len(alive_jobs()) == 1
    finally:
        algo.stop()

"""Killing a Ray EnvRunner does not wait for the actor: a runner that cannot answer (never
scheduled, as when its node is lost or its resources are missing) must not hold up the driver,
which kills stuck and unbuildable runners in the middle of training."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

ray = pytest.importorskip("ray")

from rlx.env.process_env_runner import EnvRunnerDiedError  # noqa: E402
from rlx.env.ray_env_runner import RayEnvRunner  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_session(ray_for_module):
    """The shared local Ray, this module shipped to its workers."""
    return ray_for_module


class QuietRunner:
    """A stand-in EnvRunner."""

    def __init__(self, config, worker_index, num_workers, module_spec):
        self.worker_index = worker_index

    def stop(self):
        pass


def test_killing_a_runner_that_never_started_returns_at_once():
    # A resource no node has: the actor waits to be scheduled forever, as on a lost node.
    config = SimpleNamespace(num_cpus_per_env_runner=0, num_gpus_per_env_runner=0,
                             custom_resources_per_env_runner={"lost_node": 1}, placement_strategy="PACK")
    handle = RayEnvRunner(QuietRunner, config, 1, 1)
    queued = handle.submit(lambda runner: runner.worker_index)
    started = time.perf_counter()
    handle.kill()
    assert time.perf_counter() - started < 1.0
    assert not handle.healthy and isinstance(handle.last_error, EnvRunnerDiedError)
    with pytest.raises(EnvRunnerDiedError, match="EnvRunner 1"):
        handle.submit(lambda runner: None).result(timeout=5)
    with pytest.raises(EnvRunnerDiedError, match="EnvRunner 1"):
        queued.result(timeout=30)  # what was sent before fails once Ray reports the actor gone
    handle.stop()

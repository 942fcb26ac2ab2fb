"""Shared test set-up: every test writes results under its own tmp dir, never ~/rlx_results."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from rlx.algorithms.ppo import PPOConfig

# Tests live in folders that mirror rlx's packages; a few import helpers from a test module of
# another folder (`from test_callbacks import LogAcrobotAngle`), whichever folder pytest took first.
for _folder in sorted(Path(__file__).resolve().parent.iterdir()):
    if _folder.is_dir() and not _folder.name.startswith(("_", ".")) and str(_folder) not in sys.path:
        sys.path.append(str(_folder))

#: Train batch of the small configs: a train() call takes a few hundredths of a second.
BATCH = 256


def pytest_configure(config: pytest.Config) -> None:
    """Register the `slow` mark (learning and tuned-example tests; `-m "not slow"` leaves them out)."""
    config.addinivalue_line("markers", "slow: trains to a return threshold or runs for many seconds")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules that hold slow tests first, so that pytest-xdist's workers start the long
    tests early and finish together (a module stays in one piece: its fixtures are set up once)."""
    slow_modules = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: getattr(item, "module", None) not in slow_modules)


@pytest.fixture(autouse=True)
def results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """RLX_RESULTS_DIR pointed at a per-test directory."""
    path = tmp_path / "rlx_results"
    monkeypatch.setenv("RLX_RESULTS_DIR", str(path))
    return path


def small_config(env="CartPole-v1", seed=0, **training) -> PPOConfig:
    """A PPO config that trains in a few hundredths of a second."""
    opts = dict(train_batch_size=BATCH, minibatch_size=64, num_epochs=2)
    opts.update(training)
    return PPOConfig().environment(env).training(**opts).debugging(seed=seed)


def save_trained_checkpoint(config: PPOConfig, path: Path) -> Path:
    """Build `config`, train one iteration, save a checkpoint to `path` and stop; returns `path`."""
    algo = config.build()
    try:
        algo.train()
        algo.save(str(path))
    finally:
        algo.stop()
    return path


# ------------------------------------------------------------------ a two-node Ray cluster
# A Ray cluster of two nodes on this machine (ray.cluster_utils.Cluster: two raylets), for the tests in
# tests/distributed that place learners, runners and evaluation runners on a node other than the driver's.
# The head node (the driver's) carries the custom resource `head_node`, the other one `worker_node`, so a
# test can tell, and force, where an actor sits. (Kept here: a conftest.py in a test folder would be
# imported as the module `conftest` too, hiding this one from `from conftest import ...`.)


#: CPUs each node announces: enough for 2 learners + 2 runners + 1 evaluation runner per node
#: (Ray only counts them; the machine has 2 cores).
NODE_CPUS = 4


@dataclass
class TwoNodeCluster:
    """The running cluster: its address and the node ids of the driver's node and the other."""

    address: str
    head_node_id: str
    worker_node_id: str

    def node_of_actor(self, actor_id: str) -> str:
        """The node id an actor runs on, from the GCS's actor table (ray.util.state would need
        the dashboard, which the test cluster does not start)."""
        from ray._private import state

        entry = state.actors(actor_id)
        if not entry or not entry.get("Address", {}).get("NodeID"):
            raise LookupError(f"the GCS knows no placed actor {actor_id}")
        return entry["Address"]["NodeID"]


@pytest.fixture(scope="module")
def two_node_cluster() -> Iterator[TwoNodeCluster]:
    """Start a two-node cluster, connect the driver, and tear both down after the module."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": NODE_CPUS, "resources": {"head_node": 1000}})
    worker = cluster.add_node(num_cpus=NODE_CPUS, resources={"worker_node": 1000})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    # Test modules' envs cannot be imported by Ray's workers: ship them by value.
    import envs_for_remote_tests

    ray.cloudpickle.register_pickle_by_value(envs_for_remote_tests)
    try:
        yield TwoNodeCluster(address=cluster.address,
                             head_node_id=ray.get_runtime_context().get_node_id(),
                             worker_node_id=worker.node_id)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(envs_for_remote_tests)
        ray.shutdown()
        cluster.shutdown()

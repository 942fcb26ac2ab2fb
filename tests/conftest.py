"""Shared test set-up: every test writes results under its own tmp dir, never ~/rlx_results."""
from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

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


#: The test modules that use the shared local Ray instance (`local_ray`), found at collection.
RAY_MODULES = pytest.StashKey[set]()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules that hold slow tests first, so that pytest-xdist's workers start the long
    tests early and finish together (a module stays in one piece: its fixtures are set up once);
    within each part the modules that use the shared Ray instance come together, so that a worker
    goes from one to the next without starting Ray again."""
    slow_modules = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow")}
    ray_modules = {getattr(item, "module", None) for item in items if "local_ray" in item.fixturenames}
    config.stash[RAY_MODULES] = ray_modules
    items.sort(key=lambda item: (getattr(item, "module", None) not in slow_modules,
                                 getattr(item, "module", None) not in ray_modules))


@pytest.fixture(scope="module", autouse=True)
def no_ray_left_from_other_modules(request: pytest.FixtureRequest) -> None:
    """Shut down a Ray instance another module left running before a module that does not use
    the shared one: with Ray initialised rlx picks Ray backends ("auto"), which such a module
    does not expect."""
    if request.module in request.config.stash.get(RAY_MODULES, set()) or "ray" not in sys.modules:
        return
    ray = sys.modules["ray"]
    if getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()


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


# ------------------------------------------------------------------ expert data, recorded once per run
#: The expert recordings the offline tests read: tuned_examples/<folder>/<script> (what the tuned
#: examples' comments tell users to run) with these settings.
EXPERT_RECORDINGS = {
    "pendulum": ("cql", "generate_pendulum_expert_data.py", {"steps": 4000, "seed": 0}),
    "cartpole": ("bc", "generate_cartpole_expert_data.py", {"steps": 20_000, "seed": 0}),
}


def _load_tuned_example_script(folder: str, script: str):
    """A script of tuned_examples/ loaded as a module."""
    path = Path(__file__).resolve().parents[1] / "tuned_examples" / folder / script
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _run_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every pytest-xdist worker of this run sees (the parent of the workers' own
    base temp dirs), or the base temp dir without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def expert_recordings(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A function `name -> directory` of the expert recording `name` ("pendulum": 4000 steps of
    a SAC trained to -300; "cartpole": 20k steps of a PPO trained to 450), recorded by the first
    test process that asks and read by all others (recording trains an expert: seconds of CPU).
    The recorder's mean return must reach its script's EXPERT_RETURN."""
    shared = _run_shared_dir(tmp_path_factory)

    def get(name: str) -> Path:
        folder, script, settings = EXPERT_RECORDINGS[name]
        path, done = shared / f"expert-{name}", shared / f"expert-{name}.json"
        with open(shared / f"expert-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not done.exists():
                generator = _load_tuned_example_script(folder, script)
                path.mkdir(exist_ok=True)
                expert_return = generator.record_expert_data(path, **settings)
                done.write_text(json.dumps({"return": expert_return, "target": generator.EXPERT_RETURN}))
        recorded = json.loads(done.read_text())
        assert recorded["return"] >= recorded["target"], f"the {name} expert reached only {recorded}"
        return path

    return get


# ------------------------------------------------------------------ one local Ray per test process
#: Logical CPUs of the local Ray instance that the Ray test modules share (Ray only counts them).
LOCAL_RAY_CPUS = 4


def _shared_ray_is_ready(ray, wait_s: float = 10.0) -> bool:
    """True when the running Ray is the shared local instance (one node, LOCAL_RAY_CPUS CPUs, no
    custom resources) and a previous module's actors gave all its CPUs back within `wait_s`."""
    if not ray.is_initialized():
        return False
    resources = ray.cluster_resources()
    custom = [key for key in resources
              if key not in ("CPU", "memory", "object_store_memory") and not key.startswith("node:")]
    if custom or resources.get("CPU") != LOCAL_RAY_CPUS or sum(node["Alive"] for node in ray.nodes()) != 1:
        return False
    deadline = time.monotonic() + wait_s
    while ray.available_resources().get("CPU", 0) < LOCAL_RAY_CPUS:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="session")
def local_ray():
    """A function that returns `ray` connected to this test process's local Ray instance.

    Starting Ray costs seconds of CPU on these 2-core machines, so the Ray test modules share
    one instance per test process instead of starting their own. The function starts it again
    when a module left something else behind: another cluster (the two-node cluster, Tune's
    tests with their own settings) or CPUs still taken after a 10 s wait."""
    def connect():
        ray = pytest.importorskip("ray")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not _shared_ray_is_ready(ray):
            if ray.is_initialized():
                ray.shutdown()
            ray.init(address="local", num_cpus=LOCAL_RAY_CPUS, include_dashboard=False, log_to_driver=False)
        return ray

    yield connect
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_for_module(request: pytest.FixtureRequest, local_ray):
    """The shared local Ray, with the requesting test module shipped by value to Ray's workers
    (they cannot import tests/), as a runtime_env would ship user code to a cluster."""
    ray = local_ray()
    ray.cloudpickle.register_pickle_by_value(request.module)
    yield ray
    ray.cloudpickle.unregister_pickle_by_value(request.module)


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

    import ray._private.utils as ray_private_utils

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        ray.shutdown()
    # Cluster() announces its head in /tmp/ray/ray_current_cluster, where every ray.init() without an
    # address on this machine looks first: tests and example scripts in the other pytest-xdist workers
    # would join this cluster (and fail on their num_cpus=...) while it runs. The driver connects by
    # address, so the announcement is skipped.
    announce = ray_private_utils.write_ray_address
    ray_private_utils.write_ray_address = lambda *args, **kwargs: None
    try:
        cluster = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": NODE_CPUS, "resources": {"head_node": 1000}})
    finally:
        ray_private_utils.write_ray_address = announce
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

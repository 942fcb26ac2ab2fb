"""Learners as Ray actors: the Ray backend of a LearnerGroup (`learner_backend="ray"`, or "auto"
with Ray initialised).

Each rank of the group is one Ray actor holding the same `_LearnerWorker` a learner process
holds (rlx.core.learner.learner_process), so both backends run the very same update code. The
driver talks to an actor through `RayLearner`, a handle with the surface of `_LearnerProcess`
(`rank`, `ready`, `submit(method, *args) -> Future`, `healthy`, `alive`, `kill()`, `stop()`,
`request_stop()`, `pid`), so LearnerGroup drives either kind of rank the same way.

Placement: the group's actors share ONE placement group (`LearnerPlacement`) with a bundle per
learner (`num_cpus_per_learner` CPUs, `num_gpus_per_learner` GPUs and any custom resources) and
the config's `placement_strategy` (PACK: few nodes; SPREAD: across nodes), on any node of the
cluster. A restarted rank takes its predecessor's bundle.

Rendezvous: rank 0's actor publishes its node's IP address (`ray.util.get_node_ip_address()`)
and a free port there; every actor (on whatever node) joins torch.distributed at that address.
Each actor points gloo at the network interface holding its own node's IP address (unless the
user set GLOO_SOCKET_IFNAME), never at the loopback interface unless the node's address is a
loopback one (a one-machine cluster).

The actors are part of the driver's Ray job (no job per learner). Envs registered in the
driver (rlx.register_env / Tune's register_env) resolve in the actors as well (DD-PPO's workers
build EnvRunners there). Ray is imported only when a RayLearner is created.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from concurrent.futures import Future
from typing import Any, Sequence

from rlx.core.learner.learner_process import LearnerDiedError, _LearnerWorker
from rlx.core.learner.sharding import shard_batch
from rlx.utils.ray_actors import remote_class
from rlx.utils.ray_placement_wait import wait_until_placed
from rlx.utils.registry import registry_snapshot, restore_registry

__all__ = ["LearnerPlacement", "RayLearner", "is_object_ref", "ray_backend_wanted"]

logger = logging.getLogger("rlx")

#: Seconds to wait for Ray to place the learners' placement group (a warning comes after 10 s).
PLACEMENT_TIMEOUT_S = 300.0

#: Seconds `kill()` waits for a killed actor to stop answering.
KILL_CONFIRM_S = 10.0


def ray_backend_wanted(config: Any) -> bool:
    """Whether the learners of `config` run as Ray actors: `learner_backend="ray"`, or "auto"
    (the default) while Ray is initialised in this process."""
    backend = str(getattr(config, "learner_backend", "auto") or "auto")
    if backend == "ray":
        return True
    if backend == "process":
        return False
    import sys

    ray = sys.modules.get("ray")  # not imported: not initialised either (and `import rlx` stays cheap)
    return ray is not None and ray.is_initialized()


def is_object_ref(value: Any) -> bool:
    """Whether `value` is a Ray ObjectRef (checked without importing Ray)."""
    return type(value).__name__ == "ObjectRef" and type(value).__module__.startswith("ray")


def _interface_of(ip: str) -> str | None:
    """The name of the network interface that holds `ip` (None when none does or psutil is missing)."""
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        return None
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == ip for a in addresses if a.family == socket.AF_INET):
            return name
    return None


def _writable(value: Any) -> Any:
    """`value` with read-only NumPy arrays (Ray's zero-copy views into its object store) copied:
    Learners may change their batch in place (advantage normalisation)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value if value.flags.writeable or value.dtype == object else value.copy()
    if isinstance(value, dict):
        return {k: _writable(v) for k, v in value.items()}
    if type(value) is tuple:
        return tuple(_writable(v) for v in value)
    return value


class _LearnerActor:
    """Body of one learner actor: finds its node's address, then builds and serves a `_LearnerWorker`."""

    def __init__(self, env_registry: dict[str, Any] | None, rank: int):
        restore_registry(env_registry, where=f"the Ray actor of learner {rank} (pid {os.getpid()})")
        self.rank = rank
        self.worker: Any = None
        import ray

        self.node_ip = ray.util.get_node_ip_address()
        if "GLOO_SOCKET_IFNAME" not in os.environ:
            ifname = _interface_of(self.node_ip)
            if ifname is not None:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname

    def rendezvous_address(self) -> tuple[str, int]:
        """(this node's IP address, a free port there): where the group's process group meets."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((self.node_ip, 0))
            return self.node_ip, int(s.getsockname()[1])

    def setup(self, spec: dict[str, Any], address: tuple[str, int] | None) -> dict[str, Any]:
        """Build the Learner from `spec` (what a learner process is built from) and join the
        process group at `address` (None: stand by, to `join` later); answer as a learner process does."""
        import ray

        spec = dict(spec, module_state=_writable(spec["module_state"]))  # Ray's zero-copy arrays are read-only
        spec["master_addr"], spec["master_port"] = address if address is not None else (None, None)
        self.worker = _LearnerWorker(spec, self.rank)
        context = ray.get_runtime_context()
        return dict(self.worker.ready_info(), node_id=context.get_node_id(), actor_id=context.get_actor_id())

    def join(self, address: tuple[str, int], rank: int, world_size: int) -> None:
        """(Re-)join the group's process group at `address` as `rank` of `world_size`."""
        self.rank = rank
        self.worker.join(address[0], int(address[1]), rank, world_size)

    def call(self, method: str, args: tuple) -> Any:
        """`worker.<method>(*args)`: every call of the driver goes through here."""
        return getattr(self.worker, method)(*args)

    def update_from_ref(self, batch: Any, timestep: int, want_weights: bool,
                        options: dict[str, Any] | None = None) -> tuple[Any, ...]:
        """An update on this rank's strided shard of the whole `batch` (Ray fetched it from the
        object store into this actor: it never passed through the driver). Answers as
        `update_from_batch` does (`options`: its minibatching options), plus the axis the batch
        was split along (for the metrics)."""
        shards, axis = shard_batch(batch, self.worker.world_size)
        shard = shards[self.worker.rank]
        return (*self.worker.update_from_batch(None if shard is None else _writable(shard), timestep,
                                               want_weights, options), axis)

    def ping(self) -> None:
        """Answers while the actor lives."""

    def close(self) -> None:
        """Leave the process group."""
        if self.worker is not None:
            self.worker.close()


def _remote_actor_class() -> Any:
    """`ray.remote(_LearnerActor)`, made once per process (Ray is imported then)."""
    return remote_class(_LearnerActor)


#: Ids of enclosing (Tune trial) placement groups whose learner bundles a group already uses.
_claimed_enclosing: set[str] = set()
_claimed_lock = threading.Lock()


def _enclosing_learner_bundles(bundle: dict[str, float], num_learners: int) -> tuple[Any, int] | None:
    """(the placement group this process runs in, the index of its first learner bundle) when it
    is a Ray Tune trial's whose last `num_learners` bundles are learner bundles no other group
    took (rlx.algorithms.resources.trial_bundles puts them there); else None."""
    from ray.util import get_current_placement_group

    pg = get_current_placement_group()
    if pg is None or not bundle:
        return None
    specs = pg.bundle_specs
    first = len(specs) - num_learners
    # (A trial's learner bundle may hold more, e.g. a CPU per aggregator actor beside the learner.)
    if first < 1 or any(any(float(specs[i].get(k, 0)) < v for k, v in bundle.items())
                        for i in range(first, len(specs))):
        return None
    with _claimed_lock:
        if pg.id.hex() in _claimed_enclosing:
            return None
        _claimed_enclosing.add(pg.id.hex())
    return pg, first


class LearnerPlacement:
    """The one placement group of a LearnerGroup's actors: a bundle per rank (CPUs, GPUs, custom
    resources) with `strategy`; None bundles (a learner asking for nothing) schedule without one.
    Inside a Ray Tune trial whose placement group already holds the learners' bundles (its last
    `num_learners`), the actors take those instead of reserving again."""

    def __init__(self, num_learners: int, num_cpus: float, num_gpus: float, custom: dict[str, float] | None,
                 strategy: str):
        import ray

        if not ray.is_initialized():
            logger.info("learner_backend='ray' but Ray is not initialised: calling ray.init().")
            ray.init()
        self.strategy = str(strategy or "PACK").upper()
        self.bundle = {k: float(v) for k, v in {"CPU": num_cpus, "GPU": num_gpus, **(custom or {})}.items()
                       if float(v or 0) > 0}
        self.num_cpus, self.num_gpus, self.custom = float(num_cpus), float(num_gpus), dict(custom or {})
        self.pg: Any = None
        self.first_bundle = 0
        self._owned = False
        enclosing = _enclosing_learner_bundles(self.bundle, num_learners)
        if enclosing is not None:
            self.pg, self.first_bundle = enclosing
        elif self.bundle:
            from ray.util.placement_group import placement_group

            bundles = [dict(self.bundle) for _ in range(num_learners)]
            self.pg = placement_group(bundles, strategy=self.strategy)
            self._owned = True
            try:
                wait_until_placed(self.pg, bundles, f"the {num_learners} learner actor(s)",
                                  "num_learners, num_cpus_per_learner, num_gpus_per_learner, "
                                  "custom_resources_per_learner; or fewer EnvRunners", PLACEMENT_TIMEOUT_S)
            except BaseException:
                self.remove()
                raise

    def actor_options(self, rank: int) -> dict[str, Any]:
        """Ray actor options of rank `rank` (its bundle of the placement group)."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus,
                                   "resources": self.custom or None, "max_concurrency": 1, "max_restarts": 0}
        if self.pg is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self.pg, placement_group_bundle_index=self.first_bundle + rank,
                placement_group_capture_child_tasks=False)
        else:
            options["scheduling_strategy"] = "SPREAD" if "SPREAD" in self.strategy else "DEFAULT"
        return options

    def remove(self) -> None:
        """Give the reserved resources back (idempotent)."""
        pg, self.pg = self.pg, None
        if pg is not None and not self._owned:  # a Tune trial's: its bundles are free for a next group
            with _claimed_lock:
                _claimed_enclosing.discard(pg.id.hex())
        elif pg is not None:
            try:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(pg)
            except Exception as err:  # Ray shut down: nothing is reserved any more
                logger.debug("Could not remove the learners' placement group: %s", err)


def start_ray_learners(spec: dict[str, Any], placement: LearnerPlacement, num_learners: int) -> list["RayLearner"]:
    """Start `num_learners` learner actors: rank 0 publishes the rendezvous address and every
    rank builds its Learner and joins there. Returns at once; each handle's `ready` resolves
    when its Learner is built."""
    import ray

    cls = _remote_actor_class()
    registry = registry_snapshot()
    spec_ref = ray.put(spec)  # one copy in the object store for every rank
    actors = [cls.options(**placement.actor_options(rank)).remote(registry, rank) for rank in range(num_learners)]
    # An ObjectRef argument: Ray hands the address to every setup once rank 0 answered (no wait here).
    address = actors[0].rendezvous_address.remote()
    return [RayLearner(actor, rank, actor.setup.remote(spec_ref, address), bundle=rank)
            for rank, actor in enumerate(actors)]


def start_standby_learner(spec: dict[str, Any], placement: LearnerPlacement, bundle: int) -> "RayLearner":
    """Start one learner actor in bundle `bundle` that builds its Learner but joins no process
    group yet (a replacement: `rejoin` makes it a rank). Returns at once."""
    cls = _remote_actor_class()
    actor = cls.options(**placement.actor_options(bundle)).remote(registry_snapshot(), bundle)
    return RayLearner(actor, bundle, actor.setup.remote(spec, None), bundle=bundle)


def rejoin(handles: Sequence[Any]) -> list[Future]:
    """Re-form the process group of `handles` (ranks 0..len-1 in this order) at a new address
    rank 0 publishes; Futures of their `join` calls."""
    address = handles[0].actor.rendezvous_address.remote()
    futures = []
    for rank, handle in enumerate(handles):
        handle.rank = rank
        futures.append(handle._track(handle.actor.join.remote(address, rank, len(handles)), "join"))
    return futures


class RayLearner:
    """The driver's handle on one learner actor, with the surface of a learner process's handle
    (`_LearnerProcess`): ordered calls answered with Futures, death reported as LearnerDiedError.

    Args:
        actor: the actor handle.
        rank: its rank in the group.
        setup_ref: the ObjectRef of its `setup` call (`ready` resolves with its answer).
    """

    def __init__(self, actor: Any, rank: int, setup_ref: Any, bundle: int | None = None):
        self.actor = actor
        self.rank = rank
        #: The placement group bundle (the rank it was started as) the actor holds.
        self.bundle = rank if bundle is None else bundle
        self.healthy = True
        self.last_error: BaseException | None = None
        self.pid: int | None = None
        self.node_id: str | None = None
        self.actor_id: str | None = actor._actor_id.hex()
        self._dead = False
        self._stopped = False
        self._lock = threading.Lock()
        self.ready = self._track(setup_ref, "start")
        self.ready.add_done_callback(self._record)

    def _record(self, future: Future) -> None:
        if future.exception() is None:
            info = future.result()
            self.pid, self.node_id = info.get("pid"), info.get("node_id")

    @property
    def alive(self) -> bool:
        """False once a call found the actor dead (or it was killed or stopped)."""
        return not self._dead

    @property
    def busy(self) -> bool:
        """Unused by the group (it waits on every call); present for the handle surface."""
        return False

    def submit(self, method: str, *args: Any) -> Future:
        """Queue `worker.<method>(*args)` in the actor. `update_from_batch` with a Ray ObjectRef
        as its batch makes the actor fetch the batch itself and take its shard."""
        if self._dead or self._stopped:
            return self._failed(self._died_error(method))
        try:
            if method == "update_from_batch" and is_object_ref(args[0]):
                return self._track(self.actor.update_from_ref.remote(*args), method)
            return self._track(self.actor.call.remote(method, args), method)
        except Exception as err:  # an argument does not serialize, or Ray was shut down
            return self._failed(err)

    @staticmethod
    def _failed(err: BaseException) -> Future:
        future: Future = Future()
        future.set_running_or_notify_cancel()
        future.set_exception(err)
        return future

    def _track(self, ref: Any, method: str) -> Future:
        out: Future = Future()
        out.set_running_or_notify_cancel()
        # The ObjectRef stays referenced by the callback until its result is in.
        ref.future().add_done_callback(lambda f, ref=ref: self._resolve(f, out, method))
        return out

    def _resolve(self, ray_future: Future, out: Future, method: str) -> None:
        try:
            err = ray_future.exception()
            result = None if err is not None else ray_future.result()
        except BaseException as exc:  # cancelled, or the result could not be deserialized
            err, result = exc, None
        if err is None:
            out.set_result(_writable(result) if isinstance(result, (dict, tuple)) else result)
        else:
            out.set_exception(self._translate(err, method))

    def _translate(self, err: BaseException, method: str) -> BaseException:
        from ray import exceptions as rex

        if isinstance(err, rex.RayTaskError):
            cause = getattr(err, "cause", None)
            if isinstance(cause, LearnerDiedError):
                return cause
            if cause is not None and not isinstance(err, type(cause)):
                try:
                    return err.as_instanceof_cause()
                except Exception:  # a cause type that cannot be subclassed
                    return cause
            return err
        if isinstance(err, (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.LocalRayletDiedError)):
            with self._lock:
                self._dead = True
                self.healthy = False
            error = self._died_error(method, err)
            error.__cause__ = err
            self.last_error = self.last_error or error
            return error
        return err

    def _died_error(self, method: str | None, cause: BaseException | None = None) -> LearnerDiedError:
        what = "" if method is None else " while starting" if method == "start" else f" during {method}"
        where = f"Ray actor {self.actor_id}, pid {self.pid}, node {self.node_id}"
        if self._stopped and cause is None:
            return LearnerDiedError(f"Learner {self.rank} ({where}) was stopped{what}.")
        reason = "is gone"
        if cause is not None:
            first = str(cause).strip().splitlines()
            reason = "was killed (ray.kill)" if "ray.kill" in str(cause) else \
                f"died ({type(cause).__name__}: {first[0] if first else ''})"
        return LearnerDiedError(f"Learner {self.rank} ({where}) {reason}{what}.")

    def request_stop(self) -> None:
        """Ask the actor to leave its process group once earlier calls are answered."""
        with self._lock:
            self.healthy = False
        if not self._dead and not self._stopped:
            try:
                self._close_ref = self.actor.close.remote()
            except Exception:  # Ray shut down
                self._close_ref = None

    def stop(self, timeout: float = 5.0) -> None:
        """Let the actor leave its process group (up to `timeout` s), then kill it. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.healthy = False
        import ray

        ref = getattr(self, "_close_ref", None)
        if ref is not None and not self._dead:
            try:
                ray.get(ref, timeout=timeout)
            except Exception as err:  # stuck in a collective, or dead: killed below
                logger.debug("Learner actor %d did not close cleanly: %s", self.rank, err)
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # already gone, or Ray shut down
            pass

    def kill(self) -> None:
        """Kill the actor at once (`ray.kill`) and wait (up to 10 s) until it no longer answers."""
        import ray
        from ray import exceptions as rex

        with self._lock:
            was_dead, self._dead, self.healthy = self._dead, True, False
        if was_dead:
            return
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # Ray shut down: the actor is gone with it
            return
        deadline = time.monotonic() + KILL_CONFIRM_S
        while time.monotonic() < deadline:
            try:
                ray.get(self.actor.ping.remote(), timeout=max(0.1, deadline - time.monotonic()))
            except rex.GetTimeoutError:
                return  # busy in a call that never ends: it is being killed
            except Exception:  # RayActorError: gone
                return
            time.sleep(0.01)

    def __repr__(self) -> str:
        return f"RayLearner(rank={self.rank}, actor={self.actor_id}, node={self.node_id}, healthy={self.healthy})"

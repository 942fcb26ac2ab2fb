"""LearnerGroup: `num_learners` Learners (processes, or Ray actors) that update one module
data-parallel (RLlib's `ray.rllib.core.learner.learner_group`).

`config.learners(num_learners=N)` (old name `num_learner_workers`) makes the Algorithm train
each module with a LearnerGroup in place of a driver-side Learner. It offers the surface the Algorithm and
checkpoints use (`update_from_batch`, `get_weights`/`set_weights`, `module`, `optimizers`,
`get_extra_state`/`set_extra_state`, `get_extra_tensors`/`set_extra_tensors`) and
`foreach_learner(fn)` to run code in every Learner.

How an update works:

* Each of the N ranks builds the same Learner class on a copy of the module (same weights),
  with `minibatch_size // N` as its minibatch size, and joins a torch.distributed process
  group (gloo on CPU, NCCL when GPU learners are asked for). A rank is a worker process on
  this machine (`learner_backend="process"`, spawned like ProcessEnvRunner's; rendezvous at
  127.0.0.1 on a free port) or a Ray actor anywhere in the cluster (`learner_backend="ray"`,
  the default while Ray is initialised: rlx.core.learner.ray_learners; one placement group,
  rendezvous at rank 0's node address).
* `update_from_batch` splits the batch into N shards along the batch axis: the env axis
  B of time-major [T, B] batches from EnvRunners, axis 0 of flat (replay) batches. Rank r
  gets indices r, r + N, r + 2N, ... (strided, so that without shuffling each rank's k-th
  minibatch holds exactly its share of a single learner's k-th minibatch).
* Every rank runs the Learner's own `update_from_batch` on its shard. Right before each
  optimizer step, gradients are summed over the ranks with one all_reduce and divided by
  the number of ranks taking that step; clipping then sees the averaged gradient, exactly
  as one Learner on the whole batch would.
* Metrics are averaged over ranks (per-sample arrays such as DQN's `td_error` are put back
  in batch order); rank 0's weights are copied into the driver's module, which the local
  EnvRunner shares, so sampling uses the new weights at once.

The gradient averaging and the state that follows one rank are described in
rlx.core.learner.learner_process (the process side), the sharding in rlx.core.learner.sharding.

A learner that dies, or any error during an update (the other ranks may be left
waiting in an all_reduce), stops the whole group. After any other error later calls raise
LearnerGroupError. After a death the driver still holds everything a restart needs: the
module's weights (rank 0's after the last successful update) and a mirror of rank 0's
`get_extra_state()` (refreshed with every update, at no extra round trip). So the calls that
save or load state restart the learner processes from it (`restart()`: optimizer state and
target networks start over as in a freshly built Learner) and answer, and `Algorithm.save()`
keeps the progress made since the last checkpoint. Before the survivors are stopped, the first
one that answers hands over the optimizer state and extra tensors of the last completed update
(every rank holds the same), which the restarted learners load; with none left they start over.
Learner processes: `update_from_batch` raises the death once (that update is lost); the next
call restarts the group and trains on. Ray actors: nothing stops; the surviving actors re-form
the process group among themselves, take the driver's weights and extra state and the salvaged
optimizer state, and the update goes again at once on them (each survivor takes a bigger shard;
its minibatches stay `minibatch_size // num_learners`), so `train()` goes on without waiting
for a new actor. A replacement actor starts in the lost rank's placement bundle meanwhile and
joins at the first update after it is built. The lost attempt is not counted (the driver's
weights and extra state are those of the last completed update). Only when no rank survives
(or the survivors cannot re-form) does the group restart every actor, as processes do.

RLlib's `update(batch=... | episodes=..., num_epochs=, minibatch_size=, shuffle_batch_per_epoch=,
return_state=, async_update=)`: episodes go through the Learners' learner connector pipeline here,
on the driver's module (rank 0's pipeline after its `build()`, fetched once), and the batch then
updates as above; the minibatching options reach every learner's `_update_options`
(`minibatch_size` counts all learners' rows, as `config.minibatch_size`). Async updates run one at a
time, in order, in a thread of the group; every other call (sync updates, weights, state,
checkpoints) first waits for them, at most `async_wait_timeout_s` seconds. While one runs, the
driver's module (which the local EnvRunner acts with) gets rank 0's weights when it completes.

With `num_learners=0` (the default) the Algorithm keeps a plain Learner in the driver. The
learner container (rlx.core.learner.container) makes that choice per module.
"""
from __future__ import annotations

import concurrent.futures as cf
import copy
import logging
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any, Callable, Mapping, NoReturn, Sequence

import numpy as np

from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.async_updates import RL_MODULE_STATE_AFTER_UPDATE, AsyncUpdates, state_for_result, update_options
from rlx.core.learner.learner_process import (
    LearnerDiedError,
    LearnerGroupError,
    _free_port,
    _LearnerProcess,
    _per_learner_config,
    _shutdown,
)
from rlx.core.learner.ray_learners import LearnerPlacement, RayLearner, is_object_ref, ray_backend_wanted, \
    rejoin, start_ray_learners, start_standby_learner
from rlx.core.learner.sharding import merge_metrics, shard_batch
from rlx.core.learner.loss_api import module_part, run_episodes_connector
from rlx.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME
from rlx.utils.metrics.metrics_logger import MetricsLogger

__all__ = ["LearnerDiedError", "LearnerGroup", "LearnerGroupError", "merge_metrics", "shard_batch"]

logger = logging.getLogger("rlx")

_STARTUP_TIMEOUT_S = 300.0

#: A rank of the group: a learner process's handle or a learner actor's.
_Rank = _LearnerProcess | RayLearner


def _built_learner_connector(learner: Any) -> bytes | None:
    """Run in a learner: build it (`Learner.build()`, which may add pieces to the config's learner
    connector pipeline) and answer with its pipeline, cloudpickled (None when it has none)."""
    import cloudpickle

    learner.build()
    pipeline = getattr(learner, "_learner_connector", None)
    return None if pipeline is None else cloudpickle.dumps(pipeline)


def _all_done(futures: Sequence[Future], timeout: float = _STARTUP_TIMEOUT_S) -> bool:
    """Whether every future completed without an exception within `timeout` seconds."""
    done, not_done = cf.wait(futures, timeout=timeout)
    return not not_done and all(f.exception() is None for f in done)


class _OptimizerProxy:
    """Stands for one named optimizer of the learners: state_dict() comes from rank 0,
    load_state_dict() goes to every rank (what checkpoints need)."""

    def __init__(self, group: "LearnerGroup", name: str):
        self._group = group
        self.name = name

    def state_dict(self) -> dict[str, Any]:
        return self._group._call_rank0("optimizer_state", self.name)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._group._call_all("load_optimizer_state", self.name, state_dict)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """Hyperparameters of rank 0's optimizer (a copy: changing it changes nothing)."""
        return self.state_dict()["param_groups"]

    def __repr__(self) -> str:
        return f"_OptimizerProxy({self.name!r}, {self._group!r})"


class LearnerGroup:
    """`num_learners` Learner processes updating `module` data-parallel (see the module docstring).

    Args:
        config: the Algorithm's config (`num_learners`, `num_cpus_per_learner`,
            `num_gpus_per_learner`, `seed` and the Learner's own settings).
        learner_class: the Learner subclass every process builds.
        module: the driver's module (shared with the local EnvRunner); it gets rank 0's
            weights after every update.
        num_learners: overrides `config.num_learners`.
        timeout_s: how long a collective (or start-up) may wait for the other learners.
        module_id: the id of the module the learners train (their Learner's `module_id`).
        custom_resources: Ray resources each learner actor asks for besides CPUs, GPUs and
            `config.custom_resources_per_learner` (the Ray backend; DD-PPO's workers take
            `custom_resources_per_env_runner`).

    `config.learner_backend` says where the ranks run: "process" (learner processes on this
    machine, rendezvous on 127.0.0.1), "ray" (Ray actors in one placement group on any node of
    the cluster: rlx.core.learner.ray_learners), or "auto" (Ray when it is initialised). Both
    kinds of rank run the same update code; on Ray a learner that dies is replaced in the same
    call (the update is redone), and `update_from_batch` also takes a Ray ObjectRef of the batch.
    """

    #: RLlib's LearnerGroup.is_local / is_remote: the learners are processes of their own.
    is_local = False
    is_remote = True

    def __init__(self, config: ResolvedConfig, learner_class: type, module: Any, num_learners: int | None = None,
                 timeout_s: float = 1800.0, module_id: str = "default_policy",
                 custom_resources: Mapping[str, float] | None = None):
        module = getattr(module, "unwrapped_module", module)  # a Learner's module view: the module itself
        self.config = config
        self.learner_class = learner_class
        self.module = module
        self.module_id = module_id
        self.num_learners = int(config.num_learners if num_learners is None else num_learners)
        if self.num_learners < 1:
            raise ValueError(f"A LearnerGroup needs num_learners >= 1, got {self.num_learners}.")
        num_gpus = float(getattr(config, "num_gpus_per_learner", 0) or 0)
        if num_gpus > 0 and not getattr(config, "_fake_gpus", False):
            import torch

            if not torch.cuda.is_available():
                raise LearnerGroupError(f"num_gpus_per_learner={num_gpus}, but torch sees no CUDA device.")
            self.backend = "nccl"
        else:
            self.backend = "gloo"
        #: "process" or "ray": what kind of rank the group starts (see the class docstring).
        self.learner_backend = "ray" if ray_backend_wanted(config) else "process"
        #: Whether an update that meets a learner's death restarts the group and goes again (Ray),
        #: rather than raising the death once (processes).
        self._retries_lost_updates = self.learner_backend == "ray"
        self._placement: LearnerPlacement | None = None
        #: Optimizer state and extra tensors a surviving rank held after the last completed update,
        #: collected when another rank died; the restart loads it.
        self._salvaged: dict[str, Any] | None = None
        #: Ray backend: actors building their Learner to take the place of lost ranks; they join
        #: the group at the first call after they are ready (`_grow`).
        self._replacements: list[RayLearner] = []
        #: Run on a replacement's Learner once it is built, before it joins: `fn(learner, rank)`
        #: (e.g. DD-PPO builds the worker's EnvRunner), so joining costs the others no wait for it.
        self.prepare_replacement: Callable[[Any, int], Any] | None = None
        self._prepared: dict[int, Future] = {}
        self._lock = threading.RLock()
        #: The updates queued by `update(async_update=True)`; every other call waits for them first,
        #: at most `async_wait_timeout_s` seconds.
        self._async = AsyncUpdates(f"module {module_id!r}")
        self.async_wait_timeout_s = float(timeout_s)
        #: The learners' connector pipeline `update(episodes=...)` runs here (fetched once).
        self._learner_connector: Any = None
        self._connector_metrics: Any = None
        #: Why the group cannot be used ("ErrorType: message"), None while it can.
        self._broken: str | None = None
        #: Whether `_broken` is a learner process that died: the next call restarts the group.
        self._broken_by_death = False
        self._stopped = False
        self._handles: list[_Rank] = []
        self._finalizer: weakref.finalize | None = None
        self.pids: list[int] = []
        self.optimizers: dict[str, _OptimizerProxy] = {}
        #: The driver's copy of rank 0's Learner.get_extra_state() (update counts, PPO's
        #: kl_coeff, RNG state), refreshed by every call that can change it; restart() loads it.
        self._extra_state: dict[str, Any] | None = None
        #: Everything the learner processes are built from but the weights and the port.
        self._spec = {
            "learner_class": learner_class,
            "module_id": module_id,
            "config": _per_learner_config(config, self.num_learners),
            "module_spec": {
                "module_class": type(module),
                "observation_space": module.observation_space,
                "action_space": module.action_space,
                "model_config": dict(module.model_config),
                "inference_only": bool(module.inference_only),
                "catalog_class": getattr(module, "catalog_class", None),
            },
            "world_size": self.num_learners,
            "backend": self.backend,
            # The Ray backend's rank 0 publishes its node's address instead.
            "master_addr": "127.0.0.1" if self.learner_backend == "process" else None,
            "timeout_s": timeout_s,
            "num_threads": max(1, int(getattr(config, "num_cpus_per_learner", 1) or 1)),
            "seed": getattr(config, "seed", None),
        }
        if self.learner_backend == "ray":
            self._placement = LearnerPlacement(
                self.num_learners, float(getattr(config, "num_cpus_per_learner", 1) or 0), num_gpus,
                {**dict(getattr(config, "custom_resources_per_learner", None) or {}), **dict(custom_resources or {})},
                str(getattr(config, "placement_strategy", "PACK") or "PACK"))
        try:
            infos = self._start()
        except BaseException:
            if self._placement is not None:
                self._placement.remove()
            raise
        self._extra_state = infos[0]["extra_state"]

    def _launch(self, spec: dict[str, Any], payload: bytes) -> list[Any]:
        """Start the ranks (learner processes or Ray actors); their `ready` resolves once built.
        Ray actors get `spec` through Ray's serializer (which honours
        `ray.cloudpickle.register_pickle_by_value`), processes the cloudpickled `payload`."""
        if self._placement is not None:
            return start_ray_learners(spec, self._placement, self.num_learners)
        return [_LearnerProcess(payload, rank) for rank in range(self.num_learners)]

    @property
    def actor_ids(self) -> list[str | None]:
        """The Ray actor ids of the ranks (Ray backend; None for learner processes)."""
        return [getattr(h, "actor_id", None) for h in self._handles]

    @property
    def node_ids(self) -> list[str | None]:
        """The Ray node ids the ranks run on (Ray backend; None for learner processes)."""
        return [getattr(h, "node_id", None) for h in self._handles]

    def _start(self) -> list[dict[str, Any]]:
        """Start `num_learners` learner processes on the driver module's current weights and
        make them the group's; returns their start-up answers. Every Learner is built fresh:
        new optimizer state, target networks copied from the weights, initial extra state."""
        import cloudpickle

        spec = dict(self._spec, module_state=self.module.get_state())
        for attempt in range(2):
            if self.learner_backend == "process":
                spec["master_port"] = _free_port("127.0.0.1")
            try:
                payload = cloudpickle.dumps(spec)
            except Exception as err:
                raise LearnerGroupError(
                    f"num_learners={self.num_learners} sends the config, the Learner class and the module to "
                    f"the learner processes, but they do not pickle: {type(err).__name__}: {err}"
                ) from err
            handles = self._launch(spec, payload)
            finalizer = weakref.finalize(self, _shutdown, handles)
            try:
                infos = self._wait(handles, [h.ready for h in handles], "start", timeout=_STARTUP_TIMEOUT_S)
            except BaseException as err:
                finalizer()
                if attempt == 0 and "address already in use" in str(err).lower():
                    self._broken, self._broken_by_death = None, False
                    continue  # another program took the free port between the check and the bind
                raise
            break
        self._handles = handles
        self._finalizer = finalizer
        self.pids = [info["pid"] for info in infos]
        names = list(infos[0]["optimizers"])
        if list(self.optimizers) != names:  # proxies handed out before keep working after a restart
            self.optimizers.clear()
            self.optimizers.update({name: _OptimizerProxy(self, name) for name in names})
        self._versions = self._module_versions()
        return infos

    def restart(self) -> None:
        """Replace the learner processes by `num_learners` fresh ones built on the driver's state.

        Stops whatever learner processes are left (e.g. after one was killed or ran out of
        memory), starts new ones from the driver module's current weights (rank 0's after the
        last successful update) and loads the driver's copy of the learners' extra state
        (`get_extra_state()`: update counts, PPO's KL coefficient, RNG state) into them. What
        only the lost processes held starts over as in a freshly built Learner: the optimizer
        state (e.g. Adam moments) and the extra tensors, whose target networks then equal the
        current weights (SAC's log-alpha is back at `initial_alpha`). The group is usable again.

        The calls that save or load state (`get_extra_state`, `get_extra_tensors`, the optimizers'
        `state_dict`, ...) restart the group by themselves when a learner process died, so
        `Algorithm.save()` works after a learner death; `update_from_batch` raises the death
        once (that update is lost) and restarts on the next call. Logs one warning.

        Raises:
            LearnerGroupError: the group was stopped (`stop()` is final).
        """
        self._await_async("LearnerGroup.restart()")
        self._restart()

    def _restart(self) -> None:
        with self._lock:
            if self._stopped:
                raise LearnerGroupError("The LearnerGroup is stopped: restart() cannot bring it back.")
            reason = f'"{self._broken}"' if self._broken is not None else "a call to restart()"
            # Every call that can change the learners' extra state refreshed the driver's copy.
            old, self._handles = self._handles, []
            finalizer, self._finalizer = self._finalizer, None
            if finalizer is not None:
                finalizer.detach()
            _shutdown([*old, *self._replacements])
            self._replacements, self._prepared = [], {}
            self._broken, self._broken_by_death = None, False
            extra_state = self._extra_state
            salvaged, self._salvaged = self._salvaged, None
            self._start()
            if extra_state is not None:
                self._extra_state = self._run_all("set_extra_state", extra_state)[0]
            if salvaged is not None:
                self._run_all("load_synced_state", salvaged)
                optimizer = ("the optimizer state (e.g. Adam moments) and target networks were recovered from a "
                             "surviving learner")
            else:
                optimizer = ("the optimizer state (e.g. Adam moments) restarted from scratch and target networks "
                             "were rebuilt from the current weights")
            logger.warning(
                "LearnerGroup: restarted the %d learner %s (%s) from the driver's weights after %s; %s; update "
                "counts and other learner extra state were kept.",
                self.num_learners, "actors" if self.learner_backend == "ray" else "processes",
                self.learner_class.__name__, reason, optimizer)

    # ---------------------------------------------------------------- plumbing

    def _wait(self, handles: Sequence[_Rank], futures: list[Future], what: str,
              timeout: float | None = None, collective: bool = True) -> list[Any]:
        """Results of `futures` (one per handle in `handles`).

        A learner process that died stops the group (the others cannot go on without it).
        So does any failure of a `collective` call (start-up, updates): the other ranks may
        be left waiting in an all_reduce for the failed one. An exception raised by a plain
        call (e.g. loading optimizer state that does not fit) is re-raised and the group
        stays usable.
        """
        mode = cf.FIRST_EXCEPTION if collective else cf.ALL_COMPLETED
        done, not_done = cf.wait(futures, timeout=timeout, return_when=mode)
        errors: list[BaseException] = [e for f in futures if f in done and (e := f.exception()) is not None]
        if not errors and not not_done:
            return [f.result() for f in futures]
        if errors and not_done and not any(isinstance(e, LearnerDiedError) for e in errors):
            # A rank that failed leaves the others waiting in a collective, or makes them fail
            # soon after (a dead peer closes their connections): a moment to find a dead one.
            more, _ = cf.wait(not_done, timeout=3.0)
            errors += [e for f in more if (e := f.exception()) is not None]
        if errors and not collective and not any(isinstance(e, LearnerDiedError) for e in errors):
            raise errors[0]
        if not errors:
            errors = [LearnerGroupError(f"The learners did not finish {what} within {timeout} s.")]
        self._fail(errors, handles)

    def _break(self, errors: list[BaseException], handles: Sequence[_Rank] = ()) -> BaseException:
        """Kill every learner and mark the group broken; returns the most telling error. After a
        death on the Ray backend the survivors go on instead when they can (`_shrink`)."""
        count = len(self._handles) or len(handles)
        everyone = list({id(h): h for h in list(handles) + list(self._handles)}.values())
        died = [e for e in errors if isinstance(e, LearnerDiedError)]
        if died and len(everyone) > 1:
            self._salvaged = self._salvage(everyone)
            if self._salvaged is not None and self._placement is not None and self._shrink(everyone):
                self._salvaged = None
                return died[0]  # the group goes on without the lost rank(s)
        for handle in everyone:
            handle.kill()
        error = died[0] if died else errors[0]
        self._broken = f"{type(error).__name__}: {error}"
        self._broken_by_death = bool(died)
        if hasattr(error, "add_note"):
            if died:
                error.add_note(
                    f"The LearnerGroup ({count} learners) stopped its learners: the others cannot go on "
                    "without the one that died. The next call restarts them from the driver's weights "
                    "(LearnerGroup.restart()); Algorithm.save() works now and saves the driver's state."
                )
            else:
                error.add_note(
                    f"The LearnerGroup ({count} learners) is stopped: a learner that failed leaves the "
                    "others unable to go on. Build a new Algorithm (e.g. with Algorithm.from_checkpoint) to "
                    "continue."
                )
        return error

    def _shrink(self, handles: Sequence[Any], timeout: float = 120.0) -> bool:
        """Ray backend, after a rank died: re-form the process group of the surviving actors, load
        the driver's weights and extra state and the salvaged optimizer state into them, and start
        a replacement for each lost rank in the background (`_grow` lets it join). Returns whether
        the group goes on this way (False: the caller restarts every rank instead)."""
        survivors = [h for h in handles if h.healthy and h.alive]
        lost = [h for h in handles if not (h.healthy and h.alive)]
        if not survivors or not lost:
            return False
        for handle in lost:
            handle.kill()
        try:
            if not _all_done(rejoin(survivors), timeout):
                return False
            weights = self.module.get_state()
            if not _all_done([f for h in survivors for f in (h.submit("set_weights", weights),
                                                             h.submit("set_extra_state", self._extra_state),
                                                             h.submit("load_synced_state", self._salvaged))],
                             timeout):
                return False
        except Exception as err:  # Ray failed to re-form the group: the caller restarts it
            logger.debug("LearnerGroup: could not re-form the group without the lost learner: %s", err)
            return False
        self._handles = list(survivors)
        self.pids = [h.pid for h in survivors if h.pid is not None]
        self._versions = self._module_versions()
        for handle in lost:
            self._replace(handle.bundle)
        logger.warning(
            "LearnerGroup: lost %d of %d learner actors; training goes on with %d (the optimizer state recovered "
            "from a survivor) while %d replacement(s) start in the background.",
            len(lost), len(handles), len(survivors), len(lost))
        return True

    def _replace(self, bundle: int) -> None:
        """Start a stand-by learner actor for placement bundle `bundle` on the driver's weights."""
        assert self._placement is not None, "replacements are Ray actors"
        spec = dict(self._spec, module_state=self.module.get_state())
        replacement = start_standby_learner(spec, self._placement, bundle)
        self._replacements.append(replacement)
        if self.prepare_replacement is not None:
            prepare = self.prepare_replacement
            # (Its result stays in the actor: only None travels back.)
            self._prepared[id(replacement)] = replacement.submit(
                "apply", lambda learner: (prepare(learner, bundle), None)[1])

    def _grow(self) -> None:
        """Let the replacements that finished building join the group (lock held): the process
        group re-forms with them, and they take the driver's weights and extra state and rank 0's
        optimizer state. A replacement that failed to build is started again."""
        ready = [r for r in self._replacements
                 if r.ready.done() and (r.ready.exception() is not None or self._prepared.get(id(r), r.ready).done())]
        if not ready:
            return
        for replacement in ready:
            self._replacements.remove(replacement)
            prepared = self._prepared.pop(id(replacement), None)
            if prepared is not None and prepared.exception() is not None:
                logger.warning("LearnerGroup: preparing a replacement learner failed (%s); it joins unprepared.",
                               prepared.exception())
        good = [r for r in ready if r.ready.exception() is None]
        for failed in (r for r in ready if r.ready.exception() is not None):
            logger.warning("LearnerGroup: a replacement learner actor failed to start (%s); starting another.",
                           failed.ready.exception())
            failed.kill()
            self._replace(failed.bundle)
        if not good:
            return
        state_future = self._handles[0].submit("synced_state")
        handles = self._handles + good
        joined = _all_done([state_future]) and _all_done(rejoin(handles))
        if joined:
            weights, state = self.module.get_state(), state_future.result()
            joined = _all_done([f for r in good for f in (r.submit("set_weights", weights),
                                                          r.submit("set_extra_state", self._extra_state),
                                                          r.submit("load_synced_state", state))])
        if not joined:
            # Back to the ranks that were training; if they cannot re-form either, restart them all.
            for replacement in good:
                replacement.kill()
                self._replace(replacement.bundle)
            if not _all_done(rejoin(self._handles)):
                self._fail([LearnerDiedError("The learner actors could not re-form their process group after "
                                             "replacing a lost one.")], self._handles)
            return
        self._handles = handles
        self.pids = [h.pid for h in handles if h.pid is not None]
        logger.warning("LearnerGroup: %d replacement learner actor(s) joined; %d learners train again.",
                       len(good), len(handles))

    @staticmethod
    def _salvage(handles: Sequence[Any], timeout: float = 10.0) -> dict[str, Any] | None:
        """The optimizer state and extra tensors after the last completed update, from the first
        surviving rank that answers within `timeout` s (a rank left in a collective with a dead
        peer fails out of it first); None when none does."""
        alive = [h for h in handles if h.healthy and h.alive]
        pending = {h.submit("synced_state") for h in alive}
        deadline = time.monotonic() + timeout
        while pending:
            done, pending = cf.wait(pending, timeout=max(0.0, deadline - time.monotonic()),
                                    return_when=cf.FIRST_COMPLETED)
            if not done:
                break
            for future in done:
                if future.exception() is None:
                    return future.result()
        return None

    def _fail(self, errors: list[BaseException], handles: Sequence[_Rank] = ()) -> NoReturn:
        """Kill every learner process, mark the group unusable and raise the most telling error."""
        raise self._break(errors, handles)

    def _dead_handle(self) -> _Rank | None:
        return next((h for h in self._handles if not h.healthy or not h.alive), None)

    def _check_usable(self, restart_on_death: bool = True) -> None:
        """Make sure the learners can take a call (lock held).

        A group broken by a learner death restarts (`restart()`). A learner found dead now
        restarts the group too, unless `restart_on_death` is False: then its death is raised
        (LearnerDiedError) and the next call restarts. Other failures raise LearnerGroupError.
        """
        if self._stopped:
            raise LearnerGroupError("The LearnerGroup is stopped.")
        if self._broken is None:
            dead = self._dead_handle()
            if dead is not None:
                error = self._break([dead._died_error(None)])
                if not restart_on_death:
                    raise error
        if self._broken is not None:
            if not self._broken_by_death:
                raise LearnerGroupError(f"The LearnerGroup is stopped after an earlier failure ({self._broken}).")
            self._restart()

    def _module_versions(self) -> tuple[int, ...]:
        # Every in-place change of a tensor (load_state_dict, an optimizer step, ...) bumps its version.
        return tuple(t._version for t in self.module.state_dict(keep_vars=True).values())

    def _push_driver_weights(self) -> None:
        """Send the driver module's weights to every learner if they changed since the last
        update (e.g. a checkpoint restore loaded weights straight into `module`)."""
        versions = self._module_versions()
        if versions != self._versions:
            weights = self.module.get_state()
            self._run_all("set_weights", weights)
            self._versions = self._module_versions()

    def _run_all(self, method: str, *args: Any) -> list[Any]:
        futures = [h.submit(method, *args) for h in self._handles]
        return self._wait(self._handles, futures, method, collective=False)

    def _call(self, run: Callable[[], Any], push_weights: bool = True) -> Any:
        """run() on usable learners (lock held by the caller); a learner that dies during it
        restarts the group and run() goes again once. For calls that only read or set state."""
        for attempt in range(2):
            self._check_usable()
            try:
                if push_weights:
                    self._push_driver_weights()
                return run()
            except LearnerDiedError:
                if attempt or self._stopped or not self._broken_by_death:
                    raise
        raise AssertionError("unreachable")

    def _await_async(self, what: str) -> None:
        """Wait for the async updates in flight (see AsyncUpdates.wait), so that `what` sees them applied."""
        self._async.wait(self.async_wait_timeout_s, what)

    def _call_all(self, method: str, *args: Any) -> list[Any]:
        self._await_async(method)
        with self._lock:
            return self._call(lambda: self._run_all(method, *args))

    def _call_rank0(self, method: str, *args: Any) -> Any:
        self._await_async(method)
        with self._lock:
            return self._call(lambda: self._wait(self._handles[:1], [self._handles[0].submit(method, *args)],
                                                 method, collective=False)[0])

    # ---------------------------------------------------------------- the Learner surface

    def update_from_batch(self, batch: Mapping[str, Any], timestep: int) -> dict[str, Any]:
        """One data-parallel update: each learner updates on its shard of `batch`; returns
        the averaged metrics. The driver's module then holds the new weights.

        With the Ray backend `batch` may be a Ray ObjectRef: every learner actor fetches the batch
        from the object store and takes its own shard (the arrays never pass through the driver).

        Learner processes: one that dies before or during the update raises LearnerDiedError (the
        update is lost); the next call restarts the learners (see `restart()`) and goes on.
        Ray actors: the surviving ranks re-form the group and the update goes again at once on
        them (see `_shrink`), so the call returns as if nothing happened; a replacement joins
        when it is ready. With no survivor the group restarts and the update goes again."""
        self._await_async("LearnerGroup.update_from_batch()")
        return self._update_batch(batch, timestep)

    def _update_batch(self, batch: Any, timestep: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """`update_from_batch` without waiting for async updates (`options`: the Learners'
        minibatching options for this update, None for their own)."""
        with self._lock:
            for attempt in range(2):
                self._check_usable(restart_on_death=self._retries_lost_updates)
                try:
                    return self._update_once(batch, timestep, options)
                except LearnerDiedError:
                    if attempt or not self._retries_lost_updates or self._stopped or (
                            self._broken is not None and not self._broken_by_death):
                        raise
            raise AssertionError("unreachable")

    def update(self, batch: Any = None, episodes: list[Any] | None = None, timesteps: dict[str, Any] | None = None,
               async_update: bool = False, return_state: bool = False, num_epochs: int = 1,
               minibatch_size: int | None = None, shuffle_batch_per_epoch: bool = False, **kwargs: Any) -> Any:
        """RLlib's `LearnerGroup.update` on `batch` (this group's module's columns, or a
        MultiAgentBatch / {module_id: columns} holding them) or on `episodes` (run through the
        Learners' learner connector pipeline here, on the driver's module): {module_id: averaged
        metrics}, without the module id when the data holds nothing of this group's module.

        `num_epochs` passes over the batch in minibatches of `minibatch_size` rows (None: the whole
        batch), reshuffled per pass with `shuffle_batch_per_epoch`, for Learners that update through
        the loss API (`compute_loss_for_module`; those with their own `update_from_batch`, e.g.
        PPO's, follow their config). `minibatch_size` counts the rows of all learners together, as
        `config.minibatch_size` does: each learner steps on `minibatch_size // num_learners` rows.

        `return_state=True` adds RL_MODULE_STATE_AFTER_UPDATE: {"rl_module": {module_id: weights},
        "extra_state": {module_id: learner extra state}} after this update (an ObjectRef to it while
        Ray is initialised). `async_update=True` queues the update and returns at once a list of the
        results of earlier async updates that finished since the last such call (possibly empty);
        every other call of the group waits for the queued updates first."""
        if kwargs:
            raise TypeError(f"LearnerGroup.update() got unsupported arguments {sorted(kwargs)}; it takes batch=, "
                            "episodes=, timesteps=, async_update=, return_state=, num_epochs=, minibatch_size=, "
                            "shuffle_batch_per_epoch=.")
        job = self.update_job(batch, episodes, timesteps, return_state,
                              update_options(num_epochs, minibatch_size, shuffle_batch_per_epoch))
        if async_update:
            self._check_not_stopped()
            finished = self._async.collect()  # first: never this update's own result
            self._async.submit(job)
            return finished
        self._await_async("LearnerGroup.update()")
        return job()

    def submit_update(self, job: Callable[[], Any]) -> Future:
        """Queue `job` (an `update_job`) as an async update whose result `update(async_update=True)`
        does not hand out; its Future. Learner containers queue their modules' updates this way."""
        self._check_not_stopped()
        return self._async.submit(job, collect=False)

    def update_job(self, batch: Any, episodes: list[Any] | None, timesteps: dict[str, Any] | None,
                   return_state: bool, options: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        """The work of one `update()` call, checked now, run later (at once, or queued when async)."""
        if (batch is None) == (episodes is None):
            raise ValueError("LearnerGroup.update() needs exactly one of batch= and episodes=.")
        timestep = int((timesteps or {}).get(NUM_ENV_STEPS_SAMPLED_LIFETIME) or 0)
        episodes = None if episodes is None else list(episodes)

        def job() -> dict[str, Any]:
            part = module_part(batch if episodes is None else self._episodes_batch(episodes), self.module_id)
            result: dict[str, Any] = {}
            if part is not None:
                result[self.module_id] = self._update_batch(part, timestep, self._per_rank(options))
            if return_state:
                result[RL_MODULE_STATE_AFTER_UPDATE] = state_for_result(self._state_after_update())
            return result

        return job

    def _check_not_stopped(self) -> None:
        if self._stopped:
            raise LearnerGroupError("The LearnerGroup is stopped.")

    def _per_rank(self, options: dict[str, Any]) -> dict[str, Any]:
        """`options` for one learner: its share of the minibatch (as `config.minibatch_size`)."""
        size = options.get("minibatch_size")
        if size is None or self.num_learners <= 1:
            return options
        return dict(options, minibatch_size=max(1, int(size) // self.num_learners))

    def _state_after_update(self) -> dict[str, Any]:
        """The learners' state as `update(return_state=True)` gives it (the driver's copies of
        rank 0's weights and extra state)."""
        with self._lock:
            return {"rl_module": {self.module_id: self.module.get_state()},
                    "extra_state": {self.module_id: copy.deepcopy(self._extra_state)}}

    def _episodes_batch(self, episodes: list[Any]) -> Any:
        """The train batch of `episodes`: the Learners' connector pipeline run here on the driver's
        module ({module_id: train batch}, laid out as the Learner class reads it)."""
        with self._lock:
            pipeline = self._episodes_connector()
            return run_episodes_connector(pipeline, self.learner_class, rl_module=self.module, episodes=episodes,
                                          metrics=self._connector_metrics)

    def _episodes_connector(self) -> Any:
        """The learner connector pipeline of the Learners (lock held): built once, in every learner
        by its `build()` (which may add pieces to the config's, as VPG's Learner does), and rank 0's
        copy brought here."""
        if self._learner_connector is not None:
            return self._learner_connector
        if not callable(getattr(self.config, "build_learner_connector", None)):
            raise TypeError(
                f"LearnerGroup.update(episodes=...) runs the learner connector pipeline, but the config "
                f"({type(self.config).__name__}) has no build_learner_connector(). Build the Algorithm from an "
                "AlgorithmConfig, or pass batch= with the columns the loss reads.")
        answers = self._call(lambda: self._run_all("apply", _built_learner_connector))
        payload = answers[0][0]
        if payload is None:
            raise TypeError(f"LearnerGroup.update(episodes=...): the {self.learner_class.__name__} learners built no "
                            "learner connector pipeline (config.build_learner_connector() gave None); pass batch= "
                            "instead.")
        import cloudpickle

        self._learner_connector = cloudpickle.loads(payload)
        self._connector_metrics = MetricsLogger()
        return self._learner_connector

    def _update_once(self, batch: Any, timestep: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._replacements:
            self._grow()
        self._push_driver_weights()
        extra = () if options is None else (options,)  # (calls without options stay as they were)
        if is_object_ref(batch):
            if self.learner_backend != "ray":
                import ray

                batch = ray.get(batch)  # learner processes get their shards from the driver
            else:
                futures = [h.submit("update_from_batch", batch, int(timestep), h.rank == 0, *extra)
                           for h in self._handles]
                results = self._wait(self._handles, futures, "update_from_batch")
                self._take_rank0(results[0][1], results[0][2])
                return merge_metrics([r[0] for r in results if r[0] is not None], results[0][3],
                                     len(self._handles))
        shards, axis = shard_batch(batch, len(self._handles))
        futures = [h.submit("update_from_batch", shard, int(timestep), h.rank == 0, *extra)
                   for h, shard in zip(self._handles, shards)]
        results = self._wait(self._handles, futures, "update_from_batch")
        self._take_rank0(results[0][1], results[0][2])
        return merge_metrics([m for m, _, _ in results if m is not None], axis, len(self._handles))

    def _take_rank0(self, weights: Any, extra_state: Any) -> None:
        """Rank 0's weights into the driver's module and its extra state into the driver's mirror."""
        if weights is not None:
            self.module.set_state(weights)
            self._versions = self._module_versions()
            self._extra_state = extra_state

    def run_update(self, batch: Mapping[str, Any], timestep: int) -> dict[str, Any]:
        """`update_from_batch` (each learner process applies its own precision and compilation)."""
        return self.update_from_batch(batch, timestep)

    def update_from_own_batches(self, make_batch: Callable[[Any, int], tuple[Any, Any]], timestep: int,
                                fetch_weights: bool = True) -> tuple[dict[str, Any], list[Any]]:
        """A data-parallel update on batches the learners build themselves (decentralized
        sampling, as DD-PPO's): each rank calls `make_batch(learner, rank) -> (batch, info)` in
        its process (`make_batch` travels with cloudpickle), then updates on its batch with the
        gradients all-reduced as in `update_from_batch`. Returns (averaged metrics, the ranks'
        infos). With `fetch_weights=False` the driver's module keeps its weights (no copy from
        rank 0); `pull_weights()` fetches them later."""
        self._await_async("LearnerGroup.update_from_own_batches()")
        with self._lock:
            for attempt in range(2):  # Ray actors: a lost learner is replaced and the update goes again
                self._check_usable(restart_on_death=self._retries_lost_updates)
                try:
                    if self._replacements:
                        self._grow()
                    self._push_driver_weights()
                    futures = [h.submit("update_from_own_batch", make_batch, int(timestep),
                                        fetch_weights and h.rank == 0) for h in self._handles]
                    results = self._wait(self._handles, futures, "update_from_own_batch")
                    break
                except LearnerDiedError:
                    if attempt or not self._retries_lost_updates or self._stopped or (
                            self._broken is not None and not self._broken_by_death):
                        raise
            self._take_rank0(results[0][1], results[0][2])
            # Batches from EnvRunners are time-major [T, B]: per-sample metrics follow the B axis.
            metrics = merge_metrics([m for m, _, _, _ in results if m is not None], 1, len(results))
            return metrics, [info for _, _, _, info in results]

    def pull_weights(self) -> None:
        """Copy rank 0's weights into the driver's module (after updates made with
        `fetch_weights=False`)."""
        self._await_async("LearnerGroup.pull_weights()")
        with self._lock:
            weights = self._call_rank0("get_weights")
            self.module.set_state(weights)
            self._versions = self._module_versions()

    def get_weights(self) -> dict[str, np.ndarray]:
        """The module's weights (the driver's copy, equal to the learners'). Restarts the
        learners first when one died (see `restart()`)."""
        self._await_async("LearnerGroup.get_weights()")
        with self._lock:
            if not self._stopped and (self._broken_by_death or (self._broken is None and self._dead_handle())):
                self._check_usable()
        return self.module.get_state()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load weights into the driver's module and every learner."""
        self._await_async("LearnerGroup.set_weights()")
        with self._lock:
            self.module.set_state(weights)
            self._call(lambda: self._run_all("set_weights", self.module.get_state()), push_weights=False)
            self._versions = self._module_versions()

    def get_extra_state(self) -> dict[str, Any]:
        """Rank 0's Learner.get_extra_state() (all ranks agree after each update)."""
        self._await_async("LearnerGroup.get_extra_state()")
        with self._lock:
            state = self._call(lambda: self._wait(self._handles[:1], [self._handles[0].submit("get_extra_state")],
                                                  "get_extra_state", collective=False)[0])
            self._extra_state = state
            return copy.deepcopy(state)

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Learner.set_extra_state() on every learner."""
        self._await_async("LearnerGroup.set_extra_state()")
        with self._lock:
            self._extra_state = self._call(lambda: self._run_all("set_extra_state", state))[0]

    def get_extra_tensors(self) -> dict[str, Any]:
        """Rank 0's Learner.get_extra_tensors() (target networks, ...), as CPU tensors."""
        return self._call_rank0("get_extra_tensors")

    def set_extra_tensors(self, tensors: dict[str, Any]) -> None:
        """Learner.set_extra_tensors() on every learner."""
        self._call_all("set_extra_tensors", {k: v.detach().cpu() if hasattr(v, "detach") else v
                                             for k, v in tensors.items()})

    @property
    def optimizer(self) -> _OptimizerProxy:
        """The first optimizer."""
        return next(iter(self.optimizers.values()))

    def foreach_learner(self, fn: Callable[[Any], Any]) -> list[Any]:
        """[fn(learner) for every learner], run in the learner processes (fn travels with
        cloudpickle; its result must pickle). Restarts the learners first when one died."""
        self._await_async("LearnerGroup.foreach_learner()")
        with self._lock:
            self._check_usable()
            self._push_driver_weights()
            results = self._run_all("apply", fn)
            self._extra_state = results[0][1]
            return [result for result, _ in results]

    @property
    def is_healthy(self) -> bool:
        """Whether every learner process is alive and the group can be used."""
        return (not self._stopped and self._broken is None and bool(self._handles)
                and all(h.alive and h.healthy for h in self._handles))

    def stop(self) -> None:
        """Stop the learner processes or actors and free their placement group (idempotent). Waits
        (at most `async_wait_timeout_s`) for async updates in flight first."""
        try:
            self._async.wait(self.async_wait_timeout_s, "LearnerGroup.stop()", report_failures=False)
        except LearnerGroupError as err:  # stop all the same: the updates fail with the learners
            logger.warning("%s", err)
        self._async.shutdown()
        with self._lock:
            self._stopped = True
            handles, self._handles = [*self._handles, *self._replacements], []
            self._replacements, self._prepared = [], {}
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if handles:
            _shutdown(handles)
        if self._placement is not None:
            self._placement.remove()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("broken" if self._broken else "running")
        return (f"LearnerGroup({self.learner_class.__name__}, num_learners={self.num_learners}, "
                f"learner_backend={self.learner_backend}, backend={self.backend}, {state})")

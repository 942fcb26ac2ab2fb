"""LearnerGroup: `num_learners` Learner processes that update one module data-parallel.

`config.learners(num_learners=N)` (old name `num_learner_workers`) makes the Algorithm use a
LearnerGroup in place of its driver-side Learner. It offers the surface the Algorithm and
checkpoints use (`update_from_batch`, `get_weights`/`set_weights`, `module`, `optimizers`,
`get_extra_state`/`set_extra_state`, `get_extra_tensors`/`set_extra_tensors`) and
`foreach_learner(fn)` to run code in every Learner.

How an update works:

* Each of the N worker processes (spawned, like ProcessEnvRunner's) builds the same
  Learner class on a copy of the module (same weights), with `minibatch_size // N` as its
  minibatch size, and joins a torch.distributed process group (gloo on CPU, NCCL when
  GPU learners are asked for; rendezvous at 127.0.0.1 on a free port).
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

Why an explicit all_reduce and not DistributedDataParallel: rlx Learners call many module
methods besides `forward` (`compute_values`, `q_outputs`, ...), and SAC/DDPG/TD3 take
gradients with `torch.autograd.grad` (`Learner.step_on`); DDP only averages gradients of
`backward()` through its own `forward()`. The group instead hooks the one place every
Learner update goes through before stepping, `rlx.core.learner.clip_gradients` (and, for
a Learner that steps without it, each optimizer's `step`). Ranks that run out of work
earlier than others (shards of unequal size, e.g. padded batches) keep answering the
others' all_reduces with zeros until all are done, so the collectives always pair up.

Non-gradient learner state (PPO's KL coefficient, counters) and module buffers follow
rank 0: they are broadcast to the other ranks after each update. When the ranks took
different numbers of steps (shards of unequal size), the rank that took part in every
averaged step is the source instead and also hands its weights and optimizer state to the
others, so all ranks always hold the same weights.

A learner process that dies, or any error during an update (the other ranks may be left
waiting in an all_reduce), stops the whole group. After any other error later calls raise
LearnerGroupError. After a death the driver still holds everything a restart needs: the
module's weights (rank 0's after the last successful update) and a mirror of rank 0's
`get_extra_state()` (refreshed with every update, at no extra round trip). So the calls that
save or load state restart the learner processes from it (`restart()`: optimizer state and
target networks start over as in a freshly built Learner) and answer, and `Algorithm.save()`
keeps the progress made since the last checkpoint. `update_from_batch` raises the death once
(that update is lost); the next call restarts the group and trains on.

With `num_learners=0` (the default) the Algorithm keeps a plain Learner in the driver.
"""
from __future__ import annotations

import concurrent.futures as cf
import copy
import logging
import os
import signal
import socket
import sys
import threading
import weakref
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, Callable, Mapping

import numpy as np

from rlx.utils.spawn import describe_exit, raise_startup_error, send_reply, serve_calls
from rlx.utils.worker_process import WorkerProcess
from rlx.utils.errors import RLXError

logger = logging.getLogger("rlx")

#: Column whose shape tells time-major [T, B] batches from flat [N] ones.
_SHAPE_COLUMN = "rewards"
_STARTUP_TIMEOUT_S = 300.0


class LearnerDiedError(RLXError, RuntimeError):
    """A Learner process of a LearnerGroup is gone (killed, crashed or stopped)."""


class LearnerGroupError(RLXError, RuntimeError):
    """The LearnerGroup cannot be used: it was stopped, or a Learner failed during a call."""


# ====================================================================== sharding


def _batch_layout(batch: Mapping[str, Any]) -> tuple[int, int, tuple[int, ...]]:
    """(shard axis, its length, the leading shape a column must have to be sharded)."""
    ref = batch.get(_SHAPE_COLUMN)
    if ref is None or not hasattr(ref, "shape"):
        ref = next((v for v in batch.values() if hasattr(v, "shape") and len(v.shape) >= 1), None)
        if ref is None:
            raise ValueError("LearnerGroup.update_from_batch: the batch holds no arrays to split among the learners.")
    shape = tuple(ref.shape)
    if len(shape) >= 2:  # time-major [T, B]: split the B (env) axis, keep each env's time series whole
        return 1, shape[1], shape[:2]
    return 0, shape[0], shape[:1]


def shard_batch(batch: Mapping[str, Any], num_shards: int) -> tuple[list[dict[str, Any] | None], int]:
    """Split `batch` into `num_shards` shards along its batch axis; (shards, axis).

    Time-major batches ([T, B] `rewards`) are split along B, flat ones along axis 0.
    Shard r holds indices r, r + n, r + 2n, ...; columns whose leading shape does not
    match (scalars such as `n_step`, non-arrays) go whole to every shard. A shard with no
    rows is None.
    """
    axis, length, lead = _batch_layout(batch)
    shards: list[dict[str, Any] | None] = []
    for r in range(num_shards):
        if r >= length:
            shards.append(None)
            continue
        shard: dict[str, Any] = {}
        for key, value in batch.items():
            shape = getattr(value, "shape", None)
            if shape is not None and tuple(shape[: len(lead)]) == lead:
                part = value[r::num_shards] if axis == 0 else value[:, r::num_shards]
                if isinstance(part, np.ndarray):
                    part = np.ascontiguousarray(part)
                shard[key] = part
            else:
                shard[key] = value
        shards.append(shard)
    return shards, axis


def merge_metrics(results: list[dict[str, Any]], axis: int, num_shards: int) -> dict[str, Any]:
    """Average the ranks' metrics; per-sample arrays are put back in batch order.

    `results[r]` must be rank r's metrics (ranks without a shard left out at the end).
    Numbers are averaged (ints that agree stay ints); arrays of ndim >= 1 are interleaved
    along the shard axis (the inverse of `shard_batch`); anything else is rank 0's.
    """
    if not results:
        return {}
    merged: dict[str, Any] = {}
    for key, first in results[0].items():
        values = [res[key] for res in results if key in res]
        if isinstance(first, dict):
            merged[key] = merge_metrics([v for v in values if isinstance(v, dict)], axis, num_shards)
        elif isinstance(first, np.ndarray) and first.ndim >= 1 and all(isinstance(v, np.ndarray) for v in values):
            merged[key] = _interleave(values, axis if first.ndim > axis else 0, num_shards)
        elif _is_number(first) and all(_is_number(v) for v in values):
            if all(isinstance(v, (int, np.integer)) for v in values) and len({int(v) for v in values}) == 1:
                merged[key] = int(first)
            else:
                merged[key] = float(np.mean([float(v) for v in values]))
        else:
            merged[key] = first
    return merged


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _interleave(parts: list[np.ndarray], axis: int, num_shards: int) -> np.ndarray:
    total = sum(p.shape[axis] for p in parts)
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[axis] = total
    rest = [p.shape[:axis] + p.shape[axis + 1:] for p in parts]
    if any(r != rest[0] for r in rest):
        return np.concatenate(parts, axis=axis)
    out = np.empty(shape, dtype=np.result_type(*parts))
    for r, part in enumerate(parts):
        index: list[Any] = [slice(None)] * len(shape)
        index[axis] = slice(r, None, num_shards)
        out[tuple(index)] = part
    return out


# ====================================================================== worker side

def _dtype_tables() -> tuple[dict[Any, int], dict[int, Any]]:
    import torch

    codes = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
    return codes, {v: k for k, v in codes.items()}


class _GradSync:
    """Averages gradients over the process group right before each optimizer step.

    Every sync first exchanges a small header (active flag, number of gradient values,
    dtype) so a rank that finished its update early (`join()`) can answer the others'
    all_reduces with zeros: averaging is over the ranks taking that step.
    """

    def __init__(self, world_size: int, comm_device: Any, ctrl_group: Any):
        self.world_size = world_size
        self.comm_device = comm_device
        self.ctrl_group = ctrl_group
        self.codes, self.dtypes = _dtype_tables()
        self._synced: set[int] = set()
        #: Gradient syncs this rank took part in with gradients of its own (reset per update).
        self.steps = 0

    def _headers(self, active: int, numel: int, code: int) -> Any:
        import torch
        import torch.distributed as dist

        mine = torch.tensor([active, numel, code], dtype=torch.int64)
        table = [torch.empty(3, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(table, mine, group=self.ctrl_group)
        return torch.stack(table)

    @staticmethod
    def _check(table: Any) -> tuple[int, int, int]:
        active = table[:, 0] == 1
        rows = table[active]
        if rows.shape[0] == 0:
            return 0, 0, 0
        if bool((rows[:, 1] != rows[0, 1]).any()) or bool((rows[:, 2] != rows[0, 2]).any()):
            raise LearnerGroupError(
                "The learners disagree on which gradients to average in this optimizer step "
                f"(per rank: [active, number of values, dtype] = {table.tolist()}). Every learner must "
                "step the same optimizers over the same parameters in the same order."
            )
        return int(rows.shape[0]), int(rows[0, 1]), int(rows[0, 2])

    def _all_reduce(self, flat: Any) -> Any:
        import torch.distributed as dist

        on_device = flat.to(self.comm_device)
        dist.all_reduce(on_device)
        return on_device.to(flat.device)

    def sync(self, params: list[Any]) -> None:
        """Replace the gradients of `params` by their average over the ranks stepping now."""
        import torch

        grads = [p.grad for p in params if p.grad is not None]
        dtype = torch.float32
        for g in grads:
            dtype = torch.promote_types(dtype, g.dtype)
        numel = sum(g.numel() for g in grads)
        n_active, numel_all, _ = self._check(self._headers(1, numel, self.codes.get(dtype, 0)))
        if numel_all:
            flat = torch.cat([g.reshape(-1).to(dtype) for g in grads])
            flat = self._all_reduce(flat)
            flat.div_(n_active)
            offset = 0
            for g in grads:
                n = g.numel()
                g.copy_(flat[offset: offset + n].view_as(g))
                offset += n
        self.steps += 1
        self._synced.update(id(p) for p in params)

    def step_guard(self, optimizer: Any) -> None:
        """Make `optimizer.step()` sync gradients first unless clip_gradients just did."""
        original = optimizer.step

        def step(*args: Any, **kwargs: Any) -> Any:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            if not all(id(p) in self._synced for p in params if p.grad is not None):
                self.sync(params)
            self._synced.clear()
            return original(*args, **kwargs)

        optimizer.step = step

    def join(self) -> list[int]:
        """After this rank's update: answer the other ranks' syncs until every rank is done.

        Returns how many gradient steps each rank took in this update (`steps`)."""
        import torch

        while True:
            table = self._headers(0, self.steps, 0)
            n_active, numel, code = self._check(table)
            if n_active == 0:
                return [int(n) for n in table[:, 1].tolist()]
            if numel:
                self._all_reduce(torch.zeros(numel, dtype=self.dtypes[code]))


def _install_grad_sync(sync: _GradSync) -> None:
    """Route rlx.core.learner.clip_gradients (called by Learner.apply_loss and step_on right
    before the optimizer step) through the sync, in this learner process only."""
    import rlx.core.learner as learner_module

    original = learner_module.clip_gradients
    if getattr(original, "_rlx_grad_sync", False):
        return

    def clip_gradients(params: list[Any], grad_clip: float | None, clip_by: str) -> float:
        sync.sync(params)
        return original(params, grad_clip, clip_by)

    clip_gradients._rlx_grad_sync = True  # type: ignore[attr-defined]
    learner_module.clip_gradients = clip_gradients


def _plain(value: Any) -> Any:
    """Metrics with tensors turned into NumPy (0-d ones into Python floats)."""
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _LearnerWorker:
    """What lives in one learner process: the Learner plus its share of the process group."""

    def __init__(self, spec: dict[str, Any], rank: int):
        import torch
        import torch.distributed as dist

        from rlx.core.rl_module import RLModuleSpec

        self.rank = rank
        self.world_size = int(spec["world_size"])
        torch.set_num_threads(int(spec["num_threads"]))
        if spec["seed"] is not None:
            torch.manual_seed(int(spec["seed"]) + 1000 * rank)
        backend = spec["backend"]
        comm_device = torch.device("cpu")
        if backend == "nccl":
            local = rank % max(1, torch.cuda.device_count())
            torch.cuda.set_device(local)
            comm_device = torch.device("cuda", local)
        os.environ["MASTER_ADDR"] = spec["master_addr"]
        os.environ["MASTER_PORT"] = str(spec["master_port"])
        if sys.platform.startswith("linux"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # all ranks are on this machine
        elif sys.platform == "darwin":
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo0")
        dist.init_process_group(backend, rank=rank, world_size=self.world_size,
                                timeout=timedelta(seconds=float(spec["timeout_s"])))
        # Headers and Python objects travel on a gloo (CPU) group even when gradients use NCCL.
        self.ctrl_group = dist.new_group(backend="gloo") if backend != "gloo" else None
        self.comm_device = comm_device
        module_spec = RLModuleSpec(**spec["module_spec"])
        module = module_spec.build()
        module.set_state(spec["module_state"])
        self.module = module
        # Built after the weights are loaded, so target networks copy the driver's weights.
        self.learner = spec["learner_class"](spec["config"], module)
        self.sync = _GradSync(self.world_size, comm_device, self.ctrl_group)
        _install_grad_sync(self.sync)
        for optimizer in self.learner.optimizers.values():
            self.sync.step_guard(optimizer)

    # ---------------------------------------------------------------- calls from the driver

    def ready_info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "optimizers": list(self.learner.optimizers),
                "extra_state": self.learner.get_extra_state() if self.rank == 0 else None}

    def update_from_batch(self, shard: dict[str, Any] | None, timestep: int,
                          want_weights: bool) -> tuple[Any, Any, Any]:
        """(metrics, weights, extra state): the last two only when `want_weights` (rank 0),
        for the driver's module and its mirror of the extra state."""
        import torch.distributed as dist

        metrics = None
        self.sync.steps = 0
        if shard is not None:
            metrics = _plain(self.learner.run_update(shard, timestep=timestep))
        steps = self.sync.join()
        if self.world_size > 1:
            # Non-gradient state (PPO's KL coefficient, counters, buffers) follows one rank.
            # When the ranks took different numbers of steps (shards of unequal size), the ones
            # that finished early sat out the last averaged steps: they take the weights and
            # optimizer state of the rank that took part in all of them.
            src = int(np.argmax(steps))
            uneven = len(set(steps)) > 1
            state = None
            if self.rank == src:
                state = {"extra": self.learner.get_extra_state()}
                if uneven:
                    state["weights"] = self.learner.get_weights()
                    state["optimizers"] = {k: o.state_dict() for k, o in self.learner.optimizers.items()}
                    state["tensors"] = {k: v.detach().cpu() for k, v in self.learner.get_extra_tensors().items()}
            holder = [state]
            dist.broadcast_object_list(holder, src=src, group=self.ctrl_group)
            if self.rank != src:
                state = holder[0]
                self.learner.set_extra_state(state["extra"])
                if uneven:
                    self.learner.set_weights(state["weights"])
                    for name, opt_state in state["optimizers"].items():
                        self.learner.optimizers[name].load_state_dict(opt_state)
                    if state["tensors"]:
                        self.learner.set_extra_tensors(state["tensors"])
            self._broadcast_buffers(src)
        if not want_weights:
            return metrics, None, None
        return metrics, self.learner.get_weights(), self.learner.get_extra_state()

    def update_from_own_batch(self, make_batch: Callable[[Any, int], tuple[Any, Any]], timestep: int,
                              want_weights: bool) -> tuple[Any, Any, Any, Any]:
        """`update_from_batch` on the batch this rank builds itself: `make_batch(learner, rank)`
        returns (batch, info), e.g. from an EnvRunner living in this process (DD-PPO); `info`
        travels back to the driver with the metrics."""
        batch, info = make_batch(self.learner, self.rank)
        return (*self.update_from_batch(batch, timestep, want_weights), info)

    def _broadcast_buffers(self, src: int) -> None:
        import torch.distributed as dist

        for buf in self.module.buffers():
            if buf.numel():
                on_device = buf.data.to(self.comm_device)
                dist.broadcast(on_device, src=src)
                if on_device is not buf.data:
                    buf.data.copy_(on_device)

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.learner.get_weights()

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.learner.set_weights(weights)

    def get_extra_state(self) -> dict[str, Any]:
        return self.learner.get_extra_state()

    def set_extra_state(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Load `state`; rank 0 answers with the resulting extra state (the driver mirrors it)."""
        self.learner.set_extra_state(state)
        return self.learner.get_extra_state() if self.rank == 0 else None

    def get_extra_tensors(self) -> dict[str, Any]:
        return {k: v.detach().cpu() for k, v in self.learner.get_extra_tensors().items()}

    def set_extra_tensors(self, tensors: dict[str, Any]) -> None:
        self.learner.set_extra_tensors(tensors)

    def optimizer_state(self, name: str) -> dict[str, Any]:
        return self.learner.optimizers[name].state_dict()

    def load_optimizer_state(self, name: str, state: dict[str, Any]) -> None:
        self.learner.optimizers[name].load_state_dict(state)

    def apply(self, fn: Callable[[Any], Any]) -> tuple[Any, Any]:
        """(fn(learner), rank 0's extra state afterwards: fn may have changed it)."""
        result = fn(self.learner)
        return result, self.learner.get_extra_state() if self.rank == 0 else None

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def _learner_main(conn: Any, payload: bytes, rank: int) -> None:
    """Body of a learner process: build the Learner, then answer calls until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides when learners stop
    try:
        raise_startup_error()
        import cloudpickle

        worker = _LearnerWorker(cloudpickle.loads(payload), rank)
    except BaseException as err:
        send_reply(conn, "err", err, what="learner call")
        return
    send_reply(conn, "ok", worker.ready_info(), what="learner call")
    try:
        serve_calls(conn, lambda call: getattr(worker, call[0])(*call[1]), what="learner call")
    finally:
        try:
            worker.close()
        finally:
            conn.close()


# ====================================================================== driver side


class _LearnerProcess(WorkerProcess):
    """Driver-side handle on one learner process: ordered calls answered with Futures."""

    def __init__(self, payload: bytes, rank: int):
        self.rank = rank
        super().__init__(_learner_main, (payload, rank), name=f"rlx-learner-{rank}")

    def _label(self) -> str:
        return f"learner {self.rank} (pid {self.pid})"

    @property
    def alive(self) -> bool:
        return self._process.is_alive()

    def submit(self, method: str, *args: Any) -> Future:
        import cloudpickle

        return self._send_call(method, cloudpickle.dumps((method, args), protocol=5))

    def _died_error(self, method: str | None) -> LearnerDiedError:
        what = "" if method is None else " while starting" if method == "start" else f" during {method}"
        return LearnerDiedError(f"Learner {self.rank} (process {self.pid}) {describe_exit(self._process)}{what}.")

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the process to exit; kill it when it does not within `timeout` seconds."""
        super().stop(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the process (no-op when it is gone) and reap it. The pipe and the reader
        thread are released by `stop()` (the reader ends at the EOF the death delivers)."""
        super().kill()
        self._process.join(timeout=5)


def _shutdown(handles: list[_LearnerProcess]) -> None:
    for handle in handles:
        handle.request_stop()
    for handle in handles:
        handle.stop(timeout=5.0)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _per_learner_config(config: Any, num_learners: int) -> Any:
    """The config each learner gets: `minibatch_size // num_learners` when it has one, so that
    N learners stepping together on N minibatches make one minibatch of the configured size."""
    try:
        minibatch = config.minibatch_size
    except (AttributeError, KeyError):
        return config
    if minibatch is None or num_learners <= 1:
        return config
    per = max(1, int(minibatch) // num_learners)
    if per == minibatch:
        return config
    new = config.copy(copy_frozen=False)
    new.training(minibatch_size=per)
    if getattr(config, "is_frozen", False):
        new.freeze()
    return new


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
    """

    def __init__(self, config: Any, learner_class: type, module: Any, num_learners: int | None = None,
                 timeout_s: float = 1800.0):
        module = getattr(module, "unwrapped_module", module)  # a Learner's module view: the module itself
        self.config = config
        self.learner_class = learner_class
        self.module = module
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
        self._lock = threading.RLock()
        #: Why the group cannot be used ("ErrorType: message"), None while it can.
        self._broken: str | None = None
        #: Whether `_broken` is a learner process that died: the next call restarts the group.
        self._broken_by_death = False
        self._stopped = False
        self._handles: list[_LearnerProcess] = []
        self._finalizer: weakref.finalize | None = None
        self.pids: list[int] = []
        self.optimizers: dict[str, _OptimizerProxy] = {}
        #: The driver's copy of rank 0's Learner.get_extra_state() (update counts, PPO's
        #: kl_coeff, RNG state), refreshed by every call that can change it; restart() loads it.
        self._extra_state: dict[str, Any] | None = None
        #: Everything the learner processes are built from but the weights and the port.
        self._spec = {
            "learner_class": learner_class,
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
            "master_addr": "127.0.0.1",
            "timeout_s": timeout_s,
            "num_threads": max(1, int(getattr(config, "num_cpus_per_learner", 1) or 1)),
            "seed": getattr(config, "seed", None),
        }
        infos = self._start()
        self._extra_state = infos[0]["extra_state"]

    def _start(self) -> list[dict[str, Any]]:
        """Start `num_learners` learner processes on the driver module's current weights and
        make them the group's; returns their start-up answers. Every Learner is built fresh:
        new optimizer state, target networks copied from the weights, initial extra state."""
        import cloudpickle

        spec = dict(self._spec, module_state=self.module.get_state())
        for attempt in range(2):
            spec["master_port"] = _free_port("127.0.0.1")
            try:
                payload = cloudpickle.dumps(spec)
            except Exception as err:
                raise LearnerGroupError(
                    f"num_learners={self.num_learners} sends the config, the Learner class and the module to "
                    f"the learner processes, but they do not pickle: {type(err).__name__}: {err}"
                ) from err
            handles = [_LearnerProcess(payload, rank) for rank in range(self.num_learners)]
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
        with self._lock:
            if self._stopped:
                raise LearnerGroupError("The LearnerGroup is stopped: restart() cannot bring it back.")
            reason = f'"{self._broken}"' if self._broken is not None else "a call to restart()"
            # Every call that can change the learners' extra state refreshed the driver's copy.
            old, self._handles = self._handles, []
            finalizer, self._finalizer = self._finalizer, None
            if finalizer is not None:
                finalizer.detach()
            _shutdown(old)
            self._broken, self._broken_by_death = None, False
            extra_state = self._extra_state
            self._start()
            if extra_state is not None:
                self._extra_state = self._run_all("set_extra_state", extra_state)[0]
            logger.warning(
                "LearnerGroup: restarted the %d learner processes (%s) from the driver's weights after %s. "
                "The optimizer state (e.g. Adam moments) restarted from scratch and target networks were "
                "rebuilt from the current weights; update counts and other learner extra state were kept.",
                self.num_learners, self.learner_class.__name__, reason)

    # ---------------------------------------------------------------- plumbing

    def _wait(self, handles: list[_LearnerProcess], futures: list[Future], what: str,
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
        errors = [f.exception() for f in futures if f in done and f.exception() is not None]
        if not errors and not not_done:
            return [f.result() for f in futures]
        if errors and not_done and not any(isinstance(e, LearnerDiedError) for e in errors):
            # A rank that failed leaves the others waiting in a collective, or makes them fail
            # soon after (a dead peer closes their connections): a moment to find a dead one.
            more, _ = cf.wait(not_done, timeout=3.0)
            errors += [f.exception() for f in more if f.exception() is not None]
        if errors and not collective and not any(isinstance(e, LearnerDiedError) for e in errors):
            raise errors[0]
        if not errors:
            errors = [LearnerGroupError(f"The learners did not finish {what} within {timeout} s.")]
        self._fail(errors, handles)

    def _break(self, errors: list[BaseException], handles: list[_LearnerProcess] = ()) -> BaseException:
        """Kill every learner process and mark the group broken; returns the most telling error."""
        count = len(self._handles) or len(handles)
        for handle in {id(h): h for h in list(handles) + list(self._handles)}.values():
            handle.kill()
        died = [e for e in errors if isinstance(e, LearnerDiedError)]
        error = died[0] if died else errors[0]
        self._broken = f"{type(error).__name__}: {error}"
        self._broken_by_death = bool(died)
        if hasattr(error, "add_note"):
            if died:
                error.add_note(
                    f"The LearnerGroup ({count} learner processes) stopped its learners: the others cannot go on "
                    "without the one that died. The next call restarts them from the driver's weights "
                    "(LearnerGroup.restart()); Algorithm.save() works now and saves the driver's state."
                )
            else:
                error.add_note(
                    f"The LearnerGroup ({count} learner processes) is stopped: a learner that failed leaves the "
                    "others unable to go on. Build a new Algorithm (e.g. with Algorithm.from_checkpoint) to "
                    "continue."
                )
        return error

    def _fail(self, errors: list[BaseException], handles: list[_LearnerProcess] = ()) -> None:
        """Kill every learner process, mark the group unusable and raise the most telling error."""
        raise self._break(errors, handles)

    def _dead_handle(self) -> _LearnerProcess | None:
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
            self.restart()

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

    def _call_all(self, method: str, *args: Any) -> list[Any]:
        with self._lock:
            return self._call(lambda: self._run_all(method, *args))

    def _call_rank0(self, method: str, *args: Any) -> Any:
        with self._lock:
            return self._call(lambda: self._wait(self._handles[:1], [self._handles[0].submit(method, *args)],
                                                 method, collective=False)[0])

    # ---------------------------------------------------------------- the Learner surface

    def update_from_batch(self, batch: Mapping[str, Any], timestep: int) -> dict[str, Any]:
        """One data-parallel update: each learner updates on its shard of `batch`; returns
        the averaged metrics. The driver's module then holds the new weights.

        A learner process that dies before or during the update raises LearnerDiedError (the
        update is lost); the next call restarts the learners (see `restart()`) and goes on."""
        with self._lock:
            self._check_usable(restart_on_death=False)
            self._push_driver_weights()
            shards, axis = shard_batch(batch, self.num_learners)
            futures = [h.submit("update_from_batch", shard, int(timestep), h.rank == 0)
                       for h, shard in zip(self._handles, shards)]
            results = self._wait(self._handles, futures, "update_from_batch")
            _, weights, extra_state = results[0]
            self.module.set_state(weights)
            self._versions = self._module_versions()
            self._extra_state = extra_state
            return merge_metrics([m for m, _, _ in results if m is not None], axis, self.num_learners)

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
        with self._lock:
            self._check_usable(restart_on_death=False)
            self._push_driver_weights()
            futures = [h.submit("update_from_own_batch", make_batch, int(timestep), fetch_weights and h.rank == 0)
                       for h in self._handles]
            results = self._wait(self._handles, futures, "update_from_own_batch")
            _, weights, extra_state, _ = results[0]
            if weights is not None:
                self.module.set_state(weights)
                self._versions = self._module_versions()
                self._extra_state = extra_state
            # Batches from EnvRunners are time-major [T, B]: per-sample metrics follow the B axis.
            metrics = merge_metrics([m for m, _, _, _ in results if m is not None], 1, self.num_learners)
            return metrics, [info for _, _, _, info in results]

    def pull_weights(self) -> None:
        """Copy rank 0's weights into the driver's module (after updates made with
        `fetch_weights=False`)."""
        with self._lock:
            weights = self._call_rank0("get_weights")
            self.module.set_state(weights)
            self._versions = self._module_versions()

    def get_weights(self) -> dict[str, np.ndarray]:
        """The module's weights (the driver's copy, equal to the learners'). Restarts the
        learners first when one died (see `restart()`)."""
        with self._lock:
            if not self._stopped and (self._broken_by_death or (self._broken is None and self._dead_handle())):
                self._check_usable()
        return self.module.get_state()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load weights into the driver's module and every learner."""
        with self._lock:
            self.module.set_state(weights)
            self._call(lambda: self._run_all("set_weights", self.module.get_state()), push_weights=False)
            self._versions = self._module_versions()

    def get_extra_state(self) -> dict[str, Any]:
        """Rank 0's Learner.get_extra_state() (all ranks agree after each update)."""
        with self._lock:
            state = self._call(lambda: self._wait(self._handles[:1], [self._handles[0].submit("get_extra_state")],
                                                  "get_extra_state", collective=False)[0])
            self._extra_state = state
            return copy.deepcopy(state)

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Learner.set_extra_state() on every learner."""
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
        """Stop the learner processes (idempotent)."""
        with self._lock:
            self._stopped = True
            handles, self._handles = self._handles, []
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if handles:
            _shutdown(handles)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("broken" if self._broken else "running")
        return (f"LearnerGroup({self.learner_class.__name__}, num_learners={self.num_learners}, "
                f"backend={self.backend}, {state})")

"""Ape-X's replay shards: prioritized replay buffers in Ray actors, fed by the runners directly.

With Ray EnvRunners and `num_replay_buffer_shards > 0`, Ape-X keeps its replay memory in that
many Ray actors (`ReplayShardActor`, each a buffer of `replay_buffer_config["capacity"]` steps
built as the driver would build it, one prioritized buffer per policy in multi-agent runs). Remote
runner i adds every fragment to shard (i - 1) % num_shards itself (`add_to_replay_shard`, Ape-X's
`runner_fragment_hook`), its sub-envs on lanes of their own, with one add in flight per runner;
the driver gets the fragment's step counts only. The learner thread asks the shards for
prioritized train batches in turn, keeping up to `max_requests_in_flight_per_replay_worker`
requests queued per shard (more than 2 gain nothing: one is answered while it trains on the
previous), and sends each batch's new priorities back to its shard.

A runner that has no shard yet (just built, or rebuilt after a failure) sends its fragment to the
driver, which adds it to the runner's shard and (again) tells the runner its shard. Ray restarts a
shard actor that dies, empty.
"""
from __future__ import annotations

import logging
import os
from collections import deque
from concurrent.futures import Future
from typing import Any

import numpy as np

from rlx.core.remote_fragment import RemoteFragment
from rlx.core.sample_batch import as_multi_agent
from rlx.utils.replay_buffers import make_replay_buffer
from rlx.utils.replay_buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer

logger = logging.getLogger("rlx")

#: Lanes of a runner's columns in a replay buffer start at runner_index * RUNNER_LANE_STRIDE.
RUNNER_LANE_STRIDE = 1 << 20
#: Replay requests per shard worth queueing (see the module docstring).
USEFUL_REQUESTS_PER_SHARD = 2
#: Seconds the shards get to start before building Ape-X fails with an error.
START_TIMEOUT_S = 120.0


def _writable(columns: dict[str, Any]) -> dict[str, Any]:
    """The replay's columns, with the arrays Ray hands out read-only (zero-copy) copied: the
    learner may change a replay in place, as it may one from the driver's buffer."""
    return {k: v.copy() if isinstance(v, np.ndarray) and not v.flags.writeable else v for k, v in columns.items()}


class ReplayShardActor:
    """Body of one replay shard actor: a prioritized replay buffer (per policy in multi-agent runs).

    Args:
        replay_buffer_configs: {policy_id: replay_buffer_config} for a multi-agent buffer, or
            None for a single-agent run's one buffer of `default_config`.
        default_config: the replay_buffer_config (of policies not in replay_buffer_configs).
        seed: seeds the buffer's sampling (None: unseeded).
    """

    def __init__(self, replay_buffer_configs: dict[str, dict] | None, default_config: dict, seed: int | None):
        if replay_buffer_configs is None:
            self.buffer: Any = make_replay_buffer(default_config, seed=seed)
        else:
            ids = sorted(replay_buffer_configs)

            def make_buffer(policy_id: str) -> Any:
                offset = ids.index(policy_id) if policy_id in ids else 0
                return make_replay_buffer(replay_buffer_configs.get(policy_id, default_config),
                                          seed=None if seed is None else seed + 1009 * offset)

            self.buffer = MultiAgentReplayBuffer(make_buffer)
        self._resets: dict[int, int] = {}

    def where(self) -> dict[str, Any]:
        """Its pid and node id (answers once the actor runs)."""
        import ray

        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def add(self, batch: Any, runner_index: int, resets: int | None = None) -> None:
        """Add a runner's time-major fragment on that runner's lanes; when the runner reset all
        its episodes since its last add (`resets` changed), open episodes end first."""
        if resets is not None:
            if self._resets.get(runner_index, resets) != resets:
                self.buffer.end_open_episodes()
            self._resets[runner_index] = resets
        self.buffer.add(batch, time_major=True, lane_offset=runner_index * RUNNER_LANE_STRIDE)

    def end_open_episodes(self) -> None:
        """The rows added next do not continue the episodes in progress."""
        self.buffer.end_open_episodes()

    def sample(self, requests: dict[str, tuple[int, float]], n_step: int) -> dict[str, Any]:
        """{module_id: prioritized replay of batch_size steps with n_step returns at gamma} for
        each `requests[module_id] = (batch_size, gamma)` whose buffer has data."""
        out = {}
        for module_id, buffer in self._buffers(requests).items():
            if len(buffer):
                batch_size, gamma = requests[module_id]
                out[module_id] = buffer.sample(batch_size, n_step=n_step, gamma=gamma)
        return out

    def update_priorities(self, updates: dict[str, tuple[Any, Any]]) -> None:
        """Write {module_id: (batch_indexes, td_errors)} back as new priorities."""
        for module_id, buffer in self._buffers(updates).items():
            indexes, td_error = updates[module_id]
            buffer.update_priorities(indexes, td_error)

    def size(self) -> int:
        """Steps held."""
        return len(self.buffer)

    def _buffers(self, wanted: dict[str, Any]) -> dict[str, Any]:
        per_module = getattr(self.buffer, "replay_buffers", None)
        if per_module is None:  # the single-agent run's one buffer, under its module id
            return {module_id: self.buffer for module_id in wanted}
        return {module_id: per_module[module_id] for module_id in wanted if module_id in per_module}


class SetReplayShard:
    """The call that tells a runner its replay shard (an actor handle)."""

    def __init__(self, shard: Any):
        self.shard = shard

    def __call__(self, runner: Any) -> None:
        runner._apex_replay_shard = self.shard
        runner._apex_pending_add = None


def add_to_replay_shard(runner: Any, batch: Any) -> Any:
    """Ape-X's runner_fragment_hook: add the fragment to the runner's shard (waiting for its
    previous add first) and answer its step counts; a runner without a shard answers the fragment."""
    shard = getattr(runner, "_apex_replay_shard", None)
    if shard is None:
        return batch
    import ray

    pending = getattr(runner, "_apex_pending_add", None)
    if pending is not None:
        ray.wait([pending])  # one add in flight per runner: the shard sets the pace
    counts = as_multi_agent(batch)
    runner._apex_pending_add = shard.add.remote(batch, runner.worker_index, runner.num_resets)
    return RemoteFragment(None, counts.env_steps(), counts.agent_steps())


class ReplayShards:
    """The driver's side of the shards: starts them, assigns runners, pipelines replay requests.

    Args:
        num_shards: shard actors to start.
        replay_buffer_configs: see ReplayShardActor.
        default_config: the replay_buffer_config.
        seed: the run's replay seed (shard k uses seed + 7919 * k).
        max_requests_in_flight: replay requests queued per shard (capped at 2, see the module docstring).
    """

    def __init__(self, num_shards: int, replay_buffer_configs: dict[str, dict] | None, default_config: dict,
                 seed: int | None, max_requests_in_flight: float):
        import ray

        actor_cls = ray.remote(ReplayShardActor).options(num_cpus=0, max_restarts=-1, max_concurrency=1)
        # Ray actor handles, typed Any: the ray stubs cannot see the `.remote` of their methods.
        seeds = [None if seed is None else seed + 7919 * k for k in range(int(num_shards))]
        self.shards: list[Any] = [actor_cls.remote(replay_buffer_configs, default_config, s) for s in seeds]
        self.depth = int(min(max_requests_in_flight, USEFUL_REQUESTS_PER_SHARD))
        #: Replay requests in flight: (shard index, ObjectRef), oldest first.
        self._requests: deque[tuple[int, Any]] = deque()
        self._next_shard = 0
        self._assignments: list[Future] = []
        try:
            self.locations = ray.get([s.where.remote() for s in self.shards], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError as err:
            self.stop()
            raise RuntimeError(f"The {num_shards} replay shard actor(s) (num_replay_buffer_shards) did not start within "
                               f"{START_TIMEOUT_S:.0f} s: is the Ray cluster short of memory or workers?") from err

    def shard_of(self, runner_index: int) -> int:
        """The shard that runner `runner_index` (1..N) adds to."""
        return (int(runner_index) - 1) % len(self.shards)

    def assign(self, handle: Any) -> None:
        """Tell the runner of `handle` its shard (answered asynchronously; a dead runner's call fails quietly)."""
        self._assignments = [f for f in self._assignments if not f.done()]
        self._assignments.append(handle.submit(SetReplayShard(self.shards[self.shard_of(handle.index)])))

    def add(self, batch: Any, runner_index: int) -> None:
        """Add a fragment the driver received (from a runner without its shard, or what a failed
        runner left) to that runner's shard."""
        self.shards[self.shard_of(runner_index)].add.remote(batch, runner_index, None)

    def end_open_episodes(self) -> None:
        """End the open episodes of every shard (a runner reset its episodes)."""
        for shard in self.shards:
            shard.end_open_episodes.remote()

    def next_replay(self, requests: dict[str, tuple[int, float]], n_step: int) -> tuple[int, dict[str, Any]]:
        """(shard index, {module_id: replay}) of the oldest replay request, after topping up every
        shard's queue of requests (at `n_step`)."""
        import ray

        queued = [0] * len(self.shards)
        for index, _ in self._requests:
            queued[index] += 1
        for _ in range(len(self.shards)):
            index = self._next_shard
            self._next_shard = (index + 1) % len(self.shards)
            while queued[index] < self.depth:
                self._requests.append((index, self.shards[index].sample.remote(requests, n_step)))
                queued[index] += 1
        index, ref = self._requests.popleft()
        try:
            replays = ray.get(ref)
        except ray.exceptions.RayActorError:  # the shard died (Ray restarts it, empty)
            return index, {}
        return index, {module_id: _writable(replay) for module_id, replay in replays.items()}

    def update_priorities(self, index: int, updates: dict[str, tuple[Any, Any]]) -> None:
        """Send new priorities to shard `index` (not waited for)."""
        if updates:
            self.shards[index].update_priorities.remote(updates)

    def size(self) -> int:
        """Steps held by all shards (0 for a shard that does not answer)."""
        import ray

        total = 0
        for ref in [s.size.remote() for s in self.shards]:
            try:
                total += int(ray.get(ref, timeout=10))
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as err:
                logger.debug("a replay shard did not report its size: %s", err)
        return total

    def stop(self) -> None:
        """Kill the shard actors."""
        import ray

        for shard in self.shards:
            try:
                ray.kill(shard, no_restart=True)
            except Exception as err:  # already gone, or Ray shut down
                logger.debug("replay shard was already gone: %s", err)
        self.shards = []

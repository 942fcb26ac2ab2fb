"""The weights and observation filters an EnvRunnerGroup's runners get.

Weights go from a source (a Learner, a learner group or a runner) to every runner that does
not share its module, once per version; for Ray actors they are put into Ray's object store
once per sync and every actor reads that one object (`shared_payload`), rather than the driver
sending a copy per runner; observation filters are merged from the sampling
runners into the local runner's and sent back; new and restarted runners get the local
runner's weights and state before their first sample().
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import AbstractSet, Any

from rlx.core.learner.learner import unwrap_module
from rlx.env.runner_group.calls import RestoreCall, SetFilterCall, SetWeightsCall, pop_filter_delta
from rlx.env.threaded_env_runner import ThreadedEnvRunner


def filter_has_state(runner_filter: Any) -> bool:
    """Whether a runner's filter (observation filter, plus connector state) has anything to sync."""
    return bool(getattr(runner_filter, "has_state", not runner_filter.is_identity))


def source_weights(source: Any) -> Any:
    """`source.get_weights()`; a one-module view's (LearnerContainer.of_one) without the module id level."""
    weights = source.get_weights()
    sole = getattr(source, "sole_module_id", None)
    if isinstance(weights, dict) and sole is not None and set(weights) == {sole}:
        weights = weights[sole]
    return weights


def shared_payload(group: Any, value: Any) -> Any:
    """What to send every remote runner of `group` for `value`: on the Ray backend a Ray
    ObjectRef of it (one `ray.put`, read by each actor from the object store, on its own node's
    copy), else `value` itself (a worker process gets its copy down its pipe)."""
    if group.backend != "ray":
        return value
    import ray

    return ray.put(value)


def sync_weights(group: Any, source: Any, to_worker_indices: list[int] | None, global_vars: dict | None,
                 weights_seq_no: int | None) -> None:
    """Push `source`'s weights to the runners of `group` (EnvRunnerGroup.sync_weights).

    A runner that shares its module with the source needs no copy. With `weights_seq_no`, a
    remote runner that already has that version is skipped. Busy threaded runners are skipped
    (they get the next sync); other remote runners get the weights queued ahead of their next call.
    """
    # A Learner's `module` is a view of its RLModule: compare the modules behind the views.
    source_module = unwrap_module(getattr(source, "module", None))
    weights = payload = None

    def get_weights() -> Any:
        nonlocal weights
        if weights is None:
            weights = source_weights(source)
        return weights

    def get_payload() -> Any:
        nonlocal payload
        if payload is None:
            payload = shared_payload(group, get_weights())
        return payload

    local = group.local_env_runner
    if local is not None and (to_worker_indices is None or 0 in to_worker_indices):
        if source_module is None or unwrap_module(local.module) is not source_module:
            local.set_weights(get_weights(), weights_seq_no=weights_seq_no)
        elif weights_seq_no is not None:
            local.weights_seq_no = int(weights_seq_no)
    sent = group._sent_weights
    for handle in group._remote:
        if not group._ft.is_up(handle) or (to_worker_indices is not None and handle.index not in to_worker_indices):
            continue
        if weights_seq_no is not None and sent.get(handle.index) == weights_seq_no:
            continue
        if isinstance(handle, ThreadedEnvRunner):
            if handle.busy:
                continue
            handle.runner.set_weights(get_weights(), global_vars=global_vars, weights_seq_no=weights_seq_no)
        else:
            # Queued behind nothing but earlier calls, so the next sample() uses these weights.
            handle.submit(SetWeightsCall(get_payload(), global_vars, weights_seq_no))
        sent[handle.index] = weights_seq_no


def sync_new_remotes(group: Any, wait: bool = True, skip: AbstractSet[int] = frozenset()) -> None:
    """Give freshly built remote runners (all but those in `skip`) the local runner's weights,
    observation filter and exploration state, so their first batch comes from the policy the
    learner trains. Without `wait`, the calls queue ahead of the runners' first sample() (and a
    runner that failed to build reports it there: validate_env_runners_after_construction=False)."""
    local = group.local_env_runner
    if local is None or not group._remote:
        return
    call = RestoreCall(shared_payload(group, local.get_weights()), local.get_state())
    futures = [handle.submit(call) for handle in group._remote if handle.index not in skip]
    for future in futures if wait else ():
        future.result()


def restore_restarted(group: Any, handle: Any) -> Future | None:
    """Queue the local runner's weights, observation filter and exploration state ahead of a
    restarted runner's first sample(): the Future of that call (None without a local runner)."""
    group._sent_weights.pop(handle.index, None)
    local = group.local_env_runner
    if local is None:
        return None
    seq_no = getattr(local, "weights_seq_no", None)
    group._sent_weights[handle.index] = seq_no
    return handle.submit(RestoreCall(local.get_weights(), local.get_state(), seq_no))


def merge_filters(group: Any, indices: tuple[int, ...]) -> None:
    """Fold the observation statistics the sampling runners `indices` gathered into the local
    runner's filter (use_worker_filter_stats) and send the merged filter back to them
    (update_worker_filter_stats)."""
    local, config = group.local_env_runner, group.config
    if local is None or not filter_has_state(local.filter) or not config.synchronize_filters:
        return
    handles = [h for h in group._remote if h.index in indices and group._ft.is_up(h)]
    if config.use_worker_filter_stats:
        for delta in group._call_all(handles, pop_filter_delta).values():
            local.filter.merge_delta(delta)
    if config.update_worker_filter_stats:
        state = local.filter.get_state()
        for handle in handles:
            handle.submit(SetFilterCall(state))


def sync_filters(group: Any, source: Any) -> None:
    """Copy the observation filter state of `source` (an EnvRunner) to every idle runner of
    `group` (remote processes and actors get it queued as a call)."""
    state = source.filter.get_state()
    for runner in group.idle_runners():
        if runner is not source:
            runner.filter.set_state(state)
    for handle in group._remote:
        if group._ft.is_up(handle) and not isinstance(handle, ThreadedEnvRunner):
            handle.submit(SetFilterCall(state))


def collects_filter_deltas(group: Any) -> bool:
    """Whether asynchronous samples bring their runner's new filter statistics along."""
    local, config = group.local_env_runner, group.config
    return local is not None and filter_has_state(local.filter) and bool(config.synchronize_filters) \
        and bool(config.use_worker_filter_stats)


class RunnerSync:
    """What a runner gets ahead of its next asynchronous sample() requests, once per
    `async_sample` call: the source's weights when the runner's are older than `weights_seq_no`
    (fetched from the source once for all runners) and the merged observation filter."""

    def __init__(self, group: Any, weights_from: Any, weights_seq_no: int | None, global_vars: dict | None):
        self.group, self.weights_from, self.weights_seq_no, self.global_vars = \
            group, weights_from, weights_seq_no, global_vars
        self._weights: Any = None
        self._synced: set[int] = set()
        local, config = group.local_env_runner, group.config
        self._filter_state = local.filter.get_state() if local is not None and filter_has_state(local.filter) \
            and config.synchronize_filters and config.update_worker_filter_stats else None

    def before_requests(self, handle: Any) -> None:
        """Queue the weights and filter `handle` needs (once per call)."""
        if handle.index in self._synced:
            return
        self._synced.add(handle.index)
        sent = self.group._sent_weights
        if self.weights_from is not None and self.weights_seq_no is not None \
                and sent.get(handle.index) != self.weights_seq_no:
            handle.submit(SetWeightsCall(self._source_weights(), self.global_vars, self.weights_seq_no))
            sent[handle.index] = self.weights_seq_no
        if self._filter_state is not None:
            handle.submit(SetFilterCall(self._filter_state))

    def _source_weights(self) -> Any:
        if self._weights is None:
            self._weights = shared_payload(self.group, source_weights(self.weights_from))
        return self._weights

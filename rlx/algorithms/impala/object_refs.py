"""IMPALA's fragments as Ray object references: runner -> (aggregator) -> learner, not via the driver.

On a Ray EnvRunner actor, `put_fragment` (IMPALAConfig's `runner_fragment_hook`) puts each
asynchronous fragment in Ray's object store and answers a RemoteFragment holding the ObjectRef
and the fragment's step counts, so the driver receives references and metrics, not arrays. A
runner without Ray (the process and thread backends) answers its fragment as before.

A train batch is then a `PendingBatch`: the parts that make it up (fragment references, plain
batches a failed runner left behind, or one aggregator actor's train-batch reference) and their
step counts. `fetch_train_batch` turns one into arrays where the learner is (the driver's learner
when num_learners=0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.core.remote_fragment import RemoteFragment
from rlx.core.sample_batch import as_multi_agent, map_modules
from rlx.env.env_runner_group import join_runner_batches


def put_fragment(runner: Any, batch: Any) -> Any:
    """On a runner inside a Ray actor: the fragment in the object store, as a RemoteFragment
    (ObjectRef + step counts). Elsewhere (a worker process, or a thread of the driver): the
    fragment itself."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return batch
    counts = as_multi_agent(batch)
    return RemoteFragment(ray.put(batch), counts.env_steps(), counts.agent_steps())


def is_object_ref(value: Any) -> bool:
    """Whether `value` is a Ray ObjectRef (without importing Ray when it was never imported)."""
    import sys

    ray = sys.modules.get("ray")
    return ray is not None and isinstance(value, ray.ObjectRef)


def fetch_parts(parts: list[Any], writable: bool = True) -> list[Any]:
    """The batches of `parts` (fragments' RemoteFragments, ObjectRefs or plain batches), fetched
    from the object store with one `ray.get` for all references; a part whose owner died (its
    runner was lost before the batch was read) is left out. With `writable`, arrays Ray hands
    out read-only are copied."""
    refs = [p.payload if isinstance(p, RemoteFragment) else p for p in parts]
    remote = [i for i, r in enumerate(refs) if is_object_ref(r)]
    if not remote:
        return refs
    import ray
    from ray import exceptions as rex

    out = list(refs)
    try:
        values = ray.get([refs[i] for i in remote])
    except rex.ObjectLostError:  # (OwnerDiedError too)
        values = []
        for i in remote:  # one at a time, to keep the parts that survived
            try:
                values.append(ray.get(refs[i]))
            except rex.ObjectLostError:
                values.append(None)
    for i, value in zip(remote, values):
        out[i] = value if value is None or not writable else map_modules(value, _writable)
    return [b for b in out if b is not None]


def _writable(columns: Any) -> Any:
    """`columns` with the read-only arrays Ray hands out zero-copy replaced by copies (the learner
    may change a train batch in place, as it may a batch it got by value). Dicts are updated in
    place: `ray.get` deserialized them for this caller alone."""
    if isinstance(columns, np.ndarray):
        return columns if columns.flags.writeable or columns.dtype == object else columns.copy()
    if isinstance(columns, dict):
        for key in list(columns.keys()):
            columns[key] = _writable(columns[key])
    return columns


def join_parts(parts: list[Any], writable: bool = True) -> Any:
    """One train batch from `parts` (see fetch_parts), side by side (join_runner_batches); None
    when every part was lost."""
    batches = fetch_parts(parts, writable)
    return join_runner_batches(batches) if batches else None


@dataclass
class PendingBatch:
    """A train batch waiting in the learner queue, as references where possible.

    `parts`: the fragments (RemoteFragment, or plain batches), or one aggregator's ObjectRef of
    the joined batch; `env_steps`/`agent_steps`: its step counts; `steps`: its size as
    count_steps_by counts; `seq_nos`: the weights version each fragment was sampled with.
    """

    parts: list[Any]
    env_steps: int
    agent_steps: int
    steps: int
    seq_nos: np.ndarray

    @property
    def counts(self) -> RemoteFragment:
        """Its step counts in batch form (for Algorithm.count_trained)."""
        return RemoteFragment(None, self.env_steps, self.agent_steps)

    @property
    def by_reference(self) -> bool:
        """Whether any of its data is still in the object store."""
        return any(isinstance(p, RemoteFragment) or is_object_ref(p) for p in self.parts)

    def single_ref(self) -> Any:
        """The ObjectRef of the whole joined batch (an aggregator's), else None."""
        if len(self.parts) == 1 and is_object_ref(self.parts[0]):
            return self.parts[0]
        return None

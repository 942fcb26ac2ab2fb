"""TrainingData: what one Learner update trains on (RLlib's `ray.rllib.core.learner.training_data`).

Exactly one of its fields is given. rlx's differentiable and meta learners train on `batch`
(a MultiAgentBatch, a single-agent SampleBatch, or a {module_id: {column: array}} dict);
`batches` (any batch type: each is viewed per module, `as_multi_agent`) are joined into one
batch; object references (`batch_refs`, `episodes_refs`) are fetched from Ray by `solve_refs()`.
"""
from __future__ import annotations

import dataclasses
from typing import Any

_FIELDS = ("batch", "batches", "batch_refs", "episodes", "episodes_refs", "data_iterators")


@dataclasses.dataclass
class TrainingData:
    """The data of one update: a batch, several batches, episodes, or Ray references to them."""

    batch: Any = None
    batches: list[Any] | None = None
    batch_refs: list[Any] | None = None
    episodes: list[Any] | None = None
    episodes_refs: list[Any] | None = None
    data_iterators: list[Any] | None = None

    def validate(self) -> None:
        """ValueError unless exactly one kind of data is given."""
        given = [name for name in _FIELDS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"TrainingData needs exactly one of {', '.join(_FIELDS)}; got "
                             f"{', '.join(given) if given else 'none'}.")

    def solve_refs(self) -> None:
        """Fetch `batch_refs`/`episodes_refs` from Ray's object store into `batches`/`episodes`."""
        if self.batch_refs is None and self.episodes_refs is None:
            return
        import ray

        if self.batch_refs is not None:
            self.batches, self.batch_refs = list(ray.get(list(self.batch_refs))), None
        if self.episodes_refs is not None:
            fetched = ray.get(list(self.episodes_refs))
            self.episodes = [e for part in fetched for e in (part if isinstance(part, list) else [part])]
            self.episodes_refs = None

    def as_batch(self, what: str) -> Any:
        """The one batch this data holds (`batches` joined row-wise); NotSupportedYetError for
        episodes and data iterators, which `what` (the learner) cannot train on."""
        from rlx.utils.errors import NotSupportedYetError

        self.validate()
        self.solve_refs()
        if self.batch is not None:
            return self.batch
        if self.batches is not None:
            return _join_batches(self.batches)
        kind = "episodes" if self.episodes is not None else "data_iterators"
        raise NotSupportedYetError(f"TrainingData({kind}=...) for {what}", f"{what} trains on batches",
                                   fix="Pass TrainingData(batch=MultiAgentBatch(...)) with the columns the loss reads.")


def _join_batches(batches: list[Any]) -> Any:
    """Several (multi-agent) batches as one, each module's columns joined along the rows."""
    import numpy as np
    import torch

    from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, as_multi_agent, batch_kind

    def cat(values: list[Any]) -> Any:
        return torch.cat(values) if isinstance(values[0], torch.Tensor) else np.concatenate(values)

    if not batches:
        raise ValueError("TrainingData(batches=[]) holds no batch.")
    per_module = [as_multi_agent(b) for b in batches]
    first = per_module[0].policy_batches
    joined = {mid: {k: cat([b[mid][k] for b in per_module if mid in b]) for k in first[mid]} for mid in first}
    if batch_kind(batches[0]) is SampleBatch:  # one module's columns, given as such
        return SampleBatch(next(iter(joined.values())))
    return MultiAgentBatch(joined, env_steps=sum(b.env_steps() for b in per_module))

"""SampleBatch: the old API's dict of equally long column arrays (`ray.rllib.policy.sample_batch`).

rlx trains on time-major dicts of arrays; a SampleBatch is what old-API callbacks such as
`on_postprocess_trajectory` receive for one stretch of one episode.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns

DEFAULT_POLICY_ID = "default_policy"


class SampleBatch(dict):
    """A dict of columns (NumPy arrays of equal length); `len(batch)` is the number of rows."""

    OBS = Columns.OBS
    NEXT_OBS = Columns.NEXT_OBS
    ACTIONS = Columns.ACTIONS
    REWARDS = Columns.REWARDS
    TERMINATEDS = Columns.TERMINATEDS
    TRUNCATEDS = Columns.TRUNCATEDS
    DONES = "dones"
    INFOS = "infos"
    EPS_ID = "eps_id"
    ENV_ID = "env_id"
    T = "t"
    ACTION_LOGP = Columns.ACTION_LOGP
    ACTION_DIST_INPUTS = Columns.ACTION_DIST_INPUTS
    VF_PREDS = Columns.VF_PREDS
    ADVANTAGES = Columns.ADVANTAGES
    VALUE_TARGETS = Columns.VALUE_TARGETS

    @property
    def count(self) -> int:
        """Number of rows (the length of the first column)."""
        for value in self.values():
            return len(value)
        return 0

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return dict.__len__(self) > 0

    def copy(self, shallow: bool = False) -> "SampleBatch":
        """A copy; the columns are copied too unless `shallow`."""
        if shallow:
            return SampleBatch(dict(self))
        return SampleBatch({k: np.array(v, copy=True) for k, v in self.items()})

    def rows(self) -> Any:
        """Iterate over rows as dicts {column: value}."""
        for i in range(self.count):
            yield {k: v[i] for k, v in self.items()}

    def __repr__(self) -> str:
        return f"SampleBatch({self.count} rows: {', '.join(self.keys())})"


def concat_samples(batches: list[SampleBatch]) -> SampleBatch:
    """Concatenate SampleBatches with the same columns row-wise."""
    if not batches:
        return SampleBatch()
    keys = list(batches[0].keys())
    return SampleBatch({k: np.concatenate([np.asarray(b[k]) for b in batches]) for k in keys})

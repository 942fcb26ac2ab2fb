"""LearnerGroup's earlier path: the group lives in rlx.core.learner.learner_group (RLlib's
`ray.rllib.core.learner.learner_group`), its process side in rlx.core.learner.learner_process
and the batch sharding in rlx.core.learner.sharding."""
from rlx.core.learner.learner_group import (  # noqa: F401
    LearnerDiedError,
    LearnerGroup,
    LearnerGroupError,
    merge_metrics,
    shard_batch,
)

__all__ = ["LearnerDiedError", "LearnerGroup", "LearnerGroupError", "merge_metrics", "shard_batch"]

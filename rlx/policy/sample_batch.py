"""SampleBatch, MultiAgentBatch and concat_samples at RLlib's path (`ray.rllib.policy.sample_batch`).

The batch types live in the core layer, `rlx.core.sample_batch`; these are the same objects.
"""
from rlx.core.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, concat_samples

__all__ = ["DEFAULT_POLICY_ID", "MultiAgentBatch", "SampleBatch", "concat_samples"]

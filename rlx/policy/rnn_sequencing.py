"""Sequence helpers of the old API's recurrent models at RLlib's path (`ray.rllib.policy.rnn_sequencing`).

They live in the core layer, `rlx.core.models.v2.rnn_sequencing` (the old-API RecurrentNetwork
calls them); these are the same objects.
"""
from rlx.core.models.v2.rnn_sequencing import add_time_dimension

__all__ = ["add_time_dimension"]

"""RecurrentNetwork and LSTMWrapper at RLlib's path (`ray.rllib.models.torch.recurrent_net`).

They live in the core layer, `rlx.core.models.v2.recurrent_net`; these are the same classes.
"""
from rlx.core.models.v2.recurrent_net import LSTMWrapper, RecurrentNetwork

__all__ = ["LSTMWrapper", "RecurrentNetwork"]

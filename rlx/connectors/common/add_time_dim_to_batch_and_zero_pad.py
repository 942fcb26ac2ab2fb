"""AddTimeDimToBatchAndZeroPad at RLlib's module path."""
from rlx.connectors.common.add_states_from_episodes_to_batch import AddTimeDimToBatchAndZeroPad

__all__ = ["AddTimeDimToBatchAndZeroPad"]

"""FlattenObservations at RLlib's env-to-module path."""
from rlx.connectors.common.flatten_observations import FlattenObservations

__all__ = ["FlattenObservations"]

"""TensorToNumpy at RLlib's module path."""
from rlx.connectors.common.numpy_to_tensor import TensorToNumpy

__all__ = ["TensorToNumpy"]

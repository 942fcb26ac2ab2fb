"""Old import path of the callbacks classes (`ray.rllib.algorithms.callbacks`)."""
from rlx.callbacks.callbacks import DefaultCallbacks, MultiCallbacks, RLlibCallback, make_multi_callbacks
from rlx.callbacks.memory_tracking import MemoryTrackingCallbacks

__all__ = ["RLlibCallback", "DefaultCallbacks", "MultiCallbacks", "make_multi_callbacks", "MemoryTrackingCallbacks"]

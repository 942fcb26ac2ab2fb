"""Vectorised NumPy replay buffers: uniform and prioritized, with n-step returns built at sample time."""
from rlx.utils.replay_buffers.prioritized_replay_buffer import PrioritizedReplayBuffer
from rlx.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit
from rlx.utils.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree
from rlx.utils.replay_buffers.utils import make_replay_buffer

__all__ = [
    "ReplayBuffer",
    "PrioritizedReplayBuffer",
    "SumSegmentTree",
    "MinSegmentTree",
    "make_replay_buffer",
    "StorageUnit",
]

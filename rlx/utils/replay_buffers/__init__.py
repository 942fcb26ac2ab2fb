"""Replay buffers. The vectorised NumPy buffers (uniform and prioritized, n-step returns built at
sample time) are what rlx's algorithms use; the episode buffers (RLlib's new-stack
EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, MultiAgentEpisodeReplayBuffer,
MultiAgentPrioritizedEpisodeReplayBuffer) store
SingleAgentEpisode / MultiAgentEpisode objects and are imported on first use."""
import importlib
from typing import Any

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
    "EpisodeReplayBuffer",
    "PrioritizedEpisodeReplayBuffer",
    "MultiAgentEpisodeReplayBuffer",
    "MultiAgentPrioritizedEpisodeReplayBuffer",
]

#: The episode buffers build episodes (rlx.env, a layer above): imported on first use.
_EPISODE_BUFFERS = {
    "EpisodeReplayBuffer": "rlx.utils.replay_buffers.episode_replay_buffer",
    "PrioritizedEpisodeReplayBuffer": "rlx.utils.replay_buffers.prioritized_episode_buffer",
    "MultiAgentEpisodeReplayBuffer": "rlx.utils.replay_buffers.multi_agent_episode_buffer",
    "MultiAgentPrioritizedEpisodeReplayBuffer": "rlx.utils.replay_buffers.multi_agent_prioritized_episode_buffer",
}


def __getattr__(name: str) -> Any:
    module = _EPISODE_BUFFERS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlx.utils.replay_buffers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

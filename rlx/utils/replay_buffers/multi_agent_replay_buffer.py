"""MultiAgentReplayBuffer: one replay buffer per policy (RLlib's `replay_mode="independent"`).

Each policy's transitions go to its own buffer, built from the same `replay_buffer_config`
when the policy first adds data, and each policy replays its own train batches.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from rlx.utils.replay_buffers.replay_buffer import ReplayBuffer


class MultiAgentReplayBuffer:
    """{policy_id: ReplayBuffer}, each made by `make_buffer(policy_id)` on first use."""

    def __init__(self, make_buffer: Callable[[str], ReplayBuffer]):
        self._make_buffer = make_buffer
        self.replay_buffers: dict[str, ReplayBuffer] = {}

    def buffer(self, policy_id: str) -> ReplayBuffer:
        """The buffer of `policy_id` (created empty on first use)."""
        buf = self.replay_buffers.get(policy_id)
        if buf is None:
            buf = self.replay_buffers[policy_id] = self._make_buffer(policy_id)
        return buf

    def add(self, batch: Any, time_major: bool = True, lane_offset: int = 0) -> None:
        """Add each policy's batch of a MultiAgentBatch (or {policy_id: batch}) to its buffer
        (`lane_offset`: where its columns' lanes start, as in ReplayBuffer.add)."""
        for policy_id, policy_batch in getattr(batch, "policy_batches", batch).items():
            if lane_offset:
                self.buffer(policy_id).add(policy_batch, time_major=time_major, lane_offset=lane_offset)
            else:
                self.buffer(policy_id).add(policy_batch, time_major=time_major)

    def end_open_episodes(self) -> None:
        """End every open episode in every buffer (the runners restarted their episodes)."""
        for buf in self.replay_buffers.values():
            buf.end_open_episodes()

    def remove(self, policy_id: str) -> None:
        """Drop the buffer of a removed policy."""
        self.replay_buffers.pop(policy_id, None)

    def __len__(self) -> int:
        return sum(len(buf) for buf in self.replay_buffers.values())

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self.replay_buffers

    def get_state(self) -> dict[str, Any]:
        """{policy_id: buffer state}."""
        return {pid: buf.get_state() for pid, buf in self.replay_buffers.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore get_state() (buffers of policies not in `state` are left as they are)."""
        for pid, value in state.items():
            self.buffer(str(pid)).set_state(value)

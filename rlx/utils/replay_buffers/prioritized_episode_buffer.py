"""PrioritizedEpisodeReplayBuffer (RLlib's `ray.rllib.utils.replay_buffers.prioritized_episode_buffer`):
episodes stored as in EpisodeReplayBuffer, steps drawn in proportion to priority^alpha
(Schaul et al. 2016), with importance weights and `update_priorities` after each sample."""
from __future__ import annotations

from typing import Any

from rlx.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer, Item, _Row
from rlx.utils.replay_buffers.episode_storage import transition_episode
from rlx.utils.replay_buffers.priority_index import PriorityIndex


def check_transition_sample(buffer: Any, num_items: int | None, batch_size_B: int | None,
                            batch_length_T: int | None) -> int:
    """The batch size of a sample() of single transitions; ValueError for sequence requests."""
    if num_items is not None and batch_size_B is not None:
        raise ValueError("sample() takes either num_items or batch_size_B, not both.")
    if batch_length_T not in (None, 0, 1):
        raise ValueError(f"{type(buffer).__name__} samples single transitions; batch_length_T={batch_length_T} "
                         "sequences are not supported (use EpisodeReplayBuffer.sample(sample_episodes=True)).")
    return int(num_items if num_items is not None else batch_size_B or buffer.batch_size_B)


class PrioritizedEpisodeReplayBuffer(EpisodeReplayBuffer):
    """An EpisodeReplayBuffer whose `sample()` draws steps by priority and returns n-step
    transition episodes, each with a `weights` column (the importance weight, normalised by the
    largest possible) and an `n_step` column.

    New steps get the largest priority seen so far. After a sample, pass one priority per
    sampled transition (e.g. |TD error|) to `update_priorities`, before sampling again.

    Args:
        alpha: how strongly priorities skew sampling (0 = uniform, 1 = proportional).
    """

    def __init__(self, capacity: int = 10000, *, batch_size_B: int = 16, batch_length_T: int = 1,
                 alpha: float = 1.0, metrics_num_episodes_for_smoothing: int = 100, **kwargs: Any) -> None:
        super().__init__(capacity, batch_size_B=batch_size_B, batch_length_T=batch_length_T,
                         metrics_num_episodes_for_smoothing=metrics_num_episodes_for_smoothing)
        self._priorities = PriorityIndex(2 * self.capacity, alpha)

    def _add_items(self, module_id: Any, items: list[Item]) -> None:
        super()._add_items(module_id, items)
        self._priorities.add(items)

    def _row_evicted(self, index: int, row: _Row) -> None:
        self._priorities.evict_row(index)

    def sample(self, num_items: int | None = None, *, batch_size_B: int | None = None,
               batch_length_T: int | None = None, n_step: int | tuple[int, int] | None = None, beta: float = 0.0,
               gamma: float = 0.99, include_infos: bool = False, include_extra_model_outputs: bool = False,
               to_numpy: bool = False, **kwargs: Any) -> list[Any]:
        """A list of n-step transition episodes drawn by priority (see EpisodeReplayBuffer.sample
        for n_step, gamma and the include_* flags); beta (>= 0) sets how fully the `weights`
        column corrects for the prioritisation (1 = fully)."""
        batch_size = check_transition_sample(self, num_items, batch_size_B, batch_length_T)
        if not len(self._priorities):
            raise ValueError(f"Cannot sample from an empty {type(self).__name__}: add() episodes with steps first.")
        items, weights = self._priorities.draw(self.rng, batch_size, beta)
        drawn = self._with_n_steps(items, n_step)
        episodes = [transition_episode(self._track(item), item[2], n, gamma=gamma, weight=w,
                                       include_infos=include_infos,
                                       include_extra_model_outputs=include_extra_model_outputs)
                    for (item, n), w in zip(drawn, weights)]
        return self._finish(episodes, to_numpy)

    def update_priorities(self, priorities: Any, module_id: Any = None) -> None:
        """Set the priorities of the transitions of the latest `sample()`, one per transition in
        its order (usually |TD error|); values are floored at 1e-12."""
        self._priorities.update(priorities)

    def get_state(self) -> dict[str, Any]:
        """EpisodeReplayBuffer's state plus the priorities."""
        return {**super().get_state(), "priorities": self._priorities.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what `get_state` returned."""
        super().set_state(state)
        self._priorities = PriorityIndex.from_state(state["priorities"])

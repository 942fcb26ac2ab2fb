"""MultiAgentPrioritizedEpisodeReplayBuffer (RLlib's
`ray.rllib.utils.replay_buffers.multi_agent_prioritized_episode_buffer`): MultiAgentEpisodes
stored as in MultiAgentEpisodeReplayBuffer, each module's agent steps drawn by its own priorities."""
from __future__ import annotations

from typing import Any, Iterable

from rlx.utils.replay_buffers.episode_replay_buffer import Item, _Row
from rlx.utils.replay_buffers.episode_storage import transition_episode
from rlx.utils.replay_buffers.multi_agent_episode_buffer import MultiAgentEpisodeReplayBuffer
from rlx.utils.replay_buffers.prioritized_episode_buffer import check_transition_sample
from rlx.utils.replay_buffers.priority_index import PriorityIndex


class MultiAgentPrioritizedEpisodeReplayBuffer(MultiAgentEpisodeReplayBuffer):
    """A MultiAgentEpisodeReplayBuffer with one priority index per module: `sample()` draws
    `batch_size_B` transitions per module by priority (with `weights`), and
    `update_priorities(priorities, module_id)` sets that module's latest draw's priorities.

    Args:
        alpha: how strongly priorities skew sampling (0 = uniform, 1 = proportional).
    """

    def __init__(self, capacity: int = 10000, *, batch_size_B: int = 16, batch_length_T: int = 1,
                 alpha: float = 1.0, metrics_num_episodes_for_smoothing: int = 100, **kwargs: Any) -> None:
        super().__init__(capacity, batch_size_B=batch_size_B, batch_length_T=batch_length_T,
                         metrics_num_episodes_for_smoothing=metrics_num_episodes_for_smoothing)
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}.")
        self._alpha = float(alpha)
        self._module_priorities: dict[Any, PriorityIndex] = {}

    def _add_items(self, module_id: Any, items: list[Item]) -> None:
        super()._add_items(module_id, items)
        index = self._module_priorities.get(module_id)
        if index is None:
            index = self._module_priorities[module_id] = PriorityIndex(2 * self.capacity, self._alpha)
        index.add(items)

    def _row_evicted(self, index: int, row: _Row) -> None:
        for priorities in self._module_priorities.values():
            priorities.evict_row(index)

    def sample(self, num_items: int | None = None, *, batch_size_B: int | None = None,
               batch_length_T: int | None = None, n_step: int | tuple[int, int] | None = 1, beta: float = 0.0,
               gamma: float = 0.99, include_infos: bool = False, include_extra_model_outputs: bool = False,
               replay_mode: str = "independent", modules_to_sample: Iterable[Any] | None = None,
               **kwargs: Any) -> list[Any]:
        """`batch_size_B` prioritized n-step transitions for each module (all, or
        `modules_to_sample`); beta as in PrioritizedEpisodeReplayBuffer.sample."""
        if replay_mode != "independent":
            raise ValueError(f"{type(self).__name__}.sample(replay_mode={replay_mode!r}) is not supported by rlx: "
                             "use replay_mode='independent' (each module's agent steps drawn on their own).")
        batch_size = check_transition_sample(self, num_items, batch_size_B, batch_length_T)
        modules = list(modules_to_sample) if modules_to_sample is not None else self.get_module_ids()
        episodes = []
        for module_id in modules:
            index = self._module_priorities.get(module_id)
            if index is None or not len(index):
                raise ValueError(f"No steps of module {module_id!r} are stored; stored modules: "
                                 f"{self.get_module_ids()!r}.")
            items, weights = index.draw(self.rng, batch_size, beta)
            for (item, n), weight in zip(self._with_n_steps(items, n_step), weights):
                episodes.append(transition_episode(self._track(item), item[2], n, gamma=gamma, weight=weight,
                                                   include_infos=include_infos,
                                                   include_extra_model_outputs=include_extra_model_outputs))
            self.sampled_timesteps_per_module[module_id] = \
                self.sampled_timesteps_per_module.get(module_id, 0) + batch_size
        return episodes

    def update_priorities(self, priorities: Any, module_id: Any) -> None:
        """Set the priorities of `module_id`'s transitions of the latest `sample()`, one per
        transition in its order (usually |TD error|)."""
        if module_id not in self._module_priorities:
            raise KeyError(f"No steps of module {module_id!r} are stored; stored modules: {self.get_module_ids()!r}.")
        self._module_priorities[module_id].update(priorities)

    def get_state(self) -> dict[str, Any]:
        """MultiAgentEpisodeReplayBuffer's state plus each module's priorities."""
        return {**super().get_state(), "_alpha": self._alpha,
                "module_priorities": [[mid, p.get_state()] for mid, p in self._module_priorities.items()]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what `get_state` returned."""
        super().set_state(state)
        self._alpha = state["_alpha"]
        self._module_priorities = {mid: PriorityIndex.from_state(p) for mid, p in state["module_priorities"]}

"""MultiAgentEpisodeReplayBuffer (RLlib's `ray.rllib.utils.replay_buffers.multi_agent_episode_buffer`):
MultiAgentEpisodes stored as rows of per-agent tracks, sampled per module as n-step transitions.

The single-agent EpisodeReplayBuffer is the one-agent case of the same storage: each row holds
one track per agent, and the sampleable steps are kept per module id.
"""
from __future__ import annotations

from typing import Any, Iterable

from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from rlx.utils.replay_buffers.episode_storage import Track, track_of, transition_episode


class MultiAgentEpisodeReplayBuffer(EpisodeReplayBuffer):
    """Stores MultiAgentEpisodes (or chunks of them, by id_) and samples each module's agent
    steps uniformly. `capacity` counts env steps; whole episodes are evicted oldest first.

    `sample()` returns SingleAgentEpisodes, one n-step transition each, `batch_size_B` per
    module, carrying their `agent_id`, `module_id` and `multi_agent_episode_id`.
    """

    def __init__(self, capacity: int = 10000, *, batch_size_B: int = 16, batch_length_T: int = 1,
                 metrics_num_episodes_for_smoothing: int = 100, **kwargs: Any) -> None:
        super().__init__(capacity, batch_size_B=batch_size_B, batch_length_T=batch_length_T,
                         metrics_num_episodes_for_smoothing=metrics_num_episodes_for_smoothing)
        self._num_agent_timesteps_added = 0
        self.sampled_timesteps_per_module: dict[Any, int] = {}

    def add(self, episodes: Any) -> None:
        """Store copies of the agents' steps of `episodes` (a MultiAgentEpisode or a list of them);
        a chunk whose id_ is stored extends it."""
        super().add(episodes)

    def _split(self, episode: Any) -> tuple[str, int, dict[Any, Track]]:
        if not isinstance(episode, MultiAgentEpisode):
            raise TypeError(f"MultiAgentEpisodeReplayBuffer.add() takes MultiAgentEpisodes, got "
                            f"{type(episode).__name__}; use EpisodeReplayBuffer for SingleAgentEpisodes.")
        if len(episode) and not episode.agent_episodes:
            raise ValueError(f"MultiAgentEpisode {episode.id_!r} has {len(episode)} env steps but no per-agent "
                             "episodes to store: the runner records them when episodes are asked for "
                             "(EnvRunner.sample() with RLlib's arguments, or an episode callback).")
        tracks = {}
        for agent_id, agent_episode in episode.agent_episodes.items():
            module_id = episode.module_for(agent_id) or agent_episode.module_id
            tracks[agent_id] = track_of(agent_episode, agent_id=agent_id, module_id=module_id,
                                        multi_agent_episode_id=episode.id_)
            self._num_agent_timesteps_added += len(tracks[agent_id])
        return episode.id_, len(episode), tracks

    def sample(self, num_items: int | None = None, *, batch_size_B: int | None = None,
               batch_length_T: int | None = None, n_step: int | tuple[int, int] | None = 1, gamma: float = 0.99,
               include_infos: bool = False, include_extra_model_outputs: bool = False,
               replay_mode: str = "independent", modules_to_sample: Iterable[Any] | None = None,
               **kwargs: Any) -> list[Any]:
        """`batch_size_B` n-step transitions for each module (all, or `modules_to_sample`),
        drawn independently per module; see EpisodeReplayBuffer.sample for n_step and gamma."""
        if replay_mode != "independent":
            raise ValueError(f"MultiAgentEpisodeReplayBuffer.sample(replay_mode={replay_mode!r}) is not supported "
                             "by rlx: use replay_mode='independent' (each module's agent steps drawn on their own).")
        if batch_length_T not in (None, 0, 1):
            raise ValueError(f"MultiAgentEpisodeReplayBuffer samples single transitions; batch_length_T="
                             f"{batch_length_T} sequences are not supported.")
        if num_items is not None and batch_size_B is not None:
            raise ValueError("sample() takes either num_items or batch_size_B, not both.")
        batch_size = int(num_items if num_items is not None else batch_size_B or self.batch_size_B)
        modules = list(modules_to_sample) if modules_to_sample is not None else self.get_module_ids()
        episodes = []
        for module_id in modules:
            items = self._module_to_indices.get(module_id)
            if not items:
                raise ValueError(f"No steps of module {module_id!r} are stored; stored modules: "
                                 f"{self.get_module_ids()!r}.")
            for item, n in self._draw_transitions(items, batch_size, n_step):
                episodes.append(transition_episode(self._track(item), item[2], n, gamma=gamma, weight=1.0,
                                                   include_infos=include_infos,
                                                   include_extra_model_outputs=include_extra_model_outputs))
            self.sampled_timesteps_per_module[module_id] = \
                self.sampled_timesteps_per_module.get(module_id, 0) + batch_size
        return episodes

    def get_module_ids(self) -> list[Any]:
        """The modules whose steps are stored."""
        return [mid for mid, items in self._module_to_indices.items() if items]

    def get_num_agent_timesteps(self) -> int:
        """Agent steps stored, all modules together (more than env steps when agents act together)."""
        return sum(len(items) for items in self._module_to_indices.values())

    def get_added_agent_timesteps(self) -> int:
        """Agent steps added over the buffer's lifetime."""
        return self._num_agent_timesteps_added

    def get_sampled_timesteps(self, module_id: Any = None) -> int:
        """Steps sampled over the buffer's lifetime (with module_id: that module's)."""
        if module_id is None:
            return self.sampled_timesteps
        return self.sampled_timesteps_per_module.get(module_id, 0)

    def get_state(self) -> dict[str, Any]:
        """EpisodeReplayBuffer's state plus the per-module counters."""
        return {**super().get_state(), "_num_agent_timesteps_added": self._num_agent_timesteps_added,
                "sampled_timesteps_per_module": list(self.sampled_timesteps_per_module.items())}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what `get_state` returned."""
        super().set_state(state)
        self._num_agent_timesteps_added = state["_num_agent_timesteps_added"]
        self.sampled_timesteps_per_module = dict(state["sampled_timesteps_per_module"])

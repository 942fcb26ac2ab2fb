"""EpisodeReplayBuffer (RLlib's `ray.rllib.utils.replay_buffers.episode_replay_buffer`): a FIFO
buffer of whole episodes, sampled as n-step transitions or as [B, T] sequences.

This is the buffer of RLlib's new-stack DQN/SAC examples and custom training loops, which add
the `SingleAgentEpisode`s an EnvRunner returns. rlx's own algorithms keep the flat NumPy
buffers (rlx.utils.replay_buffers.ReplayBuffer), which store the EnvRunner's array batches
without building per-step objects.

Each stored episode is a row; chunks of an ongoing episode (same `id_`) are appended to their
row. `capacity` counts env steps: the oldest rows are evicted once more are stored (the newest
row always stays).
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from rlx.core import DEFAULT_MODULE_ID
from rlx.env.single_agent_episode import SingleAgentEpisode
from rlx.utils.replay_buffers.episode_storage import (Track, sequence_episode, track_of, transition_episode,
                                                      whole_episode)

#: A sampleable step: (row's global index, agent id, timestep in that agent's track).
Item = tuple[int, Any, int]


class _Row:
    """One stored episode: its agents' tracks and its length in env steps."""

    __slots__ = ("id_", "tracks", "env_steps")

    def __init__(self, id_: str) -> None:
        self.id_ = id_
        self.tracks: dict[Any, Track] = {}
        self.env_steps = 0


def _as_list(episodes: Any) -> list[Any]:
    return list(episodes) if isinstance(episodes, (list, tuple)) else [episodes]


def _n_step_range(n_step: int | tuple[int, int] | None) -> tuple[int, int]:
    """(low, high) with n drawn from [low, high); an int n is (n, n + 1)."""
    if n_step is None:
        return 1, 2
    if isinstance(n_step, (tuple, list)):
        if len(n_step) != 2 or not 1 <= int(n_step[0]) < int(n_step[1]):
            raise ValueError(f"n_step as a range must be (low, high) with 1 <= low < high, got {n_step!r}.")
        return int(n_step[0]), int(n_step[1])
    if int(n_step) < 1:
        raise ValueError(f"n_step must be >= 1, got {n_step!r}.")
    return int(n_step), int(n_step) + 1


class EpisodeReplayBuffer:
    """Stores SingleAgentEpisodes (completed or ongoing chunks) and samples from their steps uniformly.

    Args:
        capacity: env steps to keep; the oldest episodes are evicted beyond it.
        batch_size_B: rows a `sample()` returns by default.
        batch_length_T: row length of the [B, T] batches of `sample()` (sample_episodes=False).
        metrics_num_episodes_for_smoothing: accepted for RLlib's signature; `get_metrics()`
            reports lifetime counters, which need no smoothing window.
    """

    def __init__(self, capacity: int = 10000, *, batch_size_B: int = 16, batch_length_T: int = 64,
                 metrics_num_episodes_for_smoothing: int = 100, **kwargs: Any) -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be >= 1 env step, got {capacity!r}.")
        self.capacity = int(capacity)
        self.batch_size_B = int(batch_size_B)
        self.batch_length_T = int(batch_length_T)
        self._rows: deque[_Row] = deque()
        #: Row id (the episode's id_) -> global row index (rows evicted so far + position).
        self.episode_id_to_index: dict[str, int] = {}
        self._num_episodes_evicted = 0
        #: Sampleable steps per module id.
        self._module_to_indices: dict[Any, list[Item]] = {}
        self._num_timesteps = 0
        self._num_timesteps_added = 0
        self.sampled_timesteps = 0
        self._counters: dict[str, float] = {}
        self.rng = np.random.default_rng(seed=None)

    # ------------------------------------------------------------------ adding

    def __len__(self) -> int:
        return self.get_num_timesteps()

    def add(self, episodes: Any) -> None:
        """Store copies of `episodes` (a SingleAgentEpisode or a list of them); a chunk whose id_
        is already stored extends that episode."""
        added_steps = added_episodes = 0
        for episode in _as_list(episodes):
            row_id, env_steps, tracks = self._split(episode)
            index = self.episode_id_to_index.get(row_id)
            if index is None:
                row = _Row(row_id)
                self._rows.append(row)
                index = self._num_episodes_evicted + len(self._rows) - 1
                self.episode_id_to_index[row_id] = index
                added_episodes += 1
            else:
                row = self._rows[index - self._num_episodes_evicted]
            for agent_id, chunk in tracks.items():
                track = row.tracks.get(agent_id)
                if track is None:
                    track = row.tracks[agent_id] = Track(chunk.id_, chunk.agent_id, chunk.module_id,
                                                         chunk.multi_agent_episode_id, chunk.observation_space,
                                                         chunk.action_space)
                before = len(track)
                track.extend(chunk)
                self._add_items(track.module_id, [(index, agent_id, before + i) for i in range(len(chunk))])
            row.env_steps += env_steps
            self._num_timesteps += env_steps
            self._num_timesteps_added += env_steps
            added_steps += env_steps
            self._evict()
        self._count("num_episodes_added_lifetime", added_episodes)
        self._count("num_env_steps_added_lifetime", added_steps)

    def _split(self, episode: Any) -> tuple[str, int, dict[Any, Track]]:
        """(row id, env steps, {agent id: track}) of one added episode."""
        if not isinstance(episode, SingleAgentEpisode):
            raise TypeError(f"{type(self).__name__}.add() takes SingleAgentEpisodes, got {type(episode).__name__}; "
                            "use MultiAgentEpisodeReplayBuffer for MultiAgentEpisodes.")
        track = track_of(episode)
        return episode.id_, len(track), {track.agent_id: track}

    def _add_items(self, module_id: Any, items: list[Item]) -> None:
        self._module_to_indices.setdefault(module_id, []).extend(items)

    def _evict(self) -> None:
        """Drop the oldest rows while more than `capacity` env steps are stored (keep the newest)."""
        evicted = 0
        while self._num_timesteps > self.capacity and len(self._rows) > 1:
            row = self._rows.popleft()
            del self.episode_id_to_index[row.id_]
            self._row_evicted(self._num_episodes_evicted, row)
            self._num_episodes_evicted += 1
            self._num_timesteps -= row.env_steps
            self._count("num_env_steps_evicted_lifetime", row.env_steps)
            evicted += 1
        if evicted:
            first = self._num_episodes_evicted  # rows are evicted oldest first: items below it are gone
            for module_id, items in self._module_to_indices.items():
                self._module_to_indices[module_id] = [item for item in items if item[0] >= first]
            self._count("num_episodes_evicted_lifetime", evicted)

    def _row_evicted(self, index: int, row: _Row) -> None:
        """Called for each evicted row (subclasses free what they keep per step)."""

    def _track(self, item: Item) -> Track:
        return self._rows[item[0] - self._num_episodes_evicted].tracks[item[1]]

    # ------------------------------------------------------------------ sampling

    def sample(self, num_items: int | None = None, *, batch_size_B: int | None = None,
               batch_length_T: int | None = None, n_step: int | tuple[int, int] | None = None, beta: float = 0.0,
               gamma: float = 0.99, include_infos: bool = False, include_extra_model_outputs: bool = False,
               sample_episodes: bool = False, to_numpy: bool = False, lookback: int = 0,
               min_batch_length_T: int = 0, **kwargs: Any) -> Any:
        """Sample uniformly over the stored steps.

        With sample_episodes=True: a list of SingleAgentEpisodes. Without batch_length_T, each
        is one n-step transition (o_t, a_t, sum_k gamma^k r_(t+k), o_(t+n)) with `n_step` and
        `weights` extra-model-output columns (n_step an int or a (low, high) range drawn per
        transition); with batch_length_T, slices of up to that many steps (n_step must be 1)
        with `lookback` earlier steps, totalling `batch_size_B` steps.

        Otherwise (RLlib's default): a dict of [B, T] arrays `obs`, `actions`, `rewards`,
        `is_first`, `is_last`, `is_terminated`, `is_truncated`, each row continuing into a
        random next episode where one ends.
        """
        if num_items is not None and batch_size_B is not None:
            raise ValueError("sample() takes either num_items or batch_size_B, not both.")
        batch_size_B = int(num_items if num_items is not None else batch_size_B or self.batch_size_B)
        items = self._module_to_indices.get(DEFAULT_MODULE_ID) or self._all_items()
        if not items:
            raise ValueError(f"Cannot sample from an empty {type(self).__name__}: add() episodes with steps first.")
        if not sample_episodes:
            return self._sample_batch(items, batch_size_B, int(batch_length_T or self.batch_length_T))
        if batch_length_T:
            if _n_step_range(n_step) != (1, 2):
                raise ValueError(f"sample(batch_length_T={batch_length_T}) samples sequences, which take n_step=1; "
                                 f"got n_step={n_step!r}.")
            episodes = self._sample_sequences(items, batch_size_B, int(batch_length_T), int(lookback),
                                              int(min_batch_length_T))
        else:
            episodes = [transition_episode(self._track(item), item[2], n, gamma=gamma, weight=1.0,
                                           include_infos=include_infos,
                                           include_extra_model_outputs=include_extra_model_outputs)
                        for item, n in self._draw_transitions(items, batch_size_B, n_step)]
        return self._finish(episodes, to_numpy)

    def _all_items(self) -> list[Item]:
        return [item for items in self._module_to_indices.values() for item in items]

    def _draw_transitions(self, items: list[Item], batch_size: int,
                          n_step: int | tuple[int, int] | None) -> list[tuple[Item, int]]:
        """batch_size uniformly drawn steps, each with its n (cut at its episode's end)."""
        picks = self.rng.integers(len(items), size=batch_size)
        return self._with_n_steps([items[int(p)] for p in picks], n_step)

    def _with_n_steps(self, items: list[Item], n_step: int | tuple[int, int] | None) -> list[tuple[Item, int]]:
        """Each drawn step with its n: drawn from the n_step range, cut to the steps left in its episode."""
        low, high = _n_step_range(n_step)
        ns = self.rng.integers(low, high, size=len(items))
        drawn = [(item, int(min(n, len(self._track(item)) - item[2]))) for item, n in zip(items, ns)]
        self._record_sample(drawn)
        return drawn

    def _record_sample(self, drawn: list[tuple[Item, int]]) -> None:
        self.sampled_timesteps += len(drawn)
        self._count("num_env_steps_sampled_lifetime", len(drawn))
        if drawn:
            self._counters["actual_n_step"] = float(np.mean([n for _, n in drawn]))

    def _finish(self, episodes: list[SingleAgentEpisode], to_numpy: bool) -> list[SingleAgentEpisode]:
        if to_numpy:
            for episode in episodes:
                to_np = getattr(episode, "to_numpy", None)
                if to_np is not None:
                    to_np()
        return episodes

    def _sample_sequences(self, items: list[Item], batch_size: int, length: int, lookback: int,
                          min_length: int) -> list[SingleAgentEpisode]:
        """Slices [t, t + length) (cut at episode ends) until batch_size steps are covered."""
        episodes: list[SingleAgentEpisode] = []
        covered = tries = 0
        while covered < batch_size:
            item = items[int(self.rng.integers(len(items)))]
            track, start = self._track(item), item[2]
            tries += 1
            if min_length and len(track) - start < min_length:
                if tries > 100 * batch_size:
                    raise ValueError(f"No stored episode has {min_length} steps after a sampled step; lower "
                                     "min_batch_length_T or add longer episodes.")
                continue
            end = min(len(track), start + length)
            episodes.append(sequence_episode(track, start, end, lookback=lookback))
            covered += end - start
        self.sampled_timesteps += covered
        self._count("num_env_steps_sampled_lifetime", covered)
        return episodes

    def _sample_batch(self, items: list[Item], batch_size: int, length: int) -> dict[str, np.ndarray]:
        """[B, T] rows of consecutive steps; a row that reaches an episode's end continues at the
        start of a random stored episode (is_first marks where each episode's data begins)."""
        obs: list[list[Any]] = []
        actions: list[list[Any]] = []
        rewards: list[list[float]] = []
        flags = {k: np.zeros((batch_size, length), bool) for k in ("is_first", "is_last", "is_terminated",
                                                                    "is_truncated")}
        for b in range(batch_size):
            row_obs: list[Any] = []
            row_act: list[Any] = []
            row_rew: list[float] = []
            item = items[int(self.rng.integers(len(items)))]
            track, ts = self._track(item), item[2]
            first_reward = track.rewards[ts - 1] if ts > 0 else 0.0
            while len(row_obs) < length:
                flags["is_first"][b, len(row_obs)] = True
                # Each step: the observation, the action taken at it and the reward that led to it;
                # the episode's final observation gets a repeat of the last action.
                row_obs.extend(track.obs[ts:])
                row_act.extend(track.actions[ts:] + [track.actions[-1]])
                row_rew.extend([first_reward] + track.rewards[ts:])
                end = len(row_obs) - 1
                if end < length:
                    flags["is_last"][b, end] = True
                    flags["is_terminated"][b, end] = track.terminated
                    flags["is_truncated"][b, end] = track.truncated
                item = items[int(self.rng.integers(len(items)))]
                track, ts, first_reward = self._track(item), 0, 0.0
            obs.append(row_obs[:length])
            actions.append(row_act[:length])
            rewards.append(row_rew[:length])
            flags["is_last"][b, length - 1] = True
        self.sampled_timesteps += batch_size * length
        self._count("num_env_steps_sampled_lifetime", batch_size * length)
        return {"obs": np.asarray(obs), "actions": np.asarray(actions), "rewards": np.asarray(rewards, np.float32),
                **flags}

    # ------------------------------------------------------------------ reading the buffer

    @property
    def episodes(self) -> list[SingleAgentEpisode]:
        """The stored episodes, oldest first (new objects holding copies of the buffer's data)."""
        return [whole_episode(track) for row in self._rows for track in row.tracks.values()]

    def get_num_episodes(self, module_id: Any = None) -> int:
        """Episodes stored (with module_id: those that have steps of that module)."""
        if module_id is None:
            return len(self._rows)
        return sum(1 for row in self._rows if any(t.module_id == module_id for t in row.tracks.values()))

    def get_num_episodes_evicted(self, module_id: Any = None) -> int:
        """Episodes evicted so far."""
        return self._num_episodes_evicted

    def get_num_timesteps(self, module_id: Any = None) -> int:
        """Steps stored (with module_id: that module's agent steps)."""
        if module_id is None:
            return self._num_timesteps
        return len(self._module_to_indices.get(module_id, ()))

    def get_sampled_timesteps(self, module_id: Any = None) -> int:
        """Steps sampled over the buffer's lifetime."""
        return self.sampled_timesteps

    def get_added_timesteps(self, module_id: Any = None) -> int:
        """Steps added over the buffer's lifetime."""
        return self._num_timesteps_added

    def _count(self, key: str, value: float) -> None:
        self._counters[key] = self._counters.get(key, 0) + value

    def get_metrics(self) -> dict[str, float]:
        """Counters under RLlib's metric names: episodes/env steps stored, added, evicted and
        sampled over the lifetime, and the mean n of the latest n-step sample."""
        return {"num_episodes_stored": self.get_num_episodes(), "num_env_steps_stored": self.get_num_timesteps(),
                **self._counters}

    # ------------------------------------------------------------------ checkpointing

    def get_state(self) -> dict[str, Any]:
        """The buffer's contents and counters as plain values; `set_state` restores them."""
        return {
            "rows": [{"id_": row.id_, "env_steps": row.env_steps,
                      "tracks": [[aid, t.get_state()] for aid, t in row.tracks.items()]} for row in self._rows],
            "episode_id_to_index": list(self.episode_id_to_index.items()),
            "_num_episodes_evicted": self._num_episodes_evicted,
            "_module_to_indices": [[mid, items] for mid, items in self._module_to_indices.items()],
            "_num_timesteps": self._num_timesteps,
            "_num_timesteps_added": self._num_timesteps_added,
            "sampled_timesteps": self.sampled_timesteps,
            "counters": dict(self._counters),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what `get_state` returned."""
        self._rows = deque()
        for row_state in state["rows"]:
            row = _Row(row_state["id_"])
            row.env_steps = row_state["env_steps"]
            row.tracks = {aid: Track.from_state(t) for aid, t in row_state["tracks"]}
            self._rows.append(row)
        self.episode_id_to_index = dict(state["episode_id_to_index"])
        self._num_episodes_evicted = state["_num_episodes_evicted"]
        self._module_to_indices = {mid: [tuple(i) for i in items] for mid, items in state["_module_to_indices"]}
        self._num_timesteps = state["_num_timesteps"]
        self._num_timesteps_added = state["_num_timesteps_added"]
        self.sampled_timesteps = state["sampled_timesteps"]
        self._counters = dict(state.get("counters", {}))

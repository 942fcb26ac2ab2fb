"""The open episodes of an external env and the training rows they complete.

An external application reports an episode step by step: an observation and the action
taken (`act`), rewards (`add_reward`), the final observation (`end`). A row (obs, action,
reward, next obs, ...) is complete once the observation after its action arrives; complete
rows wait in the book until the trainer drains them as one flat SampleBatch, each
episode's rows together and in order, so rlx's offline path turns them into the same
time-major batch an EnvRunner samples.
"""
from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.env.external.codec import RequestError
from rlx.offline.episode_rows import EPS_ID, T
from rlx.policy.sample_batch import SampleBatch

#: Finished episode ids remembered, to answer "already completed" (older ones are forgotten).
_FINISHED_MEMORY = 100_000


@dataclass
class _Episode:
    key: str
    number: int
    training_enabled: bool
    last_seen: float
    length: int = 0
    episode_return: float = 0.0
    reward: float = 0.0  # reward since the last action
    obs: np.ndarray | None = None  # the pending step: observation and action awaiting the next observation
    action: Any = None
    logp: float | None = None
    dist_inputs: np.ndarray | None = None


@dataclass
class _Row:
    obs: np.ndarray
    action: np.ndarray
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool
    number: int
    t: int
    logp: float | None
    dist_inputs: np.ndarray | None


class EpisodeBook:
    """Thread-safe store of open episodes and completed rows.

    Args:
        max_open_episodes: episodes open at once (more get a 429 error).
        episode_timeout_s: an episode not heard of for this long is dropped (its client is
            gone); the rows it completed stay, its unfinished step is lost.
        max_queued_steps: completed rows kept while the trainer is busy; beyond it the oldest
            are dropped (counted in `num_steps_dropped`).
        collect: keep rows for training (False: only episode statistics, for `rlx serve`).
    """

    def __init__(self, max_open_episodes: int = 10_000, episode_timeout_s: float = 600.0,
                 max_queued_steps: int = 1_000_000, collect: bool = True):
        self._lock = threading.Condition()
        self._open: dict[str, _Episode] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._rows: list[_Row] = []
        self._stats: list[tuple[float, int]] = []
        self._numbers = itertools.count(1)
        self.max_open_episodes = int(max_open_episodes)
        self.episode_timeout_s = float(episode_timeout_s)
        self.max_queued_steps = int(max_queued_steps)
        self.collect = bool(collect)
        self.num_steps = 0  # rows completed (training or not)
        self.num_steps_dropped = 0
        self.num_episodes_expired = 0
        self._last_reap = time.monotonic()

    # ------------------------------------------------------------------ episode commands

    def start(self, key: str | None, training_enabled: bool) -> str:
        """Open an episode (a fresh id when `key` is None); returns its id."""
        with self._lock:
            self._reap()
            key = uuid.uuid4().hex if key is None else key
            if key in self._open:
                raise RequestError(409, f"episode {key!r} is already started.")
            if key in self._finished:
                raise RequestError(409, f"episode {key!r} has already completed.")
            if len(self._open) >= self.max_open_episodes:
                raise RequestError(429, f"{len(self._open)} episodes are open, the most this server keeps "
                                        "(max_open_episodes): end episodes before starting new ones.")
            self._open[key] = _Episode(key, next(self._numbers), bool(training_enabled), time.monotonic())
            return key

    def get(self, key: str) -> _Episode:
        """An open episode (RequestError 404/409 when unknown or finished)."""
        with self._lock:
            return self._get(key)

    def _get(self, key: str) -> _Episode:
        episode = self._open.get(key)
        if episode is None:
            if key in self._finished:
                raise RequestError(409, f"episode {key!r} has already completed.")
            raise RequestError(404, f"episode {key!r} is not open: call start_episode() first (an episode idle "
                                    f"for more than {self.episode_timeout_s:g} s is dropped).")
        episode.last_seen = time.monotonic()
        return episode

    def act(self, key: str, obs: np.ndarray, action: np.ndarray, logp: float | None,
            dist_inputs: np.ndarray | None) -> None:
        """Record `obs` (completing the pending step) and the action taken for it."""
        with self._lock:
            episode = self._get(key)
            self._complete(episode, obs, terminated=False, truncated=False)
            episode.obs, episode.action, episode.logp, episode.dist_inputs = obs, action, logp, dist_inputs
            episode.reward = 0.0

    def add_reward(self, key: str, reward: float) -> None:
        """Add a reward to the episode's last action (and its return)."""
        with self._lock:
            episode = self._get(key)
            episode.reward += reward
            episode.episode_return += reward

    def end(self, key: str, obs: np.ndarray, truncated: bool) -> None:
        """Finish the episode at `obs` (terminated, or truncated: cut by a time limit)."""
        with self._lock:
            episode = self._get(key)
            self._complete(episode, obs, terminated=not truncated, truncated=truncated)
            del self._open[key]
            self._remember_finished(key)
            self._stats.append((episode.episode_return, episode.length))

    def _complete(self, episode: _Episode, next_obs: np.ndarray, terminated: bool, truncated: bool) -> None:
        if episode.obs is None:
            return
        row = _Row(episode.obs, episode.action, episode.reward, next_obs, terminated, truncated, episode.number,
                   episode.length, episode.logp, episode.dist_inputs)
        episode.length += 1
        episode.obs = None
        self.num_steps += 1
        if not (self.collect and episode.training_enabled):
            return
        self._rows.append(row)
        if len(self._rows) > self.max_queued_steps:
            drop = len(self._rows) - self.max_queued_steps
            del self._rows[:drop]
            self.num_steps_dropped += drop
        self._lock.notify_all()

    def _remember_finished(self, key: str) -> None:
        self._finished[key] = None
        if len(self._finished) > _FINISHED_MEMORY:
            self._finished.popitem(last=False)

    def _reap(self) -> None:
        """Drop episodes whose client has not been heard of for episode_timeout_s."""
        now = time.monotonic()
        if now - self._last_reap < min(1.0, self.episode_timeout_s / 4):
            return
        self._last_reap = now
        stale = [k for k, e in self._open.items() if now - e.last_seen > self.episode_timeout_s]
        for key in stale:
            del self._open[key]
            self._remember_finished(key)
        self.num_episodes_expired += len(stale)

    # ------------------------------------------------------------------ trainer side

    @property
    def num_open_episodes(self) -> int:
        """Episodes started and not yet ended (nor expired)."""
        with self._lock:
            return len(self._open)

    def wait_rows(self, min_rows: int, timeout_s: float, idle_timeout_s: float) -> int:
        """Wait until `min_rows` rows are queued, or `idle_timeout_s` passed with at least one;
        gives up after `timeout_s` (returns the rows queued then)."""
        start = time.monotonic()
        with self._lock:
            while True:
                self._reap()
                n = len(self._rows)
                waited = time.monotonic() - start
                if n >= min_rows or (n and waited >= idle_timeout_s) or waited >= timeout_s:
                    return n
                self._lock.wait(timeout=min(0.25, max(0.01, timeout_s - waited)))

    def drain(self) -> SampleBatch | None:
        """The queued rows as a flat SampleBatch (each episode's rows together, in order), or
        None when there are none. The behaviour columns are there only when every row has them."""
        with self._lock:
            rows, self._rows = self._rows, []
        if not rows:
            return None
        rows.sort(key=lambda r: (r.number, r.t))
        batch = {
            Columns.OBS: np.stack([r.obs for r in rows]),
            Columns.NEXT_OBS: np.stack([r.next_obs for r in rows]),
            Columns.ACTIONS: np.stack([r.action for r in rows]),
            Columns.REWARDS: np.asarray([r.reward for r in rows], np.float32),
            Columns.TERMINATEDS: np.asarray([r.terminated for r in rows], bool),
            Columns.TRUNCATEDS: np.asarray([r.truncated for r in rows], bool),
            EPS_ID: np.asarray([r.number for r in rows], np.int64),
            T: np.asarray([r.t for r in rows], np.int64),
        }
        if all(r.logp is not None and r.dist_inputs is not None for r in rows):
            batch[Columns.ACTION_LOGP] = np.asarray([r.logp for r in rows], np.float32)
            batch[Columns.ACTION_DIST_INPUTS] = np.stack([r.dist_inputs for r in rows])
        return SampleBatch(batch)

    def take_episode_stats(self) -> list[tuple[float, int]]:
        """(return, length) of the episodes finished since the last call."""
        with self._lock:
            stats, self._stats = self._stats, []
        return stats

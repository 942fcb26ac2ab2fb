"""Offline output written by an evaluation EnvRunner: what it samples, into `output`.

The training EnvRunnerGroup's batches are written on the driver (rlx.offline.offline_io). An
evaluation EnvRunner samples on its own (a thread of the driver or a Ray actor) and hands back
only its metrics, so it writes what it samples itself, as every EnvRunner of a config with
`output` does in RLlib 2.60 (its OfflineSingleAgentEnvRunner records each `sample()` call).
Each runner has its own OutputWriter (files named by its worker index, so runners never share
a file) with the config's record settings (output_write_episodes, output_max_rows_per_file,
output_write_remaining_data); `close_runner_output` completes its files (the Algorithm calls it
on every evaluation runner when it stops).
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

import numpy as np

from rlx.core.columns import Columns
from rlx.core.sample_batch import SampleBatch
from rlx.env.runner.flat_rows import EpisodeTracker, to_sample_batch
from rlx.offline.input_factory import make_output_writer
from rlx.offline.io_context import IOContext
from rlx.offline.records import check_multi_agent_output

#: Seed offset of an evaluation runner's episode ids (the driver's writer uses +307).
_EPISODE_ID_SEED = 331

_outputs: "weakref.WeakKeyDictionary[Any, RunnerOutput]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class RunnerOutput:
    """The OutputWriter of one EnvRunner and the episode ids of the rows it writes.

    Args:
        runner: the EnvRunner whose samples are written (its config's `output` settings, its
            worker index in the file names).
        log_dir: the directory `output="logdir"` writes to (the Algorithm's log dir).
    """

    def __init__(self, runner: Any, log_dir: str | Callable[[], str] | None = None):
        config = runner.config
        if isinstance(getattr(runner, "slots", None), dict):  # a multi-agent runner
            check_multi_agent_output(config)
        seed = getattr(config, "seed", None)
        index = int(getattr(runner, "worker_index", 0) or 0)
        self._tracker = EpisodeTracker(None if seed is None else int(seed) + _EPISODE_ID_SEED + index)
        self._episode_ids: dict[str, int] = {}
        self.ioctx = IOContext(log_dir=log_dir, config=config, worker_index=index, worker=runner)
        self.writer = make_output_writer(self.ioctx)

    def write(self, samples: Any, fresh_episodes: bool) -> None:
        """Write what one `sample()` call returned: rlx's time-major batch or a list of episodes.
        `fresh_episodes`: the call started new episodes (sample(num_episodes=...) resets the envs),
        so no row continues an episode of an earlier call."""
        if fresh_episodes:
            self._tracker.reset()
        if isinstance(samples, list):
            rows = self._episode_rows(samples)
        else:
            rows = to_sample_batch(samples, self._tracker)
        if rows is not None and _has_rows(rows):
            self.writer.write(rows)

    def _episode_rows(self, episodes: list[Any]) -> SampleBatch | None:
        """Flat rows of single-agent episodes (one episode's steps after another), with an
        integer `eps_id` per episode (the same for every chunk of one episode)."""
        parts = [self._rows_of(e) for e in episodes if len(e) > 0]
        if not parts:
            return None
        return SampleBatch({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})

    def _rows_of(self, episode: Any) -> dict[str, np.ndarray]:
        if not hasattr(episode, "get_observations") or hasattr(episode, "agent_episodes"):
            raise TypeError(f"evaluation output: a sample() call returned a {type(episode).__name__}; rlx writes "
                            "the rows of SingleAgentEpisodes or of its time-major batches.")
        n = len(episode)
        obs = np.asarray(episode.get_observations(slice(0, n + 1)))
        eps_id = self._episode_ids.get(episode.id_)
        if eps_id is None:
            eps_id = self._episode_ids[episode.id_] = self._tracker.new_ids(1)
        t0 = int(getattr(episode, "t_started", 0) or 0)
        terminateds = np.zeros(n, bool)
        truncateds = np.zeros(n, bool)
        terminateds[-1], truncateds[-1] = episode.is_terminated, episode.is_truncated
        rows = {Columns.OBS: obs[:-1], Columns.NEXT_OBS: obs[1:],
                Columns.ACTIONS: np.asarray(episode.get_actions(slice(0, n))),
                Columns.REWARDS: np.asarray(episode.get_rewards(slice(0, n)), np.float32),
                Columns.TERMINATEDS: terminateds, Columns.TRUNCATEDS: truncateds,
                Columns.EPS_ID: np.full(n, eps_id, np.int64), Columns.T: np.arange(t0, t0 + n, dtype=np.int64)}
        for key in episode.extra_model_outputs:
            rows[key] = np.asarray(episode.get_extra_model_outputs(key, slice(0, n)))
        if episode.is_done:
            self._episode_ids.pop(episode.id_, None)
        return rows

    def close(self) -> None:
        """Complete the writer's files (with output_write_remaining_data, the buffered rest too)."""
        close = getattr(self.writer, "close", None)
        if close is not None:
            close()


def record_runner_sample(runner: Any, samples: Any, fresh_episodes: bool,
                         log_dir: str | Callable[[], str] | None = None) -> None:
    """Write `samples` (what `runner.sample()` returned) into the runner's config's `output`,
    through the runner's own RunnerOutput (made on first use). Nothing when `output` is None."""
    if getattr(runner.config, "output", None) is None:
        return
    with _lock:
        out = _outputs.get(runner)
        if out is None:
            out = _outputs[runner] = RunnerOutput(runner, log_dir)
    out.write(samples, fresh_episodes)


def close_runner_output(runner: Any) -> None:
    """Complete the files `runner` wrote (nothing when it wrote none)."""
    with _lock:
        out = _outputs.pop(runner, None)
    if out is not None:
        out.close()


def _has_rows(batch: Any) -> bool:
    policy_batches = getattr(batch, "policy_batches", None)
    if policy_batches is not None:
        return any(len(b) for b in policy_batches.values())
    return len(batch) > 0

"""OfflineIO: an Algorithm's offline input and output, between its EnvRunnerGroup and its Learner.

Everything an Algorithm trains on comes from `EnvRunnerGroup.sample()`. With offline
settings the group hands that call to its OfflineIO, which

- reads the batch from the `input_` reader (files, a mix with the envs, a user reader)
  instead of sampling, when `input_` is not "sampler", turned into the time-major batch
  Learners train on (rlx.offline.training_batch); and
- writes every batch it returns to the `output` writer, as RLlib's flat rows with episode
  ids (rlx.offline.episode_rows).

Both happen on the driver, whatever runs the envs (local or remote EnvRunners), so the
writer sees every sampled step once and the files are written by one process.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from rlx.core.sample_batch import SampleBatch, as_multi_agent, batch_kind
from rlx.offline.behaviour import fill_behaviour_columns
from rlx.offline.concat import concat_flat, num_rows
from rlx.offline.episode_rows import EpisodeTracker, to_sample_batch
from rlx.offline.input_factory import SAMPLER, input_mentions_sampler, make_input_reader, make_output_writer
from rlx.offline.io_context import IOContext
from rlx.offline.record_checks import check_record, record_has_rows
from rlx.offline.records import check_multi_agent_output
from rlx.offline.spaces import OfflineDataError, check_batch, spaces_of
from rlx.offline.training_batch import to_training_batch
from rlx.utils.errors import NotSupportedYetError

logger = logging.getLogger("rlx")

#: Batches without rows an input reader may return in a row before `sample()` gives up on it.
MAX_EMPTY_READS = 1000

#: fn(num_timesteps, explore) -> time-major batch: the group's own sampling of its envs.
SampleFn = Callable[[Any, Any], Any]


class OfflineIO:
    """The input reader and output writer of one training EnvRunnerGroup.

    Args:
        group: the EnvRunnerGroup (its local EnvRunner gives the policies' spaces).
        config: the Algorithm's frozen config.
        log_dir: a callable returning the Algorithm's log dir (for output='logdir'), called
            when the first batch is written.
    """

    def __init__(self, group: Any, config: Any, log_dir: Callable[[], str]):
        self._group = group
        self._config = config
        seed = config.seed
        self._tracker = EpisodeTracker(None if seed is None else int(seed) + 307)
        self._resets = group.num_resets
        self._call: tuple[Any, Any] = (None, None)
        self._sample_envs: SampleFn | None = None
        worker = group.local_env_runner
        self._multi_agent = isinstance(getattr(worker, "slots", None), dict)
        if self._multi_agent:
            check_multi_agent_output(config)
        self.ioctx = IOContext(log_dir=log_dir, config=config, worker_index=0, worker=worker,
                               sampler=self._sampled_rows)
        self._reader: Any = None
        #: Whether some batches come from the envs (input_ is or mixes in 'sampler').
        self.samples_envs = input_mentions_sampler(config.input_)
        self._writer: Any = None
        self._writer_failed = False
        self._normalize_actions = bool(config.normalize_actions) and not config.actions_in_input_normalized
        self._keep_postprocessed = not config.postprocess_inputs
        self._warned_behaviour = False

    @property
    def _spaces(self) -> dict:
        """The policies' spaces now (add_policy may add policies while training)."""
        return spaces_of(self._group.local_env_runner)

    @property
    def reader(self) -> Any:
        """The input reader, None when input_ is 'sampler' (the group samples its envs). Built on
        first use: an Algorithm restored to act (`rlx evaluate`) needs no input files."""
        if self._reader is None and self._config.input_ != SAMPLER:
            self._reader = make_input_reader(self.ioctx)
        return self._reader

    @property
    def writer(self) -> Any:
        """The OutputWriter (created on first use), or None without `output`."""
        if self._writer is None and self._config.output is not None and not self._writer_failed:
            try:
                self._writer = make_output_writer(self.ioctx)
            except BaseException:
                self._writer_failed = True  # do not retry on every batch; the error was raised once
                raise
        return self._writer

    def sample(self, num_timesteps: int | None, explore: bool | None, sample_envs: SampleFn) -> Any:
        """The next training batch: sampled by `sample_envs` (input 'sampler') or read from the
        input; written to the output either way."""
        if self._config.input_ == SAMPLER:
            batch = sample_envs(num_timesteps, explore)
            if self._config.output is not None:
                self._write(self._rows(batch))
            return batch
        self._sample_envs, self._call = sample_envs, (num_timesteps, explore)
        try:
            rows = self._read(num_timesteps)
        finally:
            self._sample_envs = None
        if self._config.output is not None:
            self._write(rows)
        batch = to_training_batch(rows, self._spaces, type(self.reader).__name__, multi_agent=self._multi_agent,
                                  normalize_actions=self._normalize_actions,
                                  keep_postprocessed=self._keep_postprocessed)
        self._fill_behaviour_columns(batch)
        return batch

    def _fill_behaviour_columns(self, batch: Any) -> None:
        """Compute action_logp / action_dist_inputs the records lack with the current policy."""
        module = self._group.local_env_runner.module
        one_module = batch_kind(batch) is SampleBatch  # a single-agent run's: its runner's one module
        for pid, columns in as_multi_agent(batch).policy_batches.items():
            added = fill_behaviour_columns(columns, module if one_module else module[pid])
            if added and not self._warned_behaviour:
                self._warned_behaviour = True
                logger.warning("The offline input has no %s column(s): they are computed with the current policy "
                               "(the data counts as on-policy for the update).", " or ".join(added))

    def _read(self, num_timesteps: int | None) -> Any:
        """Flat rows of at least `num_timesteps` steps (one reader batch when None). A reader that
        returns MAX_EMPTY_READS batches without rows in a row raises OfflineDataError."""
        batches: list[Any] = []
        count = empty = 0
        count_by = self._config.count_steps_by
        spaces = self._spaces
        name = type(self.reader).__name__
        while not batches or (num_timesteps is not None and count < num_timesteps):
            batch = self.reader.next()
            where = f"a batch of the input reader {name}"
            check_record(batch, where)
            if not record_has_rows(batch):
                empty += 1
                if empty >= MAX_EMPTY_READS:
                    raise OfflineDataError(f"the input reader {name} returned {empty} batches without rows in a row; "
                                           "an input reader's next() must return rows (raise when the input is "
                                           "exhausted).")
                continue
            empty = 0
            check_batch(batch, spaces, where)
            batches.append(batch)
            count += num_rows(batch, count_by)
        return concat_flat(batches)

    def write_sampled(self, batch: Any, runner_index: int = 0) -> None:
        """Write a batch sampled outside `sample()` (asynchronous sampling), with the episodes of
        runner `runner_index` continued from its earlier batches."""
        if self._config.output is not None:
            self._write(self._rows(batch, f"runner{runner_index}/"))

    def check_sampling_mode(self, what: str) -> None:
        """NotSupportedYetError when the config reads offline input and the Algorithm samples
        in a way (`what`) that does not go through `sample()`."""
        if self._config.input_ != SAMPLER:
            raise NotSupportedYetError(f"input_ with {what}", "offline input feeds EnvRunnerGroup.sample()",
                                       fix="Leave input_='sampler' for this algorithm, or train on the files with "
                                           "a synchronous one (PPO, DQN, BC, MARWIL).")

    def _sampled_rows(self) -> Any:
        """The 'sampler' source of a mixed input: one round of sampling, as flat rows."""
        if self._sample_envs is None:
            raise RuntimeError("the 'sampler' input reads only while the EnvRunnerGroup samples.")
        return self._rows(self._sample_envs(*self._call))

    def _rows(self, batch: Any, key: str = "") -> Any:
        """A sampled time-major batch as flat rows, episodes continued from earlier batches (of
        the same `key`: a runner's, for asynchronous sampling)."""
        resets = self._group.num_resets
        if resets != self._resets:
            self._tracker.reset()  # the runners started new episodes everywhere
            self._resets = resets
        return to_sample_batch(batch, self._tracker, key)

    def _write(self, rows: Any) -> None:
        writer = self.writer
        if writer is not None and _has_rows(rows):
            writer.write(rows)

    def close(self) -> None:
        """Close the writer (completing its files) and the reader."""
        for part in (self._writer, self._reader):
            close = getattr(part, "close", None)
            if close is not None:
                close()


def _has_rows(batch: Any) -> bool:
    return any(len(b) for b in as_multi_agent(batch).policy_batches.values())


def attach_offline_io(algorithm: Any) -> OfflineIO | None:
    """Give the Algorithm's training EnvRunnerGroup an OfflineIO when its config reads offline
    input or writes output; returns it (None when neither is configured)."""
    config = algorithm.config
    if config.input_ == SAMPLER and config.output is None:
        return None
    io = OfflineIO(algorithm.env_runner_group, config, log_dir=lambda: algorithm.logdir)
    algorithm.env_runner_group.offline_io = io
    return io

"""Readers of datasets made by other tools: Minari datasets and D4RL-style HDF5 files.

Both serve their episodes as the flat SampleBatches rlx's own JsonReader serves (columns
`obs`, `new_obs`, `actions`, `rewards`, `terminateds`, `truncateds`, `eps_id`), so every
offline algorithm (BC, MARWIL, CQL) trains on them unchanged:

    config.offline_data(input_="minari:D4RL/door/human-v2")   # a Minari dataset id (local, or downloaded)
    config.offline_data(input_="/data/hopper-medium-v2.hdf5")  # a D4RL file (.hdf5 / .h5)

Each `next()` returns at least `train_batch_size` rows, walking through the episodes in an
order shuffled once per pass (seeded by the config's seed); a batch may end inside an
episode, which then continues in the next batch (rlx's offline batches treat such a cut as
a truncation, as with JSON files). Minari needs the `minari` extra, HDF5 files `h5py` (the `hdf5` extra).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.json_reader import reader_batch_size
from rlx.offline.spaces import OfflineDataError, check_batch, spaces_of
from rlx.core.sample_batch import SampleBatch
from rlx.utils.errors import install_hint

__all__ = ["D4RLReader", "EpisodeDatasetReader", "HDF5_EXTENSIONS", "MINARI_PREFIX", "MinariReader",
           "is_dataset_source", "dataset_reader"]

#: `input_="minari:<dataset id>"` reads a Minari dataset.
MINARI_PREFIX = "minari:"
#: Files read as D4RL-style HDF5 datasets.
HDF5_EXTENSIONS = (".hdf5", ".h5")


def is_dataset_source(source: Any) -> bool:
    """Whether `source` (one `input_` value) names a Minari dataset or HDF5 file(s)."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if isinstance(source, str):
        return source.startswith(MINARI_PREFIX) or source.lower().endswith(HDF5_EXTENSIONS)
    return False


def dataset_reader(source: Any, ioctx: IOContext) -> InputReader:
    """The reader of a source that `is_dataset_source`."""
    source = os.fspath(source)
    if source.startswith(MINARI_PREFIX):
        return MinariReader(source[len(MINARI_PREFIX):], ioctx)
    return D4RLReader(source, ioctx)


class EpisodeDatasetReader(InputReader):
    """Serves the rows of a dataset's episodes as flat SampleBatches of >= `train_batch_size` rows.

    Args:
        columns: one array per column (obs, new_obs, actions, rewards, terminateds, truncateds),
            every episode's rows one after the other.
        episode_starts: the first row of each episode (ascending, starting with 0).
        ioctx: the IOContext; with a `worker`, the data is checked against its policy's spaces.
        where: the dataset's name, for error messages.
    """

    def __init__(self, columns: dict[str, np.ndarray], episode_starts: np.ndarray, ioctx: IOContext | None,
                 where: str):
        self.ioctx = ioctx or IOContext()
        config = self.ioctx.config
        self.batch_size = reader_batch_size(config)
        self.where = where
        n = len(columns[Columns.REWARDS])
        if n == 0:
            raise OfflineDataError(f"{where} holds no steps.")
        self.columns = columns
        self.columns[Columns.EPS_ID] = np.repeat(np.arange(len(episode_starts), dtype=np.int64),
                                                 np.diff(np.append(episode_starts, n)))
        self._starts = np.asarray(episode_starts, np.int64)
        self._ends = np.append(self._starts[1:], n)
        seed = _get(config, "seed")
        self._rng = np.random.default_rng(None if seed is None else int(seed) + 223 + self.ioctx.worker_index)
        self._order = self._new_pass()
        self._episode = 0  # position in _order
        self._row = int(self._starts[self._order[0]])  # next row of the current episode
        if self.ioctx.worker is not None:
            check_batch(self._rows(np.arange(min(n, 64))), spaces_of(self.ioctx.worker), where)

    @property
    def num_episodes(self) -> int:
        """Episodes in the dataset."""
        return len(self._starts)

    @property
    def num_steps(self) -> int:
        """Steps (rows) in the dataset."""
        return len(self.columns[Columns.REWARDS])

    def _new_pass(self) -> np.ndarray:
        return self._rng.permutation(len(self._starts))

    def _rows(self, index: np.ndarray) -> SampleBatch:
        return SampleBatch({k: v[index] for k, v in self.columns.items()})

    def next(self) -> SampleBatch:
        """The next `batch_size` rows (at least), continuing where the last batch ended."""
        pieces, count = [], 0
        while count < self.batch_size:
            episode = self._order[self._episode]
            end = int(self._ends[episode])
            take = min(end - self._row, self.batch_size - count)
            pieces.append(np.arange(self._row, self._row + take))
            count += take
            self._row += take
            if self._row >= end:
                self._episode += 1
                if self._episode == len(self._order):
                    self._order, self._episode = self._new_pass(), 0
                self._row = int(self._starts[self._order[self._episode]])
        return self._rows(np.concatenate(pieces))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where}: {self.num_episodes} episodes, {self.num_steps} steps)"


class MinariReader(EpisodeDatasetReader):
    """A Minari dataset (`minari.load_dataset(dataset_id)`) as rlx offline input.

    Args:
        dataset_id: the dataset's id, e.g. "D4RL/door/human-v2" (found under MINARI_DATASETS_PATH;
            `download=True` fetches it from the Farama server first when it is missing).
        ioctx: the IOContext.
    """

    def __init__(self, dataset_id: str, ioctx: IOContext | None = None, download: bool = False):
        try:
            import minari
        except ImportError:
            raise OfflineDataError(f"input_='minari:...' needs the minari package: {install_hint('minari')}."
                                   ) from None
        try:
            dataset = minari.load_dataset(dataset_id, download=download)
        except (FileNotFoundError, ValueError) as err:
            raise OfflineDataError(f"Minari dataset {dataset_id!r} could not be loaded: {err}. List local datasets "
                                   "with `minari list local`; download one with `minari download <id>`.") from None
        obs, next_obs, actions, rewards, terms, truncs, starts = [], [], [], [], [], [], []
        row = 0
        for episode in dataset.iterate_episodes():
            observations = _leaf_array(episode.observations, f"Minari dataset {dataset_id!r}")
            steps = len(episode.rewards)
            starts.append(row)
            obs.append(observations[:steps])
            next_obs.append(observations[1:steps + 1])
            actions.append(np.asarray(episode.actions)[:steps])
            rewards.append(np.asarray(episode.rewards, np.float32))
            terms.append(np.asarray(episode.terminations, bool))
            truncs.append(np.asarray(episode.truncations, bool))
            row += steps
        if not starts:
            raise OfflineDataError(f"Minari dataset {dataset_id!r} holds no episodes.")
        columns = {Columns.OBS: np.concatenate(obs), Columns.NEXT_OBS: np.concatenate(next_obs),
                   Columns.ACTIONS: np.concatenate(actions), Columns.REWARDS: np.concatenate(rewards),
                   Columns.TERMINATEDS: np.concatenate(terms), Columns.TRUNCATEDS: np.concatenate(truncs)}
        self.dataset = dataset
        super().__init__(columns, np.asarray(starts), ioctx, f"Minari dataset {dataset_id!r}")


class D4RLReader(EpisodeDatasetReader):
    """A D4RL-style HDF5 file as rlx offline input: datasets `observations`, `actions`, `rewards`,
    `terminals` and `timeouts` (optional), and `next_observations` (optional: else the next row's
    observation, the last row of each episode dropped), all flat over the file's episodes.

    Args:
        path: the .hdf5 / .h5 file.
        ioctx: the IOContext.
    """

    def __init__(self, path: str, ioctx: IOContext | None = None):
        try:
            import h5py
        except ImportError:
            raise OfflineDataError(f"reading {path} needs h5py: {install_hint('hdf5')}.") from None
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isfile(path):
            raise OfflineDataError(f"offline input file {path} not found.")
        try:
            with h5py.File(path, "r") as f:
                missing = [k for k in ("observations", "actions", "rewards", "terminals") if k not in f]
                if missing:
                    raise OfflineDataError(f"{path} is not a D4RL-style dataset: it has no {missing} "
                                           f"(it has {sorted(f.keys())}).")
                data = {k: np.asarray(f[k]) for k in ("observations", "actions", "rewards", "terminals",
                                                      "timeouts", "next_observations") if k in f}
        except OSError as err:
            raise OfflineDataError(f"cannot read {path} as HDF5: {err}.") from None
        n = len(data["rewards"])
        if n == 0:
            raise OfflineDataError(f"HDF5 dataset {path} holds no steps.")
        if any(len(v) != n for v in data.values()):
            raise OfflineDataError(f"{path}: the datasets have different lengths "
                                   f"({ {k: len(v) for k, v in data.items()} }).")
        terms = data["terminals"].astype(bool).reshape(n)
        truncs = data["timeouts"].astype(bool).reshape(n) if "timeouts" in data else np.zeros(n, bool)
        obs = data["observations"]
        if "next_observations" in data:
            keep = np.arange(n)
            next_obs = data["next_observations"]
        else:
            # The next row's observation is the next observation (D4RL's convention). A timeout row's
            # successor is unknown, so it is dropped (as d4rl.qlearning_dataset does), and so is a
            # last row that is not terminal; the kept row before a dropped one ends its stretch as a
            # truncation, bootstrapped from the dropped row's observation.
            next_obs = np.concatenate([obs[1:], obs[-1:]])
            last = np.zeros(n, bool)
            last[-1] = True
            kept = ~truncs & (terms | ~last)
            next_dropped = np.append(~kept[1:], True)
            truncs = truncs | (kept & next_dropped & ~terms)
            keep = np.flatnonzero(kept)
        columns = {Columns.OBS: obs[keep].astype(np.float32, copy=False),
                   Columns.NEXT_OBS: next_obs[keep].astype(np.float32, copy=False),
                   Columns.ACTIONS: data["actions"][keep], Columns.REWARDS: data["rewards"][keep].astype(np.float32),
                   Columns.TERMINATEDS: terms[keep], Columns.TRUNCATEDS: truncs[keep]}
        ends = columns[Columns.TERMINATEDS] | columns[Columns.TRUNCATEDS]
        starts = np.concatenate([[0], np.flatnonzero(ends[:-1]) + 1]).astype(np.int64)
        super().__init__(columns, starts, ioctx, f"HDF5 dataset {path}")


def _leaf_array(observations: Any, where: str) -> np.ndarray:
    if isinstance(observations, (dict, tuple, list)):
        raise OfflineDataError(f"{where} has structured (Dict/Tuple) observations; rlx reads Minari datasets with "
                               "array observations so far.")
    return np.asarray(observations)


def _get(config: Any, key: str) -> Any:
    if hasattr(config, "get"):
        return config.get(key)
    return getattr(config, key, None)

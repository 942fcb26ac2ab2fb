"""OfflineData (RLlib's `ray.rllib.offline.offline_data`): reads `input_` through Ray Data and
serves train batches mapped by an OfflinePreLearner.

With Ray installed, `input_` is read with `ray.data.<input_read_method>` (so large datasets
stream from many files and nodes) and mapped with `Dataset.map_batches(prelearner_class)`.
Without Ray, rlx's embedded reader (rlx.offline.local_dataset) reads local Parquet/JSON files
in this process instead. `OfflineDataInput` feeds an Algorithm's training from an OfflineData,
as the config's other offline inputs (InputReaders) do.
"""
from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rlx.core.sample_batch import MultiAgentBatch, SampleBatch
from rlx.offline.input_reader import InputReader
from rlx.offline.local_dataset import LocalDataset
from rlx.offline.multi_agent_rows import strip_padding
from rlx.offline.offline_prelearner import OfflinePreLearner
from rlx.offline.spaces import OfflineDataError

logger = logging.getLogger(__name__)

#: The offline_data() settings that only the new-stack reading has: setting one of them (away from
#: its default) makes an Algorithm read input_ through OfflineData.
NEW_STACK_KEYS: dict[str, Any] = {
    "offline_data_class": None, "input_read_method": None, "input_read_method_kwargs": {}, "input_read_schema": {},
    "input_read_episodes": False, "input_read_sample_batches": False, "input_read_batch_size": None,
    "input_filesystem": None, "input_filesystem_kwargs": {}, "materialize_data": False, "map_batches_kwargs": {},
    "iter_batches_kwargs": {}, "ignore_final_observation": False, "prelearner_class": None,
    "prelearner_buffer_class": None, "prelearner_buffer_kwargs": {},
}


def uses_offline_data(config: Any) -> bool:
    """Whether the config asks for new-stack reading (a NEW_STACK_KEYS setting away from its default)."""
    return any(getattr(config, key, default) not in (default, None) for key, default in NEW_STACK_KEYS.items()
               if key != "input_read_method") or getattr(config, "input_read_method", None) is not None


def ray_data() -> Any:
    """The `ray.data` module when Ray Data is installed, else None."""
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.data") is None:
        return None
    import ray.data  # noqa: PLC0415 (heavy, optional)

    return ray.data


def _read_method_for(path: Any) -> str:
    first = path[0] if isinstance(path, (list, tuple)) and path else path
    text = os.fspath(first) if isinstance(first, os.PathLike) else str(first)
    return "read_json" if ".json" in Path(text).name.lower() or text.lower().endswith(".jsonl") else "read_parquet"


def _filesystem(name: Any, kwargs: dict) -> Any:
    """The pyarrow/fsspec filesystem object of `input_filesystem` (None for local files)."""
    if name is None or not isinstance(name, str):
        return name
    if name == "s3":
        import pyarrow.fs  # type: ignore[import-untyped]  # noqa: PLC0415

        return pyarrow.fs.S3FileSystem(**kwargs)
    if name == "gcs":
        import gcsfs  # type: ignore[import-not-found]  # noqa: PLC0415 (optional)

        return gcsfs.GCSFileSystem(**kwargs)
    if name == "abs":
        import adlfs  # type: ignore[import-not-found]  # noqa: PLC0415 (optional)

        return adlfs.AzureBlobFileSystem(**kwargs)
    raise OfflineDataError(f"Unknown input_filesystem {name!r}: use None (local), 'gcs', 's3', 'abs' or a "
                           "pyarrow.fs.FileSystem.")


class OfflineData:
    """The dataset of `config.input_` and the batches an offline Algorithm trains on.

    `sample(num_samples)` maps the raw rows with the config's `prelearner_class` (default
    OfflinePreLearner) on first use and returns the next MultiAgentBatch of `num_samples` rows,
    starting another pass over the data when one ends.
    """

    def __init__(self, config: Any) -> None:
        self.config = config
        self.is_multi_agent = bool(getattr(config, "is_multi_agent", False))
        input_ = config.input_
        self.path = list(input_) if isinstance(input_, (list, tuple)) else input_
        if not isinstance(self.path, (str, list, os.PathLike)):
            raise OfflineDataError(f"OfflineData reads files: input_ must be a path or a list of paths, got {input_!r}.")
        self.data_read_method = getattr(config, "input_read_method", None) or _read_method_for(self.path)
        self.data_read_method_kwargs = dict(getattr(config, "input_read_method_kwargs", None) or {})
        self.data_read_batch_size = getattr(config, "input_read_batch_size", None)
        self.materialize_data = bool(getattr(config, "materialize_data", False))
        self.materialize_mapped_data = bool(getattr(config, "materialize_mapped_data", True))
        self.filesystem = getattr(config, "input_filesystem", None)
        self.filesystem_object = _filesystem(self.filesystem, dict(getattr(config, "input_filesystem_kwargs", None)
                                                                   or {}))
        if self.filesystem_object is not None:
            self.data_read_method_kwargs["filesystem"] = self.filesystem_object
        self.data_is_mapped = False
        self.batch_iterators: Any = None
        self.map_batches_kwargs = {**self.default_map_batches_kwargs, **(getattr(config, "map_batches_kwargs", None)
                                                                         or {})}
        self.iter_batches_kwargs = {**self.default_iter_batches_kwargs,
                                    **(getattr(config, "iter_batches_kwargs", None) or {})}
        self.prelearner_class = getattr(config, "prelearner_class", None) or OfflinePreLearner
        self.locality_hints: Any = None
        self.learner_handles: Any = None
        self.module_spec: Any = None
        #: (observation_space, action_space) handed to the prelearner.
        self.spaces: tuple[Any, Any] = (getattr(config, "observation_space", None),
                                        getattr(config, "action_space", None))
        self.data = self._read()
        if self.materialize_data:
            self.data = self.data.materialize()

    def _read(self) -> Any:
        data_module = ray_data()
        if callable(self.data_read_method):
            return self.data_read_method(self.path, **self.data_read_method_kwargs)
        if data_module is None:
            return LocalDataset.read(self.data_read_method, self.path, **self.data_read_method_kwargs)
        reader: Callable | None = getattr(data_module, self.data_read_method, None)
        if reader is None:
            raise OfflineDataError(f"ray.data has no read method {self.data_read_method!r} (input_read_method); "
                                   "use e.g. 'read_parquet' or 'read_json'.")
        path = [os.fspath(p) for p in self.path] if isinstance(self.path, list) else os.fspath(self.path)
        return reader(path, **self.data_read_method_kwargs)

    @property
    def default_map_batches_kwargs(self) -> dict[str, Any]:
        """map_batches settings before config.map_batches_kwargs: as many mapping workers as Learners (>= 1)."""
        return {"concurrency": max(1, int(getattr(self.config, "num_learners", 0) or 0)), "zero_copy_batch": True}

    @property
    def default_iter_batches_kwargs(self) -> dict[str, Any]:
        """iter_batches settings before config.iter_batches_kwargs."""
        return {"prefetch_batches": 2}

    #: Whether a Learner runs the learner connector pieces on the sampled batches (an Algorithm's
    #: OfflineDataInput sets it): the prelearners then leave them out, so each runs once.
    learner_connector_in_learner: bool = False

    def prelearner_kwargs(self, module_state: dict[str, Any] | None = None) -> dict[str, Any]:
        """The constructor arguments of the prelearners `map_batches` builds: RLlib's config, spaces
        and module_state, and `learner_connector_in_learner=True` when a Learner runs the config's
        learner connector pieces (only then: a user prelearner without **kwargs keeps working)."""
        config = self.config
        spaces = getattr(self, "spaces", None) or (getattr(config, "observation_space", None),
                                                    getattr(config, "action_space", None))
        kwargs = {"config": config, "spaces": spaces, "module_state": module_state}
        if self.learner_connector_in_learner and getattr(config, "learner_connector", None) is not None:
            kwargs["learner_connector_in_learner"] = True
        return kwargs

    def sample(self, num_samples: int, return_iterator: bool = False, num_shards: int = 1,
               module_state: dict[str, Any] | None = None) -> Any:
        """The next MultiAgentBatch of `num_samples` mapped rows (with return_iterator: the
        dataset iterator(s), `num_shards` of them split over Learners)."""
        # (A subclass may set only the attributes RLlib's OfflineData.__init__ sets: those below default.)
        if not getattr(self, "data_is_mapped", False):
            self.data = self.data.map_batches(
                getattr(self, "prelearner_class", None) or getattr(self.config, "prelearner_class", None)
                or OfflinePreLearner,
                fn_constructor_kwargs=self.prelearner_kwargs(module_state),
                batch_size=getattr(self, "data_read_batch_size", None) or num_samples,
                **(getattr(self, "map_batches_kwargs", None) or {}),
            )
            self.data_is_mapped = True
            if getattr(self, "materialize_mapped_data", False):
                self.data = self.data.materialize()
        if return_iterator:
            if num_shards > 1:
                return self.data.streaming_split(n=num_shards, equal=True, locality_hints=self.locality_hints)
            return [self.data.iterator()]
        iter_kwargs = getattr(self, "iter_batches_kwargs", None) or {}
        if getattr(self, "batch_iterators", None) is None:
            self.batch_iterators = iter(self.data.iter_batches(batch_size=num_samples, _collate_fn=_collate,
                                                               **iter_kwargs))
        try:
            return next(self.batch_iterators)
        except StopIteration:
            logger.debug("Offline data exhausted; starting another pass.")
            self.batch_iterators = iter(self.data.iter_batches(batch_size=num_samples, _collate_fn=_collate,
                                                               **iter_kwargs))
            try:
                return next(self.batch_iterators)
            except StopIteration:
                raise OfflineDataError(f"The offline input {self.path!r} yields no batches.") from None


def _collate(batch: dict[str, np.ndarray]) -> MultiAgentBatch:
    """A flat {"module/column": array} batch as a MultiAgentBatch of SampleBatches."""
    modules: dict[str, dict[str, np.ndarray]] = {}
    for key, values in batch.items():
        module_id, _, column = key.partition("/")
        if not column:
            raise OfflineDataError(f"A prelearner returned the column {key!r}; train batches are flat dicts "
                                   "{'<module_id>/<column>': array}.")
        modules.setdefault(module_id, {})[column] = np.asarray(values)
    # (Several modules' rows come padded to one length, rlx.offline.multi_agent_rows.)
    policy_batches: dict[str, Any] = {mid: SampleBatch(strip_padding(columns)) for mid, columns in modules.items()}
    env_steps = sum(len(next(iter(columns.values()))) for columns in modules.values())
    return MultiAgentBatch(policy_batches, env_steps=env_steps)


class OfflineDataInput(InputReader):
    """An InputReader serving an Algorithm batches of `train_batch_size` rows from an OfflineData
    (`config.offline_data_class`, default OfflineData): a SampleBatch when one module is trained,
    else the MultiAgentBatch."""

    def __init__(self, config: Any) -> None:
        data_class = getattr(config, "offline_data_class", None) or OfflineData
        self.offline_data = data_class(config)
        # The Algorithm's Learner runs the learner connector pieces on every train batch.
        self.offline_data.learner_connector_in_learner = True
        self._size = int(getattr(config, "train_batch_size_per_learner", None) or config.train_batch_size)

    def next(self) -> Any:
        """The next batch of mapped offline rows."""
        batch = self.offline_data.sample(num_samples=self._size)
        if isinstance(batch, MultiAgentBatch) and len(batch.policy_batches) == 1:
            return next(iter(batch.policy_batches.values()))
        return batch

"""The checkpoint API of Algorithm (RLlib's Checkpointable methods of its Algorithm): save and
restore, from_checkpoint/from_hub, the algorithm-specific extra files and get_state/set_state.
The files are written and read by rlx.algorithms.checkpoint_writer and
rlx.algorithms.checkpointing (loaded on first use: checkpoint IO is not needed to train)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from rlx.algorithms.algorithm_state import algorithm_state, set_algorithm_state
from rlx.utils.hub import download_checkpoint

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm

AlgorithmT = TypeVar("AlgorithmT", bound="AlgorithmCheckpoints")


class SaveResult(str):
    """The path of a saved checkpoint (a str), also offering `.checkpoint.path` as RLlib 2.x does."""

    checkpoint: "SaveResult._Checkpoint"
    metrics: dict

    class _Checkpoint:
        def __init__(self, path: str):
            self.path = path

        def __repr__(self) -> str:
            return f"Checkpoint(path={self.path!r})"

    def __new__(cls, path: str, metrics: dict | None = None) -> "SaveResult":
        obj = super().__new__(cls, path)
        obj.checkpoint = cls._Checkpoint(path)
        obj.metrics = metrics or {}
        return obj


class AlgorithmCheckpoints:
    """Algorithm's checkpoint methods; Algorithm inherits them (subclasses override the
    `*_checkpoint_extras` hooks to store more, e.g. a replay buffer)."""

    if TYPE_CHECKING:  # what these methods use of the Algorithm they are part of
        iteration: int
        callbacks: Any

        @property
        def logdir(self) -> str: ...

    def save(self, checkpoint_dir: str | None = None, prevent_upload: bool = False) -> SaveResult:
        """Save a checkpoint (into `checkpoint_dir`, or a new dir under the run's logdir)."""
        path = self.save_to_path(checkpoint_dir)
        return SaveResult(path, metrics={"training_iteration": self.iteration})

    save_checkpoint = save

    def save_to_path(self, path: str | os.PathLike | None = None, *, state: dict | None = None) -> str:
        """Write a checkpoint directory at `path` (default: a new one under the logdir) and return the path."""
        from rlx.algorithms.checkpointing import write_algorithm_checkpoint  # checkpoint IO: loaded on use

        if path is None:
            path = os.path.join(self.logdir, f"checkpoint_{self.iteration:06d}")
        return write_algorithm_checkpoint(self, Path(path))

    def restore(self, checkpoint_path: Any) -> None:
        """Load a checkpoint of the same algorithm and config into this Algorithm.

        `checkpoint_path` is the checkpoint directory or a checkpoint object: Ray Tune's
        `result.checkpoint`, a Tune `Result`, or what `algo.save()` returned.
        """
        self.restore_from_path(checkpoint_path)

    def restore_from_path(self, path: Any, component: str | None = None) -> None:
        """Load weights, optimizer state, counters and filters from a checkpoint (a directory
        or a checkpoint object, as for `restore`). With `component` (RLlib's Checkpointable API),
        `path` is that component's folder and only it is loaded: the RLModule weights,
        "learner_group/learner/rl_module" or "learner_group/learner/rl_module/<module_id>"."""
        from rlx.algorithms.checkpointing import read_algorithm_checkpoint, restore_component  # checkpoint IO
        from rlx.utils.checkpoints import checkpoint_dir

        if component is not None:
            restore_component(self, checkpoint_dir(path), component)
            return
        read_algorithm_checkpoint(self, checkpoint_dir(path))
        self.callbacks.fire("on_checkpoint_loaded", algorithm=self)

    load_checkpoint = restore_from_path

    @classmethod
    def from_checkpoint(cls: type[AlgorithmT], path: Any, config_overrides: dict | None = None, *, env: Any = None,
                        policy_mapping_fn: Any = None, **kwargs: Any) -> AlgorithmT:
        """Rebuild an Algorithm (class, config, weights, state) from a checkpoint alone: its
        directory or a checkpoint object (Ray Tune's `result.checkpoint`, a Tune `Result`,
        what `algo.save()` returned).

        `env` and `policy_mapping_fn` replace the stored ones (as `config_overrides` does):
        give them when the checkpoint could not store them (a class defined inside a
        function, a creator lambda; the error says which)."""
        from rlx.algorithms.checkpointing import restored_algorithm  # checkpoint IO: loaded on use

        if kwargs:
            raise TypeError(f"from_checkpoint() got unexpected arguments: {', '.join(kwargs)}.")
        overrides = dict(config_overrides or {})
        for key, value in (("env", env), ("policy_mapping_fn", policy_mapping_fn)):
            if value is not None:
                overrides[key] = value
        return restored_algorithm(cls, path, overrides)

    @classmethod
    def from_hub(cls: type[AlgorithmT], repo_id: str, config_overrides: dict | None = None, *, revision: str | None = None,
                 token: str | None = None, local_dir: str | None = None) -> AlgorithmT:
        """Download the checkpoint in Hugging Face Hub repository `repo_id` (one `rlx hub push`
        uploaded) into `local_dir` (default ~/.cache/rlx/hub/<owner>--<name>) and load it as
        `from_checkpoint` does. Needs the `huggingface_hub` package (the `hub` extra)."""
        folder = download_checkpoint(repo_id, revision=revision, token=token, local_dir=local_dir)
        return cls.from_checkpoint(folder, config_overrides)

    def write_checkpoint_extras(self, directory: Path) -> list[str]:
        """Write algorithm-specific checkpoint files (e.g. the replay buffer) into `directory`.

        Returns their paths relative to `directory`; the base Algorithm has none.
        """
        return []

    def load_checkpoint_extras(self, directory: Path) -> Any:
        """Read and check what `write_checkpoint_extras` wrote, without applying it (None when
        there is nothing; the base Algorithm has nothing)."""
        return None

    def apply_checkpoint_extras(self, loaded: Any) -> None:
        """Apply what `load_checkpoint_extras` returned (the base Algorithm has nothing to apply)."""
        return None

    def read_checkpoint_extras(self, directory: Path) -> None:
        """Load what `write_checkpoint_extras` wrote into this Algorithm."""
        self.apply_checkpoint_extras(self.load_checkpoint_extras(directory))

    def get_state(self) -> dict[str, Any]:
        """JSON-safe algorithm state (counters, metrics, learner and runner extras)."""
        return algorithm_state(cast("Algorithm", self))

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state(). A field that does not fit raises StateFieldError naming it; the
        numbers are checked before anything changes.

        RLlib's partial form `{"learner_group": {"learner": {"rl_module": {module_id: weights}}}}`
        sets just those modules' weights (and syncs the EnvRunners).
        """
        set_algorithm_state(cast("Algorithm", self), state)

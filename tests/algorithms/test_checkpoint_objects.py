"""Checkpoint objects wherever a checkpoint path is accepted: Ray's `Checkpoint`
(`result.checkpoint`, `analysis.get_last_checkpoint()`), Tune's `Result`, rlx's
`SaveResult`, and plain paths, through `rlx.utils.checkpoints.checkpoint_dir` and the
Algorithm entry points (`restore`, `restore_from_path`, `load_checkpoint`,
`from_checkpoint`). No Ray cluster is started: Ray's objects are built by hand.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rlx.algorithms.algorithm import Algorithm, SaveResult
from rlx.algorithms.ppo import PPO
from rlx.utils.checkpoints import checkpoint_dir, read_metadata
from rlx.utils.errors import CheckpointError

from conftest import small_config

tune = pytest.importorskip("ray.tune")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, dict]:
    """A PPO checkpoint after two iterations: (its directory, iteration, weights)."""
    path = tmp_path_factory.mktemp("objects") / "checkpoint"
    algo = small_config().debugging(logger_config={"type": "rlx.loggers.NoopLogger"}).build()
    try:
        algo.train()
        algo.train()
        algo.save_to_path(path)
        return str(path), algo.iteration, algo.get_policy().get_weights()
    finally:
        algo.stop()


def ray_checkpoint(path: str) -> "tune.Checkpoint":
    return tune.Checkpoint(path)


def tune_result(path: str | None, trial_dir: str) -> "tune.Result":
    checkpoint = None if path is None else ray_checkpoint(path)
    return tune.Result(metrics={"training_iteration": 2}, checkpoint=checkpoint, error=None, path=trial_dir)


def assert_same_weights(algo: Algorithm, weights: dict) -> None:
    got = algo.get_policy().get_weights()
    assert got.keys() == weights.keys()
    for key, value in weights.items():
        np.testing.assert_array_equal(got[key], value)


# ------------------------------------------------------------------ checkpoint_dir


def test_checkpoint_dir_of_paths_and_objects(tmp_path):
    target = tmp_path / "ckpt"
    assert checkpoint_dir(str(target)) == target
    assert checkpoint_dir(target) == target
    assert checkpoint_dir(os.fsencode(target)) == target
    assert checkpoint_dir("~/ckpt") == Path.home() / "ckpt"
    assert checkpoint_dir(SaveResult(str(target))) == target
    assert checkpoint_dir(SaveResult(str(target)).checkpoint) == target
    # Ray's Checkpoint is os.PathLike, but its __fspath__ raises: its .path is used.
    checkpoint = ray_checkpoint(str(target))
    with pytest.raises(TypeError):
        os.fspath(checkpoint)
    assert checkpoint_dir(checkpoint) == target
    # Tune's Result: its checkpoint, not its .path (the trial directory).
    assert checkpoint_dir(tune_result(str(target), str(tmp_path))) == target


def test_checkpoint_dir_of_any_path_like(tmp_path):
    class PathLike:
        def __fspath__(self) -> str:
            return str(tmp_path / "x")

    assert checkpoint_dir(PathLike()) == tmp_path / "x"


def test_a_result_without_checkpoint_says_how_to_save_one(tmp_path):
    with pytest.raises(CheckpointError, match=r"Result holds no checkpoint.*checkpoint_at_end=True"):
        checkpoint_dir(tune_result(None, str(tmp_path)))


def test_a_remote_ray_checkpoint_says_to_download_it():
    remote = ray_checkpoint("mock://bucket/run/checkpoint_000001")
    with pytest.raises(CheckpointError, match=r"mock://.*checkpoint_000001 is on a remote filesystem.*"
                                              r"Algorithm\.from_checkpoint\(checkpoint\.to_directory\(\)\)"):
        checkpoint_dir(remote)
    with pytest.raises(CheckpointError, match="remote filesystem"):
        Algorithm.from_checkpoint(remote)


@pytest.mark.parametrize("value", [{"path": "x"}, 3, None])
def test_checkpoint_dir_rejects_other_types_naming_what_it_takes(value):
    expected = r"directory path \(str or pathlib\.Path\) or a checkpoint object with a \.path"
    with pytest.raises(TypeError, match=expected):
        checkpoint_dir(value)


def test_read_metadata_takes_a_ray_checkpoint(saved):
    path, _, _ = saved
    assert read_metadata(ray_checkpoint(path))["format"] == "rlx-checkpoint"


# ------------------------------------------------------------------ Algorithm entry points


def test_from_checkpoint_takes_a_ray_checkpoint_and_a_tune_result(saved, tmp_path):
    path, iteration, weights = saved
    for given in (ray_checkpoint(path), tune_result(path, str(tmp_path))):
        algo = PPO.from_checkpoint(given)
        try:
            assert algo.iteration == iteration
            assert_same_weights(algo, weights)
        finally:
            algo.stop()


@pytest.mark.parametrize("method", ["restore", "restore_from_path", "load_checkpoint"])
def test_restore_methods_take_a_ray_checkpoint(saved, method):
    path, iteration, weights = saved
    algo = small_config().debugging(logger_config={"type": "rlx.loggers.NoopLogger"}).build()
    try:
        assert algo.iteration == 0
        getattr(algo, method)(ray_checkpoint(path))
        assert algo.iteration == iteration
        assert_same_weights(algo, weights)
    finally:
        algo.stop()


def test_restore_takes_a_tune_result_and_a_save_result(saved, tmp_path):
    path, iteration, _ = saved
    algo = small_config().debugging(logger_config={"type": "rlx.loggers.NoopLogger"}).build()
    try:
        algo.restore(tune_result(path, str(tmp_path)))
        assert algo.iteration == iteration
        algo.train()
        algo.restore(SaveResult(path))
        assert algo.iteration == iteration
    finally:
        algo.stop()


def test_a_missing_checkpoint_object_names_its_directory(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(CheckpointError, match=f"Checkpoint directory does not exist: {missing}"):
        Algorithm.from_checkpoint(ray_checkpoint(str(missing)))

"""Checkpoints: save/restore/from_checkpoint, the on-disk layout, safety and error messages.

Requirements: DESIGN.md ("Checkpoint layout", principle 5) and the seeds' checkpoint and
`Algorithm.from_checkpoint` sections.
"""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlx
from rlx import register_env
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPO, PPOConfig
from rlx.utils.checkpoints import FORMAT_VERSION
from rlx.utils.errors import CheckpointError

from conftest import BATCH, small_config

POLICY_DIR = Path("policies") / "default_policy"


@pytest.fixture
def trained_algo():
    algo = small_config().build()
    algo.train()
    algo.train()
    yield algo
    algo.stop()


@pytest.fixture
def checkpoint(trained_algo, tmp_path):
    """A checkpoint directory of `trained_algo`, saved after two iterations."""
    return trained_algo.save(str(tmp_path / "ckpt"))


def observations(n: int = 30) -> np.ndarray:
    return np.random.default_rng(7).uniform(-0.5, 0.5, size=(n, 4)).astype(np.float32)


def deterministic_actions(algo) -> list[int]:
    return [int(algo.compute_single_action(o, explore=False)) for o in observations()]


def assert_same_weights(a, b):
    wa, wb = a.get_weights()["default_policy"], b.get_weights()["default_policy"]
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


def assert_weights_differ(a, b):
    wa, wb = a.get_weights()["default_policy"], b.get_weights()["default_policy"]
    assert any(not np.array_equal(wa[k], wb[k]) for k in wa)


# ----------------------------------------------------------------------------- save / load


def test_save_returns_a_path_string_with_checkpoint_attribute(trained_algo, tmp_path):
    result = trained_algo.save(str(tmp_path / "ckpt"))
    assert isinstance(result, str)
    assert result.checkpoint.path == str(result)
    assert os.path.isdir(result)


def test_save_without_a_directory_writes_under_rlx_results_dir(trained_algo, results_dir):
    path = trained_algo.save()
    assert Path(path).resolve().is_relative_to(results_dir.resolve())
    assert (Path(path) / "rlx_checkpoint.json").is_file()


def test_from_checkpoint_restores_weights_actions_and_config(trained_algo, checkpoint):
    restored = Algorithm.from_checkpoint(checkpoint)
    assert isinstance(restored, PPO)
    assert_same_weights(trained_algo, restored)
    assert deterministic_actions(restored) == deterministic_actions(trained_algo)
    assert restored.config.to_dict() == trained_algo.config.to_dict()
    assert restored.config.train_batch_size == BATCH
    assert restored.config.seed == 0
    assert restored.training_iteration == trained_algo.training_iteration
    restored.stop()


def test_from_checkpoint_accepts_the_checkpoint_object_and_algorithm_subclass(trained_algo, checkpoint):
    restored = PPO.from_checkpoint(checkpoint.checkpoint)
    assert_same_weights(trained_algo, restored)
    restored.stop()


def test_training_counters_continue_after_from_checkpoint(trained_algo, checkpoint):
    saved_iteration = trained_algo.training_iteration
    last = trained_algo.train()  # the original, one iteration after the save
    restored = Algorithm.from_checkpoint(checkpoint)
    result = restored.train()
    assert result["training_iteration"] == saved_iteration + 1 == last["training_iteration"]
    assert result["num_env_steps_sampled_lifetime"] == last["num_env_steps_sampled_lifetime"]
    assert result["num_env_steps_sampled_lifetime"] == (saved_iteration + 1) * BATCH
    assert result["num_env_steps_trained_lifetime"] == (saved_iteration + 1) * BATCH
    assert result["timesteps_total"] == result["num_env_steps_sampled_lifetime"]
    restored.stop()


def test_optimizer_state_is_restored(trained_algo, checkpoint):
    restored = Algorithm.from_checkpoint(checkpoint)
    original = trained_algo.learner.optimizer.state_dict()
    loaded = restored.learner.optimizer.state_dict()
    assert original["state"].keys() == loaded["state"].keys()
    for idx, entry in original["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(loaded["state"][idx][name], value, rtol=0, atol=0)
    restored.stop()


def test_restore_into_a_fresh_algorithm(trained_algo, checkpoint):
    fresh = small_config(seed=99).build()
    assert_weights_differ(fresh, trained_algo)
    fresh.restore(checkpoint)
    assert_same_weights(fresh, trained_algo)
    assert deterministic_actions(fresh) == deterministic_actions(trained_algo)
    assert fresh.training_iteration == trained_algo.training_iteration
    result = fresh.train()
    assert result["training_iteration"] == trained_algo.training_iteration + 1
    fresh.stop()


def test_save_to_path_and_restore_from_path(trained_algo, tmp_path):
    target = tmp_path / "explicit"
    path = trained_algo.save_to_path(target)
    assert Path(path).resolve() == target.resolve()
    fresh = small_config(seed=5).build()
    fresh.restore_from_path(target)
    assert_same_weights(fresh, trained_algo)
    fresh.stop()


def test_checkpoint_layout(checkpoint):
    root = Path(checkpoint)
    meta = json.loads((root / "rlx_checkpoint.json").read_text())
    assert isinstance(meta["format"], str) and meta["format"]
    assert meta["format_version"] == FORMAT_VERSION
    assert "PPO" in meta["algorithm_class"]
    assert rlx.__version__ in meta.values()
    for name in ("config.json", "algorithm_state.json"):
        assert (root / name).is_file(), name
        json.loads((root / name).read_text())  # plain JSON
    assert (root / POLICY_DIR / "module.safetensors").is_file()
    assert any(p.name.startswith("optimizer") for p in (root / POLICY_DIR).iterdir())
    state = json.loads((root / "algorithm_state.json").read_text())
    assert state  # counters and metrics state are stored


def test_weights_file_is_safetensors(trained_algo, checkpoint):
    from safetensors.numpy import load_file

    tensors = load_file(str(Path(checkpoint) / POLICY_DIR / "module.safetensors"))
    weights = trained_algo.get_weights()["default_policy"]
    assert tensors.keys() == weights.keys()
    for k in weights:
        np.testing.assert_array_equal(tensors[k], weights[k])


def test_loading_never_unpickles(trained_algo, checkpoint, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a checkpoint load used pickle")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    restored = Algorithm.from_checkpoint(checkpoint)
    restored.restore(checkpoint)
    assert_same_weights(trained_algo, restored)
    restored.stop()


def test_mean_std_filter_survives_a_round_trip(tmp_path):
    algo = small_config().env_runners(observation_filter="MeanStdFilter").build()
    algo.train()
    state = algo.env_runner.filter.get_state()
    assert state["count"] > 0
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    restored_state = restored.env_runner.filter.get_state()
    assert restored_state["count"] == state["count"]
    np.testing.assert_allclose(restored_state["mean"], state["mean"])
    np.testing.assert_allclose(restored_state["m2"], state["m2"])
    # Actions depend on the filter: they agree only if it was restored.
    assert deterministic_actions(restored) == deterministic_actions(algo)
    algo.stop()
    restored.stop()


def test_saving_twice_into_the_same_directory_replaces_it(trained_algo, tmp_path):
    parent = tmp_path / "checkpoints"
    target = parent / "latest"
    trained_algo.save(str(target))
    trained_algo.train()
    trained_algo.save(str(target))
    assert [p.name for p in parent.iterdir()] == ["latest"]  # no temp or old directories left
    restored = Algorithm.from_checkpoint(target)
    assert restored.training_iteration == 3
    assert_same_weights(restored, trained_algo)
    restored.stop()


def test_a_failed_save_leaves_the_previous_checkpoint_intact(trained_algo, tmp_path, monkeypatch):
    import rlx.algorithms.checkpoint_writer as checkpoint_writer

    parent = tmp_path / "checkpoints"
    target = parent / "latest"
    trained_algo.save(str(target))
    saved_iteration = trained_algo.training_iteration
    trained_algo.train()

    def failing_write(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_writer, "write_tensors", failing_write)
    with pytest.raises(OSError, match="disk full"):
        trained_algo.save(str(target))
    monkeypatch.undo()
    assert [p.name for p in parent.iterdir()] == ["latest"]
    restored = Algorithm.from_checkpoint(target)
    assert restored.training_iteration == saved_iteration
    restored.stop()


def test_restoring_into_a_different_model_raises_checkpoint_error(checkpoint):
    other = small_config(model={"fcnet_hiddens": [16]}).build()
    with pytest.raises(CheckpointError, match="module.safetensors"):
        other.restore(checkpoint)
    other.stop()


def test_export_native_model_files_writes_a_weights_only_model_pt(tmp_path):
    algo = small_config().checkpointing(export_native_model_files=True).build()
    algo.train()
    path = Path(algo.save(str(tmp_path / "ckpt")))
    # (policies/default_policy/model/ holds the exported TorchScript model: tests/policy/test_export.py)
    model_files = list((path / "policies" / "default_policy").glob("model.pt"))
    assert len(model_files) == 1
    state = torch.load(model_files[0], weights_only=True)
    weights = algo.get_weights()["default_policy"]
    assert set(state) == set(weights)
    for k in weights:
        np.testing.assert_array_equal(state[k].numpy(), weights[k])
    algo.stop()


def test_registered_env_name_round_trips(tmp_path):
    register_env("rlx_test_ckpt_registered_cartpole", lambda ctx: gym.make("CartPole-v1"))
    algo = small_config(env="rlx_test_ckpt_registered_cartpole").build()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    assert restored.config.env == "rlx_test_ckpt_registered_cartpole"
    assert_same_weights(restored, algo)
    algo.stop()
    restored.stop()


class TinyEnv(gym.Env):
    """A module-level env class: stored in config.json as an import path."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(action == 1), self.t >= 10, False, {}


def test_env_class_round_trips_as_an_import_path(tmp_path):
    algo = small_config(env=TinyEnv).build()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    assert restored.config.env is TinyEnv
    assert_same_weights(restored, algo)
    algo.stop()
    restored.stop()


def test_save_refuses_a_directory_with_other_files_and_deletes_nothing(trained_algo, tmp_path):
    target = tmp_path / "my_project"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match="not an rlx checkpoint"):
        trained_algo.save(str(target))
    assert (target / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_save_into_an_existing_empty_directory(trained_algo, tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    path = trained_algo.save(str(target))
    assert (Path(path) / "rlx_checkpoint.json").is_file()


def test_config_overrides_replace_stored_values(checkpoint):
    restored = Algorithm.from_checkpoint(checkpoint, config_overrides={"lr": 0.0123})
    assert restored.config.lr == pytest.approx(0.0123)
    assert restored.config.train_batch_size == BATCH
    assert restored.train()["learners"]["default_policy"]["curr_lr"] == pytest.approx(0.0123)
    restored.stop()


@pytest.mark.parametrize(
    "optimizer",
    [{"type": "sgd", "momentum": 0.9}, {"type": "adamw"}, {"type": "RMSprop", "alpha": 0.95}],
    ids=lambda o: o["type"],
)
def test_optimizer_state_round_trips_for_other_optimizers(tmp_path, optimizer):
    algo = small_config(optimizer=optimizer).build()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    assert type(restored.learner.optimizer) is type(algo.learner.optimizer)
    original, loaded = algo.learner.optimizer.state_dict(), restored.learner.optimizer.state_dict()
    assert original["param_groups"][0].keys() == loaded["param_groups"][0].keys()
    for key, value in original["param_groups"][0].items():
        if key != "params":
            assert loaded["param_groups"][0][key] == value, key
    for idx, entry in original["state"].items():
        for name, value in entry.items():
            torch.testing.assert_close(torch.as_tensor(loaded["state"][idx][name]), torch.as_tensor(value),
                                       rtol=0, atol=0)
    algo.stop()
    restored.stop()


# ----------------------------------------------------------------------------- errors


def test_missing_directory_raises_checkpoint_error(tmp_path):
    missing = tmp_path / "does_not_exist"
    with pytest.raises(CheckpointError, match="does_not_exist"):
        Algorithm.from_checkpoint(missing)


def test_restore_from_missing_directory_raises_checkpoint_error(tmp_path):
    algo = small_config().build()
    with pytest.raises(CheckpointError, match="does_not_exist"):
        algo.restore(tmp_path / "does_not_exist")
    algo.stop()


def test_missing_weights_file_is_named(checkpoint):
    (Path(checkpoint) / POLICY_DIR / "module.safetensors").unlink()
    with pytest.raises(CheckpointError, match="module.safetensors"):
        Algorithm.from_checkpoint(checkpoint)


def test_missing_weights_file_is_named_on_restore(checkpoint):
    (Path(checkpoint) / POLICY_DIR / "module.safetensors").unlink()
    algo = small_config().build()
    with pytest.raises(CheckpointError, match="module.safetensors"):
        algo.restore(checkpoint)
    algo.stop()


def test_missing_metadata_file_is_named(checkpoint):
    (Path(checkpoint) / "rlx_checkpoint.json").unlink()
    with pytest.raises(CheckpointError, match="rlx_checkpoint.json"):
        Algorithm.from_checkpoint(checkpoint)


@pytest.mark.parametrize("name", ["config.json", "algorithm_state.json", "rlx_checkpoint.json"])
def test_corrupt_json_file_is_named(checkpoint, name):
    (Path(checkpoint) / name).write_text('{"truncated": ')
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        Algorithm.from_checkpoint(checkpoint)


def test_corrupt_weights_file_is_named(checkpoint):
    (Path(checkpoint) / POLICY_DIR / "module.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="module.safetensors"):
        Algorithm.from_checkpoint(checkpoint)


def test_unknown_format_version_raises_checkpoint_error(checkpoint):
    meta_path = Path(checkpoint) / "rlx_checkpoint.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 999
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"(?i)format.version.*999"):
        Algorithm.from_checkpoint(checkpoint)


def test_env_lambda_cannot_be_stored_and_is_named(tmp_path):
    algo = small_config(env=lambda ctx: gym.make("CartPole-v1")).build()
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    with pytest.raises(CheckpointError, match="'env'"):
        Algorithm.from_checkpoint(path)
    restored = Algorithm.from_checkpoint(path, config_overrides={"env": "CartPole-v1"})
    assert_same_weights(restored, algo)
    assert restored.training_iteration == 1
    algo.stop()
    restored.stop()

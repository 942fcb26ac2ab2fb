"""Damaged checkpoints: every problem is a CheckpointError naming the file and the field, and
`restore()` loads all of a checkpoint or none of it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import save_trained_checkpoint
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import CheckpointError


def ppo_config() -> PPOConfig:
    return (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
            .training(train_batch_size=64, minibatch_size=32, num_epochs=1).debugging(seed=0))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PPO CartPole checkpoint after one iteration (tests damage copies of it)."""
    return save_trained_checkpoint(ppo_config(), tmp_path_factory.mktemp("integrity") / "pristine")


@pytest.fixture
def copy(checkpoint: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(checkpoint, target)
    return target


def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    result = edit(data)
    path.write_text(json.dumps(data if result is None else result))


WEIGHTS = "policies/default_policy/module.safetensors"


@pytest.mark.parametrize("file, edit, field", [
    ("config.json", lambda d: [1, 2, 3], "config"),
    ("config.json", lambda d: d.update(observation_space={"__space__": {"type": "Box", "shape": "x"}}),
     "observation_space"),
    ("config.json", lambda d: d.update(zzz={"__tuple__": 5}), "zzz"),
    ("algorithm_state.json", lambda d: d.update(counters="not a dict"), "counters"),
    ("algorithm_state.json", lambda d: d.update(iteration=1e308 * 10), "iteration"),
    ("algorithm_state.json", lambda d: d.update(iteration=-3), "iteration"),
    ("algorithm_state.json", lambda d: d.update(time_total_s="soon"), "time_total_s"),
    ("algorithm_state.json", lambda d: d.update(episodes_window=[[1.0]]), "episodes_window"),
    ("algorithm_state.json", lambda d: d["env_runner"].update(num_env_steps_sampled_lifetime="many"),
     "env_runner"),
    ("algorithm_state.json", lambda d: "a string", "algorithm state"),
    ("rlx_checkpoint.json", lambda d: d.update(files="config.json"), "files"),
    ("rlx_checkpoint.json", lambda d: d.update(files=["../../etc/passwd"]), "files"),
    ("rlx_checkpoint.json", lambda d: d.update(checksums=[1]), "checksums"),
    ("policies/default_policy/optimizer.json", lambda d: d.update(param_groups=[{"lr": 1e308 * 10}]),
     "param_groups"),
    ("policies/default_policy/optimizer.json", lambda d: d.update(tensor_keys=5), "optimizer"),
])
def test_a_wrongly_shaped_file_is_a_checkpoint_error_naming_file_and_field(copy, file, edit, field):
    edit_json(copy / file, edit)
    with pytest.raises(CheckpointError) as info:
        Algorithm.from_checkpoint(copy)
    message = str(info.value)
    assert Path(file).name in message, message
    assert field in message, message


def test_a_flipped_byte_in_the_weights_is_detected(copy):
    weights = copy / WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x40  # inside the last tensor's data: still a valid safetensors file
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="module.safetensors.*checksum"):
        Algorithm.from_checkpoint(copy)


def test_weights_with_nan_are_refused(copy):
    from safetensors.numpy import load_file, save_file

    weights = load_file(str(copy / WEIGHTS))
    name = sorted(weights)[0]
    weights[name] = np.full_like(weights[name], np.nan)
    save_file(weights, str(copy / WEIGHTS))
    edit_json(copy / "rlx_checkpoint.json", lambda d: d["checksums"].pop(WEIGHTS) and None)
    with pytest.raises(CheckpointError, match=f"module.safetensors: tensor '{name}' holds .* NaN"):
        Algorithm.from_checkpoint(copy)


def test_a_damaged_replay_buffer_file_is_a_checkpoint_error(tmp_path):
    from rlx.algorithms.dqn import DQNConfig

    config = (DQNConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .training(num_steps_sampled_before_learning_starts=32, train_batch_size=32)
              .checkpointing(store_buffer_in_checkpoints=True)
              .debugging(seed=0))
    algo = config.build()
    try:
        algo.train()
        path = Path(algo.save(str(tmp_path / "ckpt")).checkpoint.path)
    finally:
        algo.stop()
    buffer_json = next(path.glob("replay_buffer*.json"))
    edit_json(buffer_json, lambda d: {"nonsense": True})
    with pytest.raises(CheckpointError, match="replay"):
        Algorithm.from_checkpoint(path)


def test_an_algorithm_state_from_another_algorithm_is_refused(copy, tmp_path):
    from rlx.algorithms.dqn import DQNConfig

    algo = DQNConfig().environment("CartPole-v1").env_runners(num_env_runners=0).build()
    try:
        dqn = Path(algo.save(str(tmp_path / "dqn")).checkpoint.path)
    finally:
        algo.stop()
    shutil.copy(dqn / "algorithm_state.json", copy / "algorithm_state.json")
    with pytest.raises(CheckpointError, match="algorithm_state.json: field 'algorithm_class'.*DQN"):
        Algorithm.from_checkpoint(copy)


def test_restore_is_all_or_nothing(copy):
    edit_json(copy / "algorithm_state.json", lambda d: d.update(counters={"num_env_steps_sampled_lifetime": -1}))
    algo = ppo_config().build()
    try:
        for _ in range(2):
            algo.train()
        weights = {k: v.copy() for k, v in algo.learner.module.get_state().items()}
        optimizer_steps = [s.get("step") for s in algo.learner.optimizers["default"].state_dict()["state"].values()]
        counters = dict(algo._counters)
        with pytest.raises(CheckpointError, match="counters.num_env_steps_sampled_lifetime.*Nothing was loaded"):
            algo.restore(copy)
        assert algo.iteration == 2
        assert dict(algo._counters) == counters
        after = algo.learner.module.get_state()
        assert all(np.array_equal(weights[k], after[k]) for k in weights)
        assert [s.get("step") for s in algo.learner.optimizers["default"].state_dict()["state"].values()] == \
            optimizer_steps
        algo.train()  # still usable
    finally:
        algo.stop()


def test_a_checkpoint_without_checksums_still_loads(copy):
    edit_json(copy / "rlx_checkpoint.json", lambda d: d.pop("checksums") and None)
    algo = Algorithm.from_checkpoint(copy)
    try:
        assert algo.iteration == 1
    finally:
        algo.stop()

"""Shared test set-up: every test writes results under its own tmp dir, never ~/rlx_results."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlx.algorithms.ppo import PPOConfig

#: Train batch of the small configs: a train() call takes a few hundredths of a second.
BATCH = 256


@pytest.fixture(autouse=True)
def results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """RLX_RESULTS_DIR pointed at a per-test directory."""
    path = tmp_path / "rlx_results"
    monkeypatch.setenv("RLX_RESULTS_DIR", str(path))
    return path


def small_config(env="CartPole-v1", seed=0, **training) -> PPOConfig:
    """A PPO config that trains in a few hundredths of a second."""
    opts = dict(train_batch_size=BATCH, minibatch_size=64, num_epochs=2)
    opts.update(training)
    return PPOConfig().environment(env).training(**opts).debugging(seed=seed)


def save_trained_checkpoint(config: PPOConfig, path: Path) -> Path:
    """Build `config`, train one iteration, save a checkpoint to `path` and stop; returns `path`."""
    algo = config.build()
    try:
        algo.train()
        algo.save(str(path))
    finally:
        algo.stop()
    return path

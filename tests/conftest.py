"""Shared test set-up: every test writes results under its own tmp dir, never ~/rlx_results."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlx.algorithms.ppo import PPOConfig

# Tests live in folders that mirror rlx's packages; a few import helpers from a test module of
# another folder (`from test_callbacks import LogAcrobotAngle`), whichever folder pytest took first.
for _folder in sorted(Path(__file__).resolve().parent.iterdir()):
    if _folder.is_dir() and not _folder.name.startswith(("_", ".")) and str(_folder) not in sys.path:
        sys.path.append(str(_folder))

#: Train batch of the small configs: a train() call takes a few hundredths of a second.
BATCH = 256


def pytest_configure(config: pytest.Config) -> None:
    """Register the `slow` mark (learning and tuned-example tests; `-m "not slow"` leaves them out)."""
    config.addinivalue_line("markers", "slow: trains to a return threshold or runs for many seconds")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules that hold slow tests first, so that pytest-xdist's workers start the long
    tests early and finish together (a module stays in one piece: its fixtures are set up once)."""
    slow_modules = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: getattr(item, "module", None) not in slow_modules)


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

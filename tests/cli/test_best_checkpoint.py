"""`checkpoint_config`'s checkpoint_score_attribute / checkpoint_score_order / num_to_keep, as
Tune's CheckpointConfig: in `rlx train` flags, experiment files and Python runs. The kept
checkpoints are the best-scoring plus the latest, and the summary's best one exists on disk."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from cli_helpers import run_rlx
from rlx.algorithms.ppo import PPOConfig
from rlx.callbacks import RLlibCallback
from rlx.cli.experiments import load_experiment_file
from rlx.cli.outcome import RunSettings
from rlx.cli.train import run_experiment
from rlx.utils.errors import ConfigError

SMALL = {"train_batch_size": 64, "minibatch_size": 64, "num_epochs": 1}


def _config(scores):
    """PPO on CartPole with tiny batches whose results carry `fake_score`: scores[i] at iteration i + 1."""

    class FakeScore(RLlibCallback):
        def on_train_result(self, *, algorithm, result, **kwargs):
            result["fake_score"] = scores[algorithm.iteration - 1]

    return PPOConfig().environment("CartPole-v1").training(**SMALL).callbacks(FakeScore)


def _kept(trial_dir: Path) -> list[int]:
    return sorted(int(p.name.rsplit("_", 1)[1]) for p in trial_dir.iterdir() if p.name.startswith("checkpoint_"))


def _best_line(text: str) -> str:
    [line] = [ln for ln in text.splitlines() if ln.strip().startswith("Best:")]
    return line


@pytest.mark.parametrize("order, best", [("max", 2), ("min", 3)])
def test_python_run_keeps_the_best_checkpoints_and_the_latest(tmp_path, order, best):
    from rlx.cli.experiments import ExperimentSpec

    spec = ExperimentSpec(name="best", config=_config([3.0, 9.0, 1.0, 4.0, 2.0]), stop={"training_iteration": 5},
                          checkpoint_freq=1, keep_checkpoints_num=1, checkpoint_score_attribute="fake_score",
                          checkpoint_score_order=order)
    out = io.StringIO()
    outcome = run_experiment(spec, RunSettings(storage_path=str(tmp_path)), out)
    assert _kept(outcome.trial_dir) == sorted({best, 5})  # the best one and the latest
    assert outcome.best_checkpoint.endswith(f"checkpoint_{best:06d}") and Path(outcome.best_checkpoint).exists()
    assert outcome.best_checkpoint_score == {2: 9.0, 3: 1.0}[best]
    assert f"checkpoint_{best:06d} (fake_score=" in _best_line(out.getvalue())
    assert re.search(rf"rlx evaluate \S*checkpoint_{best:06d} ", out.getvalue())


def test_experiment_file_checkpoint_config_and_its_errors(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("""
exp:
  run: PPO
  env: CartPole-v1
  stop: {training_iteration: 3}
  config: {train_batch_size: 64, minibatch_size: 64, num_epochs: 1}
  checkpoint_config:
    checkpoint_frequency: 1
    num_to_keep: 1
    checkpoint_score_attribute: training_iteration
    checkpoint_score_order: min
""")
    [spec] = load_experiment_file(path)
    assert (spec.keep_checkpoints_num, spec.checkpoint_score_attribute, spec.checkpoint_score_order) == \
        (1, "training_iteration", "min")
    outcome = run_experiment(spec, RunSettings(storage_path=str(tmp_path)), io.StringIO())
    assert _kept(outcome.trial_dir) == [1, 3]  # iteration 1 scores best with "min"; 3 is the latest
    assert outcome.best_checkpoint.endswith("checkpoint_000001")

    script = tmp_path / "exp.py"
    script.write_text("from rlx.algorithms.ppo import PPOConfig\n"
                      "config = PPOConfig().environment('CartPole-v1')\n"
                      "checkpoint_config = {'num_to_keep': 2, 'checkpoint_score_attribute': 'episode_reward_mean'}\n")
    [spec] = load_experiment_file(script)
    assert (spec.keep_checkpoints_num, spec.checkpoint_score_attribute) == (2, "episode_reward_mean")

    path.write_text(path.read_text().replace("order: min", "order: lowest"))
    with pytest.raises(ConfigError, match="checkpoint_score_order must be 'max' or 'min', got 'lowest'"):
        load_experiment_file(path)


def test_cli_flags_keep_the_best_checkpoint(tmp_path):
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1",
                   "--config", '{"train_batch_size": 64, "minibatch_size": 64, "num_epochs": 1}',
                   "--stop", '{"training_iteration": 3}', "--checkpoint-freq", "1", "--keep-checkpoints-num", "1",
                   "--checkpoint-score-attribute", "training_iteration", "--checkpoint-score-order", "min",
                   results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    best = _best_line(proc.stdout).split()[1]
    assert best.endswith("checkpoint_000001") and Path(best).exists()
    [trial] = [p for p in (tmp_path / "default").iterdir() if p.is_dir()]
    assert _kept(trial) == [1, 3]


def test_the_best_checkpoint_is_never_deleted_and_a_missing_score_is_said(tmp_path):
    from rlx.cli.checkpoint_keeper import CheckpointKeeper

    keeper = CheckpointKeeper(num_to_keep=1, score_attribute="env_runners/episode_return_mean")
    scores = [500.0, 9.4, None, 9.3]  # the run collapses after its first checkpoint
    for i, score in enumerate(scores, start=1):
        path = tmp_path / f"checkpoint_{i:06d}"
        path.mkdir()
        keeper.add(str(path), i, {"env_runners": {} if score is None else {"episode_return_mean": score}})
        assert Path(keeper.best[0]).name == "checkpoint_000001" and Path(keeper.best[0]).exists()
        if i == 3:
            assert "has no numeric value in the result of iteration 3" in keeper.missing_score_note()
    assert keeper.missing_score_note() is None  # said once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_000001", "checkpoint_000004"]

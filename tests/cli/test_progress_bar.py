"""Progress within a training iteration: the sampling and learning loops report env steps and
updates while `train()` runs; the bar (rich) shows %, rate and ETA toward a step stop; Python
users turn it on with `config.reporting(progress_bar=True)` or RLX_PROGRESS_BAR=1."""
from __future__ import annotations

import io
import re
import time

import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.cli.progress import ProgressReporter, progress_goal
from rlx.utils.progress import ProgressGoal, TrainingProgress
from rlx.utils.progress_events import listening

SMALL = dict(train_batch_size=400, minibatch_size=100, num_epochs=2)


class Recorder:
    """A progress listener that keeps what it was told, and when."""

    def __init__(self):
        self.env_steps: list[int] = []
        self.updates = 0

    def on_env_steps(self, n: int) -> None:
        self.env_steps.append(n)

    def on_updates(self, n: int) -> None:
        self.updates += n


def _config(**training):
    return (PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2)
            .training(**{**SMALL, **training}).debugging(seed=0))


def test_progress_events_fire_during_an_iteration():
    algo = _config().build_algo()
    recorder = Recorder()
    try:
        with listening(recorder):
            result = algo.train()
    finally:
        algo.stop()
    # One report per vector step of the sampling loop (2 sub-envs), not one per iteration.
    assert len(recorder.env_steps) >= 100
    assert sum(recorder.env_steps) == result["num_env_steps_sampled_this_iter"] == 400
    assert recorder.updates == 2 * 4  # 2 epochs of 4 minibatches


def test_nothing_reports_outside_a_listening_block():
    algo = _config().build_algo()
    recorder = Recorder()
    try:
        with listening(recorder):
            pass
        algo.train()
    finally:
        algo.stop()
    assert recorder.env_steps == [] and recorder.updates == 0


def test_bar_shows_percent_rate_and_eta_toward_a_step_stop():
    goal = progress_goal({"timesteps_total": 10_000})  # an old name of num_env_steps_sampled_lifetime
    assert goal == ProgressGoal("env_steps", 10_000)
    bar = TrainingProgress(goal, stream=io.StringIO(), live=False)
    bar.begin_iteration(1, lifetime_steps=0, time_total_s=0.0, expected_steps=4000)
    time.sleep(0.05)
    bar.on_env_steps(2500)
    bar.on_updates(3)
    text = bar.text()
    assert "iter 1" in text and "25%" in text
    assert re.search(r"[\d,]+ steps/s", text) and re.search(r"ETA \d+:\d\d:\d\d", text)
    assert "2,500/4,000 steps, 3 updates" in text


def test_cli_reporter_bar_follows_train_toward_the_stop():
    out = io.StringIO()
    reporter = ProgressReporter(out, live=False, goal=progress_goal({"num_env_steps_sampled_lifetime": 800}))
    algo = _config().build_algo()
    try:
        reporter.update(algo.train())
        text = reporter.bar.text()
    finally:
        reporter.finish()
        algo.stop()
    assert "50%" in text and "400/400 steps, 8 updates" in text and "steps/s" in text
    assert re.search(r"^iter\s+1 \| steps\s+400", out.getvalue(), re.M)


def test_plain_bar_lines_during_a_long_iteration_without_a_terminal():
    out = io.StringIO()
    bar = TrainingProgress(ProgressGoal("iterations", 10), stream=out, live=False, plain_every_s=0.05)
    bar.start()
    try:
        bar.begin_iteration(1, lifetime_steps=0, time_total_s=0.0, expected_steps=1000)
        bar.on_env_steps(500)
        time.sleep(0.3)
    finally:
        bar.stop()
    assert re.search(r"^  iter 1 .* 5% .*500/1,000 steps", out.getvalue(), re.M)


@pytest.mark.parametrize("how", ["config", "env var"])
def test_python_train_draws_the_bar_when_asked(how, capsys, monkeypatch):
    config = _config()
    if how == "config":
        config.reporting(progress_bar=True)
    else:
        monkeypatch.setenv("RLX_PROGRESS_BAR", "1")
    algo = config.build_algo()
    try:
        capsys.readouterr()
        algo.train()
        algo.train()
    finally:
        algo.stop()
    printed = capsys.readouterr().out
    assert re.search(r"iter 1 .*100%.*steps/s.*ETA 0:00:00.*400/400 steps, 8 updates", printed)
    assert re.search(r"iter 2 .*100%", printed)


def test_python_train_draws_nothing_by_default(capsys, monkeypatch):
    monkeypatch.delenv("RLX_PROGRESS_BAR", raising=False)
    algo = _config().build_algo()
    try:
        capsys.readouterr()
        algo.train()
    finally:
        algo.stop()
    assert "steps/s" not in capsys.readouterr().out


def test_iteration_and_time_stops_are_goals_too():
    assert progress_goal({"training_iteration": 20}) == ProgressGoal("iterations", 20)
    assert progress_goal({"env_runners/episode_return_mean": 450, "time_total_s": 60}) == ProgressGoal("time_s", 60)
    assert progress_goal({"env_runners/episode_return_mean": 450}) is None
    bar = TrainingProgress(ProgressGoal("iterations", 4), stream=io.StringIO(), live=False)
    bar.begin_iteration(2, lifetime_steps=1000, time_total_s=5.0, expected_steps=1000)
    bar.on_env_steps(500)
    assert "38%" in bar.text()  # 1 iteration done and half of the 2nd: 1.5 of 4

"""`rlx train` and `rlx train file`, run through the real console script.

Each test starts `rlx` in a subprocess (about a second of start-up) with small PPO
batches so an iteration takes hundredths of a second, then checks what the command
printed and what it left in the trial directory.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from cli_helpers import ROOT, rlx_executable, run_rlx

SMALL = json.dumps({"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1})
TRIAL_RE = re.compile(r"^PPO_CartPole-v1_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{6}$")


def trials(root: Path, experiment: str = "default") -> list[Path]:
    """Trial directories of one experiment."""
    base = root / experiment
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.exists() else []


def results(trial: Path) -> list[dict]:
    """The result.json lines of a trial."""
    return [json.loads(line) for line in (trial / "result.json").read_text().splitlines()]


def checkpoints(trial: Path) -> list[str]:
    """Names of a trial's checkpoint directories."""
    return sorted(p.name for p in trial.iterdir() if p.name.startswith("checkpoint_"))


def assert_one_line_error(proc, *needles: str) -> None:
    """A failed command: non-zero exit, one line on stderr naming the problem, no traceback."""
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# ------------------------------------------------------------------ rlx train


def test_train_writes_trial_dir_checkpoints_and_prints_the_evaluate_command(tmp_path):
    storage = tmp_path / "store"
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                   "--stop", '{"training_iteration": 3}', "--checkpoint-freq", "2",
                   "--storage-path", str(storage), "--experiment-name", "exp1", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    [trial] = trials(storage, "exp1")
    assert TRIAL_RE.match(trial.name)
    assert {"params.json", "result.json", "progress.csv"} <= {p.name for p in trial.iterdir()}
    assert list(trial.glob("events.out.tfevents.*"))
    rows = results(trial)
    assert [r["training_iteration"] for r in rows] == [1, 2, 3]
    with open(trial / "progress.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [int(r["training_iteration"]) for r in table] == [1, 2, 3]
    assert "env_runners/episode_return_mean" in table[0]
    params = json.loads((trial / "params.json").read_text())
    assert params["train_batch_size"] == 256 and params["seed"] == 1 and params["env"] == "CartPole-v1"
    # Every 2nd iteration, plus one at the end.
    assert checkpoints(trial) == ["checkpoint_000002", "checkpoint_000003"]
    final = trial / "checkpoint_000003"
    assert f"rlx evaluate {final} --algo PPO --env CartPole-v1" in proc.stdout
    assert "reached training_iteration >= 3" in proc.stdout
    # Not a terminal: one plain progress line per iteration, no in-place redraws.
    assert len(re.findall(r"^iter\s+\d+ \| steps", proc.stdout, re.M)) == 3
    assert "\r" not in proc.stdout
    last = rows[-1]["env_runners"]["episode_return_mean"]
    assert f"Final return: {last:.1f}" in proc.stdout


@pytest.mark.slow
def test_default_results_root_and_experiment_name(results_dir):
    proc = run_rlx("train", "--run", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                   "--stop", '{"training_iteration": 1}', "--local-dir", str(results_dir / "local"),
                   results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(trials(results_dir / "local")) == 1  # --local-dir is --storage-path's old name
    proc = run_rlx("train", "--run", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                   "--stop", '{"training_iteration": 1}', results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(trials(results_dir)) == 1  # $RLX_RESULTS_DIR/default/<trial>


def test_keep_checkpoints_num_keeps_the_most_recent(tmp_path):
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                   "--stop", '{"training_iteration": 4}', "--checkpoint-freq", "1", "--keep-checkpoints-num", "2",
                   results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [trial] = trials(tmp_path)
    assert checkpoints(trial) == ["checkpoint_000003", "checkpoint_000004"]
    assert proc.stdout.count("Checkpoint saved:") == 4


def test_no_checkpoint_at_end_saves_nothing(tmp_path):
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                   "--stop", '{"training_iteration": 2}', "--no-checkpoint-at-end", results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [trial] = trials(tmp_path)
    assert checkpoints(trial) == []
    assert "No checkpoint saved" in proc.stdout and "rlx evaluate" not in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("key, bound", [
    ("timesteps_total", 700),
    ("num_env_steps_sampled_lifetime", 700),
    ("episode_reward_mean", 30),
    ("env_runners/episode_return_mean", 30),
    ("time_total_s", 0.2),
])
def test_stop_criteria_stop_at_the_first_iteration_that_reaches_them(tmp_path, key, bound):
    # A second, unreachable criterion shows that reaching any one of them stops training.
    stop = json.dumps({key: bound, "training_iteration": 60})
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL, "--seed", "0",
                   "--stop", stop, "--no-checkpoint-at-end", results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [trial] = trials(tmp_path)
    rows = results(trial)

    def value(row):
        node = row
        for part in key.split("/"):
            node = node[part]
        return node

    reached = [i for i, r in enumerate(rows) if value(r) is not None and value(r) >= bound]
    assert reached, f"{key} never reached {bound}: {[value(r) for r in rows]}"
    assert reached[0] == len(rows) - 1, "training went on after the criterion was reached"
    assert f"reached {key} >= " in proc.stdout


@pytest.mark.slow
def test_verbosity_flags_set_the_log_level(tmp_path):
    args = ("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL, "--stop",
            '{"training_iteration": 1}', "--no-checkpoint-at-end")
    quiet = run_rlx(*args, results_dir=tmp_path)
    info = run_rlx(*args, "-v", results_dir=tmp_path)
    debug = run_rlx(*args, "-vv", results_dir=tmp_path)
    assert "INFO --" not in quiet.stderr + quiet.stdout
    assert "INFO -- Built PPO on CartPole-v1" in info.stderr and "DEBUG --" not in info.stderr
    assert "DEBUG -- Iteration 1:" in debug.stderr
    params = [json.loads((t / "params.json").read_text())["log_level"] for t in trials(tmp_path)]
    assert sorted(params) == ["DEBUG", "INFO", "WARN"]


@pytest.mark.slow
def test_restore_continues_from_the_checkpoint(tmp_path):
    first = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                    "--stop", '{"training_iteration": 2}', "--experiment-name", "a", results_dir=tmp_path)
    assert first.returncode == 0, first.stderr
    [trial] = trials(tmp_path, "a")
    ckpt = trial / "checkpoint_000002"
    # --algo and --env come from the checkpoint, and so does its config (train_batch_size 256).
    second = run_rlx("train", "--restore", str(ckpt), "--stop", '{"training_iteration": 4}',
                     "--experiment-name", "b", results_dir=tmp_path)
    assert second.returncode == 0, second.stderr
    [trial_b] = trials(tmp_path, "b")
    rows = results(trial_b)
    assert [r["training_iteration"] for r in rows] == [3, 4]
    assert rows[0]["num_env_steps_sampled_lifetime"] == results(trial)[-1]["num_env_steps_sampled_lifetime"] + 256
    wrong = run_rlx("train", "--restore", str(ckpt), "--algo", "DQN", results_dir=tmp_path)
    assert_one_line_error(wrong, "DQN", "PPO")


# ------------------------------------------------------------------ errors and help


@pytest.mark.parametrize("args, needles", [
    (["--algo", "PPX", "--env", "CartPole-v1"], ["Unknown algorithm 'PPX'", "PPO"]),
    (["--algo", "PPO", "--env", "CartPol-v1"], ["Unknown env 'CartPol-v1'", "CartPole-v1"]),
    (["--algo", "PPO", "--env", "CartPole-v1", "--config", "{lr: 1"], ["--config is not valid JSON"]),
    (["--algo", "PPO", "--env", "CartPole-v1", "--stop", "[1]"], ["--stop must be a JSON object"]),
    (["--algo", "PPO", "--env", "CartPole-v1", "--config", '{"lrr": 0.1}'], ["Unknown config key 'lrr'", "'lr'"]),
    (["--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"episode_reward_meen": 1}'],
     ["episode_reward_meen", "episode_reward_mean"]),
    (["--algo", "PPO", "--env", "CartPole-v1", "--restore", "/no/such/checkpoint"], ["/no/such/checkpoint"]),
    (["--algo", "PPO", "--env", "CartPole-v1", "--framework", "tf2"], ["PyTorch-only"]),
    (["--env", "CartPole-v1"], ["--algo"]),
    (["--algo", "PPO"], ["--env"]),
])
def test_train_errors_are_one_clear_line(tmp_path, args, needles):
    proc = run_rlx("train", *args, "--stop", '{"training_iteration": 1}', results_dir=tmp_path) \
        if "--stop" not in args else run_rlx("train", *args, results_dir=tmp_path)
    assert_one_line_error(proc, *needles)


def test_vv_shows_the_traceback(tmp_path):
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPol-v1", "-vv", results_dir=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "EnvError" in proc.stderr


def test_help_shows_every_option():
    proc = run_rlx("train", "--help")
    assert proc.returncode == 0
    for option in ("--algo", "--run", "--env", "--config", "--stop", "--checkpoint-freq", "--checkpoint-at-end",
                   "--keep-checkpoints-num", "--storage-path", "--local-dir", "--experiment-name", "--framework",
                   "--seed", "-v", "--restore", "-f"):
        assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", proc.stdout), option
    file_help = run_rlx("train", "file", "--help")
    assert file_help.returncode == 0 and "PATH" in file_help.stdout and "--stop" in file_help.stdout
    top = run_rlx("--help")
    for command in ("train", "evaluate", "rollout", "list", "plot"):
        assert command in top.stdout


def test_version_and_python_dash_m():
    import subprocess

    import rlx

    proc = subprocess.run([sys.executable, "-m", "rlx", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"rlx {rlx.__version__}"


# ------------------------------------------------------------------ rlx train file


def test_train_file_runs_every_experiment_in_order_with_flag_overrides(tmp_path):
    spec = {
        "first": {"run": "PPO", "env": "CartPole-v1", "stop": {"training_iteration": 50},
                  "config": {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1, "lr": 0.001}},
        "second": {"algo": "PPO", "env": "CartPole-v0", "stop": {"training_iteration": 50},
                   "checkpoint_config": {"checkpoint_frequency": 1, "num_to_keep": 1},
                   "config": {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = run_rlx("train", "file", str(path), "--stop", '{"training_iteration": 2}', "--env", "CartPole-v1",
                   results_dir=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    [first] = trials(tmp_path / "out", "first")
    [second] = trials(tmp_path / "out", "second")
    assert len(results(first)) == 2 and len(results(second)) == 2  # --stop overrides the file's
    assert json.loads((first / "params.json").read_text())["lr"] == 0.001
    second_params = json.loads((second / "params.json").read_text())
    assert second_params["env"] == "CartPole-v1" and second_params["train_batch_size"] == 128
    assert checkpoints(second) == ["checkpoint_000002"]  # frequency 1, keep 1
    assert proc.stdout.index("Finished PPO") < proc.stdout.rindex("Finished PPO")
    assert "Ran 2 experiments" in proc.stdout


def test_train_file_json_and_dash_f_alias(tmp_path):
    path = tmp_path / "exp.json"
    path.write_text(json.dumps({"j": {"run": "PPO", "env": "CartPole-v1", "stop": {"training_iteration": 1},
                                      "config": {"train_batch_size": 128, "minibatch_size": 64}}}))
    proc = run_rlx("train", "-f", str(path), results_dir=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert len(results(trials(tmp_path / "out", "j")[0])) == 1


def test_train_file_python_defines_config_and_stop(tmp_path):
    path = tmp_path / "my_experiment.py"
    path.write_text(
        "from rlx.algorithms.ppo import PPOConfig\n"
        "config = PPOConfig().environment('CartPole-v1').training(train_batch_size=128, minibatch_size=64)\n"
        "stop = {'training_iteration': 2}\n"
    )
    proc = run_rlx("train", "file", str(path), results_dir=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    [trial] = trials(tmp_path / "out", "my_experiment")
    assert [r["num_env_steps_sampled_lifetime"] for r in results(trial)] == [128, 256]


@pytest.mark.parametrize("content, suffix, needles", [
    ("exp: {run: PPO, env: CartPole-v1, stopp: {training_iteration: 1}}", ".yaml", ["unknown key 'stopp'", "'stop'"]),
    ("exp: {env: CartPole-v1}", ".yaml", ["no algorithm"]),
    ("exp: {run: PPO, env: CartPole-v1, num_samples: 4}", ".yaml", ["num_samples", "Ray Tune"]),
    ("exp: [1, 2", ".yaml", ["not valid YAML"]),
    ('{"exp": ', ".json", ["not valid JSON"]),
    ("x = 1\n", ".py", ["must define `config`"]),
    ("exp: {run: PPO, env: CartPole-v1}", ".txt", ["unknown experiment file type"]),
])
def test_bad_experiment_files_are_one_clear_line(tmp_path, content, suffix, needles):
    path = tmp_path / f"bad{suffix}"
    path.write_text(content)
    assert_one_line_error(run_rlx("train", "file", str(path), results_dir=tmp_path), *needles)
    assert_one_line_error(run_rlx("train", "file", str(tmp_path / "missing.yaml"), results_dir=tmp_path),
                          "missing.yaml", "does not exist")


def _offline_input(example: str, expert_recordings) -> dict:
    """Offline tuned examples read files their yaml says how to make (`python
    tuned_examples/<algo>/generate_*.py`): when those are missing, the same script's recording
    made once for the test run (conftest's `expert_recordings`) as the `input` setting."""
    from conftest import EXPERT_RECORDINGS

    text = (ROOT / example).read_text()
    [spec] = yaml.safe_load(text).values()
    path = (spec.get("config") or {}).get("input")
    if not isinstance(path, str) or path == "sampler" or Path(path).exists():
        return {}
    named = re.search(r"python tuned_examples/\S+/(generate_\w+\.py)", text)
    assert named, f"{example} reads {path} but does not say how to make it"
    [name] = [name for name, (_, script, _) in EXPERT_RECORDINGS.items() if script == named.group(1)]
    return {"input": str(expert_recordings(name))}


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tuned_examples").rglob("*.yaml")))
def test_every_tuned_example_runs_unchanged(tmp_path, example, expert_recordings):
    """One iteration of each tuned example as written. Only the iteration's minimum duration
    (IMPALA/APPO's default is 10 s of sampling) and a missing offline input are set from outside."""
    overrides = {"min_time_s_per_iteration": 0, **_offline_input(example, expert_recordings)}
    proc = run_rlx("train", "file", example, "--stop", '{"training_iteration": 1}', "--no-checkpoint-at-end",
                   "--config", json.dumps(overrides), results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    name = next(iter(yaml.safe_load((ROOT / example).read_text())))
    [trial] = [t for t in (tmp_path / name).iterdir()]
    assert len(results(trial)) == 1


@pytest.mark.slow
def test_ppo_tuned_example_reaches_its_return_through_the_cli(tmp_path):
    proc = run_rlx("train", "file", "tuned_examples/ppo/cartpole-ppo.yaml", "--seed", "0", results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [trial] = trials(tmp_path, "cartpole-ppo")
    last = results(trial)[-1]
    assert last["env_runners"]["episode_return_mean"] >= 450
    assert last["num_env_steps_sampled_lifetime"] <= 100_000
    assert "reached env_runners/episode_return_mean >= 450" in proc.stdout


# ------------------------------------------------------------------ terminal behaviour


def _run_in_pty(args: list[str], env: dict, interrupt_after_iterations: int, timeout: float = 120) -> tuple[str, int]:
    """Run rlx in a pseudo-terminal; send Ctrl-C (SIGINT) once `interrupt_after_iterations`
    progress lines have been drawn. Returns (everything printed, exit status)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ.update(env)
        os.execv(rlx_executable(), ["rlx", *args])
    out, sent, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        if not sent and len(re.findall(rb"iter\s+\d+ \|", out)) >= interrupt_after_iterations:
            os.kill(pid, signal.SIGINT)
            sent = True
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return out.decode(errors="replace"), os.waitstatus_to_exitcode(status)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX-only")
def test_live_progress_redraws_in_place_and_ctrl_c_stops_with_a_checkpoint(tmp_path):
    env = {"RLX_RESULTS_DIR": str(tmp_path), "TERM": "xterm"}
    text, status = _run_in_pty(["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL], env,
                               interrupt_after_iterations=3)
    assert status == 0, text
    assert "\r\x1b[2Kiter" in text  # the status line is redrawn in place
    assert "Ctrl-C: stopping after this iteration" in text
    [trial] = trials(tmp_path)
    rows = results(trial)
    final = f"checkpoint_{rows[-1]['training_iteration']:06d}"
    assert checkpoints(trial) == [final]  # no --stop: only Ctrl-C ends it, with a final checkpoint
    assert "(Ctrl-C)" in text and f"rlx evaluate {trial / final}" in text

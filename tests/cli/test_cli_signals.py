"""`rlx train` stopped by a signal: SIGTERM (docker stop, a cluster scheduler's cancel) is treated
as Ctrl-C: the current iteration finishes, a final checkpoint is saved and the command exits 0;
a second one aborts at once."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import ROOT, rlx_executable

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SMALL = json.dumps({"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1})


def _start_training(results_dir: Path, config: str = SMALL) -> subprocess.Popen:
    """`rlx train` with no stop criteria (only a signal ends it), output in `results_dir`, in a
    process group of its own (with its worker processes)."""
    env = dict(os.environ, RLX_RESULTS_DIR=str(results_dir), PYTHONUNBUFFERED="1")
    env.pop("COLUMNS", None)
    return subprocess.Popen([rlx_executable(), "train", "--algo", "PPO", "--env", "CartPole-v1", "--config", config,
                             "--no-progress"], cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_iterations(proc: subprocess.Popen, results_dir: Path, count: int, timeout: float = 60) -> Path:
    """The trial directory, once its result.json holds `count` iterations."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for result in results_dir.glob("default/*/result.json"):
            if len(result.read_text().splitlines()) >= count:
                return result.parent
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no {count} iterations within {timeout} s: {proc.communicate()}")


def _read_until(proc: subprocess.Popen, needle: str, timeout: float = 60) -> str:
    """stdout up to the line holding `needle` (the rest stays in the pipe)."""
    seen, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
            if needle in line:
                return seen
    proc.kill()
    raise AssertionError(f"{needle!r} not printed within {timeout} s: {seen}")


def _finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"rlx train did not stop within {timeout} s after SIGTERM:\n{out}\n{err}")
    return proc.returncode, out, err


def test_sigterm_saves_a_final_checkpoint_and_exits_like_ctrl_c(tmp_path):
    proc = _start_training(tmp_path)
    trial = _wait_for_iterations(proc, tmp_path, 1)
    proc.send_signal(signal.SIGTERM)
    code, out, err = _finish(proc)
    assert code == 0, err
    rows = [json.loads(line) for line in (trial / "result.json").read_text().splitlines()]
    final = f"checkpoint_{rows[-1]['training_iteration']:06d}"
    assert sorted(p.name for p in trial.iterdir() if p.name.startswith("checkpoint_")) == [final]
    assert (trial / final / "algorithm_state.pkl").exists() or any((trial / final).iterdir())
    assert "SIGTERM: stopping after this iteration and saving a checkpoint" in out
    assert "(SIGTERM)" in out and f"rlx evaluate {trial / final}" in out


def test_sigterm_to_every_process_of_the_job_still_saves_a_final_checkpoint(tmp_path):
    # A cluster scheduler (Slurm's scancel) signals every process of the job: the EnvRunner
    # processes leave stopping to the driver, as they do with Ctrl-C.
    config = json.dumps({**json.loads(SMALL), "num_env_runners": 2})
    proc = _start_training(tmp_path, config)
    trial = _wait_for_iterations(proc, tmp_path, 1)
    os.killpg(proc.pid, signal.SIGTERM)
    code, out, err = _finish(proc)
    assert code == 0, err
    assert [p.name for p in trial.iterdir() if p.name.startswith("checkpoint_")], out
    assert "(SIGTERM)" in out


def test_a_second_sigterm_aborts_without_a_checkpoint(tmp_path):
    proc = _start_training(tmp_path)
    trial = _wait_for_iterations(proc, tmp_path, 1)
    proc.send_signal(signal.SIGTERM)
    _read_until(proc, "SIGTERM: stopping after this iteration")  # the first one was handled
    proc.send_signal(signal.SIGTERM)
    code, out, err = _finish(proc)
    # As a second Ctrl-C: KeyboardInterrupt, the CLI's interrupted exit status, no traceback.
    assert code == 130, (out, err)
    assert "Traceback" not in err
    assert "interrupted" in err
    assert not [p for p in trial.iterdir() if p.name.startswith("checkpoint_")]

"""`rlx stack` (RLlib's `ray stack`): the Python stacks of every rlx process on this machine."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="stack dumps are requested with SIGUSR1")


def _env(registry: Path) -> dict[str, str]:
    return {**os.environ, "RLX_PROCESS_DIR": str(registry), "PYTHONPATH": os.getcwd()}


def _start(script: str, registry: Path, tmp_path: Path) -> subprocess.Popen:
    path = tmp_path / "driver.py"
    path.write_text(script)
    return subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_env(registry))


def _wait_ready(process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.strip() == "ready":
            return
        if not line and process.poll() is not None:
            break
    raise AssertionError(f"the driver did not get ready (exit code {process.poll()})")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def _rlx_stack(registry: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlx", "stack", *args], capture_output=True, text=True, timeout=120,
                          env=_env(registry))


@pytest.mark.slow
def test_stack_prints_the_driver_and_its_env_runner_process(tmp_path):
    registry = tmp_path / "registry"
    driver = _start(
        "import time\n"
        "from rlx.algorithms.ppo import PPOConfig\n"
        "algo = (PPOConfig().environment('CartPole-v1')\n"
        "        .env_runners(num_env_runners=1, env_runner_backend='process')\n"
        "        .training(train_batch_size=64, minibatch_size=32, num_epochs=1).build())\n"
        "def driver_is_waiting_here():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(300)\n"
        "driver_is_waiting_here()\n",
        registry, tmp_path)
    try:
        _wait_ready(driver)
        done = _rlx_stack(registry, "--pid", str(driver.pid))
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        assert f"=== rlx driver (pid {driver.pid}) ===" in out
        assert "driver_is_waiting_here" in out
        assert "=== rlx env-runner rlx-env-runner-1 (pid " in out
        assert "serve_calls" in out  # the runner process waits for the driver's next call
        assert out.index("driver (pid") < out.index("env-runner rlx-env-runner-1")
    finally:
        _stop(driver)


def test_stack_reports_processes_that_do_not_answer_within_the_timeout(tmp_path):
    registry = tmp_path / "registry"
    quiet = _start(
        "import signal, time\n"
        "from rlx.utils.stack_dump import install\n"
        "install('driver')\n"
        "signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # replaces rlx's dump handler\n"
        "print('ready', flush=True)\n"
        "time.sleep(300)\n",
        registry, tmp_path)
    try:
        _wait_ready(quiet)
        started = time.monotonic()
        done = _rlx_stack(registry, "--timeout", "0.5")
        assert done.returncode == 0
        assert time.monotonic() - started < 60
        assert f"=== rlx driver (pid {quiet.pid}) ===" in done.stdout
        assert "no stack dump within 0.5 s" in done.stdout
    finally:
        _stop(quiet)


def test_stack_forgets_exited_processes_and_says_when_none_run(tmp_path):
    registry = tmp_path / "registry"
    registry.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          timeout=60)
    dead_pid = int(gone.stdout)
    (registry / f"{dead_pid}.json").write_text(json.dumps({"pid": dead_pid, "ppid": 1, "roles": ["driver"],
                                                           "name": "driver", "start_time": None}))
    done = _rlx_stack(registry)
    assert done.returncode == 1
    assert "no running rlx processes found" in done.stdout
    assert not (registry / f"{dead_pid}.json").exists()


def test_a_process_unregisters_when_it_exits(tmp_path):
    registry = tmp_path / "registry"
    done = subprocess.run([sys.executable, "-c", "from rlx.utils.stack_dump import install; install('driver'); "
                                                 "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=60, env=_env(registry))
    assert done.returncode == 0, done.stderr
    assert list(registry.iterdir()) == []


def test_stack_pid_that_is_not_an_rlx_process(tmp_path):
    done = _rlx_stack(tmp_path / "registry", "--pid", str(os.getpid()))
    assert done.returncode == 1
    assert f"process {os.getpid()} is not a running rlx process" in done.stdout


def test_a_registry_others_may_write_to_is_not_trusted(tmp_path):
    registry = tmp_path / "registry"
    registry.mkdir()
    registry.chmod(0o777)
    done = _rlx_stack(registry)
    assert done.returncode == 1
    assert "does not trust its process registry" in done.stderr and "written by other users" in done.stderr
    # A process does not register in it either (and runs on).
    script = ("import os\nfrom rlx.utils.stack_dump import install\ninstall('driver')\n"
              "print(sorted(os.listdir(os.environ['RLX_PROCESS_DIR'])))\n")
    made = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env=_env(registry))
    assert made.returncode == 0 and made.stdout.strip() == "[]"

"""Running the real `rlx` console script in a subprocess, for the CLI tests."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rlx_executable() -> str:
    """The `rlx` console script installed next to this Python (pip install -e . puts it there)."""
    candidate = Path(sys.executable).parent / "rlx"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("rlx")
    if found is None:
        raise RuntimeError("The rlx console script is not installed: run pip install -e . first.")
    return found


def run_rlx(*args: str, results_dir: Path | None = None, timeout: float = 300, cwd: Path | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `rlx ARGS...` and return the finished process (text stdout/stderr captured).

    RLX_RESULTS_DIR is set to `results_dir` when given, so nothing lands in ~/rlx_results.
    """
    full_env = dict(os.environ)
    full_env.pop("COLUMNS", None)
    if results_dir is not None:
        full_env["RLX_RESULTS_DIR"] = str(results_dir)
    full_env.update(env or {})
    return subprocess.run([rlx_executable(), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(cwd or ROOT), env=full_env)

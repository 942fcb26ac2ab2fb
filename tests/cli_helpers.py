"""Running the `rlx` command line for the CLI tests.

`run_rlx` runs the command as the console script does (`rlx.cli.main.entry_point`) in a process
of its own, with the console script's sys.path, environment, working directory and exit status,
and its stdout/stderr captured. By default that process is forked from rlx's fork server, which
has already imported torch (a fresh interpreter spends seconds on that, which most CLI tests do
not test); `fresh_interpreter=True` runs the real console script in a new interpreter instead,
for tests of what interpreter start-up does (sys.path from the working directory, signals).
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
            env: dict | None = None, fresh_interpreter: bool = False) -> subprocess.CompletedProcess:
    """Run `rlx ARGS...` and return the finished process (text stdout/stderr captured).

    RLX_RESULTS_DIR is set to `results_dir` when given, so nothing lands in ~/rlx_results.
    """
    full_env = dict(os.environ)
    full_env.pop("COLUMNS", None)
    if results_dir is not None:
        full_env["RLX_RESULTS_DIR"] = str(results_dir)
    full_env.update(env or {})
    command = [rlx_executable(), *args]
    if fresh_interpreter or os.environ.get("RLX_TEST_CLI_FRESH_INTERPRETER"):
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              cwd=str(cwd or ROOT), env=full_env)
    return _run_forked(command, full_env, str(cwd or ROOT), timeout)


def _console_script_path(executable: str, environ: dict) -> list[str]:
    """The sys.path a console script starts with: its own directory, $PYTHONPATH, then the
    interpreter's own entries (standard library and site-packages; nothing of the tests)."""
    python_path = [entry for entry in environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    prefixes = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})
    interpreter = [entry for entry in sys.path if entry and entry.startswith(prefixes)]
    return [os.path.dirname(executable), *python_path, *interpreter]


def run_python_script(script: Path, cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python SCRIPT` (text stdout/stderr captured) in a process forked from rlx's fork server:
    the script's directory first on sys.path, then $PYTHONPATH and the interpreter's entries,
    run as `__main__` with `env` as its environment and `cwd` as its working directory."""
    command = [sys.executable, str(script)]
    return _run_forked(command, env, str(cwd), timeout, body=_script_child)


def _redirect_output(out_path: str, err_path: str) -> None:
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)


def _script_child(argv: list[str], environ: dict, cwd: str, out_path: str, err_path: str) -> None:
    """Body of a forked `python SCRIPT` process."""
    import runpy

    _redirect_output(out_path, err_path)
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    script = argv[1]
    sys.path[:] = [os.path.dirname(os.path.abspath(script)), *_console_script_path(argv[0], environ)[1:]]
    sys.argv = argv[1:]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()


def _cli_child(argv: list[str], environ: dict, cwd: str, out_path: str, err_path: str) -> None:
    """Body of the forked CLI process: the console script's environment, then entry_point()."""
    _redirect_output(out_path, err_path)
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    sys.path[:] = _console_script_path(argv[0], environ)
    if sys.flags.safe_path and not environ.get("PYTHONSAFEPATH"):
        # The fork server started with PYTHONSAFEPATH (rlx starts its workers so), a flag this
        # fork inherits but the user's console script would not have: give the working directory
        # the place rlx.cli.env_source.add_cwd_to_sys_path gives it then (it still takes it off
        # again when the command loads a checkpoint the working directory lies in).
        sys.path.insert(0, cwd)
    sys.argv = list(argv)
    from rlx.cli.main import entry_point

    try:
        entry_point()
    finally:
        # A forked multiprocessing child ends with os._exit: run what an interpreter runs at exit.
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()


def _run_forked(command: list[str], environ: dict, cwd: str, timeout: float,
                body: Any = None) -> subprocess.CompletedProcess:
    """`command` run by `body` (default `_cli_child`) in a process forked from rlx's fork server."""
    from rlx.utils.spawn import _context, _main_module_hidden

    with tempfile.TemporaryDirectory(prefix="rlx-cli-test-") as folder:
        out_path, err_path = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
        for path in (out_path, err_path):
            open(path, "w").close()
        process = _context().Process(target=body or _cli_child, args=(command, environ, cwd, out_path, err_path),
                                     name="rlx-cli-test", daemon=False)
        with _main_module_hidden():
            process.start()
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join(10)
            raise subprocess.TimeoutExpired(command, timeout, output=_read(out_path), stderr=_read(err_path))
        return subprocess.CompletedProcess(command, process.exitcode, _read(out_path), _read(err_path))


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()

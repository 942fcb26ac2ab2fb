"""Stack dumps on request: what `rlx stack` reads from every rlx process on this machine.

Each rlx process (a driver that built an Algorithm, an EnvRunner or learner worker process,
a sub-env process, an EnvRunner Ray actor) calls `install(role)` once. That

- records the process in a per-user registry folder (`registry_dir()`): `<pid>.json` says its
  role, name, parent and start time, and is removed when the process exits;
- registers Python's `faulthandler` on SIGUSR1, writing every thread's Python stack to
  `<pid>.stack` in that folder. The dump is written by a C-level signal handler, so it
  arrives even while the process is stuck in native code or holds the GIL.

`rlx stack` sends SIGUSR1 and reads the file (or uses py-spy when it is installed). Set
`RLX_STACK_DUMPS=0` to leave SIGUSR1 alone (the process is then still listed); an application
that installs its own SIGUSR1 handler keeps it called (faulthandler chains to it).
`RLX_PROCESS_DIR` moves the registry folder (tests use it to see only their own processes).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["DUMP_SIGNAL", "check_registry_dir", "install", "process_start_time", "registry_dir"]

#: The signal a dump is requested with (None where the platform has no SIGUSR1).
DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)

_installed: dict[str, Any] = {}


def registry_dir() -> Path:
    """The folder where rlx processes register (per user): $RLX_PROCESS_DIR, else
    `<tempdir>/rlx-processes-<uid>`."""
    override = os.environ.get("RLX_PROCESS_DIR")
    if override:
        return Path(override)
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"rlx-processes-{uid}"


def check_registry_dir(folder: Path) -> None:
    """Raise a PermissionError unless `folder` is a real directory of this user that no one else
    may write to (a shared temp dir must not let another user plant records or links in it)."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{folder} is not a directory (a symlink or a file).")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to another user (uid {info.st_uid}).")
    if info.st_mode & 0o022:
        raise PermissionError(f"{folder} may be written by other users (mode {oct(info.st_mode & 0o777)}).")


def process_start_time(pid: int) -> str | None:
    """When process `pid` started, as the kernel counts it (Linux /proc; None elsewhere or when
    it is gone): with the pid it names a process uniquely, so a reused pid is not mistaken for it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # Fields after the command name (which may hold spaces and parentheses); starttime is field 22.
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def install(role: str, name: str | None = None, parent_pid: int | None = None) -> None:
    """Register this process under `role` (e.g. "driver", "env-runner") and make SIGUSR1 dump its
    Python stacks for `rlx stack`. Once per process; later calls add their role. Never raises:
    a process that cannot register still runs. `parent_pid` is the process that started this one
    when that is not the OS parent (a worker forked by a fork server)."""
    if parent_pid is not None:
        _installed["parent_pid"] = int(parent_pid)
    try:
        _install(role, name)
    except Exception:  # noqa: BLE001 - debugging support must not break training
        import logging

        logging.getLogger("rlx").debug("Could not register this process for `rlx stack`.", exc_info=True)


def _install(role: str, name: str | None) -> None:
    pid = os.getpid()
    if _installed.get("pid") == pid:
        if role not in _installed["roles"]:
            _installed["roles"].append(role)
            _write_record()
        return
    folder = registry_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_registry_dir(folder)
    stack_path = folder / f"{pid}.stack"
    dumps = os.environ.get("RLX_STACK_DUMPS", "1").strip().lower() not in ("0", "false", "no", "off")
    stack_file = None
    if dumps and DUMP_SIGNAL is not None:
        import faulthandler

        # Append mode: `rlx stack` truncates the file after reading, and later dumps then start at 0.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        stack_file = os.fdopen(os.open(stack_path, flags, 0o600), "ab", buffering=0)  # kept open for the handler
        previous = signal.getsignal(DUMP_SIGNAL)
        chain = callable(previous)  # a Python handler of the application keeps being called
        faulthandler.register(DUMP_SIGNAL, file=stack_file, all_threads=True, chain=chain)
    _installed.update(pid=pid, roles=[role], name=name or role, folder=folder, stack_file=stack_file,
                      stack_path=stack_path if stack_file is not None else None, started=time.time())
    _write_record()
    atexit.register(_unregister, pid)


def _write_record() -> None:
    pid = _installed["pid"]
    record = {
        "pid": pid,
        "ppid": _installed.get("parent_pid") or os.getppid(),
        "roles": list(_installed["roles"]),
        "name": _installed["name"],
        "start_time": process_start_time(pid),
        "registered_at": _installed["started"],
        "argv": list(sys.argv)[:8],
        "stack_file": str(_installed["stack_path"]) if _installed["stack_path"] else None,
    }
    path = _installed["folder"] / f"{pid}.json"
    tmp = path.with_suffix(".json.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(tmp, flags, 0o600), "w") as f:
        f.write(json.dumps(record))
    os.replace(tmp, path)


def _unregister(pid: int) -> None:
    """Remove this process's registry files at exit (not in a forked child that inherited them)."""
    if os.getpid() != pid or _installed.get("pid") != pid:
        return
    folder = _installed["folder"]
    for suffix in (".json", ".stack"):
        try:
            (folder / f"{pid}{suffix}").unlink()
        except OSError:
            pass

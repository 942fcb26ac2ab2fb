"""`rlx stack`: print the Python stacks of every rlx process on this machine (RLlib's `ray stack`).

rlx processes (drivers that built an Algorithm, EnvRunner, learner and sub-env worker
processes, EnvRunner Ray actors on this node) register in `rlx.utils.stack_dump.registry_dir()`.
For each live one this command prints its stacks: with `py-spy dump` when py-spy is installed
(and allowed to attach), else by sending SIGUSR1, on which rlx's faulthandler writes every
thread's stack to a file that is read here. Every wait is bounded by `--timeout`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rlx.utils.errors import RLXError
from rlx.utils.stack_dump import DUMP_SIGNAL, check_registry_dir, process_start_time, registry_dir

__all__ = ["RegisteredProcess", "dump_stacks", "live_processes", "run_stack_command"]

#: Seconds a dump file must stop growing before it is read as complete.
SETTLE_S = 0.1
POLL_S = 0.02
ROLE_ORDER = ("driver", "learner", "env-runner", "ray-env-runner", "sub-env")


@dataclass
class RegisteredProcess:
    """One registered rlx process: its pid, parent, roles and dump file."""

    pid: int
    ppid: int
    roles: list[str]
    name: str
    stack_file: Path | None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """e.g. "driver (pid 123)" or "env-runner rlx-env-runner-1 (pid 456)"."""
        roles = "+".join(self.roles)
        extra = f" {self.name}" if self.name and self.name not in self.roles else ""
        return f"{roles}{extra} (pid {self.pid})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _forget(folder: Path, pid: int) -> None:
    for suffix in (".json", ".stack"):
        try:
            (folder / f"{pid}{suffix}").unlink()
        except OSError:
            pass


def live_processes(folder: Path | None = None) -> list[RegisteredProcess]:
    """The registered processes that are still running (stale records are removed), driver first."""
    folder = registry_dir() if folder is None else folder
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text())
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours
        started = record.get("start_time")
        if not _alive(pid) or (started is not None and process_start_time(pid) not in (None, started)):
            _forget(folder, pid)
            continue
        stack_file = record.get("stack_file")
        found.append(RegisteredProcess(pid, int(record.get("ppid") or 0), list(record.get("roles") or ["?"]),
                                       str(record.get("name") or ""), Path(stack_file) if stack_file else None,
                                       record))

    def order(p: RegisteredProcess) -> tuple[int, int]:
        rank = min((ROLE_ORDER.index(r) if r in ROLE_ORDER else len(ROLE_ORDER)) for r in p.roles)
        return rank, p.pid

    return sorted(found, key=order)


def _descendants(processes: list[RegisteredProcess], root: int) -> list[RegisteredProcess]:
    """`root` and the registered processes it started (directly or through others)."""
    keep = {root}
    changed = True
    while changed:
        changed = False
        for p in processes:
            if p.pid not in keep and p.ppid in keep:
                keep.add(p.pid)
                changed = True
    return [p for p in processes if p.pid in keep]


def _py_spy_dump(py_spy: str, pid: int, timeout: float) -> str | None:
    """`py-spy dump --pid` output, or None when py-spy fails (e.g. not allowed to attach)."""
    try:
        done = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def _signal_dumps(processes: list[RegisteredProcess], timeout: float) -> dict[int, str]:
    """Ask each process for a faulthandler dump (SIGUSR1) and collect what they write within
    `timeout` seconds in all; a process without an answer maps to an explanation."""
    results: dict[int, str] = {}
    waiting: dict[int, tuple[RegisteredProcess, int]] = {}
    for p in processes:
        if p.stack_file is None or DUMP_SIGNAL is None:
            results[p.pid] = ("(no stack dump: the process was started with RLX_STACK_DUMPS=0 or on a platform "
                              "without SIGUSR1; install py-spy to read it)")
            continue
        try:
            offset = p.stack_file.stat().st_size
            os.kill(p.pid, DUMP_SIGNAL)
        except (OSError, ProcessLookupError) as err:
            results[p.pid] = f"(could not signal it: {type(err).__name__}: {err})"
            continue
        waiting[p.pid] = (p, offset)
    deadline = time.monotonic() + timeout
    sizes: dict[int, tuple[int, float]] = {}
    while waiting and time.monotonic() < deadline:
        now = time.monotonic()
        for pid, (p, offset) in list(waiting.items()):
            try:
                size = p.stack_file.stat().st_size  # type: ignore[union-attr]
            except OSError:
                continue
            if size <= offset:
                continue
            last = sizes.get(pid)
            if last is None or last[0] != size:
                sizes[pid] = (size, now)
            elif now - last[1] >= SETTLE_S:
                results[pid] = _read_dump(p.stack_file, offset)  # type: ignore[arg-type]
                del waiting[pid]
        time.sleep(POLL_S)
    for pid, (p, offset) in waiting.items():
        partial = _read_dump(p.stack_file, offset) if pid in sizes else ""  # type: ignore[arg-type]
        results[pid] = partial or (f"(no stack dump within {timeout:g} s: the process may have replaced rlx's "
                                   "SIGUSR1 handler, or be stopped)")
    return results


def _read_dump(path: Path, offset: int) -> str:
    """The text written to `path` after `offset`; the file is emptied again for the next dump."""
    with open(path, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    try:
        os.truncate(path, 0)
    except OSError:
        pass
    return text


def dump_stacks(processes: list[RegisteredProcess], timeout: float = 5.0, use_py_spy: bool = True) -> dict[int, str]:
    """{pid: stack text} for `processes`, with py-spy where it is installed and works, else
    with SIGUSR1 and rlx's faulthandler; at most about `timeout` seconds per method."""
    results: dict[int, str] = {}
    py_spy = shutil.which("py-spy") if use_py_spy else None
    rest = list(processes)
    if py_spy is not None:
        rest = []
        for p in processes:
            text = _py_spy_dump(py_spy, p.pid, timeout)
            if text is None:
                rest.append(p)
            else:
                results[p.pid] = text
    results.update(_signal_dumps(rest, timeout))
    return results


def run_stack_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`rlx stack`: print the stacks of the registered rlx processes; status 1 when there are none."""
    out = sys.stdout if out is None else out
    folder = registry_dir()
    if folder.exists():
        try:
            check_registry_dir(folder)
        except PermissionError as err:
            raise RLXError(f"rlx stack does not trust its process registry: {err} Remove it, or set "
                           "RLX_PROCESS_DIR to a directory of your own.") from None
    processes = [p for p in live_processes(folder) if p.pid != os.getpid()]
    if args.pid is not None:
        processes = _descendants(processes, int(args.pid))
        if not processes:
            print(f"rlx stack: process {args.pid} is not a running rlx process (see 'rlx stack' for all of them).",
                  file=out)
            return 1
    if not processes:
        print(f"rlx stack: no running rlx processes found (registry: {registry_dir()}).", file=out)
        return 1
    stacks = dump_stacks(processes, timeout=float(args.timeout), use_py_spy=not args.no_py_spy)
    for p in processes:
        print(f"=== rlx {p.label} ===", file=out)
        print(stacks.get(p.pid, "").rstrip() or "(empty dump)", file=out)
        print(file=out)
    return 0

"""Counting this test process's children and file descriptors from /proc (Linux), for the
tests that check failures and restarts leave no process or fd behind."""
from __future__ import annotations

import os


def process_gone(pid: int) -> bool:
    """Whether no process `pid` exists any more (a zombie still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def child_processes(spawned_only: bool = False) -> list[int]:
    """Pids of this process's children that have not been reaped, zombies included; with
    `spawned_only`, only multiprocessing 'spawn' workers (and zombies, whose cmdline is gone)."""
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            cmdline = b""
            if spawned_only:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
        except OSError:  # ended meanwhile
            continue
        # Fields after the parenthesised name: state, ppid, ...
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) != me:
            continue
        if not spawned_only or b"spawn_main" in cmdline or state == "Z":
            pids.append(int(entry))
    return pids


def open_fds() -> int:
    """File descriptors this process holds."""
    return len(os.listdir("/proc/self/fd"))

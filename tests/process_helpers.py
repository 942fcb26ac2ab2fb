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
    `spawned_only`, only rlx's worker processes: multiprocessing 'spawn' workers and the
    workers forked by this process's fork server (not the fork server itself), zombies included."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # ended meanwhile
            continue
        # Fields after the parenthesised name: state, ppid, ...
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        found.append((int(entry), int(ppid), state, cmdline))
    fork_servers = {pid for pid, ppid, _, cmdline in found if ppid == me and b"multiprocessing.forkserver" in cmdline}
    if not spawned_only:
        return [pid for pid, ppid, _, _ in found if ppid == me]
    return [pid for pid, ppid, state, cmdline in found
            if (ppid == me and (b"spawn_main" in cmdline or state == "Z")) or ppid in fork_servers]


def open_fds() -> int:
    """File descriptors this process holds."""
    return len(os.listdir("/proc/self/fd"))

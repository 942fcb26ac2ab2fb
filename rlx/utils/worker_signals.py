"""The signals rlx's worker processes (EnvRunners, Learners, sub-envs) leave to their driver."""
from __future__ import annotations

import signal

#: Ctrl-C in a terminal reaches every process of the foreground group, and a cluster scheduler
#: (Slurm's scancel, for one) sends SIGTERM to every process of a job: the driver treats both as
#: "finish the iteration, save a checkpoint, stop", which needs its workers alive until then.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignore_stop_signals() -> None:
    """Ignore SIGINT and SIGTERM in a worker process: the driver decides when workers stop (it asks
    them over their pipe, or kills them with SIGKILL); a worker whose driver is gone exits when its
    pipe closes."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)

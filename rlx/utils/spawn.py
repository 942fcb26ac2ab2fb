"""Starting helper processes (EnvRunners, sub-envs, learners) with the "spawn" method.

Spawn normally re-imports the parent's `__main__` script in each child, so a script
without an `if __name__ == "__main__":` guard would run again in every worker and build
workers of its own. rlx ships everything a worker needs with cloudpickle (which carries
classes and functions defined in `__main__` by value), so the children are started
without the main script: users need no main guard.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
from typing import Any, Callable, Iterator

_MISSING = object()


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    # multiprocessing.spawn.get_preparation_data() reads __main__.__spec__ and __file__ to
    # tell the child what to import; with neither, the child imports no main module.
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: getattr(main, name, _MISSING) for name in ("__spec__", "__file__")}
    main.__spec__ = None
    if saved["__file__"] is not _MISSING:
        del main.__file__
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                if hasattr(main, name) and name != "__spec__":
                    delattr(main, name)
            else:
                setattr(main, name, value)


def start_process(target: Callable[..., Any], args: tuple, name: str, daemon: bool = True) -> Any:
    """Start a "spawn" process running `target(*args)` without re-running `__main__`.

    `daemon=False` lets the process start processes of its own (an EnvRunner whose
    sub-envs run in processes); whoever starts it must then stop it before exit, since
    multiprocessing waits for non-daemon children when the interpreter exits.
    """
    ctx = mp.get_context("spawn")
    process = ctx.Process(target=target, args=args, name=name, daemon=daemon)
    with _main_module_hidden():
        process.start()
    return process


def spawn_pipe() -> tuple[Any, Any]:
    """A duplex pipe (parent end, child end) from the spawn context."""
    return mp.get_context("spawn").Pipe(duplex=True)


def send_reply(conn: Any, status: str, value: Any, what: str = "call") -> None:
    """Send a worker's answer ("ok", result) or ("err", exception) down `conn`, pickled with
    protocol 5 (NumPy arrays as one buffer) and with the remote traceback for errors. An
    exception or result that does not pickle still arrives, as a RuntimeError/TypeError
    describing it; a closed pipe (the driver is gone) is ignored."""
    import pickle
    import traceback

    if status == "err":
        remote_tb = "".join(traceback.format_exception(type(value), value, value.__traceback__))
        try:
            data = pickle.dumps(("err", value, remote_tb), protocol=5)
        except Exception:
            data = pickle.dumps(("err", RuntimeError(f"{type(value).__name__}: {value}"), remote_tb), protocol=5)
    else:
        try:
            data = pickle.dumps(("ok", value, None), protocol=5)
        except Exception as err:
            data = pickle.dumps(("err", TypeError(f"The result of a {what} could not be sent back: {err}"), ""),
                                protocol=5)
    try:
        conn.send_bytes(data)
    except (BrokenPipeError, OSError):
        pass


def describe_exit(process: Any) -> str:
    """How a worker process ended: 'was killed by SIGKILL', 'exited with code 1', ..."""
    import signal

    code = process.exitcode
    if code is None:
        return "is shutting down"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exited with code {code}"


def serve_calls(conn: Any, run: Callable[[Any], Any], what: str = "call") -> None:
    """The worker side of the pipe: answer each cloudpickled call with `run(call)` (in
    order, errors sent back as errors) until the driver sends None or goes away."""
    import cloudpickle

    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the driver is gone
        call = cloudpickle.loads(message)
        if call is None:
            return
        try:
            result = run(call)
        except BaseException as err:
            send_reply(conn, "err", err, what=what)
        else:
            send_reply(conn, "ok", result, what=what)

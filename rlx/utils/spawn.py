"""Starting helper processes (EnvRunners, sub-envs, learners).

Workers start from a fork server (multiprocessing's "forkserver" method) that imported torch,
Gymnasium and rlx's runner once: each worker is a fork of it, so starting one (or restarting a
failed one) takes milliseconds instead of the seconds a fresh interpreter spends importing
torch. On other platforms than Linux, or with RLX_START_METHOD=spawn, workers are fresh "spawn"
interpreters. Neither method copies the starting process's memory, threads or
open files into the worker.

Both methods normally re-import the parent's `__main__` script in each child, so a script
without an `if __name__ == "__main__":` guard would run again in every worker and build
workers of its own. rlx ships everything a worker needs with cloudpickle (which carries
classes and functions defined in `__main__` by value), so the children are started
without the main script: users need no main guard.

What the driver set up for its workers reaches every child before the child's own code
runs (see `start_process`): the environment variables as they are when the worker starts
(a fork server was started earlier, with the variables of that time), the env registry
(`rlx.register_env` and Ray Tune's `register_env`), and, when Ray is initialised in the
starting process, the address and namespace of that Ray cluster: a worker whose code uses Ray
joins it on first use, so env code can reach the driver's named actors, and a worker that
never uses Ray starts no Ray job of its own (rlx.utils.ray_join).
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import sys
import threading
from typing import Any, Callable, Iterator

from rlx.utils.errors import RLXError
from rlx.utils.ray_join import join_on_first_use, pending_ray
from rlx.utils.registry import registry_snapshot, restore_registry
from rlx.utils.stack_dump import install as install_stack_dumps

logger = logging.getLogger(__name__)

_MISSING = object()
#: Modules the fork server imports once, so that workers forked from it need not: what an
#: EnvRunner or Learner process imports first. (A module that fails to import is skipped.)
FORKSERVER_PRELOAD = ("numpy", "torch", "gymnasium", "rlx.env.process_env_runner", "rlx.core.learner.learner_process")
#: Environment variable choosing the start method: "forkserver" or "spawn".
START_METHOD_ENV_VAR = "RLX_START_METHOD"
#: What went wrong while this worker process started (before its own code ran);
#: raised by `raise_startup_error()` inside the worker's own error reporting.
_STARTUP_ERROR: BaseException | None = None
_warned_ray_client = False


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


def _driver_ray() -> dict[str, str] | None:
    """Address and namespace of the Ray this process is connected to (or, in a worker that has
    not used Ray yet, was handed); None when Ray is not imported or not initialised (the common
    case, which costs nothing) or reached through Ray Client (whose children cannot join by address)."""
    global _warned_ray_client
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return pending_ray()  # a worker that has not used Ray hands on the cluster it was given
    client_hook = sys.modules.get("ray._private.client_mode_hook")
    if client_hook is not None and client_hook.client_mode_should_convert():
        if not _warned_ray_client:
            _warned_ray_client = True
            logger.warning("Ray is connected through Ray Client: rlx's worker processes do not join it, so env "
                           "code in them cannot reach Ray actors. Use env_runner_backend='ray' for that.")
        return None
    context = ray.get_runtime_context()
    return {"address": context.gcs_address, "namespace": context.namespace}


def worker_startup_state() -> dict[str, Any]:
    """What a worker process needs from this one before its own code runs: the env registry
    (`rlx.utils.registry.registry_snapshot()`), where this process's Ray is, if initialised, and
    this process's environment variables and pid. `start_process` ships it. (Ray actors,
    already in Ray, get only the registry snapshot.)"""
    return {"env_registry": registry_snapshot(), "ray": _driver_ray(), "environ": dict(os.environ),
            "parent_pid": os.getpid()}


def start_method() -> str:
    """The multiprocessing start method of rlx's worker processes: $RLX_START_METHOD when set,
    else "forkserver" on Linux, else "spawn" (macOS frameworks are not safe to use in a fork of
    a process that loaded them, as torch's import may have)."""
    available = mp.get_all_start_methods()
    chosen = os.environ.get(START_METHOD_ENV_VAR, "").strip().lower()
    if chosen:
        if chosen not in ("forkserver", "spawn") or chosen not in available:
            raise RLXError(f"{START_METHOD_ENV_VAR}={chosen!r}: rlx starts worker processes with 'forkserver' or "
                           f"'spawn'; this platform has {', '.join(m for m in available if m != 'fork')}.")
        return chosen
    return "forkserver" if sys.platform.startswith("linux") and "forkserver" in available else "spawn"


def _context() -> Any:
    """The multiprocessing context workers start from (the fork server preloads FORKSERVER_PRELOAD)."""
    method = start_method()
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
    return ctx


def raise_startup_error() -> None:
    """Raise what went wrong while this worker process started, if anything. Worker bodies
    call it where their errors are reported to the driver."""
    if _STARTUP_ERROR is not None:
        raise _STARTUP_ERROR


def _bootstrap(startup: dict[str, Any], name: str, target: Callable[..., Any], args: tuple) -> None:
    """First code of every worker process: restore the starting process's environment and env
    registry, arrange to join its Ray on first use, then run `target(*args)`."""
    global _STARTUP_ERROR
    where = f"worker process {name} (pid {os.getpid()})"
    if os.environ.pop(_SAFE_PATH_MARK, None):  # the processes this one starts get the user's environment
        os.environ.pop("PYTHONSAFEPATH", None)
    environ = startup.get("environ")
    if environ is not None and environ != os.environ:
        # A fork server started earlier has the variables of that time; the worker gets today's.
        os.environ.clear()
        os.environ.update(environ)
    try:
        # `rlx stack` finds it (under the process that started it) and can ask for its stacks.
        install_stack_dumps(_stack_role(name), name, parent_pid=startup.get("parent_pid"))
        restore_registry(startup["env_registry"], where=where)
        if startup["ray"] is not None:
            # Joined when the worker's code first uses Ray: a Ray job per process otherwise.
            join_on_first_use(startup["ray"], where)
    except Exception as err:  # reported where the worker reports its errors (raise_startup_error)
        _STARTUP_ERROR = RLXError(f"The {where} failed to start: {type(err).__name__}: {err}")
        _STARTUP_ERROR.__cause__ = err
    target(*args)


def _stack_role(name: str) -> str:
    """The `rlx stack` role of a worker named like "rlx-env-runner-3": "env-runner"."""
    base = name[len("rlx-"):] if name.startswith("rlx-") else name
    return next((role for role in ("env-runner", "learner", "sub-env") if base.startswith(role)), "worker")


def start_process(target: Callable[..., Any], args: tuple, name: str, daemon: bool = True) -> Any:
    """Start a worker process (see `start_method`) running `target(*args)` without re-running `__main__`.

    Before `target` runs, the new process gets this one's env registrations (names
    registered afterwards do not reach it) and, when Ray is initialised here, the address and
    namespace to join that cluster with on first use; `target` should call `raise_startup_error()` where it reports
    errors. `daemon=False` lets the process start processes of its own (an EnvRunner whose
    sub-envs run in processes); whoever starts it must then stop it before exit, since
    multiprocessing waits for non-daemon children when the interpreter exits.
    """
    ctx = _context()
    startup = worker_startup_state()
    process = ctx.Process(target=_bootstrap, args=(startup, name, target, args), name=name, daemon=daemon)
    with _main_module_hidden(), _safe_child_path():
        process.start()
    return process


_SAFE_PATH_LOCK = threading.Lock()
#: Set (with PYTHONSAFEPATH) in the environment of a child while it starts; its _bootstrap removes both.
_SAFE_PATH_MARK = "RLX_SET_PYTHONSAFEPATH"


@contextlib.contextmanager
def _safe_child_path() -> Iterator[None]:
    """Start the child with PYTHONSAFEPATH, so that its interpreter does not put its working
    directory first on sys.path before multiprocessing hands it this process's sys.path: a
    process running in a directory it does not trust (a checkpoint) must not import, say, a
    `multiprocessing/` package of that directory while its children start."""
    with _SAFE_PATH_LOCK:
        if os.environ.get("PYTHONSAFEPATH"):
            yield
            return
        os.environ["PYTHONSAFEPATH"] = os.environ[_SAFE_PATH_MARK] = "1"
        try:
            yield
        finally:
            os.environ.pop("PYTHONSAFEPATH", None)
            os.environ.pop(_SAFE_PATH_MARK, None)


def spawn_pipe() -> tuple[Any, Any]:
    """A duplex pipe (parent end, child end) for a worker process."""
    return _context().Pipe(duplex=True)


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

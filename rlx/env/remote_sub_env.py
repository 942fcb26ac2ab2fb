"""RemoteSubEnv: one sub-environment in its own process (`remote_worker_envs=True`).

The EnvRunner sends every sub-env its action first (`step_async`) and then collects the
answers (`step_wait`), so the sub-envs of one runner step in parallel. Worth it when a
step costs far more than a message between processes (about 50 microseconds).

With `remote_env_batch_wait_ms` > 0 the runner does not wait for every answer: it asks
`ready_sub_envs()` which steps have arrived within that many milliseconds, acts for those
sub-envs, and collects the others' answers in a later poll (see rlx.env.partial_steps).
"""
from __future__ import annotations

import pickle
import time
import traceback
from multiprocessing.connection import wait as wait_connections
from typing import Any, Callable, Sequence

from rlx.utils.errors import EnvError
from rlx.utils.spawn import raise_startup_error, spawn_pipe, start_process
from rlx.utils.worker_signals import ignore_stop_signals


def _serve(conn: Any, payload: bytes) -> None:
    """Body of the sub-env process: build the env, then answer (method, args) calls."""
    ignore_stop_signals()
    import cloudpickle

    try:
        raise_startup_error()
        env = cloudpickle.loads(payload)()
        info = {"observation_space": env.observation_space, "action_space": env.action_space,
                "metadata": getattr(env, "metadata", {}), "render_mode": getattr(env, "render_mode", None),
                "spec": getattr(env, "spec", None)}
        conn.send_bytes(pickle.dumps(("ok", info)))
    except BaseException as err:
        conn.send_bytes(pickle.dumps(("err", f"{type(err).__name__}: {err}\n{traceback.format_exc()}")))
        return
    while True:
        try:
            name, args, kwargs = cloudpickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        try:
            if name == "__getattr__":
                value = getattr(env, args[0])
                result = ("callable", None) if callable(value) else ("value", value)
            else:
                result = getattr(env, name)(*args, **kwargs)
            conn.send_bytes(pickle.dumps(("ok", result), protocol=5))
        except BaseException as err:
            conn.send_bytes(pickle.dumps(("err", f"{type(err).__name__}: {err}\n{traceback.format_exc()}")))
        if name == "close":
            break
    conn.close()


class RemoteSubEnv:
    """A Gymnasium-style env whose real env lives in a child process built by `make_env()`."""

    def __init__(self, make_env: Callable[[], Any], name: str = "env"):
        import cloudpickle

        self._name = name
        self._conn, child = spawn_pipe()
        self._process = start_process(_serve, (child, cloudpickle.dumps(make_env)), name=f"rlx-sub-env-{name}")
        child.close()
        self._waiting = False
        info = self._receive()
        self.observation_space = info["observation_space"]
        self.action_space = info["action_space"]
        self.metadata = info["metadata"]
        self.render_mode = info["render_mode"]
        self.spec = info["spec"]
        self._closed = False

    def _send(self, name: str, *args: Any, **kwargs: Any) -> None:
        import cloudpickle

        try:
            self._conn.send_bytes(cloudpickle.dumps((name, args, kwargs)))
        except (BrokenPipeError, OSError) as err:
            raise EnvError(f"The process of sub-env {self._name} is gone (exit code {self._process.exitcode}).") from err

    def _receive(self) -> Any:
        try:
            status, value = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError) as err:
            raise EnvError(f"The process of sub-env {self._name} died (exit code {self._process.exitcode}).") from err
        if status == "err":
            raise EnvError(f"Sub-env {self._name} (in its own process) raised {value}")
        return value

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._waiting:
            # A step left in flight by a sample() that raised: its answer comes first, and is dropped.
            try:
                self.step_wait()
            except EnvError:
                pass  # that step's failure; a dead process fails the call below
        self._send(name, *args, **kwargs)
        return self._receive()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset the remote env."""
        return self._call("reset", seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Step the remote env and wait for the result."""
        return self._call("step", action)

    def step_async(self, action: Any) -> None:
        """Send the action; `step_wait()` collects the result."""
        self._send("step", action)
        self._waiting = True

    def step_wait(self) -> tuple[Any, float, bool, bool, dict]:
        """The result of the action sent with `step_async()`."""
        self._waiting = False
        return self._receive()

    @property
    def result_connection(self) -> Any:
        """The pipe end the sub-env's answers arrive on (readable once `step_wait()` would not block)."""
        return self._conn

    def render(self) -> Any:
        """Render the remote env (rgb_array frames travel back)."""
        return self._call("render")

    @property
    def unwrapped(self) -> "RemoteSubEnv":
        """The proxy itself: the real env is in another process."""
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        kind, value = self._call("__getattr__", name)
        if kind == "value":
            return value
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    def close(self) -> None:
        """Close the remote env and end its process."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            if self._waiting:
                self._receive()
            self._call("close")
        except EnvError:
            pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()


def remote_sub_env_of(env: Any) -> RemoteSubEnv:
    """The RemoteSubEnv inside `env` (a RemoteSubEnv itself, or a wrapper of one such as a ConnectorEnv)."""
    node = env
    while not isinstance(node, RemoteSubEnv):
        inner = getattr(node, "env", None)
        if inner is None or inner is node:
            raise TypeError(f"{type(env).__name__} does not run in a process of its own (no RemoteSubEnv inside); "
                            "partial steps (remote_env_batch_wait_ms > 0) need remote_worker_envs=True.")
        node = inner
    return node


def ready_sub_envs(envs: Sequence[Any], waiting: Sequence[int], timeout_s: float) -> list[int]:
    """Which of the sub-envs `waiting` on a step (sent with `step_async`) have answered.

    Waits up to `timeout_s` seconds for all of them and returns those that answered by then;
    when none has, waits on until the first one does (RLlib's poll of remote sub-envs). A
    sub-env whose process died counts as answered: its `step_wait()` raises the error.
    """
    pending = {remote_sub_env_of(envs[i]).result_connection: i for i in waiting}
    ready: list[int] = []
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0 and ready:
            break
        for conn in wait_connections(list(pending), timeout=left if left > 0 else None):
            ready.append(pending.pop(conn))
    return sorted(ready)

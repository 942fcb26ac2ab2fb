"""Joining the driver's Ray cluster from a worker process on first use, not at start-up.

Every process that calls `ray.init` is a Ray driver and starts a Ray job of its own, so a
worker process (an EnvRunner or Learner process of the "process" backend, a sub-env process)
that joined the driver's cluster while starting would add a job per process. Most never use
Ray. A worker started while the driver is connected to Ray instead gets RAY_ADDRESS and
RAY_NAMESPACE in its environment, and Ray's automatic `ray.init()` (which runs on the first
`ray.get_actor`, `ray.get`, `ray.put`, ...) is made to join that cluster in the driver's
namespace, where the driver's named actors are. Only a worker whose code uses Ray connects.

Ray is not imported here: the connection is set up when the worker's code imports Ray.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import sys
import threading
from types import ModuleType
from typing import Any

from rlx.utils.errors import RLXError

#: The driver's Ray ({"address", "namespace"}) this worker joins on first use (None: none).
_PENDING: dict[str, str] | None = None
_WHERE = "worker process"
_LOCK = threading.Lock()
#: Ray's modules that bind its auto-init function by name when Ray is imported.
_AUTO_INIT_USERS = ("ray._private.auto_init_hook", "ray._private.client_mode_hook", "ray.util.placement_group")


def pending_ray() -> dict[str, str] | None:
    """The driver's Ray this worker joins on first use, if it was started with one (the
    processes it starts in turn are handed the same)."""
    return None if _PENDING is None else dict(_PENDING)


def join_on_first_use(ray_info: dict[str, str], where: str) -> None:
    """Arrange for this worker to join the Ray cluster at `ray_info["address"]`, in namespace
    `ray_info["namespace"]`, the first time its code uses Ray (see the module docstring)."""
    global _PENDING, _WHERE
    _PENDING, _WHERE = dict(ray_info), where
    os.environ["RAY_ADDRESS"] = ray_info["address"]
    os.environ["RAY_NAMESPACE"] = ray_info["namespace"]
    ray = sys.modules.get("ray")
    if ray is not None:
        _patch_auto_init()
    else:
        sys.meta_path.insert(0, _AfterRayImport())


def connect() -> None:
    """Join the pending Ray cluster now (Ray's automatic ray.init() calls this). A failure
    says what could not be reached and what to do instead."""
    import ray

    if ray.is_initialized() or _PENDING is None:
        return
    address, namespace = _PENDING["address"], _PENDING["namespace"]
    with _LOCK:
        if ray.is_initialized():
            return
        try:
            unreachable = gcs_unreachable(address)
            if unreachable is not None:
                raise ConnectionError(f"its GCS does not answer ({unreachable})")
            ray.init(address=address, namespace=namespace, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as err:
            raise RLXError(
                f"The {_WHERE} could not connect to the driver's Ray cluster at {address} (namespace "
                f"{namespace!r}), which env code in worker processes uses to reach Ray actors: "
                f"{type(err).__name__}: {err}. Use config.env_runners(env_runner_backend='ray') to run the "
                "EnvRunners as Ray actors instead.") from err


def gcs_unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """None when a TCP connection to `address` ("host:port") opens within `timeout_s`, else why
    not (ray.init would retry an unreachable GCS for minutes)."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as err:
        return f"{type(err).__name__}: {err}"


def _auto_init() -> None:
    """Ray's automatic ray.init(), joining the driver's cluster and namespace."""
    import ray

    if ray._private.auto_init_hook.enable_auto_connect and not ray.is_initialized():
        connect()


def _patch_auto_init() -> None:
    for name in _AUTO_INIT_USERS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "auto_init_ray"):
            module.auto_init_ray = _auto_init


class _AfterRayImport(importlib.abc.MetaPathFinder):
    """Patches Ray's auto-init once `import ray` has run (and then leaves sys.meta_path)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "ray":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_patch(module: ModuleType) -> None:
            exec_module(module)
            _patch_auto_init()

        spec.loader.exec_module = exec_then_patch  # type: ignore[method-assign]
        return spec

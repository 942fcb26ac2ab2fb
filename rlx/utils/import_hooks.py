"""Import hooks: run code right after a module finishes importing, without importing it; and
with that, register rlx with Ray Tune as soon as both are imported, without ever importing Ray.

`import rlx.algorithms` (any algorithm module) and `import rlx.models` call `install()`. When
`ray.tune` is already imported, `rlx.tune` is imported at once; otherwise a finder on
`sys.meta_path` waits for `ray.tune` and imports `rlx.tune` right after it finishes loading.
Importing `rlx.tune` registers rlx's algorithms and envs with Tune (again after each
`ray.init()`), so `tune.Tuner("PPO")` / `tune.run("PPO")` run rlx's PPO with no
`import rlx.tune`, in the driver and in every Ray worker that imports both (a trial actor, a
remote Tuner). Without it Tune would fall back to registering RLlib's algorithms under the
same names.

This module lives in the bottom layer, outside the `rlx.tune` package, on purpose: importing
anything inside that package runs `rlx/tune/__init__.py`, which imports Ray; `rlx.tune` is
named here only as a string, imported when Ray Tune is. It uses the standard library only, so
`import rlx.algorithms.ppo` stays as fast as before. `rlx._tune_autoregister` is this module
under its old name.
"""
from __future__ import annotations

import importlib
import logging
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

logger = logging.getLogger("rlx")

_TUNE = "ray.tune"
_lock = threading.RLock()
#: module name -> callbacks to run once that module has finished importing.
_pending: dict[str, list[Callable[[], None]]] = {}


def install() -> None:
    """Make `rlx.tune` register rlx with Ray Tune once `ray.tune` is imported (now, if it is)."""
    when_imported(_TUNE, _import_rlx_tune)


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Call `callback()` once the module `name` has finished importing: now if it already
    has, else right after its import (a finder on `sys.meta_path` watches for it)."""
    with _lock:
        # A module still being imported counts as imported: no finder would see it again.
        if name not in sys.modules:
            callbacks = _pending.setdefault(name, [])
            if callback not in callbacks:
                callbacks.append(callback)
            if not any(isinstance(f, _ImportWatcher) for f in sys.meta_path):
                sys.meta_path.insert(0, _ImportWatcher())
            return
    _run(callback)


def _import_rlx_tune() -> None:
    importlib.import_module("rlx.tune")


def _run(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # noqa: BLE001 - never break the user's import; Tune then says "Unknown trainable"
        logger.warning("rlx could not register itself with Ray Tune; `import rlx.tune` does it explicitly",
                       exc_info=True)


def _after_import(name: str) -> None:
    with _lock:
        callbacks = _pending.pop(name, [])
        if not _pending:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ImportWatcher)]
    for callback in callbacks:
        _run(callback)


class _ImportWatcher:
    """A `sys.meta_path` finder that finds nothing itself: for a watched module it asks the
    other finders for the spec and wraps that loader's `exec_module` to run the callbacks
    after the module's code. (Not an importlib.abc.MetaPathFinder: importing that module
    would cost more than everything else here.)"""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                _watch_loader(spec.loader, fullname)
                return spec
        return None


def _watch_loader(loader: Any, name: str) -> None:
    exec_module = getattr(loader, "exec_module", None)
    if exec_module is None:  # a legacy loader: nothing to wrap, the callbacks stay pending
        return

    # An attribute of this loader instance (one per module), not of its class; the
    # module's __loader__ stays the real loader, so importlib.resources & co. still work.
    def exec_then_notify(module: ModuleType) -> None:
        exec_module(module)
        try:
            del loader.exec_module
        except AttributeError:
            pass
        _after_import(name)

    loader.exec_module = exec_then_notify

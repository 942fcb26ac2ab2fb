"""Ray actor classes made on first use: `ray.remote(cls)` once per class and process, so that
importing a module that defines an actor never imports Ray."""
from __future__ import annotations

import threading
from typing import Any

_remote_classes: dict[type, Any] = {}
_lock = threading.Lock()


def remote_class(cls: type) -> Any:
    """`ray.remote(cls)`, made on the first call for `cls` (Ray is imported then) and reused."""
    with _lock:
        made = _remote_classes.get(cls)
        if made is None:
            import ray

            made = _remote_classes[cls] = ray.remote(cls)
        return made

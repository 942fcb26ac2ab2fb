"""User callbacks: RLlibCallback (old name DefaultCallbacks), chaining helpers and the dispatcher."""
from rlx.callbacks.callbacks import (
    ALGORITHM_EVENTS,
    CALLBACK_EVENTS,
    ENV_RUNNER_EVENTS,
    EPISODE_EVENTS,
    EVENT_KWARGS,
    OLD_API_EVENTS,
    CallbackDispatcher,
    DefaultCallbacks,
    MultiCallbacks,
    RLlibCallback,
    make_multi_callbacks,
    normalize_callbacks_class,
    normalize_event_callables,
)
from rlx.callbacks.memory_tracking import MemoryTrackingCallbacks

__all__ = [
    "ALGORITHM_EVENTS",
    "CALLBACK_EVENTS",
    "ENV_RUNNER_EVENTS",
    "EPISODE_EVENTS",
    "EVENT_KWARGS",
    "MLflowLoggerCallback",
    "MemoryTrackingCallbacks",
    "OLD_API_EVENTS",
    "CallbackDispatcher",
    "DefaultCallbacks",
    "MultiCallbacks",
    "RLlibCallback",
    "WandbLoggerCallback",
    "make_multi_callbacks",
    "normalize_callbacks_class",
    "normalize_event_callables",
]


def __getattr__(name: str) -> type:
    """The W&B and MLflow logger callbacks, imported on first use: rlx.loggers loads NumPy, and
    importing rlx.callbacks stays light."""
    if name in ("MLflowLoggerCallback", "WandbLoggerCallback"):
        from rlx.callbacks import loggers

        return getattr(loggers, name)
    raise AttributeError(f"module 'rlx.callbacks' has no attribute {name!r}")

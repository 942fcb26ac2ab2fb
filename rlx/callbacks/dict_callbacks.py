"""The oldest form of callbacks, a dict {event: fn(info)}: a generated RLlibCallback subclass whose
events call `fn` with the `info` dict (the keywords plus their old names) the old API passed."""
from __future__ import annotations

from typing import Any, Callable

from rlx.callbacks.events import DICT_EVENT_ALIASES, check_event_name
from rlx.callbacks.rllib_callback import RLlibCallback
from rlx.utils.errors import ConfigError


def _old_info(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The `info` dict the old dict-form callbacks received: the keywords plus old names."""
    info = dict(kwargs)
    if "algorithm" in kwargs:
        info["trainer"] = kwargs["algorithm"]
    if "base_env" in kwargs and kwargs["base_env"] is not None:
        info["env"] = kwargs["base_env"]
    if "policies" in kwargs and "policy" not in kwargs:
        info["policy"] = kwargs["policies"]
    if "postprocessed_batch" in kwargs:
        info["post_batch"] = kwargs["postprocessed_batch"]
    if "original_batches" in kwargs:
        originals = kwargs["original_batches"]
        info["all_pre_batches"] = originals
        pre = None
        # Keyed by agent id in the old API; rlx's single-agent runners key it by policy id.
        for key in (kwargs.get("agent_id"), kwargs.get("policy_id")):
            try:
                pre = originals[key]
                break
            except (KeyError, IndexError, TypeError):
                continue
        if pre is not None and not isinstance(pre, tuple):  # old form was (policy, batch)
            try:
                policy = kwargs["policies"][kwargs["policy_id"]]
            except (KeyError, IndexError, TypeError):
                policy = None
            pre = (policy, pre)
        info["pre_batch"] = pre
    return info


def dict_callbacks_class(mapping: dict) -> type:
    """A generated RLlibCallback subclass whose events call `fn(info)` for the old dict form."""
    body: dict[str, Any] = {"__doc__": "Generated from an old-style {event: fn(info)} callbacks dict."}
    for event, fn in mapping.items():
        if not isinstance(event, str):
            raise ConfigError(f"callbacks_class dict keys must be event names, got {event!r}.")
        event = DICT_EVENT_ALIASES.get(event, event)
        check_event_name(event, "callbacks_class dict")
        if not callable(fn):
            raise ConfigError(f"callbacks_class dict value for '{event}' must be a callable fn(info), got {fn!r}.")
        if event in body:
            raise ConfigError(f"callbacks_class dict sets '{event}' twice (once under its old name).")
        body[event] = _make_info_method(event, fn)
    return type("DictCallbacks", (RLlibCallback,), body)


def _make_info_method(event: str, fn: Callable[[dict], Any]) -> Callable[..., None]:
    def method(self: RLlibCallback, **kwargs: Any) -> None:
        fn(_old_info(kwargs))

    method.__name__ = method.__qualname__ = event
    method.__doc__ = f"Call {getattr(fn, '__qualname__', fn)!s}(info) for {event}."
    return method

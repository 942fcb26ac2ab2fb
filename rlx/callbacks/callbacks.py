"""Callbacks: RLlibCallback event methods, per-event callables, and the dispatcher that calls them.

Users inject code either as RLlibCallback subclasses (`config.callbacks(MyCallbacks)`, a list of
them, `MultiCallbacks([A, B])`, a factory, or the old `{"on_train_result": fn(info)}` dict) or as
plain callables per event (`config.callbacks(on_train_result=fn)`). A CallbackDispatcher, built once
per component, turns that into one precomposed callable per event, or None for events nobody handles.
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Iterable, Union

from rlx.callbacks.dict_callbacks import dict_callbacks_class
from rlx.callbacks.events import (ALGORITHM_EVENTS, CALLBACK_EVENTS, ENV_RUNNER_EVENTS, EPISODE_EVENTS, EVENT_KWARGS,
                                  KWARG_ALIASES, OLD_API_EVENTS, OPTIONAL_EVENT_KWARGS, RENAMED_EVENTS,
                                  check_event_name, event_hint)
from rlx.callbacks.rllib_callback import DefaultCallbacks, RLlibCallback
from rlx.utils.errors import ConfigError, did_you_mean
from rlx.utils.registry import import_object

__all__ = ["ALGORITHM_EVENTS", "CALLBACK_EVENTS", "ENV_RUNNER_EVENTS", "EPISODE_EVENTS", "EVENT_KWARGS",
           "OLD_API_EVENTS", "CallbackDispatcher", "DefaultCallbacks", "MultiCallbacks", "RLlibCallback",
           "make_multi_callbacks", "normalize_callbacks_class", "normalize_event_callables"]

_ACCEPTED = (
    "an RLlibCallback subclass (or its import path 'package.module.Name'), a list of them, "
    "MultiCallbacks([A, B]), a factory returning an RLlibCallback (e.g. functools.partial(MyCallbacks, x=1)), "
    "a dict {event: fn(info)}, or None"
)

CallbackItem = Union[type, Callable[[], "RLlibCallback"]]


# --------------------------------------------------------------------------- chaining classes


class _ChainedCallbacks(RLlibCallback):
    """Forwards every event to sub-instances built from `_rlx_items`, in order.

    The dispatcher never instantiates these: it expands them into their items instead.
    """

    _rlx_items: tuple = ()

    def __init__(self) -> None:
        self._instantiate_items()

    def _instantiate_items(self) -> None:
        self._callback_list = _instantiate(self._rlx_items)
        self._rlx_dispatch = _resolve(self._callback_list, {})


def _make_forwarder(event: str) -> Callable[..., None]:
    def forward(self: _ChainedCallbacks, **kwargs: Any) -> None:
        handler = self._rlx_dispatch.get(event)
        if handler is not None:
            handler(**kwargs)

    forward.__name__ = forward.__qualname__ = event
    forward.__doc__ = f"Call {event} on every chained callback, in order."
    return forward


for _event in CALLBACK_EVENTS:
    setattr(_ChainedCallbacks, _event, _make_forwarder(_event))
del _event


class MultiCallbacks(_ChainedCallbacks):
    """Chains several callback classes: `config.callbacks(MultiCallbacks([A, B]))`.

    The config holds this instance; calling it (as the library does with a callbacks class)
    creates fresh instances of every class and returns self.
    """

    def __init__(self, callback_class_list: Iterable[Any]) -> None:
        if isinstance(callback_class_list, (str, bytes)) or not isinstance(callback_class_list, Iterable):
            raise ConfigError(
                f"MultiCallbacks expects a list of RLlibCallback classes, got {callback_class_list!r}."
            )
        self._callback_class_list = list(callback_class_list)
        self._rlx_items = tuple(normalize_callbacks_class(self._callback_class_list))
        self._callback_list: list[RLlibCallback] = []
        self._rlx_dispatch: dict[str, Callable[..., None] | None] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> "MultiCallbacks":
        """Create fresh instances of every chained class and return self."""
        self._instantiate_items()
        return self

    def __repr__(self) -> str:
        names = ", ".join(getattr(c, "__name__", repr(c)) for c in self._callback_class_list)
        return f"MultiCallbacks([{names}])"


def make_multi_callbacks(callback_class_list: Iterable[Any]) -> type:
    """Return a new RLlibCallback subclass whose instances call every given class's events in order."""
    classes = list(callback_class_list)
    items = tuple(normalize_callbacks_class(classes))
    names = "_".join(getattr(c, "__name__", "factory") for c in classes)
    return type(
        f"MultiCallbacks_{names}" if names else "MultiCallbacks_empty",
        (_ChainedCallbacks,),
        {"_rlx_items": items, "__doc__": f"Chains {', '.join(getattr(c, '__name__', repr(c)) for c in classes)}."},
    )


# --------------------------------------------------------------------------- validation


def _check_callback_class(cls: type) -> None:
    """Reject `on_*` methods that look like misspelled or renamed events; warn about other ones."""
    if issubclass(cls, _ChainedCallbacks):
        return
    for name in dir(cls):
        if not name.startswith("on_") or name in EVENT_KWARGS or not callable(getattr(cls, name, None)):
            continue
        if name in RENAMED_EVENTS:
            raise ConfigError(
                f"{cls.__name__}.{name} is not a callback event. It was renamed to '{RENAMED_EVENTS[name]}'."
            )
        hint = did_you_mean(name, CALLBACK_EVENTS)
        if hint:
            raise ConfigError(f"{cls.__name__}.{name} is not a callback event.{hint}")
        warnings.warn(
            f"{cls.__name__}.{name} is not a callback event and will never be called by rlx.",
            stacklevel=2,
        )


def _needs_arguments(factory: Callable) -> bool:
    """Whether calling `factory()` without arguments would fail for missing parameters."""
    try:
        inspect.signature(factory).bind()
    except TypeError:
        return True
    except ValueError:  # no signature available (some builtins): assume it can be called
        return False
    return False


def _import_callbacks_class(path: str) -> Any:
    """The object a callbacks import path names (experiment files name classes this way, as RLlib's
    `update_from_dict` accepts them); a ConfigError naming the path when it cannot be imported."""
    try:
        return import_object(path)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"callbacks_class: cannot import '{path}' ({exc}); an import path must name a module that every "
            f"process can import (on the Python path where the driver starts). Accepted: {_ACCEPTED}."
        ) from exc


def _normalize_one(value: Any) -> list[CallbackItem]:
    if isinstance(value, str):
        return _normalize_one(_import_callbacks_class(value))
    if isinstance(value, dict):
        return [dict_callbacks_class(value)]
    if isinstance(value, type):
        if issubclass(value, MultiCallbacks):
            raise ConfigError("callbacks_class: pass MultiCallbacks([A, B]) (an instance), not the class.")
        if issubclass(value, _ChainedCallbacks):
            return list(value._rlx_items)
        if not issubclass(value, RLlibCallback):
            raise ConfigError(
                f"callbacks_class: class {value.__name__} does not subclass RLlibCallback "
                f"(rlx.callbacks.RLlibCallback, old name DefaultCallbacks). Accepted: {_ACCEPTED}."
            )
        _check_callback_class(value)
        if _needs_arguments(value):
            raise ConfigError(
                f"callbacks_class: {value.__name__}() needs constructor arguments; "
                f"pass functools.partial({value.__name__}, ...) instead."
            )
        return [value]
    if isinstance(value, MultiCallbacks):
        return list(value._rlx_items)
    if isinstance(value, RLlibCallback):
        raise ConfigError(
            f"callbacks_class: got an instance of {type(value).__name__}; pass the class itself "
            "(each component creates its own instance)."
        )
    if callable(value):
        target = value.func if isinstance(value, functools.partial) else None
        if isinstance(target, type):
            if not issubclass(target, RLlibCallback):
                raise ConfigError(
                    f"callbacks_class: {value!r} builds a {target.__name__}, which does not subclass "
                    f"RLlibCallback. Accepted: {_ACCEPTED}."
                )
            _check_callback_class(target)
        if _needs_arguments(value):
            raise ConfigError(
                f"callbacks_class: factory {value!r} cannot be called without arguments. A per-event "
                "function belongs in config.callbacks(on_<event>=fn)."
            )
        return [value]
    raise ConfigError(f"callbacks_class: got {value!r} ({type(value).__name__}). Accepted: {_ACCEPTED}.")


def normalize_callbacks_class(value: Any) -> list[CallbackItem]:
    """Validate a `callbacks_class` (old key `callbacks`) value; return its classes/factories in order.

    MultiCallbacks instances and make_multi_callbacks classes are expanded into their items, and the
    old `{event: fn(info)}` dict becomes a generated class.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items: list[CallbackItem] = []
        for item in value:
            if item is None or isinstance(item, (list, tuple)):
                raise ConfigError(f"callbacks_class: list item {item!r} is not accepted. Accepted items: {_ACCEPTED}.")
            items.extend(_normalize_one(item))
        return items
    return _normalize_one(value)


def normalize_event_callables(event: str, value: Any) -> list[Callable[..., Any]]:
    """Validate a `config.callbacks(on_<event>=fn | [fn, ...] | None)` value; return its callables."""
    check_event_name(event, "config.callbacks()")
    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for fn in items:
        if isinstance(fn, type):
            raise ConfigError(
                f"{event}: got the class {fn.__name__}; pass a function, or put callback classes in "
                "callbacks_class."
            )
        if not callable(fn):
            raise ConfigError(f"{event}: expected a callable or a list of callables, got {fn!r}.")
    return items


# --------------------------------------------------------------------------- dispatch


def _instantiate(items: Iterable[CallbackItem]) -> list[RLlibCallback]:
    """Fresh instances of every item; chained instances are replaced by their items' instances."""
    instances: list[RLlibCallback] = []
    for item in items:
        inst = item()
        if not isinstance(inst, RLlibCallback):
            raise ConfigError(f"callbacks_class: factory {item!r} returned {inst!r}, not an RLlibCallback instance.")
        if isinstance(inst, _ChainedCallbacks):
            instances.extend(_instantiate(inst._rlx_items))
            continue
        if not isinstance(item, type):
            _check_callback_class(type(inst))
        instances.append(inst)
    return instances


def _label(handler: Callable) -> str:
    owner = getattr(handler, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        return f"{type(owner).__name__}.{getattr(handler, '__name__', '?')}"
    return getattr(handler, "__qualname__", None) or repr(handler)


def _adapt(handler: Callable[..., Any], event: str) -> Callable[..., Any]:
    """Wrap `handler` so it receives only the keywords it names (computed once, here)."""
    known = EVENT_KWARGS[event]
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):  # no signature available: pass everything
        return handler
    takes_var_kw = False
    pairs: list[tuple[str, str]] = []  # (parameter name, keyword the library passes)
    for p in params:
        if p.kind is p.POSITIONAL_ONLY:
            raise ConfigError(
                f"{_label(handler)} takes positional-only parameter '{p.name}', but {event} passes "
                f"keyword arguments only: {', '.join(known)}."
            )
        if p.kind is p.VAR_KEYWORD:
            takes_var_kw = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        source = p.name if p.name in known else KWARG_ALIASES.get(p.name)
        if source not in known:
            if p.default is p.empty:
                raise ConfigError(
                    f"{_label(handler)} requires '{p.name}', which {event} does not pass. It passes: "
                    f"{', '.join(known)}.{did_you_mean(p.name, known)}"
                )
            continue
        pairs.append((p.name, source))
    renamed = tuple((name, src) for name, src in pairs if name != src)
    if takes_var_kw:
        if not renamed:
            return handler
        return lambda **kw: handler(**kw, **{name: kw[src] for name, src in renamed if src in kw})
    wanted = tuple(pairs)
    if any(src in OPTIONAL_EVENT_KWARGS for _, src in wanted):
        # A handler that names an argument a runner may not pass gets None for it, as by RLlib's default.
        return lambda **kw: handler(**{name: kw.get(src) for name, src in wanted
                                       if src in kw or src in OPTIONAL_EVENT_KWARGS})
    return lambda **kw: handler(**{name: kw[src] for name, src in wanted if src in kw})


def _chain(handlers: list[Callable[..., Any]]) -> Callable[..., None]:
    """One callable that calls every handler in order and returns None."""
    if len(handlers) == 1:
        only = handlers[0]

        def dispatch_one(**kwargs: Any) -> None:
            only(**kwargs)

        return dispatch_one
    chained = tuple(handlers)

    def dispatch_all(**kwargs: Any) -> None:
        for handler in chained:
            handler(**kwargs)

    return dispatch_all


def _resolve(
    instances: list[RLlibCallback], callables: dict[str, list[Callable[..., Any]]]
) -> dict[str, Callable[..., None] | None]:
    """Per event: overriding instance methods in order, then the event's callables; None if none."""
    table: dict[str, Callable[..., None] | None] = {}
    for event in CALLBACK_EVENTS:
        base = getattr(RLlibCallback, event)
        handlers = [
            _adapt(getattr(inst, event), event) for inst in instances if getattr(type(inst), event) is not base
        ]
        handlers.extend(_adapt(fn, event) for fn in callables.get(event, ()))
        table[event] = _chain(handlers) if handlers else None
    return table


class CallbackDispatcher(list):
    """Per-component callback resolution: fresh instances, one precomposed callable per event.

    `get(event)` is None for events nobody handles, so callers can skip building arguments.

    It is also what RLlib 2.60 exposes as `algo.callbacks`: the list of RLlibCallback instances
    (one per configured class, in order: `algo.callbacks[0]`). Old-API-stack code that reads an
    attribute of its one callbacks object (`algo.callbacks.my_counter`) still works when there
    is exactly one instance.
    """

    def __init__(
        self,
        callbacks_class: Any = None,
        event_callables: dict[str, Any] | None = None,
    ) -> None:
        callables = {
            event: normalize_event_callables(event, value) for event, value in (event_callables or {}).items()
        }
        self.instances: list[RLlibCallback] = _instantiate(normalize_callbacks_class(callbacks_class))
        super().__init__(self.instances)
        self._table = _resolve(self.instances, callables)
        self.handled_events: frozenset[str] = frozenset(e for e, h in self._table.items() if h is not None)

    def get(self, event: str) -> Callable[..., None] | None:
        """The callable that runs every handler of `event` (keywords only), or None when there are none."""
        try:
            return self._table[event]
        except KeyError:
            raise ConfigError(f"'{event}' is not a callback event.{event_hint(event)}") from None

    def has(self, event: str) -> bool:
        """Whether any handler is registered for `event`."""
        return self.get(event) is not None

    def has_any(self, events: Iterable[str]) -> bool:
        """Whether any of `events` has a handler (e.g. EPISODE_EVENTS, to decide on building episodes)."""
        return any(self.get(event) is not None for event in events)

    def fire(self, event: str, **kwargs: Any) -> None:
        """Call every handler of `event` with `kwargs`; a no-op when there are none."""
        handler = self.get(event)
        if handler is not None:
            handler(**kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the dispatcher lacks: the one instance's attribute (old API stack).
        instances = self.__dict__.get("instances")
        if name.startswith("__") or not instances or len(instances) != 1:
            raise AttributeError(f"'CallbackDispatcher' object has no attribute '{name}' (algo.callbacks is the "
                                 f"list of callback instances: use algo.callbacks[i].{name}).")
        return getattr(instances[0], name)

    def __repr__(self) -> str:
        names = ", ".join(type(i).__name__ for i in self.instances)
        return f"CallbackDispatcher(instances=[{names}], events={sorted(self.handled_events)})"

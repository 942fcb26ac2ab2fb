"""RLlib's API annotations (`ray.rllib.utils.annotations`), for user code that imports them.

`override(ParentClass)` checks that the decorated method exists in the parent class; the
stability markers (`PublicAPI`, `DeveloperAPI`, ...) return what they decorate unchanged.
"""
from __future__ import annotations

from typing import Any, Callable


def override(parent_cls: type) -> Callable[[Callable], Callable]:
    """Mark a method as overriding one of `parent_cls`; a NameError when the parent has none."""
    if not isinstance(parent_cls, type):
        raise TypeError(f"override() takes the parent class, got {parent_cls!r}: write @override(Parent).")

    def check(method: Callable) -> Callable:
        name = getattr(method, "__name__", None)
        if name is not None and not hasattr(parent_cls, name):
            raise NameError(f"{name} does not override a method of {parent_cls.__name__}.")
        return method

    return check


def _marker(obj: Any = None, **kwargs: Any) -> Any:
    # Usable bare (@PublicAPI) and called (@PublicAPI(stability="beta")).
    if obj is None or kwargs:
        return lambda target: target
    return obj


PublicAPI = DeveloperAPI = ExperimentalAPI = OldAPIStack = OverrideToImplementCustomLogic = _marker
OverrideToImplementCustomLogic_CallToSuperRecommended = _marker


def is_overridden(obj: Any, method_name: str, base: type) -> bool:
    """Whether `obj`'s class defines `method_name` differently from `base`."""
    return getattr(type(obj), method_name, None) is not getattr(base, method_name, None)

"""Env creation from what a user puts in `config.environment(env=...)`.

Accepted, in this order: a name registered with `register_env`, an import path
('package.module:Class' or 'package.module.Class'), a Gymnasium id (old versions such as
'CartPole-v0' map to the closest registered version), an env class, or a creator callable.
"""
from __future__ import annotations

import importlib
import logging
import re
from typing import Any, Callable

from rlx.env.env_context import EnvContext
from rlx.utils.errors import EnvError, did_you_mean

logger = logging.getLogger(__name__)

EnvCreator = Callable[[EnvContext], Any]

_ENV_REGISTRY: dict[str, EnvCreator] = {}


def register_env(name: str, env_creator: EnvCreator) -> None:
    """Register `env_creator(env_context) -> env` under `name` for `config.environment(name)`."""
    if not isinstance(name, str) or not name:
        raise EnvError(f"register_env needs a non-empty string name, got {name!r}.")
    if not callable(env_creator):
        raise EnvError(f"register_env('{name}', ...) needs a callable creator, got {env_creator!r}.")
    _ENV_REGISTRY[name] = env_creator
    _maybe_register_with_tune(name, env_creator)


def _maybe_register_with_tune(name: str, env_creator: EnvCreator) -> None:
    """Also register with Ray Tune's registry when Ray is already imported (no import cost otherwise)."""
    import sys

    if "ray.tune" in sys.modules:
        try:
            sys.modules["ray.tune"].register_env(name, env_creator)
        except Exception:  # pragma: no cover - best effort only
            logger.debug("Could not register env %s with Ray Tune", name, exc_info=True)


def registered_env_names() -> list[str]:
    """Names registered with register_env."""
    return sorted(_ENV_REGISTRY)


def get_registered_creator(name: str) -> EnvCreator | None:
    """The creator registered under `name`, if any."""
    return _ENV_REGISTRY.get(name)


def import_object(path: str) -> Any:
    """Import 'package.module:attr' or 'package.module.attr'."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"'{path}' is not an import path of the form 'package.module:Name'.")
    module = importlib.import_module(module_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _gym_ids() -> list[str]:
    import gymnasium as gym

    return list(gym.registry.keys())


def _closest_gym_version(env_id: str) -> str | None:
    match = re.fullmatch(r"(.+)-v(\d+)", env_id)
    if not match:
        return None
    base = match.group(1)
    versions = []
    for gid in _gym_ids():
        m = re.fullmatch(re.escape(base) + r"-v(\d+)", gid)
        if m:
            versions.append(int(m.group(1)))
    if not versions:
        return None
    return f"{base}-v{max(versions)}"


def make_env_creator(env: Any, env_config: dict | None = None) -> tuple[EnvCreator, str]:
    """Resolve an env specifier into `(creator(env_context) -> env, description)`."""
    if env is None:
        raise EnvError("No environment is configured: call config.environment('CartPole-v1') or similar.")
    if isinstance(env, str):
        return _creator_from_string(env)
    if isinstance(env, type):
        cls = env
        return (lambda ctx: cls(ctx)), f"{cls.__module__}.{cls.__qualname__}"
    if callable(env):
        fn = env
        return (lambda ctx: fn(ctx)), getattr(fn, "__qualname__", repr(fn))
    raise EnvError(f"Cannot create an env from {env!r}: give a name, a Gymnasium id, an import path or a class.")


def _creator_from_string(name: str) -> tuple[EnvCreator, str]:
    creator = _ENV_REGISTRY.get(name)
    if creator is not None:
        return creator, name
    import gymnasium as gym

    if name in gym.registry:
        return _gym_creator(name), name
    if ":" in name or ("." in name and "/" not in name):
        try:
            obj = import_object(name)
        except (ImportError, AttributeError) as err:
            if ":" in name:
                raise EnvError(f"Could not import env '{name}': {err}.") from err
        else:
            if isinstance(obj, type):
                return (lambda ctx: obj(ctx)), name
            if callable(obj):
                return (lambda ctx: obj(ctx)), name
            raise EnvError(f"'{name}' imports to {obj!r}, which is neither an env class nor a creator.")
    closest = _closest_gym_version(name)
    if closest is not None:
        logger.warning("Env id '%s' is not registered in Gymnasium; using '%s' instead.", name, closest)
        return _gym_creator(closest), closest
    hint = did_you_mean(name, list(_ENV_REGISTRY) + _gym_ids())
    raise EnvError(
        f"Unknown env '{name}'.{hint} Use a Gymnasium id (e.g. 'CartPole-v1'), register a creator with "
        f"rlx.register_env('{name}', lambda env_config: MyEnv(env_config)), or give an import path "
        "'package.module:MyEnv'."
    )


def _gym_creator(env_id: str) -> EnvCreator:
    def create(ctx: EnvContext) -> Any:
        import gymnasium as gym

        kwargs = dict(ctx)
        try:
            return gym.make(env_id, **kwargs)
        except TypeError as err:
            raise EnvError(
                f"gymnasium.make('{env_id}', **env_config) failed with env_config={kwargs!r}: {err}. "
                "env_config keys are passed to the env's constructor; remove the ones it does not take."
            ) from err

    return create

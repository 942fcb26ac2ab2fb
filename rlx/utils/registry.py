"""The registries of this process: env creators, ModelCatalog's custom models and action
distributions, the Algorithms built here (`LIVE_ALGORITHMS`), and `import_object` for
'package.module:Name' paths.

Env names. Accepted by `make_env_creator`, in this order: a name registered with
`register_env` (or with `ray.tune.registry.register_env`, when Ray Tune is imported), a
Gymnasium id, an import path ('package.module:Class' or 'package.module.Class'), an old
Gymnasium version such as 'CartPole-v0' (mapped to the closest registered version), an env
class, or a creator callable.

Model names. `ModelCatalog.register_custom_model` / `register_custom_action_dist`
(rlx.models.catalog) store their classes in `CUSTOM_MODELS` / `CUSTOM_ACTION_DISTS` here, and
`find_custom_class` looks a name up: registered here, shipped from the driver, or registered
with Ray Tune.

Registrations live in this process. Worker processes (EnvRunners, sub-envs, learners) and
Ray actors get a snapshot of them when they start (`registry_snapshot()` in the process
that starts them, `restore_registry()` in the new one), so a name registered in the driver
resolves everywhere; one registered after a worker started does not reach that worker.

Standard library, gymnasium (on first use) and cloudpickle (when shipping) only: this module is
the bottom layer, and `rlx.env.registry` is this very module under its old name.
"""
from __future__ import annotations

import importlib
import logging
import re
import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable, Mapping

from rlx.utils.ale_ids import ensure_ale_registered
from rlx.utils.errors import ConfigError, EnvError, did_you_mean

if TYPE_CHECKING:
    from rlx.env.env_context import EnvContext

logger = logging.getLogger(__name__)

EnvCreator = Callable[["EnvContext"], Any]

_ENV_REGISTRY: dict[str, EnvCreator] = {}
#: Registrations shipped from the process that started this one (see `restore_registry`).
_SHIPPED: dict[str, "_ShippedCreator"] = {}
#: Names registered there whose creators could not be shipped here, with the reason.
_NOT_SHIPPED: dict[str, str] = {}
#: This worker process in error messages ("worker process rlx-env-runner-1 (pid 12)");
#: None in a process that received no snapshot (the driver).
_WORKER_LABEL: str | None = None


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
    if "ray.tune" in sys.modules:
        try:
            sys.modules["ray.tune"].register_env(name, env_creator)
        except Exception:  # pragma: no cover - best effort only
            logger.debug("Could not register env %s with Ray Tune", name, exc_info=True)


def registered_env_names() -> list[str]:
    """Names registered with register_env here, or shipped from the process that started this one."""
    return sorted(set(_ENV_REGISTRY) | set(_SHIPPED))


def get_registered_creator(name: str) -> EnvCreator | None:
    """The creator registered under `name`, if any: with `register_env` in this process, in
    the process that started this one (shipped at start), or with Ray Tune's `register_env`
    (looked up only when `ray.tune.registry` is already imported)."""
    creator = _ENV_REGISTRY.get(name)
    if creator is not None:
        return creator
    shipped = _SHIPPED.get(name)
    if shipped is not None:
        return shipped.load()
    return _tune_creator(name)


# ---------------------------------------------------------------- Ray Tune's registry


def _tune_registry_module() -> Any | None:
    """`ray.tune.registry` when something already imported it; never imported here, so that
    `import rlx` and processes without Ray stay light."""
    return sys.modules.get("ray.tune.registry")


def _tune_creator(name: str) -> EnvCreator | None:
    """The creator registered under `name` with `ray.tune.registry.register_env`, if any."""
    tune = _tune_registry_module()
    if tune is None:
        return None
    try:
        if tune._global_registry.contains(tune.ENV_CREATOR, name):
            return tune._global_registry.get(tune.ENV_CREATOR, name)
    except Exception:  # no Ray session any more, a non-ASCII name, ...: not registered there
        logger.debug("Looking up env %r in Ray Tune's registry failed", name, exc_info=True)
    return None


def _tune_env_names(tune: Any) -> set[str]:
    """Names registered with Tune's `register_env`: those held in this process (not yet
    flushed to Ray, or flushed from here) and, with Ray running, those in Ray's KV store for
    this job (registered by another process of the job, e.g. the driver of a Tune trial)."""
    registry = tune._global_registry
    keys = list(getattr(registry, "_to_flush", {})) + list(getattr(registry, "_registered", ()))
    names = {key for category, key in keys if category == tune.ENV_CREATOR}
    from ray.experimental import internal_kv  # Ray is imported: ray.tune.registry imports it

    if internal_kv._internal_kv_initialized():
        prefix = tune._make_key(registry.prefix, tune.ENV_CREATOR, "")
        names.update(key[len(prefix):].decode() for key in internal_kv._internal_kv_list(prefix))
    return names


def _tune_registrations() -> dict[str, EnvCreator]:
    """Envs registered with Tune's `register_env` and not with rlx's (empty without Ray Tune)."""
    tune = _tune_registry_module()
    if tune is None:
        return {}
    try:
        names = _tune_env_names(tune)
    except Exception:  # private parts of Tune's registry changed, or Ray went away
        logger.debug("Could not list the envs in Ray Tune's registry", exc_info=True)
        return {}
    creators = {}
    for name in names - set(_ENV_REGISTRY) - set(_SHIPPED):
        creator = _tune_creator(name)
        if creator is not None:
            creators[name] = creator
    return creators


# ---------------------------------------------------------------- shipping to worker processes


class _ShippedCreator:
    """A creator registered in the process that started this one, as cloudpickled bytes;
    unpickled on first use, so a creator this process never uses imports nothing here."""

    def __init__(self, name: str, data: bytes):
        self.name = name
        self.data = data
        self._creator: EnvCreator | None = None

    def load(self) -> EnvCreator:
        """The creator, unpickled once."""
        if self._creator is None:
            import cloudpickle

            try:
                self._creator = cloudpickle.loads(self.data)
            except Exception as err:
                raise EnvError(
                    f"Env '{self.name}' is registered in the driver, but its creator could not be loaded in "
                    f"{_WORKER_LABEL or 'this process'}: {type(err).__name__}: {err}. The creator travels with "
                    "cloudpickle, which sends functions and classes of importable modules by name: those modules "
                    "must be importable here too (install them on this machine, or define the creator in the "
                    "driver script)."
                ) from err
        return self._creator


def _pickle_creator(creator: EnvCreator) -> bytes | Exception:
    """The creator cloudpickled, or the error pickling it raised."""
    import cloudpickle

    try:
        return cloudpickle.dumps(creator)
    except Exception as err:
        return err


def registry_snapshot() -> dict[str, dict[str, Any]]:
    """The env registrations of this process, ready to ship to a worker process it starts.

    Holds every name registered with `register_env` here, shipped here from the process
    that started this one, or registered with Ray Tune's `register_env` (when
    `ray.tune.registry` is imported): `{"creators": {name: cloudpickled creator},
    "unpicklable": {name: why its creator did not pickle}}`. cloudpickle carries lambdas,
    closures and classes defined in `__main__` by value. Give it to `restore_registry` in
    the new process.
    """
    pickled: dict[str, bytes | Exception] = {}  # later sources win a name
    for name, creator in _tune_registrations().items():
        pickled[name] = _pickle_creator(creator)
    for name, shipped in _SHIPPED.items():
        pickled[name] = shipped.data
    for name, creator in _ENV_REGISTRY.items():
        pickled[name] = _pickle_creator(creator)
    creators = {name: data for name, data in pickled.items() if isinstance(data, bytes)}
    unpicklable = {name: why for name, why in _NOT_SHIPPED.items() if name not in pickled}
    unpicklable.update({name: f"{type(err).__name__}: {err}" for name, err in pickled.items()
                        if isinstance(err, Exception)})
    return {"creators": creators, "unpicklable": unpicklable, **_model_catalog_snapshot()}


def _model_catalog_snapshot() -> dict[str, dict[str, bytes]]:
    """ModelCatalog's registrations (custom models and action distributions) of this process,
    cloudpickled: a model registered in the driver resolves in the processes it starts too.
    Classes that do not pickle are left out (the worker's error then names the class)."""
    out: dict[str, dict[str, bytes]] = {}
    for kind, registered in _CUSTOM_TABLES.items():
        out[kind] = {name: data for name, data in SHIPPED_CUSTOM[kind].items() if name not in registered}
        for name, cls in registered.items():
            data = _pickle_creator(cls)
            if isinstance(data, bytes):
                out[kind][name] = data
    return out


def restore_registry(snapshot: Mapping[str, Mapping[str, Any]] | None, where: str) -> None:
    """Make the registrations of `snapshot` (from `registry_snapshot()` in the process that
    started this one) resolve here. Call it first thing in a new worker process; `where`
    names the process in error messages ("worker process rlx-env-runner-1 (pid 12)")."""
    global _WORKER_LABEL
    _WORKER_LABEL = where
    if not snapshot:
        return
    for name, data in snapshot.get("creators", {}).items():
        _SHIPPED[name] = _ShippedCreator(name, data)
        _NOT_SHIPPED.pop(name, None)
    for name, reason in snapshot.get("unpicklable", {}).items():
        _SHIPPED.pop(name, None)
        _NOT_SHIPPED[name] = reason
    # Unpickled when a name is looked up: a class this process cannot load fails only the
    # configs that use it, with an error naming it.
    for kind in _CUSTOM_TABLES:
        SHIPPED_CUSTOM[kind].update(snapshot.get(kind, {}))


# ---------------------------------------------------------------- ModelCatalog's tables

#: Custom models registered with ModelCatalog.register_custom_model: {name: model class}.
CUSTOM_MODELS: dict[str, Any] = {}
#: Custom action distributions registered with ModelCatalog.register_custom_action_dist.
CUSTOM_ACTION_DISTS: dict[str, Any] = {}
_CUSTOM_TABLES: dict[str, dict[str, Any]] = {"custom_models": CUSTOM_MODELS,
                                             "custom_action_dists": CUSTOM_ACTION_DISTS}
#: Registrations shipped (cloudpickled) from the process that started this one, unpickled on
#: first use: {"custom_models" | "custom_action_dists": {name: bytes}}.
SHIPPED_CUSTOM: dict[str, dict[str, bytes]] = {"custom_models": {}, "custom_action_dists": {}}
#: Ray Tune's registry categories of RLlib's ModelCatalog.
_TUNE_CATEGORIES = {"custom_models": "rllib_model", "custom_action_dists": "rllib_action_dist"}


def register_custom_class(kind: str, name: str, cls: Any) -> None:
    """Store `cls` under `name` in ModelCatalog's table `kind` ("custom_models" or
    "custom_action_dists"), and in Ray Tune's registry when Ray Tune is imported (as RLlib
    does, so trials running in Ray workers find it too). The caller checks `cls`."""
    _CUSTOM_TABLES[kind][name] = cls
    tune = _tune_registry_module()
    if tune is None:
        return
    try:
        tune._global_registry.register(_TUNE_CATEGORIES[kind], name, cls)
    except Exception:  # noqa: BLE001 - the local registration stands; Ray workers then miss it
        logger.warning("Could not register %r with Ray Tune's registry", name, exc_info=True)


def find_custom_class(kind: str, name: str) -> Any | None:
    """The class registered as `name` in ModelCatalog's table `kind`: in this process, shipped
    from the process that started this one, or with Ray Tune's registry; None when none is.
    ConfigError naming the class when a shipped class cannot be loaded here."""
    cls = _CUSTOM_TABLES[kind].get(name)
    if cls is None:
        cls = _unship_custom(kind, name)
    if cls is None:
        cls = _from_tune(_TUNE_CATEGORIES[kind], name)
    return cls


def registered_custom_names(kind: str) -> list[str]:
    """The names registered in ModelCatalog's table `kind` in this process."""
    return sorted(_CUSTOM_TABLES[kind])


def _unship_custom(kind: str, name: str) -> Any:
    """The class registered as `name` in the process that started this one (None when none was
    shipped), unpickled now; ConfigError naming the class when this process cannot load it."""
    data = SHIPPED_CUSTOM[kind].get(name)
    if data is None:
        return None
    import cloudpickle

    try:
        cls = cloudpickle.loads(data)
    except Exception as err:  # noqa: BLE001 - e.g. the class's module is not importable here
        raise ConfigError(
            f"{name!r} was registered with ModelCatalog in the driver, but this worker process cannot load its "
            f"class ({type(err).__name__}: {err}). Define the class in a module every process can import (or "
            "inside the script or function that registers it), or give an import path 'package.module:Class'."
        ) from None
    _CUSTOM_TABLES[kind][name] = cls
    return cls


def _from_tune(category: str, name: str) -> Any:
    """What Ray Tune's registry holds as `name` in `category` (None without Ray Tune)."""
    tune = _tune_registry_module()
    if tune is None:
        return None
    try:
        if tune._global_registry.contains(category, name):
            return tune._global_registry.get(category, name)
    except Exception:  # noqa: BLE001 - no Ray session: nothing registered there
        return None
    return None


# ---------------------------------------------------------------- Algorithms of this process

#: Every Algorithm built in this process (weakly: a dropped one is forgotten). The old API's
#: `Policy.learn_on_batch` finds the one whose Learner trains its module (rlx.env.policy_learning).
LIVE_ALGORITHMS: "weakref.WeakSet[Any]" = weakref.WeakSet()


# ---------------------------------------------------------------- resolving env specifiers


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
    creator = get_registered_creator(name)
    if creator is not None:
        return creator, name
    import gymnasium as gym

    ensure_ale_registered(name)
    if name in gym.registry:
        return _gym_creator(name), name
    plugin = _plugin_env_id(name)
    if plugin is not None:
        return _gym_creator(plugin), plugin
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
    raise _unknown_env_error(name)


def _plugin_env_id(name: str) -> str | None:
    """For Gymnasium's 'package:Namespace/Env-vN' form (e.g. 'ale_py:ALE/Pong-v5'): import the
    package, as gymnasium.make does, and return the id it registered; None for other names.
    Each process resolves it itself, so runner and learner processes import the package too."""
    module_name, sep, env_id = name.partition(":")
    if not sep or not re.fullmatch(r"(?:[\w.-]+/)?[\w.-]+-v\d+", env_id):
        return None
    import gymnasium as gym

    if "__main__" in module_name.split(".") or module_name.split(".")[0] in sys.stdlib_module_names:
        raise EnvError(f"Env '{name}': '{module_name}' is a standard-library or `__main__` module, which registers "
                       "no Gymnasium env (importing a `__main__` module runs a program); rlx does not import it. Name "
                       "the package that registers the env, e.g. 'ale_py:ALE/Pong-v5'.")
    try:
        importlib.import_module(module_name)
    except ImportError as err:
        raise EnvError(f"Env '{name}': importing '{module_name}', the package that registers '{env_id}', "
                       f"failed: {err}. Install that package.") from err
    if env_id not in gym.registry:
        raise EnvError(f"Env '{name}': '{module_name}' was imported but registered no Gymnasium env '{env_id}'."
                       f"{did_you_mean(env_id, _gym_ids())}")
    return env_id


def _unknown_env_error(name: str) -> EnvError:
    """Why `name` resolves to no env here, and what to do about it."""
    if name in _NOT_SHIPPED:
        return EnvError(
            f"Env '{name}' is registered in the driver, but its creator could not be sent to "
            f"{_WORKER_LABEL or 'this process'}: it does not pickle ({_NOT_SHIPPED[name]}). Worker processes "
            "get the driver's registrations with cloudpickle: register a creator that pickles (a module-level "
            "function or class, or a lambda capturing only picklable values), or use "
            "env_runner_backend='thread', which needs no pickling."
        )
    hint = did_you_mean(name, registered_env_names() + _gym_ids())
    if _WORKER_LABEL is not None:
        shipped = ", ".join(f"'{n}'" for n in sorted(_SHIPPED)) or "none"
        return EnvError(
            f"Unknown env '{name}' in {_WORKER_LABEL}.{hint} A worker process gets the driver's env "
            f"registrations (rlx.register_env, ray.tune.registry.register_env) when it starts, and '{name}' was "
            f"not registered then (names it got: {shipped}). Register it in the driver before building the "
            "algorithm: a register_env after build() does not reach runners already started. A Gymnasium id "
            "or an import path 'package.module:MyEnv' needs no registration."
        )
    return EnvError(
        f"Unknown env '{name}'.{hint} Use a Gymnasium id (e.g. 'CartPole-v1'), register a creator with "
        f"rlx.register_env('{name}', lambda env_config: MyEnv(env_config)), or give an import path "
        "'package.module:MyEnv'."
    )


def _gym_creator(env_id: str) -> EnvCreator:
    def create(ctx: "EnvContext") -> Any:
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

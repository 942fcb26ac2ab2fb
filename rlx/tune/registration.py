"""What `import rlx.tune` registers with Ray Tune, and the hook that lets Tune take rlx
Algorithm classes.

* Every algorithm of `rlx.algorithms.registry` as a Tune trainable under its name, so
  `tune.Tuner("PPO", ...)` and `tune.run("PPO", ...)` run rlx's PPO.
* Every env registered with `rlx.register_env` so far (later ones are forwarded by
  `register_env` itself once ray.tune is imported), so trials in other processes find them.
* Both again after each `ray.init()`: Tune keeps registrations in the Ray session, and a
  new session (after `ray.shutdown()`) starts without them. Ray runs its own registry flush
  from the same post-init hook list.
* `tune.Tuner(PPO, ...)` / `tune.run(PPOTrainer, ...)` with an Algorithm class: see
  `install_algorithm_class_hook`.
* rlx configs as `param_space=` / `config=`: see `register_config_class`.
* rlx's names stay rlx's when Tune falls back to RLlib's algorithms for a name it does not
  know: see `install_rllib_fallback_guard`.

`import rlx.algorithms` imports this package by itself once `ray.tune` is imported
(rlx/_tune_autoregister.py), so none of this needs an explicit `import rlx.tune`.
"""
from __future__ import annotations

import logging
from typing import Any

from rlx._tune_autoregister import when_imported
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.tune.trainable import REGISTERED, is_algorithm_class, trainable
from rlx.utils.registry import get_registered_creator, registered_env_names

logger = logging.getLogger(__name__)


def register_algorithms() -> list[str]:
    """Register every rlx algorithm with Ray Tune under its registry name; return the names."""
    from ray.tune.registry import register_trainable

    for name, cls in REGISTERED.items():
        register_trainable(name, cls)
    return list(REGISTERED)


def register_envs() -> list[str]:
    """Register every env of `rlx.register_env` with Ray Tune's env registry; return the names."""
    from ray.tune.registry import register_env

    names = registered_env_names()
    for name in names:
        register_env(name, get_registered_creator(name))
    return names


def _register_all() -> None:
    try:
        register_algorithms()
        register_envs()
    except Exception:  # noqa: BLE001 - never break ray.init(); Tune then says "Unknown trainable"
        logger.warning("rlx.tune could not register rlx's algorithms with Ray Tune", exc_info=True)


def install_reinit_hook() -> None:
    """Register again after every `ray.init()` (a new Ray session has an empty registry)."""
    import ray._private.worker as ray_worker

    hooks = getattr(ray_worker, "_post_init_hooks", None)
    if isinstance(hooks, list) and _register_all not in hooks:
        hooks.append(_register_all)


def install_algorithm_class_hook() -> None:
    """Let Tune's `run=`/`trainable=` be an rlx Algorithm class: `tune.Tuner(PPO, ...)`.

    Tune turns a class into a trainable in one place, `Experiment.register_if_needed`
    (Tuner.fit and tune.run both build their Experiment through it): it registers the class
    under its `__name__` and the trials look it up by that name. It accepts only
    `ray.tune.Trainable` subclasses (an ordinary class check, no ABC or registration hook),
    and rlx's Algorithm must not subclass Trainable (`import rlx.algorithms.ppo` never
    imports ray). So this wraps that one classmethod: an Algorithm class is swapped for its
    adapter, `rlx.tune.trainable(cls)`, named like the class, before Tune registers it;
    anything else passes through untouched. Idempotent.
    """
    from ray.tune.experiment import Experiment

    current = Experiment.__dict__["register_if_needed"].__func__
    if getattr(current, "_rlx_original", None) is not None:
        return

    def register_if_needed(cls: Any, run_object: Any) -> Any:
        if is_algorithm_class(run_object):
            run_object = trainable(run_object)
        return current(cls, run_object)

    register_if_needed._rlx_original = current  # type: ignore[attr-defined]
    register_if_needed.__doc__ = current.__doc__
    register_if_needed.__wrapped__ = current  # type: ignore[attr-defined]
    Experiment.register_if_needed = classmethod(register_if_needed)


def register_config_class() -> None:
    """Let Tune take an rlx config itself as `Tuner(param_space=...)` or `tune.run(config=...)`.

    Tune converts a config with `to_dict()` when it is an instance of its ABC
    `ray.tune.tune._Config` (RLlib's AlgorithmConfig subclasses it); anything else must
    be a dict. rlx's AlgorithmConfig cannot subclass it (`import rlx` never imports Ray),
    so it is registered as a virtual subclass, as soon as its module is imported (now, if
    it is). `to_dict()` is the flat dict `AlgorithmTrainable.make_config` reads, search
    spaces included.
    """
    when_imported("rlx.algorithms.algorithm_config", _register_config_class)


def _register_config_class() -> None:
    from ray.tune.tune import _Config

    if not issubclass(AlgorithmConfig, _Config):
        _Config.register(AlgorithmConfig)


def install_rllib_fallback_guard() -> None:
    """Keep "PPO", "DQN", ... rlx's when Tune falls back to RLlib's algorithms.

    For a trainable name it does not know (a typo, an algorithm only RLlib has), Tune calls
    `ray.tune.registry._has_rllib_trainable`, which registers every RLlib algorithm when
    RLlib is importable, overwriting rlx's registrations of the same names: a later
    `tune.Tuner("PPO")` would silently train RLlib's PPO. This wraps that function to
    register rlx's algorithms again right after. Idempotent.
    """
    import ray.tune.registry as tune_registry

    current = getattr(tune_registry, "_has_rllib_trainable", None)
    if current is None or getattr(current, "_rlx_original", None) is not None:
        return

    def _has_rllib_trainable(trainable_name: str) -> bool:
        try:
            return current(trainable_name)
        finally:
            register_algorithms()

    _has_rllib_trainable._rlx_original = current  # type: ignore[attr-defined]
    _has_rllib_trainable.__wrapped__ = current  # type: ignore[attr-defined]
    tune_registry._has_rllib_trainable = _has_rllib_trainable

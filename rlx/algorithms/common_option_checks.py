"""The checks of individual AlgorithmConfig option values used by the option table in
common_options.py: each takes the option's name and value and returns the value normalised,
or raises a ConfigError that names the option."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.config_options import boolean, choice, dictionary, integer
from rlx.callbacks.callbacks import normalize_callbacks_class, normalize_event_callables
from rlx.core.compile_options import check_backend_option, what_to_compile as compile_targets
from rlx.core.rl_module.compiled_acting import check_worker_backend
from rlx.offline.estimators.methods import check_input_evaluation, check_methods
from rlx.utils.errors import ConfigError, NotSupportedYetError


def torch_device(name: str, value: Any) -> Any:
    """None or a string torch accepts as a device ("cpu", "cuda", "cuda:1", "mps")."""
    if value is None:
        return None
    import torch

    try:
        torch.device(value)
    except (RuntimeError, TypeError, ValueError, OverflowError) as err:
        raise ConfigError(f"{name} must be a torch device such as 'cpu', 'cuda:0' or 'mps', got {value!r} ({err}).") \
            from None
    return str(value)


def ope_methods(name: str, value):
    """The off-policy estimation methods of `value` (see rlx.offline.estimators.methods)."""
    return check_methods(name, value)


def input_evaluation(name: str, value):
    """The old input_evaluation setting, checked as off-policy estimation methods."""
    return check_input_evaluation(name, value)


def framework(name: str, value):
    """'torch'; any other framework raises a ConfigError (rlx is PyTorch-only)."""
    if value == "torch":
        return value
    if value in ("tf", "tf2", "tfe", "jax"):
        raise ConfigError(
            f"framework={value!r} is not available: rlx is PyTorch-only. "
            "Use config.framework('torch') (the default) or drop the framework setting."
        )
    raise ConfigError(f"'{name}' must be 'torch' (rlx is PyTorch-only), got {value!r}.")


def must_be_true(what: str):
    """A check that accepts only True for an option rlx cannot turn off (`what` says why)."""
    def check(name: str, value):
        value = boolean(name, value)
        if not value:
            raise ConfigError(f"'{name}=False' is not available: {what}")
        return value

    return check


def exploration_config(name: str, value):
    """An exploration config dict, validated (see rlx.utils.exploration)."""
    from rlx.utils.exploration import validate_exploration_config

    value = dictionary()(name, value)
    return validate_exploration_config(dict(value))


def dynamo_backend(name: str, value):
    """A torch.compile backend name for the learner (see rlx.core.compile_options)."""
    return check_backend_option(name, value)


def worker_dynamo_backend(name: str, value):
    """A torch.compile backend name for the EnvRunners."""
    return check_worker_backend(name, value)


def compress_observations(name: str, value):
    """True, False or RLlib's 'bulk' (one compressed block per column, what rlx always does)."""
    if value == "bulk":
        return value
    try:
        return boolean(name, value)
    except ConfigError:
        raise ConfigError(f"'{name}' must be True, False or 'bulk', got {value!r}.") from None


def replay_mode(name: str, value):
    """The multi-agent replay mode ('independent' or 'lockstep')."""
    # The replay-buffer package costs 10 ms to import: only a config that sets replay_mode pays it.
    from rlx.utils.replay_buffers.multi_agent_replay_buffer import check_replay_mode

    return check_replay_mode(name, value)


def what_to_compile(name: str, value):
    """What torch.compile compiles in the learner."""
    return compile_targets(value)


def torch_lr_scheduler_classes(name: str, value):
    """None, a list of lr-scheduler factories (fn(optimizer) -> torch LRScheduler, e.g. a class or a
    functools.partial of one), or {module_id: such a list}."""
    if value is None:
        return None

    def check_list(where: str, classes):
        if not isinstance(classes, (list, tuple)):
            raise ConfigError(f"'{where}' must be a list of torch lr scheduler classes (or functools.partial "
                              f"objects of them), got {classes!r}.")
        for cls in classes:
            if not callable(cls):
                raise ConfigError(f"'{where}' holds {cls!r}, which is not callable: give torch lr scheduler classes, "
                                  "e.g. functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=0.99).")
        return list(classes)

    if isinstance(value, dict):
        return {mid: check_list(f"{name}[{mid!r}]", classes) for mid, classes in value.items()}
    return check_list(name, value)


def callbacks_class(name: str, value):
    """A callbacks class value, checked (see rlx.callbacks.callbacks.normalize_callbacks_class)."""
    normalize_callbacks_class(value)  # raises ConfigError for anything that is not a callbacks class
    return value


def event_callables(event: str):
    """A check for the callables of callback event `event` (config.callbacks(on_<event>=fn))."""
    def check(name: str, value):
        normalize_event_callables(event, value)
        return value

    return check


def evaluation_config(name: str, value):
    """None or a dict of settings that override the main config for evaluation."""
    if value is None:
        return None
    if hasattr(value, "to_dict") and not isinstance(value, dict):
        value = value.to_dict()
    if not isinstance(value, dict):
        raise ConfigError(
            f"'{name}' must be a dict of settings that override the main config for evaluation, "
            f"e.g. {{'explore': False}}; got {value!r}."
        )
    return dict(value)


def evaluation_interval(name: str, value):
    """None (0 means None too) or a positive number of iterations between evaluations."""
    if value == 0:
        return None
    return integer(min_value=1, allow_none=True)(name, value)


def log_level(name: str, value):
    """One of DEBUG, INFO, WARN (or WARNING), ERROR, CRITICAL, in any case."""
    if not isinstance(value, str):
        raise ConfigError(f"'{name}' must be one of DEBUG, INFO, WARN, ERROR; got {value!r}.")
    upper = value.upper()
    if upper == "WARNING":
        upper = "WARN"
    return choice("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")(name, upper)


def vectorize_mode(name: str, value: Any) -> str:
    """'sync' or 'async' (a string in any case, or a gymnasium.VectorizeMode)."""
    text = str(getattr(value, "value", value)).lower()
    if text == "vector_entry_point":
        raise NotSupportedYetError(f"{name}='vector_entry_point'", "envs' own vectorized entry points")
    return choice("sync", "async")(name, text)


def rl_module_spec(name: str, value: Any) -> Any:
    """None, an RLModuleSpec or a MultiRLModuleSpec (RLlib's types; old-style specs with a
    build() method are accepted too)."""
    if value is None or callable(getattr(value, "build", None)):
        return value
    raise ConfigError(f"'{name}' must be an RLModuleSpec or MultiRLModuleSpec (or None), got {value!r:.120} "
                      f"({type(value).__name__}).")

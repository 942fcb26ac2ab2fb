"""What a checkpoint may make rlx import and call: the trust model of checkpoint loading.

A checkpoint holds only data: JSON and safetensors. Where a config setting holds a class or
a function, the checkpoint stores its import path, and loading imports it back. Loading
never calls anything a checkpoint names unless it is of the kind its field expects:

- fields that take a kind (the env, callbacks, exploration, replay buffer, logger, learner,
  EnvRunner and RLModule classes, the algorithm class) accept only a subclass of that
  kind's base class, or (where the field also takes a function) a function defined in
  Python outside the standard library;
- every other field accepts classes and functions defined outside the standard library
  (the user's own code or an installed package), which rlx itself never calls;
- `__dataclass__` values construct only rlx's own dataclasses, with their own fields.

Importing a module runs its top-level code, as any Python import does: a checkpoint can make
rlx import a module that is installed (or, for `rlx evaluate`, one its `env_source` records),
never one of the standard library. Anything else is a CheckpointError naming the field,
raised before anything is imported or called.
"""
from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.utils.errors import CheckpointError
from rlx.utils.registry import get_registered_creator


@dataclass(frozen=True)
class Kind:
    """What a config field may hold: subclasses of `bases` (import paths; a base whose module
    is not installed is skipped) and, with `functions`, user-defined Python functions."""

    description: str
    bases: tuple[str, ...] = ()
    functions: bool = False


_ENV = Kind("an env class (a gymnasium.Env or MultiAgentEnv subclass) or an env creator function",
            ("gymnasium:Env", "rlx.env.multi_agent_env:MultiAgentEnv"), functions=True)
_CALLBACKS = Kind("an RLlibCallback subclass", ("rlx.callbacks.callbacks:RLlibCallback",))
_FUNCTION = Kind("a function defined in Python outside the standard library", functions=True)
_ANY = Kind("a class or function defined outside the standard library", ("builtins:object",), functions=True)

#: Field path (dot-separated; matched by its longest known suffix) -> what it may hold.
FIELD_KINDS: dict[str, Kind] = {
    "env": _ENV,
    "callbacks_class": _CALLBACKS,
    "callbacks": _CALLBACKS,
    "env_runner_cls": Kind("an EnvRunner class", ("rlx.env.env_runner:SingleAgentEnvRunner",
                                                  "rlx.env.multi_agent_env_runner:MultiAgentEnvRunner")),
    "learner_class": Kind("a Learner subclass", ("rlx.core.learner:Learner",)),
    "exploration_config.type": Kind("an Exploration subclass", ("rlx.utils.exploration.exploration:Exploration",)),
    "replay_buffer_config.type": Kind("a ReplayBuffer subclass",
                                      ("rlx.utils.replay_buffers.replay_buffer:ReplayBuffer",)),
    "logger_config.type": Kind("a Logger subclass (rlx's or Tune's)",
                               ("rlx.loggers.logger:Logger", "ray.tune.logger.logger:Logger")),
    "module_class": Kind("an RLModule subclass", ("rlx.core.rl_module:RLModule",)),
    "catalog_class": Kind("a Catalog subclass", ("rlx.core.models.catalog:Catalog",)),
    "algorithm_class": Kind("an Algorithm subclass", ("rlx.algorithms.algorithm:Algorithm",)),
}
FIELD_KINDS["policy_class"] = Kind("rlx's Policy class", ("rlx.policy.policy:Policy",))
#: Fields that hold a function (callbacks_on_* are matched by prefix). Function fields of
#: features not built yet (connectors) fall under the default kind.
for _name in ("env_task_fn", "logger_creator", "policy_mapping_fn", "policies_to_train", "observation_fn"):
    FIELD_KINDS[_name] = _FUNCTION

#: Fields whose string values are import paths resolved at run time ('pkg.mod:Name', 'pkg.mod.Name').
STRING_PATH_FIELDS = ("env", "env_runner_cls", "learner_class", "exploration_config.type",
                      "replay_buffer_config.type", "logger_config.type")

_IMPORT_PATH = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*(:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*)?")


def kind_of(field: str) -> Kind:
    """The Kind a config field (dot-separated path, list entries under their list's name) takes."""
    parts = field.split(".")
    for start in range(len(parts)):
        suffix = ".".join(parts[start:])
        if suffix in FIELD_KINDS:
            return FIELD_KINDS[suffix]
    if parts[-1].startswith("callbacks_on_"):
        return _FUNCTION
    return _ANY


def import_checked(path: Any, field: str, source: str | Path) -> Any:
    """Import the object `path` names for config field `field` of the checkpoint file
    `source`, after checking the path, and check it is of the field's kind."""
    kind = kind_of(field)
    if not isinstance(path, str) or not _IMPORT_PATH.fullmatch(path):
        raise CheckpointError(f"{source}: field '{field}' holds {path!r:.120}, which is not an import path "
                              "('package.module:Name').")
    module_name, attr = _split(path, field, source)
    if _is_stdlib(module_name):
        raise _refused(source, field, path, kind, f"it is in the standard library module '{module_name}'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise CheckpointError(
            f"{source}: field '{field}' refers to {path}, which cannot be imported now: {err}. Make it importable "
            "(define it at module level in an installed module) before loading.") from err
    check_kind(obj, field, source, path)
    return obj


def check_kind(obj: Any, field: str, source: str | Path, path: str | None = None) -> None:
    """Raise a CheckpointError unless `obj` (what `path` imported) is of `field`'s kind."""
    kind = kind_of(field)
    label = path or repr(obj)
    if isinstance(obj, type):
        if _is_stdlib(obj.__module__):
            raise _refused(source, field, label, kind, "it is a standard-library class")
        bases = _bases(kind)
        if not any(issubclass(obj, base) for base in bases):
            raise _refused(source, field, label, kind, f"class {obj.__qualname__} is not one")
        return
    if isinstance(obj, types.FunctionType):
        if not kind.functions:
            raise _refused(source, field, label, kind, "it is a function")
        if _is_stdlib(obj.__module__ or ""):
            raise _refused(source, field, label, kind, "it is a standard-library function")
        return
    raise _refused(source, field, label, kind, f"it is {type(obj).__name__} {obj!r:.80}")


def check_string_paths(config: dict[str, Any], source: str | Path) -> None:
    """Check the import-path strings of the fields resolved at run time (STRING_PATH_FIELDS),
    at the top level and in `evaluation_config`, against their kinds."""
    for scope, prefix in ((config, ""), (config.get("evaluation_config"), "evaluation_config.")):
        if not isinstance(scope, dict):
            continue
        for field in STRING_PATH_FIELDS:
            value: Any = scope
            for part in field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if isinstance(value, str) and _looks_like_import_path(field, value):
                import_checked(value, prefix + field, source)


def dataclass_type(path: Any, field: str, source: str | Path) -> type:
    """The rlx dataclass a `__dataclass__` marker names (rlx's own value types only)."""
    if not isinstance(path, str) or not _IMPORT_PATH.fullmatch(path):
        raise CheckpointError(f"{source}: field '{field}' names the dataclass {path!r:.120}, which is not an "
                              "import path.")
    module_name, attr = _split(path, field, source)
    if module_name != "rlx" and not module_name.startswith("rlx."):
        raise CheckpointError(f"{source}: field '{field}' names the dataclass {path}; a checkpoint may construct "
                              "only rlx's own value types.")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise CheckpointError(f"{source}: field '{field}' names the dataclass {path}, which does not exist in "
                              f"this rlx: {err}.") from err
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise CheckpointError(f"{source}: field '{field}' names {path}, which is not a dataclass.")
    return obj


def _looks_like_import_path(field: str, value: str) -> bool:
    if ":" in value:
        module, _, name = value.partition(":")
        # Gymnasium's 'package:Namespace/Env-vN' form names an env id, not an attribute.
        return not (field.endswith("env") and re.fullmatch(r"(?:[\w.-]+/)?[\w.-]+-v\d+", name))
    if field.endswith("env"):
        return "." in value and "/" not in value and not _is_registered_env(value)
    return "." in value and not value.startswith(("ray.tune.logger.", "ray.tune.logger:"))


def _is_registered_env(name: str) -> bool:
    if get_registered_creator(name) is not None:
        return True
    import gymnasium as gym

    return name in gym.registry


def _split(path: str, field: str = "", source: str | Path = "") -> tuple[str, str]:
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise CheckpointError(f"{source}: field '{field}' holds '{path}', which is not an import path of the form "
                              "'package.module:Name'.")
    return module, attr


def _is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def _bases(kind: Kind) -> tuple[type, ...]:
    found = []
    for path in kind.bases:
        module_name, attr = _split(path)
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue  # an optional base (Tune's, multi-agent's) that is not installed here
        found.append(obj)
    return tuple(found)


def _refused(source: str | Path, field: str, label: str, kind: Kind, why: str) -> CheckpointError:
    return CheckpointError(
        f"{source}: field '{field}' names {label:.120}, and a checkpoint may name only {kind.description} there "
        f"({why}). Loading refuses it without calling it. If this checkpoint is yours, pass the value again with "
        f"Algorithm.from_checkpoint(path, config_overrides={{'{field.split('.')[0]}': ...}}).")

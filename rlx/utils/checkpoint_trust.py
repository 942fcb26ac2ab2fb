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
never one of the standard library, never a `__main__` module (importing one runs a program),
and never one that would be loaded from inside the checkpoint directory (as happens when the
loading process runs in it, with its working directory on `sys.path`). Where a module would
come from is checked with `importlib.util.find_spec` before it is imported, one package level
at a time. While a checkpoint loads, `sys.path` entries inside it are set aside
(`checkpoint_off_sys_path`). Anything else is a CheckpointError naming the field, raised
before anything is imported or called.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rlx.utils.checkpoint_paths import checkpoint_of, is_inside
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
        obj: Any = import_module_checked(module_name, field, source)
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
            if not isinstance(value, str):
                continue
            if _looks_like_import_path(field, value):
                import_checked(value, prefix + field, source)
            elif field == "env" and ":" in value:
                check_plugin_module(value, prefix + field, source)


def check_plugin_module(env: str, field: str, source: str | Path) -> None:
    """Check the module of Gymnasium's plugin form `"MODULE:NS/Name-vN"` (imported when the env
    is made, to register its envs) as an import path's module: not from the standard library,
    not a `__main__` module, not from inside the checkpoint. Nothing is imported here."""
    module_name = env.partition(":")[0]
    if not _MODULE_NAME.fullmatch(module_name):
        raise CheckpointError(f"{source}: field '{field}' holds {env!r:.120}, whose module {module_name!r:.80} is "
                              "not a module name.")
    if _is_stdlib(module_name):
        raise _refused(source, field, env, _ENV, f"it names the standard library module '{module_name}', which "
                       "registers no Gymnasium env")
    check_module_source(module_name, field, source, import_parents=False)


_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def import_module_checked(module_name: str, field: str, source: str | Path,
                          root: str | os.PathLike | None = None) -> types.ModuleType:
    """Import module `module_name`, which checkpoint file `source` names in `field`, after
    checking, one package level at a time, where it would be loaded from (see
    `check_module_source`). Returns the module."""
    check_module_source(module_name, field, source, root)
    return importlib.import_module(module_name)


def check_module_source(module_name: str, field: str, source: str | Path, root: str | os.PathLike | None = None,
                        import_parents: bool = True) -> None:
    """Raise a CheckpointError, before the module is imported, when module `module_name` is a
    `__main__` module not yet imported (importing one runs a program), or would be loaded from
    inside the checkpoint `root` (default: the checkpoint `source` belongs to).

    Each package level is looked up with `importlib.util.find_spec`, which imports nothing of
    its own; its parent packages are imported first (when `import_parents`, after their own
    check), as any import of the module would. ModuleNotFoundError when a level is not there.
    """
    if root is None:
        root = checkpoint_of(source) if _is_file_path(source) else None
    parts = module_name.split(".")
    # A module already imported runs nothing when imported again (the script's own `__main__`
    # of a process that saved and loads a checkpoint, say).
    if "__main__" in parts and module_name not in sys.modules:
        raise CheckpointError(
            f"{source}: field '{field}' names the module {module_name}, a `__main__` module: importing one runs "
            "a program, so a checkpoint may not name it. Loading refuses it without importing it.")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        loaded = sys.modules.get(name)
        if loaded is not None:
            _check_locations(name, _module_locations(loaded), field, source, root)
            continue
        if depth > 1 and not import_parents:
            return  # the parent package is not imported: its children are found when it is
        if depth > 1:
            importlib.import_module(".".join(parts[:depth - 1]))
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as err:
            raise ModuleNotFoundError(f"No module named '{name}' ({err})", name=name) from err
        if spec is None:
            # Not importable here (the checkpoint is off sys.path while it loads): say so when
            # the module is one the checkpoint brings along.
            stem = Path(root or "", *name.split("."))
            if root is not None and (stem.with_suffix(".py").exists() or stem.is_dir()):
                _check_locations(name, [str(stem)], field, source, root)
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        locations = list(spec.submodule_search_locations or [])
        if spec.has_location and spec.origin:
            locations.append(spec.origin)
        if Path(spec.origin or "").name == "__main__.py":
            raise CheckpointError(f"{source}: field '{field}' names the module {module_name}, whose file is "
                                  f"{spec.origin}, a `__main__` script: importing it runs a program.")
        _check_locations(name, locations, field, source, root)


def _module_locations(module: types.ModuleType) -> list[str]:
    """The file and package directories a loaded module came from."""
    found = [getattr(module, "__file__", None) or ""]
    found += list(getattr(module, "__path__", None) or [])
    return [f for f in found if f]


def _check_locations(name: str, locations: list[str], field: str, source: str | Path,
                     root: str | os.PathLike | None) -> None:
    if root is None:
        return
    for location in locations:
        if is_inside(location, root):
            raise CheckpointError(
                f"{source}: field '{field}' names the module '{name}', which would be loaded from "
                f"{os.path.realpath(location)}, inside the checkpoint {os.path.realpath(root)}. A checkpoint may not bring code along: rlx imports nothing from "
                "inside a checkpoint (run the loading process from another directory, or move the module out "
                "of the checkpoint and install it).")


def _is_file_path(source: str | Path) -> bool:
    try:
        return Path(source).is_file()
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def checkpoint_off_sys_path(root: str | os.PathLike) -> Iterator[None]:
    """While the checkpoint `root` loads, set aside the `sys.path` entries that lie inside it
    (`''` and the working directory when the process runs in the checkpoint), so that no module,
    rlx's own lazy imports included, is found there; they are put back afterwards."""
    removed = [(i, entry) for i, entry in enumerate(sys.path) if _path_entry_inside(entry, root)]
    for i, _ in reversed(removed):
        del sys.path[i]
    try:
        yield
    finally:
        for i, entry in removed:
            if entry not in sys.path:
                sys.path.insert(min(i, len(sys.path)), entry)


def _path_entry_inside(entry: Any, root: str | os.PathLike) -> bool:
    if not isinstance(entry, str):
        return False
    try:
        return is_inside(entry or os.getcwd(), root)
    except (OSError, ValueError):
        return False


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
        obj: Any = import_module_checked(module_name, field, source)
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

"""Where `rlx train` gets its env from, and how `rlx evaluate` gets it back.

An env may come from a module of the current directory (`--env my_envs:MyEnv`), from
modules named with `--import` (which run `register_env` calls or Gymnasium registrations),
from a Gymnasium plugin package named in Gymnasium's `module:id` form
(`--env ale_py:ALE/Pong-v5`), or from a `rlx train file` Python file. Training records
these in its checkpoints (rlx.algorithms.checkpointing.record_env_source); evaluating (or
`--restore`) imports and runs them again before the checkpoint's config is read.
"""
from __future__ import annotations

import importlib
import logging
import os
import re
import stat
import sys
import types
from pathlib import Path
from typing import Any, Sequence

from rlx.algorithms.checkpoint_env_source import EXPERIMENT_MODULE, read_env_source
from rlx.utils.ale_ids import ensure_ale_registered
from rlx.utils.atomic_directory import METADATA_FILE
from rlx.utils.checkpoint_paths import enclosing_checkpoint, is_inside
from rlx.utils.checkpoint_trust import check_module_source
from rlx.utils.errors import CheckpointError, ConfigError, EnvError
from rlx.utils.registry import get_registered_creator, import_object

logger = logging.getLogger("rlx")


def add_cwd_to_sys_path(checkpoint: str | os.PathLike | None = None) -> None:
    """Make modules of the current directory importable, as `python -m rlx` does (the
    console script's sys.path starts with its own bin directory instead).

    Not when the command loads `checkpoint` and the current directory lies inside it: then
    the current directory (`''` or its path, which `python -m` puts there) is taken off
    sys.path instead, so that no module of the checkpoint can be imported."""
    try:
        cwd = os.getcwd()
    except FileNotFoundError:  # the current directory was deleted
        return
    ckpt = None if checkpoint is None else enclosing_checkpoint(Path(checkpoint).expanduser())
    if ckpt is not None and is_inside(cwd, ckpt):
        sys.path[:] = [entry for entry in sys.path if not (isinstance(entry, str) and is_inside(entry or cwd, ckpt))]
        return
    if sys.flags.safe_path:  # python -P / PYTHONSAFEPATH: the user asked for no such entry
        return
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _is_missing(err: ModuleNotFoundError, name: str) -> bool:
    """Whether `err` says module `name` itself (or a package above it) is missing, rather
    than something the module imports."""
    return err.name is not None and (name == err.name or name.startswith(err.name + "."))


def import_modules(names: Sequence[str], option: str = "--import") -> None:
    """Import each module of `names` in order (`--import` values), with a one-line error
    naming the module when one cannot be imported."""
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if _is_missing(err, name):
                raise ConfigError(f"{option} {name}: no module named '{err.name}' here. Give a module importable "
                                  "from the current directory or PYTHONPATH (a file my_envs.py is --import "
                                  "my_envs), or install its package.") from err
            raise ConfigError(f"{option} {name} failed: {err}.") from err
        except Exception as err:
            raise ConfigError(f"{option} {name} failed: {type(err).__name__}: {err}") from err


# ------------------------------------------------------------------ Gymnasium plugin ids


def resolve_gymnasium_id(env: Any) -> tuple[Any, str | None]:
    """`(env to configure, module imported for it)` for an env specifier, resolving ids of
    Gymnasium plugin packages the way `gymnasium.make` does.

    `'module:NS/Name-vN'` imports `module` (which registers its envs) and becomes
    `'NS/Name-vN'`; the module is returned so checkpoints record it. A namespaced id whose
    namespace nothing registered fails with Gymnasium's own hint ("Have you installed the
    proper package for NS?"). Other specifiers are returned unchanged for rlx's registry.
    """
    if not isinstance(env, str):
        return env, None
    import gymnasium as gym

    if get_registered_creator(env) is None:
        ensure_ale_registered(env)  # 'ALE/Pong-v5' needs no 'ale_py:' prefix
    if get_registered_creator(env) is not None or env in gym.registry:
        return env, None
    module, sep, env_id = env.partition(":")
    if sep:
        return _resolve_module_prefixed(env, module, env_id)
    if "/" in env:
        _raise_if_namespace_missing(env)
    return env, None


def _resolve_module_prefixed(env: str, module: str, env_id: str) -> tuple[str, str | None]:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if "/" not in env_id or not _is_missing(err, module):
            return env, None  # an import path 'package.module:EnvClass': rlx's registry reports it
        raise EnvError(f"Unknown env '{env}': {_gymnasium_error(env)} Install the package that provides "
                       f"the module '{module}'.") from err
    except Exception as err:
        raise EnvError(f"Importing '{module}' for env '{env}' failed: {type(err).__name__}: {err}") from err
    try:
        import_object(env)
        return env, None  # module:attribute, an env class or creator
    except (ImportError, AttributeError):
        pass
    spec = _find_spec(env)
    return spec.id, module


def _find_spec(env: str) -> Any:
    """Gymnasium's spec of `env` ('module:id' imports the module first), or an EnvError
    carrying Gymnasium's own message."""
    import gymnasium as gym
    from gymnasium.envs import registration

    find = getattr(registration, "_find_spec", None)  # what gymnasium.make uses
    try:
        if find is not None:
            return find(env)
        module, _, env_id = env.rpartition(":")
        if module:
            importlib.import_module(module)
        return gym.spec(env_id)
    except (gym.error.Error, ModuleNotFoundError) as err:
        raise EnvError(f"Unknown env '{env}': {' '.join(str(err).split())}") from err


def _gymnasium_error(env: str) -> str:
    try:
        _find_spec(env)
    except EnvError as err:
        return str(err).split(": ", 1)[1]
    return "Gymnasium cannot find it."


def _raise_if_namespace_missing(env: str) -> None:
    import gymnasium as gym

    try:
        gym.spec(env)
    except gym.error.NamespaceNotFound as err:
        namespace = env.split("/")[0]
        raise EnvError(
            f"Unknown env '{env}': {err} Gymnasium envs of a plugin package are registered when the package is "
            f"imported: name it as Gymnasium does, --env 'MODULE:{env}' (e.g. ale_py:ALE/Pong-v5), or add "
            f"--import MODULE, where MODULE is the package that registers '{namespace}'."
        ) from err
    except gym.error.Error:
        pass  # a known namespace: rlx's registry suggests names and versions


# ------------------------------------------------------------------ experiment files


def load_experiment_module(path: str | Path) -> types.ModuleType:
    """Run a `rlx train file` Python file as the module `__rlx_experiment__`, kept in
    sys.modules so that the import paths a checkpoint stored for its classes
    (`__rlx_experiment__:MyEnv`) resolve."""
    path = Path(path)
    module = types.ModuleType(EXPERIMENT_MODULE)
    module.__file__ = str(path)
    sys.modules[EXPERIMENT_MODULE] = module
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    except Exception as err:
        sys.modules.pop(EXPERIMENT_MODULE, None)
        raise ConfigError(f"Running {path} failed: {type(err).__name__}: {err}") from err
    try:
        import cloudpickle

        # Worker processes cannot import this module: send its classes by value, as
        # cloudpickle does for a file run without a module name.
        cloudpickle.register_pickle_by_value(module)
    except ImportError:  # pragma: no cover - cloudpickle comes with rlx's worker processes
        pass
    return module


# ------------------------------------------------------------------ from a checkpoint


def rebuild_env_source(meta: dict[str, Any], checkpoint: str | Path) -> dict[str, Any]:
    """Import the modules and run the experiment file a checkpoint's `env_source` records
    (nothing for checkpoints without one), so its config's env resolves here; return the
    env source, for the checkpoints of a restored run to record again.

    What a checkpoint records is checked first (see `check_env_source`): module names must be
    module names outside the standard library, and the directories and file it names must lie
    outside the checkpoint and belong to this user (or root), writable by no one else.
    """
    source = read_env_source(meta)
    check_env_source(source, checkpoint)
    for entry in source["imports"]:
        _import_recorded(entry["module"], entry.get("path"), checkpoint)
    experiment_file = source["experiment_file"]
    if experiment_file:
        path = Path(experiment_file)
        if not path.is_file():
            raise CheckpointError(
                f"Checkpoint {checkpoint} was trained from the experiment file {path}, which defines its env and "
                "no longer exists. Put the file back at that path to rebuild the env."
            )
        logger.info("Running %s, the experiment file recorded in %s", path, checkpoint)
        if str(path.parent) not in sys.path:
            sys.path.append(str(path.parent))  # its sibling modules, as when training ran next to it
        load_experiment_module(path)
    return source


_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def check_env_source(source: dict[str, Any], checkpoint: str | Path) -> None:
    """Raise a CheckpointError, naming the field, for an `env_source` entry rlx will not act on."""
    where = Path(checkpoint).expanduser() / METADATA_FILE
    for entry in source["imports"]:
        name, root = entry.get("module"), entry.get("path")
        if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
            raise CheckpointError(f"{where}: env_source.imports holds {name!r:.80}, which is not a module name.")
        if name.split(".")[0] in sys.stdlib_module_names:
            raise CheckpointError(f"{where}: env_source.imports names the standard-library module '{name}', which "
                                  "no env comes from; rlx does not import it.")
        if root is not None:
            if not isinstance(root, str):
                raise CheckpointError(f"{where}: env_source.imports path of '{name}' is {root!r:.80}, not a path.")
            if Path(root).is_dir():
                _check_owned_location(Path(root), checkpoint, where, f"the import path of '{name}'")
    experiment_file = source["experiment_file"]
    if experiment_file is not None:
        if not isinstance(experiment_file, str):
            raise CheckpointError(f"{where}: env_source.experiment_file is {experiment_file!r:.80}, not a path.")
        path = Path(experiment_file)
        if path.is_file():
            _check_owned_location(path, checkpoint, where, "the experiment file")
            _check_owned_location(path.parent, checkpoint, where, "the experiment file's directory")


def _check_owned_location(path: Path, checkpoint: str | Path, where: Path, what: str) -> None:
    """Refuse a file or directory inside the checkpoint, or one another user could have written."""
    resolved = path.resolve()
    ckpt = Path(checkpoint).expanduser().resolve()
    if resolved == ckpt or ckpt in resolved.parents:
        raise CheckpointError(f"{where}: {what}, {path}, lies inside the checkpoint; rlx runs code only from "
                              "outside a checkpoint, so a checkpoint cannot bring code along.")
    if not hasattr(os, "getuid"):
        return
    info = resolved.stat()
    if info.st_uid not in (os.getuid(), 0) or info.st_mode & stat.S_IWOTH:
        raise CheckpointError(f"{where}: {what}, {path}, belongs to another user or is writable by everyone, so "
                              "rlx does not run code from it. Import the env's module yourself (--import) instead.")


def _import_recorded(name: str, root: str | None, checkpoint: str | Path) -> None:
    """Import module `name`, from `root` (where training imported it) when it is not
    importable from here; where it would be loaded from is checked first (never from inside
    the checkpoint, never a `__main__` module)."""
    ckpt = enclosing_checkpoint(Path(checkpoint).expanduser())
    where = ckpt / METADATA_FILE
    try:
        check_module_source(name, "env_source.imports", where, ckpt)
        importlib.import_module(name)
        return
    except CheckpointError:
        raise
    except ModuleNotFoundError as err:
        if not _is_missing(err, name) or not root or not Path(root).is_dir():
            raise _recorded_import_error(name, root, checkpoint, err) from err
    if root not in sys.path:
        sys.path.append(root)
    try:
        check_module_source(name, "env_source.imports", where, ckpt)
        importlib.import_module(name)
    except CheckpointError:
        raise
    except Exception as err:
        raise _recorded_import_error(name, root, checkpoint, err) from err


def _recorded_import_error(name: str, root: str | None, checkpoint: str | Path, err: Exception) -> CheckpointError:
    where = f" (training imported it from {root})" if root else ""
    return CheckpointError(
        f"Checkpoint {checkpoint} needs module '{name}' to rebuild its env{where}, and importing it failed: "
        f"{type(err).__name__}: {err}. Run from the directory that holds it, add that directory to PYTHONPATH, "
        "or install it."
    )

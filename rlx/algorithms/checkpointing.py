"""Read Algorithm checkpoints: rebuild the stored config, check every file, then apply all of
it or nothing. The layout of a checkpoint directory is described in
rlx.algorithms.checkpoint_layout; rlx.algorithms.checkpoint_writer writes it (its entry point
stays importable here)."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.algorithms.algorithm_state import StateFieldError
from rlx.algorithms.checkpoint_checks import check_algorithm_class, check_files, check_finite, check_fits, check_param_groups
# The env_source entry (version 1.1) is written by its own module; its names stay importable here.
from rlx.algorithms.checkpoint_env_source import (EXPERIMENT_MODULE, env_source, read_env_source,  # noqa: F401
                                                  record_env_source, reset_env_source)
from rlx.algorithms.checkpoint_layout import CHECKPOINT_VERSION, STATE_CLASS_KEY, optimizer_stem, policy_dir  # noqa: F401
from rlx.algorithms.checkpoint_writer import write_algorithm_checkpoint  # noqa: F401
from rlx.core.rl_module.module_checkpoint import MODULE_METADATA_FILE, read_module_dir
from rlx.utils.checkpoints import (
    METADATA_FILE,
    checkpoint_dir,
    decode_value,
    read_json,
    read_metadata,
    read_tensors,
    unflatten_optimizer_state,
)
from rlx.utils.checkpoint_trust import check_string_paths, checkpoint_off_sys_path, import_checked
from rlx.utils.checkpoint_paths import enclosing_checkpoint
from rlx.utils.errors import CheckpointError, ConfigError, NotSupportedYetError, RLXError


def read_config(root: Path, algo_cls: Any, overrides: dict) -> Any:
    """Rebuild the config stored in a checkpoint, with `overrides` applied. The stored values
    are decoded under the trust rules of rlx.utils.checkpoint_trust; `overrides` are the
    caller's own and are taken as given."""
    source = root / "config.json"
    raw = read_json(source)
    if not isinstance(raw, dict):
        raise CheckpointError(f"{source} holds {type(raw).__name__}, not the config's settings (a JSON object).")
    decoded = {}
    for key, value in raw.items():
        if key in overrides:
            continue
        decoded[key] = decode_value(value, key, source)
    check_string_paths(decoded, source)
    config = algo_cls.get_default_config()
    try:
        config.update_from_dict(decoded)
    except Exception as err:
        raise CheckpointError(f"The config in {source} cannot be applied: {err}") from err
    try:
        config.update_from_dict(overrides)
    except ConfigError as err:
        raise ConfigError(f"config_overrides: {err}") from err
    return config


def checkpoint_algorithm_class(root: Path, meta: dict[str, Any]) -> type:
    """The Algorithm subclass a checkpoint's metadata names, imported only when it is one."""
    if "algorithm_class" not in meta:
        raise CheckpointError(f"{root / METADATA_FILE} has no 'algorithm_class' field.")
    return import_checked(meta["algorithm_class"], "algorithm_class", root / METADATA_FILE)


def algorithm_from_checkpoint(root: Path, overrides: dict) -> Any:
    """Build the Algorithm a checkpoint describes and load its state. While it loads, nothing
    is imported from inside the checkpoint (rlx.utils.checkpoint_trust)."""
    meta = read_metadata(root)
    with checkpoint_off_sys_path(root):
        check_files(root, meta)
        algo_cls = checkpoint_algorithm_class(root, meta)
        config = read_config(root, algo_cls, overrides)
        algo = _build(algo_cls, config, root)
        try:
            read_algorithm_checkpoint(algo, root, meta)
        except BaseException:
            algo.stop()  # a state that does not load must not leave the runner processes running
            raise
    return algo


def _build(algo_cls: type, config: Any, root: Path) -> Any:
    """`algo_cls(config=config)`; a value of the stored config that passed its checks but does
    not build (a damaged config.json) is a CheckpointError naming the file."""
    try:
        return algo_cls(config=config)
    except (RLXError, KeyboardInterrupt):
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as err:
        raise CheckpointError(f"The config in {root / 'config.json'} does not build a {algo_cls.__name__} (the file "
                              f"may be damaged): {type(err).__name__}: {err}") from err


def restored_algorithm(cls: type, path: Any, overrides: dict) -> Any:
    """`cls.from_checkpoint(path)`: the Algorithm a checkpoint (directory or checkpoint object)
    describes, loaded, after its `on_checkpoint_loaded` callbacks; a CheckpointError when it
    is not a `cls`."""
    root = checkpoint_dir(path)
    algo = algorithm_from_checkpoint(root, overrides)
    try:
        algo.callbacks.fire("on_checkpoint_loaded", algorithm=algo)
        if not isinstance(algo, cls):
            raise CheckpointError(f"Checkpoint {root} holds a {type(algo).__name__}, not a {cls.__name__}.")
    except BaseException:
        algo.stop()  # its runner and learner processes must not outlive the failed load
        raise
    return algo


@dataclass
class LoadedCheckpoint:
    """Everything a checkpoint holds for an Algorithm, read and checked but not yet applied."""

    modules: dict[str, "LoadedModule"]
    state: dict[str, Any]
    extras: Any


@dataclass
class LoadedModule:
    """One module's weights, optimizer states and extra learner tensors from a checkpoint."""

    weights: dict[str, Any]
    optimizers: dict[str, dict[str, Any]]
    extra_tensors: dict[str, Any] | None


#: The one component of a checkpoint that `restore_from_path(component=...)` restores alone.
RL_MODULE_COMPONENT = "learner_group/learner/rl_module"


def restore_component(algo: Any, path: Path, component: str) -> None:
    """RLlib's `restore_from_path(path, component=...)`: load one component of a checkpoint, found
    at `path`. rlx restores the RLModule weights: component "learner_group/learner/rl_module" (path:
    that folder, every module directory in it) or ".../rl_module/<module_id>" (path: that module's
    directory); they go to the learners and the EnvRunners. Other components raise NotSupportedYetError."""
    name = str(component).strip("/")
    if name == RL_MODULE_COMPONENT:
        folders = {d.name: d for d in sorted(Path(path).iterdir()) if (d / MODULE_METADATA_FILE).is_file()}
        if not folders:
            raise CheckpointError(f"{path} holds no module directory (a folder with {MODULE_METADATA_FILE}); with "
                                  f"component={name!r} give the checkpoint's {RL_MODULE_COMPONENT} folder.")
    elif name.startswith(RL_MODULE_COMPONENT + "/") and name.count("/") == RL_MODULE_COMPONENT.count("/") + 1:
        folders = {name.rsplit("/", 1)[1]: Path(path)}
    else:
        raise NotSupportedYetError(f"restore_from_path(component={component!r})",
                                   f"rlx restores the RLModule weights ({RL_MODULE_COMPONENT!r} or "
                                   f"'{RL_MODULE_COMPONENT}/<module_id>') as a component",
                                   fix="Restore the whole checkpoint with restore_from_path(path) instead.")
    weights = {}
    for module_id, folder in folders.items():
        with checkpoint_off_sys_path(enclosing_checkpoint(folder)):
            _, weights_path = read_module_dir(folder)
        weights[module_id] = read_tensors(weights_path)
    algo.set_weights(weights)


def read_algorithm_checkpoint(algo: Any, root: Path, meta: dict | None = None) -> None:
    """Load weights, optimizer state and algorithm state from `root` into `algo`: all of it or,
    when anything does not fit, none of it (a CheckpointError naming file and field)."""
    meta = meta or read_metadata(root)
    with checkpoint_off_sys_path(root):
        loaded = load_checkpoint_files(algo, root, meta)
        apply_checkpoint(algo, loaded, root)
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner)


def load_checkpoint_files(algo: Any, root: Path, meta: dict) -> LoadedCheckpoint:
    """Read and check every file of checkpoint `root` that `algo` loads, changing nothing."""
    check_files(root, meta)
    check_algorithm_class(algo, meta.get("algorithm_class"), root / METADATA_FILE, "algorithm_class")
    stored = meta.get("policy_ids", ["default_policy"])
    if not isinstance(stored, list) or not all(isinstance(p, str) for p in stored):
        raise CheckpointError(f"{root / METADATA_FILE}: field 'policy_ids' must be a list of policy ids.")
    modules = {}
    for module_id, learner in algo.learner_by_module().items():
        if module_id not in stored:
            if meta.get("trainable_policies_only"):
                continue  # written with checkpoint_trainable_policies_only: this one keeps its weights
            raise CheckpointError(
                f"Checkpoint {root} has no policy {module_id!r} (it has {', '.join(stored)}). Restore it into a "
                "config whose policies are among those, e.g. config.multi_agent(policies=...) naming fewer.")
        modules[module_id] = _load_module_files(root, module_id, learner)
    state_file = root / "algorithm_state.json"
    state = read_json(state_file)
    if not isinstance(state, dict):
        raise CheckpointError(f"{state_file} holds {type(state).__name__}, not an algorithm state (a JSON object).")
    check_algorithm_class(algo, state.get(STATE_CLASS_KEY), state_file, STATE_CLASS_KEY)
    try:
        extras = algo.load_checkpoint_extras(root)
    except CheckpointError:
        raise
    except Exception as err:
        raise CheckpointError(f"The algorithm-specific files of checkpoint {root} cannot be read: "
                              f"{type(err).__name__}: {err}.") from err
    return LoadedCheckpoint(modules, state, extras)


def _load_module_files(root: Path, module_id: str, learner: Any) -> LoadedModule:
    """Read and check one module's files (weights, optimizers, extra tensors) for `learner`."""
    folder = root / policy_dir(module_id)
    weights_file = folder / "module.safetensors"
    weights = read_tensors(weights_file)
    check_finite(weights, weights_file)
    check_fits(weights, learner.module.state_dict(), weights_file,
                "Was the checkpoint written with a different model config?")
    optimizers = {}
    for name in learner.optimizers:
        stem = optimizer_stem(name)
        if not (folder / f"{stem}.json").is_file():
            raise CheckpointError(
                f"Checkpoint {root} has no state for the '{name}' optimizer ({policy_dir(module_id)}/{stem}.json): "
                "it was written by a different algorithm or config."
            )
        opt_meta = read_json(folder / f"{stem}.json")
        opt_file = folder / f"{stem}.safetensors"
        opt_tensors = read_tensors(opt_file)
        check_finite(opt_tensors, opt_file)
        check_param_groups(opt_meta, folder / f"{stem}.json", learner.optimizers[name].param_groups)
        try:
            optimizers[name] = unflatten_optimizer_state(opt_tensors, opt_meta)
        except CheckpointError as err:
            raise CheckpointError(f"{folder / stem}.json: {err}") from err
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RuntimeError) as err:
            raise CheckpointError(f"{folder / stem}.json is not a valid optimizer state: "
                                  f"{type(err).__name__}: {err}.") from err
    extra_tensors = None
    learner_file = folder / "learner.safetensors"
    own_extra = learner.get_extra_tensors()
    if learner_file.is_file() or own_extra:
        if not learner_file.is_file():
            raise CheckpointError(f"Checkpoint {root} is missing {policy_dir(module_id)}/learner.safetensors "
                                  "(target networks).")
        extra_tensors = read_tensors(learner_file)
        check_finite(extra_tensors, learner_file)
        check_fits(extra_tensors, own_extra, learner_file, "")
    return LoadedModule(weights, optimizers, extra_tensors)


def apply_checkpoint(algo: Any, loaded: LoadedCheckpoint, root: Path) -> None:
    """Apply a LoadedCheckpoint to `algo`; when a part fails, restore what was there before."""
    learners = algo.learner_by_module()
    before = _snapshot(algo)
    try:
        for module_id, module in loaded.modules.items():
            learner = learners[module_id]
            learner.module.set_state(module.weights)
            for name, optimizer in learner.optimizers.items():
                optimizer.load_state_dict(module.optimizers[name])
            if module.extra_tensors is not None:
                learner.set_extra_tensors(module.extra_tensors)
        state = {k: v for k, v in loaded.state.items() if k != STATE_CLASS_KEY}
        algo.set_state(state)
        algo.apply_checkpoint_extras(loaded.extras)
    except Exception as err:
        _restore(algo, before)
        if isinstance(err, CheckpointError):
            raise
        if isinstance(err, StateFieldError):
            raise CheckpointError(f"{root / 'algorithm_state.json'}: field '{err.field}' is not valid: "
                                  f"{err.reason}. Nothing was loaded.") from err
        raise CheckpointError(f"Checkpoint {root} does not fit this {type(algo).__name__}: "
                              f"{type(err).__name__}: {err}. Nothing was loaded.") from err


def _snapshot(algo: Any) -> dict[str, Any]:
    modules = {}
    for module_id, learner in algo.learner_by_module().items():
        modules[module_id] = {
            "weights": {k: v.detach().clone() for k, v in learner.module.state_dict().items()},
            "optimizers": {name: copy.deepcopy(opt.state_dict()) for name, opt in learner.optimizers.items()},
            "extra_tensors": {k: v.detach().clone() if hasattr(v, "detach") else v
                              for k, v in learner.get_extra_tensors().items()},
        }
    return {"modules": modules, "state": copy.deepcopy(algo.get_state())}


def _restore(algo: Any, before: dict[str, Any]) -> None:
    learners = algo.learner_by_module()
    for module_id, saved in before["modules"].items():
        learner = learners[module_id]
        learner.module.set_state(saved["weights"])
        for name, optimizer in learner.optimizers.items():
            optimizer.load_state_dict(saved["optimizers"][name])
        if saved["extra_tensors"]:
            learner.set_extra_tensors(saved["extra_tensors"])
    algo.set_state(before["state"])



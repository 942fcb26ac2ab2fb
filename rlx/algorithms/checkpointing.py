"""Write and read Algorithm checkpoints in the layout of DESIGN.md.

    rlx_checkpoint.json       format name/version, rlx version, algorithm class, file list
    config.json               the config (classes and functions as import paths; what rlx's
                              factories made at run time as the call that made it, see
                              rlx.utils.checkpoint_recipes; an env without an import path
                              as its registered name; a lambda policy_mapping_fn as the
                              table of the policy it picks for each of the env's agents)
    algorithm_state.json      counters, metrics window, learner extras, env-runner state
    policies/<policy_id>/module.safetensors      module weights (one folder per policy;
                                                 single-agent: policies/default_policy)
    policies/<policy_id>/optimizer.safetensors   optimizer tensors (+ optimizer.json); extra
                                                 optimizers as optimizer_<name>.safetensors/.json
    policies/<policy_id>/learner.safetensors     learner tensors outside the module (target
                                                 networks, SAC's log-alpha), when there are any
    replay_buffer.safetensors (+ replay_buffer.json) only with store_buffer_in_checkpoints
    policies/<policy_id>/model.pt                only with export_native_model_files (the state_dict)
    policies/<policy_id>/model/                  only with export_native_model_files: the policy
                                                 exported to run without rlx (model.pt, TorchScript;
                                                 model.onnx when `onnx` is installed; export_info.json)

rlx_checkpoint.json lists the stored policies in `policy_ids` (and `trainable_policies_only`
when only the trainable ones were written); a config with fewer policies restores just those.

`checkpoint_version` 1.1 (format version 1 still) adds `env_source` to rlx_checkpoint.json:
what rebuilds the env besides config.json, as plain JSON (no code is stored):

    "env_source": {
        "imports": [{"module": "my_envs", "path": "/home/me/project"}, ...],
        "experiment_file": "/home/me/project/my_exp.py"      # or null
    }

`imports` are the modules to import before the env is resolved, in order: those the user
named (`rlx train --import`), then the module defining the env (its class or creator, the
module of an import path, or the package that registered a Gymnasium id); `path` is the
sys.path entry it was imported from, tried when it is not importable otherwise.
`experiment_file` is the `rlx train file` Python file that defined the config. Checkpoints
of version 1.0 have no `env_source` and load as before.

`checkpoint_version` 1.2 adds `checksums` to rlx_checkpoint.json ({file: "sha256:<hex>"} for
every listed binary file, checked on load; the JSON files stay editable by hand) and an `algorithm_class` key to algorithm_state.json.
Loading reads and checks every file first and then applies all of it, or nothing.
"""
from __future__ import annotations

import copy
import importlib.util
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.algorithms.algorithm_state import StateFieldError
from rlx.algorithms.checkpoint_checks import (check_algorithm_class, check_files, check_finite, check_fits,
                                              check_param_groups, class_path, file_checksum)
# The env_source entry (version 1.1) is written by its own module; its names stay importable here.
from rlx.algorithms.checkpoint_env_source import (EXPERIMENT_MODULE, env_source, read_env_source,  # noqa: F401
                                                  record_env_source, reset_env_source)
from rlx.algorithms.policy_mapping_table import mapping_table_for
from rlx.core.rl_module.module_checkpoint import MODULE_METADATA_FILE, read_module_dir, write_component_dir
from rlx.env.policy_export import DEFAULT_ONNX_OPSET, export_policy_files
from rlx.utils.checkpoints import (
    FORMAT_NAME,
    FORMAT_VERSION,
    METADATA_FILE,
    AtomicDirectory,
    checkpoint_dir,
    decode_value,
    encode_value,
    flatten_optimizer_state,
    read_json,
    read_metadata,
    read_tensors,
    unflatten_optimizer_state,
    write_json,
    write_tensors,
)
from rlx.utils.checkpoint_trust import check_string_paths, checkpoint_off_sys_path, import_checked
from rlx.utils.checkpoint_paths import enclosing_checkpoint
from rlx.utils.errors import CheckpointError, ConfigError, EnvError, NotSupportedYetError, RLXError, install_hint
from rlx.utils.registry import get_registered_creator, registered_env_names
from rlx.utils.version import __version__

#: Key of algorithm_state.json naming the Algorithm class that wrote it.
STATE_CLASS_KEY = "algorithm_class"
#: Version of what rlx_checkpoint.json holds within FORMAT_VERSION (1.1: `env_source`; 1.2:
#: `checksums`, and algorithm_state.json names its algorithm class).
CHECKPOINT_VERSION = f"{FORMAT_VERSION}.2"

logger = logging.getLogger(__name__)
#: Whether the missing-`onnx` warning of export_native_model_files was given (once per process).
_warned_no_onnx = False


def write_algorithm_checkpoint(algo: Any, path: Path) -> str:
    """Write `algo` into the checkpoint directory `path` atomically; return the path."""
    learners = _learners_to_save(algo)
    files = ["config.json", "algorithm_state.json"]
    config = _encoded_config(algo)
    with AtomicDirectory(path) as tmp:
        write_json(tmp / "config.json", config)
        write_json(tmp / "algorithm_state.json", {**algo.get_state(), STATE_CLASS_KEY: class_path(type(algo))})
        for module_id, learner in learners.items():
            files += _write_module_files(tmp, module_id, learner, algo.config.export_native_model_files)
            if algo.config.export_native_model_files:
                files += _write_exported_model(tmp, module_id, algo, learner)
            # RLlib's component path of the module (RLModule.from_checkpoint, RLModuleSpec(load_state_path=...)).
            files.append(write_component_dir(tmp, module_id, learner.module, f"{policy_dir(module_id)}/module.safetensors"))
        files += algo.write_checkpoint_extras(tmp)
        cls = type(algo)
        write_json(tmp / METADATA_FILE, {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "checkpoint_version": CHECKPOINT_VERSION,
            "rlx_version": __version__,
            "algorithm_class": f"{cls.__module__}:{cls.__qualname__}",
            "env": config.get("env") if isinstance(config.get("env"), str) else None,
            "env_source": env_source(algo.config),
            "policy_ids": list(learners),
            "trainable_policies_only": bool(algo.config.checkpoint_trainable_policies_only),
            "policy_spaces": _policy_spaces(algo, learners),
            "training_iteration": algo.iteration,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": files,
            # Of the binary files only: the JSON files are readable, and editable by hand.
            "checksums": {name: file_checksum(tmp / name) for name in files if not name.endswith(".json")},
        })
    return str(Path(path).expanduser().resolve())


def policy_dir(module_id: str) -> str:
    """The checkpoint directory of one module: policies/<module_id>."""
    if not isinstance(module_id, str) or not module_id or module_id in (".", "..") or "/" in module_id \
            or "\\" in module_id or "\0" in module_id:
        raise CheckpointError(f"Policy id {module_id!r} cannot name a checkpoint directory; use ids without "
                              "path separators.")
    return f"policies/{module_id}"


def _policy_spaces(algo: Any, module_ids: Any) -> dict[str, Any]:
    """{policy_id: {"observation_space": ..., "action_space": ...}}: each policy's env spaces
    (encoded), so one policy loads without the mapping function that found them."""
    slots = getattr(algo.env_runner, "slots", None)
    if not slots:
        return {}
    return {mid: {"observation_space": encode_value(slots[mid].observation_space),
                  "action_space": encode_value(slots[mid].action_space)}
            for mid in module_ids if mid in slots}


def _learners_to_save(algo: Any) -> dict[str, Any]:
    container = algo.learners
    learners = container.by_module()
    if algo.config.checkpoint_trainable_policies_only:
        learners = {mid: l for mid, l in learners.items() if container.is_trainable(mid)}
    return learners


def _write_module_files(tmp: Path, module_id: str, learner: Any, native: bool) -> list[str]:
    """Write one module's weights, optimizer states and extra learner tensors; their names."""
    folder = policy_dir(module_id)
    (tmp / folder).mkdir(parents=True)
    write_tensors(tmp / folder / "module.safetensors", learner.module.state_dict())
    files = [f"{folder}/module.safetensors"]
    for name, optimizer in learner.optimizers.items():
        stem = _optimizer_stem(name)
        tensors, meta = flatten_optimizer_state(optimizer.state_dict())
        write_tensors(tmp / folder / f"{stem}.safetensors", tensors)
        write_json(tmp / folder / f"{stem}.json", meta)
        files += [f"{folder}/{stem}.safetensors", f"{folder}/{stem}.json"]
    extra = learner.get_extra_tensors()
    if extra:
        write_tensors(tmp / folder / "learner.safetensors", extra)
        files.append(f"{folder}/learner.safetensors")
    if native:
        import torch

        torch.save(learner.module.state_dict(), tmp / folder / "model.pt")
        files.append(f"{folder}/model.pt")
    return files


def _write_exported_model(tmp: Path, module_id: str, algo: Any, learner: Any) -> list[str]:
    """policies/<module_id>/model/: the policy exported for serving without rlx (RLlib's
    native model files): TorchScript always, ONNX when the `onnx` package is installed."""
    global _warned_no_onnx
    folder = f"{policy_dir(module_id)}/model"
    policy = algo.get_policy(module_id)
    written = export_policy_files(policy, tmp / folder, module=learner.module)
    if importlib.util.find_spec("onnx") is not None:
        written += export_policy_files(policy, tmp / folder, onnx=DEFAULT_ONNX_OPSET, module=learner.module)
    elif not _warned_no_onnx:
        _warned_no_onnx = True
        logger.warning("export_native_model_files: checkpoints get model.pt (TorchScript) but no model.onnx, as "
                       f"the `onnx` package is not installed ({install_hint('export')}).")
    return sorted({f"{folder}/{name}" for name in written})


def _encoded_config(algo: Any) -> dict:
    """config.json of `algo`: its config encoded, with what has no import path stored another
    way where one exists (see `_store_env_by_name` and `_store_mapping_as_table`)."""
    config = algo.config
    encoded = encode_value(config.to_dict())
    if _unstorable(encoded.get("logger_creator")):
        # A lambda that placed this run's results; an Algorithm restored from the checkpoint
        # is a new run and logs to a new directory, so nothing is lost by dropping it.
        encoded["logger_creator"] = None
    _store_env_by_name(encoded, config.env)
    evaluation = encoded.get("evaluation_config")
    if isinstance(evaluation, dict) and isinstance(config.evaluation_config, dict):
        _store_env_by_name(evaluation, config.evaluation_config.get("env"))
    if _unstorable(encoded.get("policy_mapping_fn")):  # (no table for a single-agent env: it has no agent ids)
        _store_mapping_as_table(encoded, algo)
    return encoded


def _unstorable(encoded: Any) -> bool:
    return isinstance(encoded, dict) and "__unserializable__" in encoded


def _store_env_by_name(encoded: dict, env: Any) -> None:
    """An env class or creator without an import path that is registered with `register_env`
    is stored as its registered name, which resolves wherever that name is registered."""
    if not _unstorable(encoded.get("env")):
        return
    for name in registered_env_names():
        try:
            if get_registered_creator(name) is env:
                encoded["env"] = name
                return
        except EnvError:  # a shipped registration that does not load here is not this env
            continue


def _store_mapping_as_table(encoded: dict, algo: Any) -> None:
    """A policy_mapping_fn without an import path (the docs' lambdas) is stored as the table of
    the policy it picks for each of the env's agents (rlx.algorithms.policy_mapping_table)."""
    table = mapping_table_for(algo)
    if table is not None:
        encoded["policy_mapping_fn"] = encode_value(table)


def _optimizer_stem(name: str) -> str:
    return "optimizer" if name == "default" else f"optimizer_{name}"


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
        stem = _optimizer_stem(name)
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



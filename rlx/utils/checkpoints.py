"""Safe, versioned checkpoint directories: JSON for structure, safetensors for tensors.

Loading never unpickles anything. Writes go to a temporary sibling directory that is
renamed into place, so a crash mid-save never leaves a half-written checkpoint.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from rlx.utils import checkpoint_trust as trust
from rlx.utils.atomic_directory import (METADATA_FILE, AtomicDirectory, recover_interrupted_save,  # noqa: F401
                                        sweep_interrupted_saves)
from rlx.utils.checkpoint_paths import check_links_stay_inside, checkpoint_of, is_inside
from rlx.utils.checkpoint_recipes import RECIPE_KEY, make_from_recipe, recipe_of
from rlx.utils.errors import CheckpointError

FORMAT_NAME = "rlx-checkpoint"
FORMAT_VERSION = 1


# ------------------------------------------------------------------ JSON encoding of config values


def _import_path(obj: Any) -> str | None:
    """`module:qualname` of a class or function, or None when it has none: a lambda, a local
    object, or one whose name was changed so that it no longer names it (a class a factory
    made at run time). A module not imported here is not imported to check."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<lambda>" in qualname or "<locals>" in qualname:
        return None
    found = _resolve_loaded(module, qualname)
    if found is _MISSING:
        return None
    return f"{module}:{qualname}"


#: What _resolve_loaded returns for a name missing from its module, and for a module not imported.
_MISSING, _NOT_LOADED = object(), object()


def _resolve_loaded(module: str, qualname: str) -> Any:
    """What `module:qualname` names: _NOT_LOADED when the module is not imported, _MISSING when
    it has no such name."""
    import sys

    found: Any = sys.modules.get(module, _NOT_LOADED)
    if found is _NOT_LOADED:
        return found
    for part in qualname.split("."):
        found = getattr(found, part, _MISSING)
        if found is _MISSING:
            return _MISSING
    return found


def _named_at_module_level(obj: Any) -> bool:
    """Whether `obj`'s import path names `obj` itself (in a module imported here)."""
    path = _import_path(obj)
    return path is not None and _resolve_loaded(*path.split(":", 1)) is obj


def encode_value(value: Any) -> Any:
    """Turn a config value into JSON: classes/functions become import paths (what an rlx factory
    made at run time, such as a make_multi_agent class, the call that made it; see
    rlx.utils.checkpoint_recipes), spaces become dicts."""
    import gymnasium as gym

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, (list, set)):
        return [encode_value(v) for v in value]
    if isinstance(value, gym.spaces.Space):
        return {"__space__": space_to_dict(value)}
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        return {
            "__dataclass__": _import_path(type(value)),
            "fields": {f.name: encode_value(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init},
        }
    recipe = recipe_of(value)
    if recipe is not None and not _named_at_module_level(value):
        name, args = recipe
        encoded_args = [encode_value(arg) for arg in args]
        if not _holds_unserializable(encoded_args):
            return {RECIPE_KEY: name, "args": encoded_args}
        return {"__unserializable__": f"{name}({', '.join(map(repr, args))})"[:200]}
    if isinstance(value, type) or callable(value):
        path = _import_path(value)
        if path is not None:
            return {"__import__": path}
    return {"__unserializable__": repr(value)[:200]}


def _holds_unserializable(encoded: Any) -> bool:
    """Whether an encode_value result holds a value a checkpoint cannot store."""
    if isinstance(encoded, dict):
        return "__unserializable__" in encoded or any(_holds_unserializable(v) for v in encoded.values())
    if isinstance(encoded, list):
        return any(_holds_unserializable(v) for v in encoded)
    return False


def decode_value(value: Any, key: str = "", source: str | Path = "config.json") -> Any:
    """Inverse of encode_value for the value of config field `key` read from `source`.

    Builds only plain data, spaces, arrays and rlx's own dataclasses; an import path is
    imported only when it names an object of the kind its field takes
    (rlx.utils.checkpoint_trust). Anything else is a CheckpointError naming file and field.
    """
    try:
        return _decode(value, key, source)
    except CheckpointError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as err:
        raise CheckpointError(f"{source}: field '{key}' holds a value rlx cannot decode: "
                              f"{type(err).__name__}: {err}.") from err


class UnstorableSettingError(CheckpointError):
    """A config setting the checkpoint could not store (it has no import path) is needed to
    load it: the message says what to pass instead."""


def unstorable_error(key: str, held: str) -> UnstorableSettingError:
    """The error for config setting `key`, stored as unserializable (it held `held`): what to
    pass when loading instead, and how to make checkpoints that need nothing."""
    top = key.split(".")[0]
    what = f"Config setting '{key}' held {held}, which a checkpoint cannot store (a lambda, or a class or function " \
           "defined inside a function, has no import path)."
    if key == "env":
        return UnstorableSettingError(
            f"{what} Give the env when loading: Algorithm.from_checkpoint(path, env=MyEnv) (or "
            f"config_overrides={{'{top}': ...}}), or rlx evaluate / rlx serve --env NAME_OR_IMPORT_PATH. To make "
            "checkpoints that rebuild the env by themselves, define the class or creator at module level, or "
            "register it before saving with rlx.register_env('my_env', MyEnv) (the checkpoint then stores the "
            "name, which resolves where that name is registered), or configure the env by name.")
    if key == "policy_mapping_fn":
        return UnstorableSettingError(
            f"{what} Give it when loading: Algorithm.from_checkpoint(path, policy_mapping_fn=fn), or for rlx "
            "evaluate / rlx serve --config '{\"policy_mapping_fn\": \"my_module:fn\"}'. (Checkpoints of a "
            "multi-agent Algorithm store a lambda mapping as the policy it picks for each of the env's agents; this "
            "one had no env agents to ask.)")
    return UnstorableSettingError(f"{what} Define it at module level, or pass it again with "
                                  f"Algorithm.from_checkpoint(path, config_overrides={{'{top}': ...}}).")


#: Array dtypes a checkpoint's config may hold (never object arrays).
_ARRAY_DTYPES = frozenset("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split())


def _decode(value: Any, key: str, source: str | Path) -> Any:
    if isinstance(value, list):
        return [_decode(v, key, source) for v in value]
    if not isinstance(value, dict):
        return value
    if "__import__" in value:
        return trust.import_checked(value["__import__"], key, source)
    if "__unserializable__" in value:
        raise unstorable_error(key, str(value["__unserializable__"])[:200])
    if RECIPE_KEY in value:
        return make_from_recipe(value[RECIPE_KEY], value.get("args"), key, source, _decode)
    if "__ndarray__" in value:
        dtype = value.get("dtype")
        if dtype not in _ARRAY_DTYPES:
            raise CheckpointError(f"{source}: field '{key}' holds an array of dtype {dtype!r:.40}; a checkpoint "
                                  f"may hold arrays of {', '.join(sorted(_ARRAY_DTYPES))}.")
        return np.asarray(value["__ndarray__"], dtype=dtype)
    if "__tuple__" in value:
        items = value["__tuple__"]
        if not isinstance(items, list):
            raise CheckpointError(f"{source}: field '{key}' holds a tuple marker without a list.")
        return tuple(_decode(v, key, source) for v in items)
    if "__space__" in value:
        try:
            return space_from_dict(value["__space__"])
        except CheckpointError as err:
            raise CheckpointError(f"{source}: field '{key}': {err}") from err
    if "__dataclass__" in value:
        cls = trust.dataclass_type(value["__dataclass__"], key, source)
        fields = value.get("fields")
        if not isinstance(fields, dict):
            raise CheckpointError(f"{source}: field '{key}' holds a dataclass marker without a 'fields' dict.")
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise CheckpointError(f"{source}: field '{key}' gives {cls.__name__} unknown fields "
                                  f"{', '.join(map(str, unknown))}.")
        decoded = {k: _decode(v, f"{key}.{k}", source) for k, v in fields.items()}
        _drop_foreign_load_state_path(decoded, f"{key}.load_state_path", source)
        return cls(**decoded)
    return {k: _decode(v, f"{key}.{k}" if key else k, source) for k, v in value.items()}


def _drop_foreign_load_state_path(fields: dict[str, Any], field: str, source: str | Path) -> None:
    """An RLModuleSpec's `load_state_path` stored in a checkpoint that leads outside it is not
    read: the checkpoint's own weights replace what it would load (a WARNING says so)."""
    path = fields.get("load_state_path")
    if path is None:
        return
    root = checkpoint_of(source) if Path(source).is_file() else None
    if isinstance(path, str) and root is not None and is_inside(root / path, root):
        return
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(f"{source}: field '{field}' holds {path!r:.120}, not a path.")
    logging.getLogger("rlx").warning(
        "%s: field '%s' names %s, outside the checkpoint; rlx does not read it (the checkpoint's own weights are "
        "loaded instead). Set RLModuleSpec(load_state_path=...) in code to load weights from elsewhere.",
        source, field, str(path)[:200])
    fields["load_state_path"] = None


def space_to_dict(space: Any) -> dict:
    """JSON description of a gymnasium space."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(),
                "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_dict(s) for s in space.spaces]}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_dict(s) for k, s in space.spaces.items()}}
    raise CheckpointError(f"Cannot store space {space!r} in a checkpoint.")


#: Largest Box (in elements) a checkpoint may describe: a guard against a shape that would
#: allocate gigabytes, far above any real observation space.
_MAX_SPACE_SIZE = 10**8


def space_from_dict(d: dict) -> Any:
    """Inverse of space_to_dict."""
    import gymnasium as gym

    kind = d["type"]
    if kind == "Box":
        size = int(np.prod([int(n) for n in d["shape"]], dtype=np.float64))
        if size > _MAX_SPACE_SIZE:
            raise CheckpointError(f"A Box space of shape {d['shape']} in the checkpoint is larger than rlx accepts.")
        return gym.spaces.Box(np.asarray(d["low"], dtype=d["dtype"]), np.asarray(d["high"], dtype=d["dtype"]),
                              tuple(d["shape"]), dtype=d["dtype"])
    if kind == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d.get("start", 0))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(d["nvec"])
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"])
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_dict(s) for s in d["spaces"]])
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_dict(s) for k, s in d["spaces"].items()})
    raise CheckpointError(f"Unknown space type '{kind}' in checkpoint.")


# ------------------------------------------------------------------ files


def write_json(path: Path, data: Any) -> None:
    """Write JSON (NaN allowed, as Python's json writes it)."""
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def read_json(path: Path) -> Any:
    """Read a JSON file of a checkpoint, naming the file on failure."""
    if not path.is_file():
        raise CheckpointError(f"Checkpoint file is missing: {path}. The checkpoint is incomplete or not an rlx checkpoint.")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"Checkpoint file {path} is corrupt (not valid JSON): {err}.") from err
    except RecursionError as err:
        raise CheckpointError(f"Checkpoint file {path} is corrupt: its JSON is nested too deeply to read "
                              f"({err}).") from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise CheckpointError(f"Checkpoint file {path} is corrupt: {err}.") from err
    except OSError as err:
        raise CheckpointError(f"Checkpoint file {path} cannot be read: {err}.") from err


def write_tensors(path: Path, tensors: dict[str, Any]) -> None:
    """Save a flat dict of arrays/tensors with safetensors."""
    from safetensors.numpy import save_file

    arrays = {}
    for k, v in tensors.items():
        if hasattr(v, "detach"):
            v = v.detach().cpu().numpy()
        arrays[k] = np.ascontiguousarray(v)
    save_file(arrays, str(path))


def read_tensors(path: Path) -> dict[str, np.ndarray]:
    """Load a safetensors file as NumPy arrays, naming the file on failure."""
    from safetensors.numpy import load_file

    if not path.is_file():
        raise CheckpointError(f"Checkpoint file is missing: {path}. The checkpoint is incomplete.")
    try:
        return load_file(str(path))
    except Exception as err:
        raise CheckpointError(f"Checkpoint file {path} is corrupt (not a safetensors file): {err}.") from err


def flatten_optimizer_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a torch optimizer state_dict into (tensors, JSON-safe structure)."""
    import torch

    tensors: dict[str, Any] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, per_param in state["state"].items():
        for name, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{idx}.{name}"] = value
            else:
                scalars.setdefault(str(idx), {})[name] = value
    meta = {"param_groups": state["param_groups"], "scalars": scalars,
            "tensor_keys": sorted(tensors), "tensor_shapes": {k: list(v.shape) for k, v in tensors.items()}}
    return tensors, meta


def unflatten_optimizer_state(tensors: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of flatten_optimizer_state."""
    import torch

    state: dict[int, dict[str, Any]] = {}
    for key in meta["tensor_keys"]:
        if key not in tensors:
            raise CheckpointError(f"Optimizer state is missing tensor '{key}'.")
        idx, _, name = key.partition(".")
        arr = tensors[key]
        state.setdefault(int(idx), {})[name] = torch.from_numpy(np.array(arr)).reshape(meta["tensor_shapes"][key])
    for idx, values in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


def checkpoint_dir(checkpoint: Any) -> Path:
    """The local directory of a checkpoint, given as a path or as a checkpoint object.

    Takes a `str` or `os.PathLike` path; an object with a `.path`, such as Ray's
    `Checkpoint` (`result.checkpoint`, `analysis.get_last_checkpoint()`); and an object
    with a `.checkpoint`, such as Ray Tune's `Result` or rlx's `SaveResult`. A Ray
    `Checkpoint` on a remote filesystem (S3, GCS, ...) raises a CheckpointError saying to
    download it first.
    """
    if isinstance(checkpoint, (str, bytes, PurePath)):  # SaveResult is a str
        return Path(os.fsdecode(checkpoint)).expanduser()
    if hasattr(checkpoint, "checkpoint"):  # Tune's Result: its .path is the trial dir, not a checkpoint
        inner = checkpoint.checkpoint
        if inner is None:
            raise CheckpointError(
                f"{type(checkpoint).__name__} holds no checkpoint: the run saved none. Save one with "
                "tune.CheckpointConfig(checkpoint_at_end=True) or checkpoint_frequency, or algo.save()."
            )
        return checkpoint_dir(inner)
    path = getattr(checkpoint, "path", None)
    if path is not None:
        _require_local_filesystem(checkpoint, path)
        return checkpoint_dir(path)
    # After `.path`: Ray's Checkpoint is os.PathLike too, but its __fspath__ raises.
    if isinstance(checkpoint, os.PathLike):
        return Path(os.fspath(checkpoint)).expanduser()
    raise TypeError(
        f"A checkpoint must be a directory path (str or pathlib.Path) or a checkpoint object with a .path, "
        f"such as Ray Tune's result.checkpoint; got {type(checkpoint).__name__} {checkpoint!r:.100}."
    )


def _require_local_filesystem(checkpoint: Any, path: Any) -> None:
    """Refuse a checkpoint object whose (pyarrow) `filesystem` is not the local one."""
    filesystem = getattr(checkpoint, "filesystem", None)
    kind = getattr(filesystem, "type_name", "local") if filesystem is not None else "local"
    if kind != "local":
        raise CheckpointError(
            f"The checkpoint {kind}://{path} is on a remote filesystem, and rlx loads checkpoints from local "
            "directories. Download it first and load the copy, e.g. "
            "Algorithm.from_checkpoint(checkpoint.to_directory())."
        )


def read_metadata(path: Any) -> dict[str, Any]:
    """Read and check `rlx_checkpoint.json` of a checkpoint directory (a path or a checkpoint
    object, see `checkpoint_dir`)."""
    root = checkpoint_dir(path)
    if not root.exists():
        recover_interrupted_save(root)  # a save killed between its two renames left it hidden
    if not root.exists():
        raise CheckpointError(f"Checkpoint directory does not exist: {root}.")
    if not root.is_dir():
        raise CheckpointError(f"Checkpoint path {root} is a file; give the checkpoint directory.")
    sweep_interrupted_saves(root.parent)
    check_links_stay_inside(root)
    meta = read_json(root / METADATA_FILE)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{root / METADATA_FILE} does not describe an rlx checkpoint (format={found!r}).")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"Checkpoint {root} has format version {version!r}; this rlx reads version {FORMAT_VERSION}. "
            "Load it with the rlx release that wrote it."
        )
    return meta

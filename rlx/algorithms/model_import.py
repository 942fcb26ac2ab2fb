"""`Algorithm.import_model(path)`: weights trained outside rlx loaded into a policy's model.

The seeds' recipe (`trainer.import_model("my_weights.h5")`) loads an h5 file into the
Policy's ModelV2 through the model's `import_from_h5`. rlx reads:

- `.h5` / `.hdf5` (with h5py, the optional `rlx[hdf5]` dependency): a custom model's own
  `import_from_h5(path)` when it overrides it (e.g. to map a Keras file's layers); otherwise
  every dataset of the file, its path written with dots (`body/0/weight` -> `body.0.weight`),
  as the model's `state_dict()` entries;
- `.pt` / `.pth`: a torch state dict (`torch.save(model.state_dict(), path)`), read with
  `torch.load(..., weights_only=True)`, so no code in the file runs.

The weights go into the policy's model: the user's ModelV2 for a `custom_model`, else the
policy's RLModule. Names and shapes must match the model's exactly; the error lists what
differs. Afterwards the Learner and every EnvRunner use the new weights.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.utils.errors import install_hint

__all__ = ["import_model", "load_h5_weights", "load_state_dict_checked", "read_h5_state"]

H5_SUFFIXES = (".h5", ".hdf5")
TORCH_SUFFIXES = (".pt", ".pth")


def import_model(algorithm: Any, import_file: str | os.PathLike, policy_id: str = "default_policy") -> None:
    """Load the weights in `import_file` into `policy_id`'s model, then push them to the
    Learner and the EnvRunners (see the module docstring for the formats)."""
    path = Path(import_file)
    if not path.is_file():
        raise FileNotFoundError(f"import_model: there is no file {str(path)!r}.")
    suffix = path.suffix.lower()
    if suffix not in H5_SUFFIXES + TORCH_SUFFIXES:
        raise ValueError(f"import_model: cannot read {path.name!r}; give an .h5/.hdf5 file (read with h5py) or a "
                         ".pt/.pth file holding a torch state dict (torch.save(model.state_dict(), path)).")
    policy = algorithm.get_policy(policy_id)
    model = policy.model
    target = model if isinstance(model, nn.Module) else policy.module
    if suffix in H5_SUFFIXES:
        importer = getattr(model, "import_from_h5", None)
        if callable(importer):
            importer(str(path))
        else:
            load_h5_weights(target, path)
    else:
        load_state_dict_checked(target, _read_torch_state(path), path)
    algorithm.set_weights({policy_id: policy.get_weights()})


def _read_torch_state(path: Path) -> Mapping[str, Any]:
    """The state dict in a torch file (also one saved under a "state_dict" key)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - pickled objects beyond tensors, or not a torch file
        raise ValueError(f"import_model: {path.name!r} is not a torch state dict that loads with "
                         f"weights_only=True ({type(err).__name__}: {err}). Save the weights with "
                         "torch.save(model.state_dict(), path).") from None
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"import_model: {path.name!r} holds a {type(state).__name__}, not a state dict of tensors; "
                         "save the weights with torch.save(model.state_dict(), path).")
    return state


def read_h5_state(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every dataset of an h5 file as {name with dots: array} (`a/b/weight` -> `a.b.weight`)."""
    try:
        import h5py
    except ImportError:
        raise ImportError(f"Reading .h5 weights needs h5py: {install_hint('hdf5')}, or save the weights as a torch "
                          "state dict (.pt) instead.") from None
    state: dict[str, np.ndarray] = {}

    def visit(name: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset):
            state[name.replace("/", ".")] = np.asarray(item[()])

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return state


def load_h5_weights(model: nn.Module, path: str | os.PathLike) -> None:
    """Load an h5 file whose datasets are named like `model.state_dict()` into `model`."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"import_from_h5 loads into torch models; {type(model).__name__} is not a torch.nn.Module.")
    load_state_dict_checked(model, read_h5_state(path), Path(path),
                            hint=" A file in another layout (e.g. Keras's save_weights) needs the model's own "
                                 "import_from_h5(h5_file) to map its layers onto the torch parameters.")


def load_state_dict_checked(model: nn.Module, state: Mapping[str, Any], source: Path, hint: str = "") -> None:
    """`model.load_state_dict(state)` after checking names and shapes, with an error that lists
    the names missing from and unknown to the model and the shapes that differ."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unknown = [k for k in state if k not in own]
    if missing or unknown:
        raise ValueError(f"import_model: the weights in {source.name!r} do not match {type(model).__name__}'s: "
                         f"missing {_listing(missing)}, unknown {_listing(unknown)}. The model's names are "
                         f"{_listing(list(own))}.{hint}")
    wrong = [f"{k} {tuple(np.shape(state[k]))} (model: {tuple(own[k].shape)})" for k in own
             if tuple(np.shape(state[k])) != tuple(own[k].shape)]
    if wrong:
        raise ValueError(f"import_model: shapes in {source.name!r} differ from {type(model).__name__}'s: "
                         f"{'; '.join(wrong[:8])}.{hint}")
    model.load_state_dict({k: torch.as_tensor(np.asarray(v) if not isinstance(v, torch.Tensor) else v)
                           for k, v in state.items()})


def _listing(names: list[str], limit: int = 8) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")

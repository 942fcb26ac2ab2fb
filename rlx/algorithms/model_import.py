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

import torch
from torch import nn

from rlx.utils.weights_io import load_h5_weights, load_state_dict_checked, read_h5_state

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

"""Weights read from files into torch models with checked names and shapes: h5 files (with
h5py) and state dicts. `Algorithm.import_model` (rlx.algorithms.model_import) and the old API's
`ModelV2.import_from_h5` read through these.
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

__all__ = ["load_h5_weights", "load_state_dict_checked", "read_h5_state"]


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

"""`update_global_seed_if_necessary` (RLlib's `ray.rllib.utils.debug.deterministic`)."""
from __future__ import annotations

import os
import random

import numpy as np

from rlx.utils.errors import NotSupportedYetError
from rlx.utils.torch_utils import set_torch_seed


def update_global_seed_if_necessary(framework: str | None = None, seed: int | None = None) -> None:
    """Seed Python's `random`, NumPy's global generator and (framework "torch") torch, making cuDNN
    deterministic; nothing when `seed` is None. rlx is PyTorch-only: "tf"/"tf2" raise."""
    if seed is None:
        return
    if framework not in (None, "torch"):
        raise NotSupportedYetError(f"update_global_seed_if_necessary(framework={framework!r})", "rlx is PyTorch-only",
                                   fix='Pass framework="torch".')
    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    if framework == "torch":
        set_torch_seed(seed)

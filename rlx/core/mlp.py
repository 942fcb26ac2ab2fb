"""The fully connected building blocks of rlx's networks: `MLP` (and `make_mlp`, with RLlib's
initializer settings), `EnsembleMLP` (several MLPs of one shape in batched matmuls) and
`flat_obs_dim`, the input width of an MLP over an observation space."""
from __future__ import annotations

import math
from typing import Any, Literal, Sequence, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlx.utils.errors import NotSupportedYetError

__all__ = ["ACTIVATION_FNS", "EnsembleMLP", "MLP", "flat_obs_dim", "make_mlp", "resolve_initializer"]

#: The activation functions of the model config's activation names.
ACTIVATION_FNS = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "swish": F.silu,
    "silu": F.silu,
    "elu": F.elu,
    "linear": None,
    None: None,
}


class MLP(nn.Module):
    """A stack of Linear layers with one activation between them (none after the output layer).

    forward() loops over the layers with torch.nn.functional calls instead of nested
    Module calls: for the small batches of env stepping, Module.__call__'s hook machinery
    costs as much as the matrix products.
    """

    def __init__(self, linears: Sequence[nn.Linear], activations: Sequence[str | None]):
        super().__init__()
        self.linears = nn.ModuleList(linears)
        self._acts = [ACTIVATION_FNS[a] for a in activations]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for lin, act in zip(cast("Sequence[nn.Linear]", self.linears), self._acts):  # built from `linears`
            x = F.linear(x, lin.weight, lin.bias)
            if act is not None:
                x = act(x)
        return x


def make_mlp(
    in_dim: int,
    hiddens: Sequence[int],
    activation: str | None,
    out_dim: int | None = None,
    out_gain: float = 1.0,
    post_hiddens: Sequence[int] = (),
    post_activation: str | None = "relu",
    initializers: dict[str, Any] | None = None,
    layer_init: Literal["orthogonal", "torch"] = "orthogonal",
) -> MLP:
    """An MLP `in_dim -> hiddens (activation) -> post_hiddens (post_activation) [-> out_dim]`.

    With `layer_init="orthogonal"`, hidden layers use orthogonal init with gain sqrt(2) and zero
    biases, and the output layer uses `out_gain` (small for policy logits, 1 for values): the
    initialization PPO is known to like. With `layer_init="torch"`, every layer keeps
    torch.nn.Linear's own initialization (what RLlib's and SB3's SAC use) and `out_gain` is
    unused. `initializers` (the model dict's fcnet_kernel_initializer, fcnet_bias_initializer and
    their _kwargs) replace the hidden layers' initialization in both cases.
    """
    if layer_init not in ("orthogonal", "torch"):
        raise ValueError(f"layer_init must be 'orthogonal' or 'torch', got {layer_init!r}.")
    orthogonal = layer_init == "orthogonal"
    init = initializers or {}
    kernel_init = resolve_initializer(init.get("fcnet_kernel_initializer"))
    bias_init = resolve_initializer(init.get("fcnet_bias_initializer"))
    linears: list[nn.Linear] = []
    acts: list[str | None] = []
    dim = in_dim
    for sizes, act_name in ((hiddens, activation), (post_hiddens, post_activation)):
        for h in sizes:
            lin = nn.Linear(dim, h)
            if kernel_init is not None:
                kernel_init(lin.weight, **(init.get("fcnet_kernel_initializer_kwargs") or {}))
            elif orthogonal:
                nn.init.orthogonal_(lin.weight, gain=math.sqrt(2.0))
            if bias_init is not None:
                bias_init(lin.bias, **(init.get("fcnet_bias_initializer_kwargs") or {}))
            elif orthogonal:
                nn.init.zeros_(lin.bias)
            linears.append(lin)
            acts.append(act_name)
            dim = h
    if out_dim is not None:
        lin = nn.Linear(dim, out_dim)
        if orthogonal:
            nn.init.orthogonal_(lin.weight, gain=out_gain)
            nn.init.zeros_(lin.bias)
        linears.append(lin)
        acts.append(None)
    return MLP(linears, acts)


def resolve_initializer(value: Any) -> Any:
    """A torch.nn.init function from a callable or a name ("xavier_uniform", "orthogonal_", ...)."""
    if value is None or callable(value):
        return value
    name = str(value)
    # The in-place forms (trailing underscore) first: the others are deprecated aliases.
    for candidate in (name + "_", name, name.lower() + "_", name.lower()):
        fn = getattr(nn.init, candidate, None)
        if callable(fn):
            return fn
    names = sorted(n for n in dir(nn.init) if n.endswith("_") and not n.startswith("_"))
    raise ValueError(f"Unknown initializer {value!r}; use a callable or one of torch.nn.init's: {', '.join(names)}.")


def flat_obs_dim(space: gym.Space) -> int:
    """Input width of an MLP reading (preprocessed) observations of `space`."""
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise NotSupportedYetError(
        f"observation space {space} as direct model input",
        "the default MLP reads Box observations; Discrete, Dict and Tuple spaces are preprocessed into one",
    )


class EnsembleMLP(nn.Module):
    """`num_members` independent MLPs of the same shape evaluated together with batched matmuls.

    Twin Q-functions (SAC, TD3) are an ensemble of 2: one baddbmm per layer computes both,
    halving the number of small-op dispatches that dominate CPU time at these sizes.
    Input [B, in] (shared by all members) or [E, B, in]; output [E, B, out].
    """

    def __init__(self, num_members: int, in_dim: int, hiddens: Sequence[int], out_dim: int,
                 activation: str | None = "relu", initializers: dict[str, Any] | None = None):
        super().__init__()
        self.num_members = num_members
        dims = [in_dim] + list(hiddens) + [out_dim]
        init = initializers or {}
        kernel_init = resolve_initializer(init.get("fcnet_kernel_initializer"))
        bias_init = resolve_initializer(init.get("fcnet_bias_initializer"))
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            # PyTorch's nn.Linear default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), unless the model
            # config names initializers for the hidden layers (as make_mlp's).
            bound = 1.0 / math.sqrt(a)
            weight = torch.empty(num_members, a, b).uniform_(-bound, bound)
            bias = torch.empty(num_members, 1, b).uniform_(-bound, bound)
            hidden = i < len(dims) - 2
            for member in range(num_members):
                if hidden and kernel_init is not None:
                    kernel = torch.empty(b, a)  # nn.Linear's [out, in], so fans are computed the same way
                    kernel_init(kernel, **(init.get("fcnet_kernel_initializer_kwargs") or {}))
                    weight[member] = kernel.T
                if hidden and bias_init is not None:
                    row = torch.empty(b)
                    bias_init(row, **(init.get("fcnet_bias_initializer_kwargs") or {}))
                    bias[member, 0] = row
            self.weights.append(nn.Parameter(weight))
            self.biases.append(nn.Parameter(bias))
        self._act = ACTIVATION_FNS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.num_members, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if i < last and self._act is not None:
                x = self._act(x)
        return x

"""Default networks: MLP trunks and the actor-critic RLModule built from `model_config`."""
from __future__ import annotations

import math
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlx.core.action_masking import apply_action_mask, find_action_mask
from rlx.core.cnn import is_image_space
from rlx.core.columns import Columns
from rlx.core.rl_module import RLModule
from rlx.utils.errors import NotSupportedYetError

_ACTIVATION_FNS = {
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
        self._acts = [_ACTIVATION_FNS[a] for a in activations]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for lin, act in zip(self.linears, self._acts):
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
) -> MLP:
    """An MLP `in_dim -> hiddens (activation) -> post_hiddens (post_activation) [-> out_dim]`.

    Hidden layers use orthogonal init with gain sqrt(2); the output layer uses `out_gain`
    (small for policy logits, 1 for values), the initialization PPO is known to like.
    `initializers` (the model dict's fcnet_kernel_initializer, fcnet_bias_initializer and their
    _kwargs) replace the hidden layers' initialization.
    """
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
            else:
                nn.init.orthogonal_(lin.weight, gain=math.sqrt(2.0))
            if bias_init is not None:
                bias_init(lin.bias, **(init.get("fcnet_bias_initializer_kwargs") or {}))
            else:
                nn.init.zeros_(lin.bias)
            linears.append(lin)
            acts.append(act_name)
            dim = h
    if out_dim is not None:
        lin = nn.Linear(dim, out_dim)
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


def refuse_no_final_linear(model_config: dict[str, Any], algorithm: str) -> None:
    """NotSupportedYetError for model['no_final_linear'] in a module whose heads need their linear layer."""
    if model_config.get("no_final_linear"):
        raise NotSupportedYetError(f"model['no_final_linear'] with {algorithm}",
                                   "it applies to the actor-critic network of policy-gradient algorithms (PPO, ...)",
                                   fix="Remove no_final_linear from the model config.")


def flat_obs_dim(space: gym.Space) -> int:
    """Input width of an MLP reading (preprocessed) observations of `space`."""
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise NotSupportedYetError(
        f"observation space {space} as direct model input",
        "the default MLP reads Box observations; Discrete, Dict and Tuple spaces are preprocessed into one",
    )


class ActorCriticModule(RLModule):
    """The default module of policy-gradient algorithms: a policy head and a value head.

    With `vf_share_layers=True` both heads sit on one MLP trunk; otherwise the policy and
    the value function are separate MLPs. For Box actions, `free_log_std=True` makes the
    log standard deviation a free parameter instead of a network output. The networks come
    from the spec's `catalog_class` (default: ActorCriticCatalog; see rlx.core.models.catalog).
    """

    #: The networks come from `self.catalog_class` (default: ActorCriticCatalog).
    builds_from_catalog = True

    def setup(self) -> None:
        from rlx.core.models.actor_critic_catalog import ActorCriticCatalog

        cfg = self.model_config
        # With an action mask in the (Dict) observation, the networks read only the other keys.
        self.action_mask = find_action_mask(self.observation_space, self.action_space, cfg)
        space = self.action_mask.input_space if self.action_mask is not None else self.observation_space
        catalog = (self.catalog_class or ActorCriticCatalog)(space, self.action_space, cfg)
        self.catalog = catalog
        self.free_log_std = catalog.free_log_std
        self.vf_share_layers = catalog.vf_share_layers
        if self.free_log_std:
            self.log_std = nn.Parameter(torch.zeros(catalog.pi_head_output_dim))
        self._flatten = not is_image_space(space, cfg) and len(space.shape) != 1
        self.encoder = catalog.build_actor_critic_encoder("torch")
        self.pi = catalog.build_pi_head("torch")
        self.vf = None if self.inference_only else catalog.build_vf_head("torch")

    def _obs(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The networks' input and the action mask (None without one)."""
        obs, mask = batch[Columns.OBS], None
        if self.action_mask is not None:
            obs, mask = self.action_mask.split(obs)
        if self._flatten:
            obs = obs.reshape(obs.shape[0], -1)
        return obs, mask

    def _pi(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        out = self.pi(features)
        if self.free_log_std:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return apply_action_mask(out, mask)

    @torch.no_grad()
    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The action-distribution inputs for acting (without gradients, as RLlib's modules act)."""
        obs, mask = self._obs(batch)
        features = self.encoder(obs) if self.encoder is not None else obs
        return {Columns.ACTION_DIST_INPUTS: self._pi(features, mask)}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch, **kwargs)

    def numpy_inference_fn(self) -> Any:
        """forward_inference's action-distribution inputs in NumPy (see RLModule.numpy_inference_fn)
        for MLP networks without an action mask; None otherwise."""
        from rlx.core.numpy_forward import as_float32_rows, keeps_methods, mlp_numpy_fn

        if self.action_mask is not None or not keeps_methods(
                self, ActorCriticModule, ("forward_inference", "forward_exploration", "_pi", "_obs")):
            return None
        pi = mlp_numpy_fn(self.pi)
        encoder = mlp_numpy_fn(self.encoder) if self.encoder is not None else None
        if pi is None or (self.encoder is not None and encoder is None):
            return None
        log_std = self.log_std.detach().numpy() if self.free_log_std else None

        def forward(obs: np.ndarray) -> np.ndarray:
            x = as_float32_rows(obs)
            out = pi(encoder(x) if encoder is not None else x)
            if log_std is not None:
                out = np.concatenate([out, np.broadcast_to(log_std, out.shape)], axis=-1)
            return out

        return forward

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, mask = self._obs(batch)
        if self.encoder is not None:
            features = self.encoder(obs)
            logits = self._pi(features, mask)
            values = self.vf(features).squeeze(-1)
        else:
            logits = self._pi(obs, mask)
            values = self.vf(obs).squeeze(-1)
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.VF_PREDS: values}

    def compute_values(self, batch: dict[str, Any]) -> torch.Tensor:
        """State values V(obs), shape [B]."""
        obs, _ = self._obs(batch)
        if self.encoder is not None:
            obs = self.encoder(obs)
        return self.vf(obs).squeeze(-1)


class EnsembleMLP(nn.Module):
    """`num_members` independent MLPs of the same shape evaluated together with batched matmuls.

    Twin Q-functions (SAC, TD3) are an ensemble of 2: one baddbmm per layer computes both,
    halving the number of small-op dispatches that dominate CPU time at these sizes.
    Input [B, in] (shared by all members) or [E, B, in]; output [E, B, out].
    """

    def __init__(self, num_members: int, in_dim: int, hiddens: Sequence[int], out_dim: int,
                 activation: str | None = "relu"):
        super().__init__()
        self.num_members = num_members
        dims = [in_dim] + list(hiddens) + [out_dim]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in zip(dims[:-1], dims[1:]):
            bound = 1.0 / math.sqrt(a)
            self.weights.append(nn.Parameter(torch.empty(num_members, a, b).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(num_members, 1, b).uniform_(-bound, bound)))
        self._act = _ACTIVATION_FNS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.num_members, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if i < last and self._act is not None:
                x = self._act(x)
        return x

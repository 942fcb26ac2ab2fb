"""The default attention module (model["use_attention"]=True): encoder, GTrXL, policy and value heads.

GTrXL is the gated Transformer-XL of Parisotto et al., "Stabilizing Transformers for Reinforcement
Learning" (2019): each transformer unit runs relative multi-head attention over [memory; inputs]
and a position-wise MLP, each with layer norm on its input (identity-map reordering) and a GRU-type
gate in place of the residual connection.

Batches carry a time axis, as for the LSTM module: `obs` is [B, T, ...] (one episode's steps per
row) and `state_in` holds fixed-size arrays, so EnvRunners and the recurrent PPO Learner carry it
unchanged: `memory_<i>` [B, M, D], the inputs of transformer unit i at the last M steps
(M = attention_memory_inference, D = attention_dim), and `seen` [B, 1], how many of those M steps
belong to the current episode (older slots are masked out). Step t attends to itself and the M
steps before it, so running T steps in one call equals running them one at a time.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.core.cnn import CNN, default_conv_filters, is_image_space
from rlx.core.columns import Columns
from rlx.core.distributions import DiagGaussian, dist_class_for_space
from rlx.core.models import flat_obs_dim, make_mlp
from rlx.core.rl_module.rl_module import RLModule, built_layer
from rlx.utils.errors import ConfigError, NotSupportedYetError


class GRUGate(nn.Module):
    """GTrXL's gating layer g(x, y): a GRU update of the residual stream x by the sublayer output y.

    The update gate's bias starts at -`init_bias`, so a new unit starts close to the identity map.
    """

    def __init__(self, dim: int, init_bias: float) -> None:
        super().__init__()
        self.from_y = nn.Linear(dim, 3 * dim, bias=False)   # W_r, W_z, W_g
        self.from_x = nn.Linear(dim, 2 * dim, bias=False)   # U_r, U_z
        self.reset_x = nn.Linear(dim, dim, bias=False)      # U_g
        self.gate_bias = nn.Parameter(torch.full((dim,), float(init_bias)))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(1 - z) * x + z * h with z the update gate and h the candidate state."""
        wr, wz, wg = self.from_y(y).chunk(3, dim=-1)
        ur, uz = self.from_x(x).chunk(2, dim=-1)
        r = torch.sigmoid(wr + ur)
        z = torch.sigmoid(wz + uz - self.gate_bias)
        h = torch.tanh(wg + self.reset_x(r * x))
        return (1.0 - z) * x + z * h


class RelativeMultiHeadAttention(nn.Module):
    """Transformer-XL attention: content term (q + u)·k plus position term (q + v)·R[t - s], with
    R a projected sinusoidal embedding of the distance between query t and key s."""

    def __init__(self, dim: int, num_heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        inner = num_heads * head_dim
        self.query = nn.Linear(dim, inner, bias=False)
        self.key_value = nn.Linear(dim, 2 * inner, bias=False)
        self.position = nn.Linear(dim, inner, bias=False)
        self.out = nn.Linear(inner, dim, bias=False)
        self.u = nn.Parameter(torch.zeros(num_heads, head_dim))
        self.v = nn.Parameter(torch.zeros(num_heads, head_dim))

    def forward(self, x: torch.Tensor, context: torch.Tensor, distances: torch.Tensor, pos_emb: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """x [B, T, D] (queries), context [B, S, D] (keys/values; its last T rows are x's steps),
        distances [T, S] (long, clamped to pos_emb's rows), pos_emb [P, D], mask [B, T, S] (True: may attend)."""
        B, T, _ = x.shape
        S = context.shape[1]
        H, dh = self.num_heads, self.head_dim
        q = self.query(x).view(B, T, H, dh).transpose(1, 2)                       # [B, H, T, dh]
        k, v = self.key_value(context).view(B, S, 2, H, dh).permute(2, 0, 3, 1, 4)  # 2 x [B, H, S, dh]
        r = self.position(pos_emb).view(-1, H, dh).permute(1, 2, 0)               # [H, dh, P]
        content = (q + self.u[:, None]) @ k.transpose(-1, -2)                    # [B, H, T, S]
        by_distance = (q + self.v[:, None]) @ r                                   # [B, H, T, P]
        position = by_distance.gather(-1, distances.expand(B, H, T, S))
        scores = (content + position) / math.sqrt(dh)
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v                                   # [B, H, T, dh]
        return self.out(out.transpose(1, 2).reshape(B, T, H * dh))


class GTrXLUnit(nn.Module):
    """One gated transformer unit: gated attention sublayer, then gated position-wise MLP."""

    def __init__(self, dim: int, num_heads: int, head_dim: int, mlp_dim: int, gate_bias: float) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = RelativeMultiHeadAttention(dim, num_heads, head_dim)
        self.attention_gate = GRUGate(dim, gate_bias)
        self.mlp_norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, dim))
        self.mlp_gate = GRUGate(dim, gate_bias)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, distances: torch.Tensor, pos_emb: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """x [B, T, D] and this unit's memory [B, M, D] -> the unit's output [B, T, D]."""
        context = self.attention_norm(torch.cat([memory, x], dim=1))
        y = self.attention(context[:, memory.shape[1]:], context, distances, pos_emb, mask)
        x = self.attention_gate(x, torch.relu(y))
        return self.mlp_gate(x, torch.relu(self.mlp(self.mlp_norm(x))))


def sinusoid_embedding(length: int, dim: int) -> torch.Tensor:
    """[length, dim] sinusoidal embeddings of the distances 0 .. length - 1."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    emb = torch.zeros(length, dim)
    emb[:, 0::2] = torch.sin(pos * freq)
    emb[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return emb


class GTrXL(nn.Module):
    """Input projection to `dim`, then `num_units` GTrXL units, each attending over its memory."""

    def __init__(self, in_dim: int, dim: int, num_units: int, num_heads: int, head_dim: int, mlp_dim: int,
                 gate_bias: float, memory: int) -> None:
        super().__init__()
        self.memory = memory
        self.input = nn.Linear(in_dim, dim)
        self.units = nn.ModuleList(GTrXLUnit(dim, num_heads, head_dim, mlp_dim, gate_bias) for _ in range(num_units))
        self.register_buffer("pos_emb", sinusoid_embedding(memory + 1, dim), persistent=False)
        self._layouts: dict[tuple, tuple[torch.Tensor, ...]] = {}

    def _layout(self, T: int, window: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(key positions [window + T], causal window mask [T, window + T], clamped distances
        [T, window + T]) for T query steps; cached, as acting asks for the same T=1 layout each step."""
        key = (T, window, device)
        if key not in self._layouts:
            key_pos = torch.arange(-window, T, device=device)
            dist = torch.arange(T, device=device)[:, None] - key_pos[None, :]
            self._layouts[key] = (key_pos, (dist >= 0) & (dist <= window), dist.clamp(0, window))
            if len(self._layouts) > 64:  # sequence lengths vary in training; keep the cache small
                self._layouts.pop(next(iter(self._layouts)))
        return self._layouts[key]

    def forward(self, x: torch.Tensor, memories: list[torch.Tensor], seen: torch.Tensor,
                window: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """x [B, T, in_dim] (one episode's consecutive steps per row), memories [B, M, D] per unit,
        seen [B] (memory slots of this episode); each step attends to itself and the `window`
        (<= M) steps before it. Returns the output [B, T, D] and the memories after the last step."""
        x = self.input(x)
        B, T = x.shape[:2]
        key_pos, causal, distances = self._layout(T, window, x.device)
        in_episode = key_pos[None, :] >= -seen.reshape(B, 1)                          # [B, window + T]
        mask = causal[None] & in_episode[:, None]
        new_memories = []
        for unit, memory in zip(self.units, memories):
            new_memories.append(torch.cat([memory, x], dim=1)[:, -self.memory:])
            x = unit(x, memory[:, memory.shape[1] - window:], distances, self.pos_emb, mask)
        return x, new_memories


def obs_encoder(observation_space: Any, cfg: dict[str, Any]) -> tuple[nn.Module, int]:
    """The network before the recurrent core: a CNN (conv_filters) for images, else the fcnet MLP."""
    if is_image_space(observation_space, cfg):
        filters = cfg.get("conv_filters") or default_conv_filters(observation_space.shape)
        dtype = getattr(observation_space, "original_space", observation_space).dtype
        cnn = CNN(observation_space.shape, filters, cfg.get("conv_activation", "relu"), scale_uint8=dtype == np.uint8)
        return cnn, cnn.out_dim
    in_dim = flat_obs_dim(observation_space)
    hiddens = list(cfg.get("fcnet_hiddens", [64, 64]))
    return make_mlp(in_dim, hiddens, cfg.get("fcnet_activation", "tanh")), (hiddens[-1] if hiddens else in_dim)


def _positive_int(cfg: dict[str, Any], key: str, default: int) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"model['{key}'] must be a positive integer, got {value!r}.")
    return value


class AttentionActorCriticModule(RLModule):
    """Actor-critic with a GTrXL after the fcnet (or CNN) encoder: RLlib's use_attention.

    model_config keys: attention_num_transformer_units, attention_dim, attention_num_heads,
    attention_head_dim, attention_position_wise_mlp_dim, attention_init_gru_gate_bias,
    attention_memory_inference (the memory the state carries and acting attends to),
    attention_memory_training (<= attention_memory_inference: how many of those steps the train
    pass attends to), max_seq_len (the Learner's sequence length), fcnet_* / conv_* (the encoder),
    post_fcnet_* (the heads), free_log_std, and vf_share_layers: False (rlx's PPO default) gives the
    value function an encoder and GTrXL of its own, with memories "vf_memory_<i>".
    """

    def setup(self) -> None:
        cfg = self.model_config
        self.dim = _positive_int(cfg, "attention_dim", 64)
        self.num_units = _positive_int(cfg, "attention_num_transformer_units", 1)
        self.memory_inference = _positive_int(cfg, "attention_memory_inference", 50)
        self.memory_training = _positive_int(cfg, "attention_memory_training", 50)
        if self.memory_training > self.memory_inference:
            raise ConfigError(
                f"model['attention_memory_training'] ({self.memory_training}) is larger than "
                f"model['attention_memory_inference'] ({self.memory_inference}); rlx's attention state holds the "
                "inference memory, from which training reads its last attention_memory_training steps. "
                "Set attention_memory_training <= attention_memory_inference.")
        if cfg.get("no_final_linear"):
            raise NotSupportedYetError("model['no_final_linear'] with use_attention",
                                       "the attention module's policy and value heads keep their final linear layer",
                                       fix="Remove no_final_linear from the model config.")
        obs_space, action_space = self._spaces()
        image_space = obs_space if is_image_space(obs_space, cfg) else None
        self._image = image_space is not None
        self._obs_shape = tuple(image_space.shape) if image_space is not None else (-1,)
        self.encoder, self.gtrxl = self._make_core()
        self.vf_share_layers = bool(cfg.get("vf_share_layers", False))
        if not self.vf_share_layers and not self.inference_only:
            self.vf_encoder, self.vf_gtrxl = self._make_core()
        dist_cls, _ = dist_class_for_space(action_space, cfg)
        out_dim = dist_cls.required_input_dim(action_space, cfg)
        self.free_log_std = bool(cfg.get("free_log_std", False)) and dist_cls is DiagGaussian
        pi_out = out_dim // 2 if self.free_log_std else out_dim
        post = list(cfg.get("post_fcnet_hiddens", []))
        post_act = cfg.get("post_fcnet_activation", "relu")
        self.pi = make_mlp(self.dim, post, post_act, pi_out, out_gain=0.01)
        self.vf: nn.Module | None = (None if self.inference_only
                                     else make_mlp(self.dim, post, post_act, 1, out_gain=1.0))
        if self.free_log_std:
            self.log_std = nn.Parameter(torch.zeros(pi_out))

    def _make_core(self) -> tuple[nn.Module, GTrXL]:
        cfg = self.model_config
        encoder, enc_dim = obs_encoder(self.observation_space, cfg)
        gtrxl = GTrXL(enc_dim, self.dim, self.num_units, _positive_int(cfg, "attention_num_heads", 1),
                      _positive_int(cfg, "attention_head_dim", 32),
                      _positive_int(cfg, "attention_position_wise_mlp_dim", 32),
                      float(cfg.get("attention_init_gru_gate_bias", 2.0)), self.memory_inference)
        return encoder, gtrxl

    def _memory_names(self, prefix: str = "") -> list[str]:
        return [f"{prefix}memory_{i}" for i in range(self.num_units)]

    def get_initial_state(self) -> dict[str, Any]:
        names = self._memory_names()
        if not (self.vf_share_layers or self.inference_only):
            names += self._memory_names("vf_")
        state: dict[str, np.ndarray] = {name: np.zeros((self.memory_inference, self.dim), np.float32)
                                        for name in names}
        state["seen"] = np.zeros(1, np.float32)
        return state

    def _run(self, encoder: nn.Module, gtrxl: GTrXL, obs: Any, state: dict[str, Any], prefix: str,
             window: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        obs = torch.as_tensor(obs, dtype=torch.float32)
        B, T = obs.shape[:2]
        x = encoder(obs.reshape(B * T, *self._obs_shape)).reshape(B, T, -1)
        names = self._memory_names(prefix)
        memories = [torch.as_tensor(state[n], dtype=torch.float32) for n in names]
        out, new_memories = gtrxl(x, memories, torch.as_tensor(state["seen"], dtype=torch.float32), window)
        return out, dict(zip(names, new_memories))

    def _state_out(self, state: dict[str, Any], steps: int) -> dict[str, Any]:
        out = {k: v for k, v in state.items() if k != "seen"}  # a memory not run this call travels along
        seen = torch.as_tensor(state["seen"], dtype=torch.float32)
        out["seen"] = (seen + steps).clamp(max=float(self.memory_inference))
        return out

    def _embeddings(self, batch: dict[str, Any], window: int) -> tuple[torch.Tensor, dict[str, Any]]:
        state = batch[Columns.STATE_IN]
        out, memories = self._run(self.encoder, self.gtrxl, batch[Columns.OBS], state, "", window)
        state_out = self._state_out(state, out.shape[1])
        state_out.update(memories)
        return out, state_out

    def _value_embeddings(self, batch: dict[str, Any], embeddings: torch.Tensor | None) -> torch.Tensor:
        if self.vf_share_layers:
            return embeddings if embeddings is not None else self._embeddings(batch, self.memory_training)[0]
        out, _ = self._run(self.vf_encoder, self.vf_gtrxl, batch[Columns.OBS], batch[Columns.STATE_IN], "vf_",
                           self.memory_training)
        return out

    def _logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        out = self.pi(embeddings)
        if self.free_log_std:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self._embeddings(batch, self.memory_inference)
        if "vf_memory_0" in state_out:
            # The value GTrXL steps too, so its memory stays in sync with the episode.
            _, vf_memories = self._run(self.vf_encoder, self.vf_gtrxl, batch[Columns.OBS], batch[Columns.STATE_IN],
                                       "vf_", self.memory_inference)
            state_out.update(vf_memories)
        return {Columns.ACTION_DIST_INPUTS: self._logits(embeddings), Columns.STATE_OUT: state_out}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self._embeddings(batch, self.memory_training)
        values = built_layer(self, self.vf, "value head")(self._value_embeddings(batch, embeddings)).squeeze(-1)
        return {Columns.ACTION_DIST_INPUTS: self._logits(embeddings), Columns.STATE_OUT: state_out,
                Columns.EMBEDDINGS: embeddings, Columns.VF_PREDS: values}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values [B, T]."""
        return built_layer(self, self.vf, "value head")(self._value_embeddings(batch, embeddings)).squeeze(-1)

"""What recurrent replay-based algorithms (DQN, SAC, DDPG, TD3 with model use_lstm) share, R2D2-style:
the `burn_in_len` / `zero_init_states` options and the folding of the old sequence-replay keys, the
SequenceReplayBuffer a config asks for, n-step targets inside zero-padded sequences, and the
unroll of stored sequences whose burn-in steps only warm up the stored state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, integer
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError
from rlx.utils.replay_buffers import make_replay_buffer
from rlx.utils.replay_buffers.sequence_replay_buffer import BURN_IN, SEQ_LENS, STATE_PREFIX, SequenceReplayBuffer

#: Old (RLlib 1.x/2.0 R2D2) replay_buffer_config keys and the settings they map to.
OLD_SEQUENCE_KEYS = {"replay_sequence_length": "model['max_seq_len']", "replay_burn_in": "burn_in_len",
                     "replay_zero_init_states": "zero_init_states"}


def sequence_replay_options(algo_name: str) -> list[Option]:
    """The `burn_in_len` and `zero_init_states` training options of a recurrent replay algorithm."""
    t = ("training",)
    return [
        Option("burn_in_len", 0, t, integer(0),
               doc=f"Recurrent {algo_name} (model use_lstm): leading steps of each replayed sequence that only "
                   "warm up the stored state (no loss), before the max_seq_len steps trained on (as RLlib's R2D2). 0: off."),
        Option("zero_init_states", False, t, boolean,
               doc=f"Recurrent {algo_name}: start replayed sequences from a zero state instead of the stored one."),
    ]


def fold_sequence_replay_settings(values: dict[str, Any], algo_name: str) -> None:
    """Check the recurrent replay settings in a config's `values` (in place).

    With model use_lstm, the old keys replay_sequence_length (> 1), replay_burn_in and
    replay_zero_init_states leave replay_buffer_config and set model['max_seq_len'],
    burn_in_len and zero_init_states. Without it, burn_in_len and zero_init_states must stay
    off; the old keys then reach the replay buffer, which refuses values other than the defaults.
    """
    model = values["model"]
    if not model.get("use_lstm"):
        for key, off in (("burn_in_len", 0), ("zero_init_states", False)):
            if values[key] != off:
                raise ConfigError(f"{key}={values[key]!r} applies to recurrent models: set "
                                  f"model={{'use_lstm': True, ...}} (recurrent {algo_name}) or leave {key} at {off!r}.")
        return
    rb = dict(values["replay_buffer_config"])
    seq_len = rb.pop("replay_sequence_length", None)
    burn_in = rb.pop("replay_burn_in", None)
    zero = rb.pop("replay_zero_init_states", None)
    zero = rb.pop("zero_init_states", None) if zero is None else zero  # R2D2's own name in the buffer config
    if getattr(rb.get("storage_unit"), "value", rb.get("storage_unit")) == "sequences":
        rb.pop("storage_unit")  # what recurrent replay stores anyway
    if seq_len is not None and seq_len != 1:
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
            raise ConfigError(f"replay_buffer_config['replay_sequence_length'] must be a positive int, got {seq_len!r}.")
        model = {**model, "max_seq_len": seq_len}
    if burn_in is not None and burn_in != 0:
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
            raise ConfigError(f"replay_buffer_config['replay_burn_in'] must be an int >= 0, got {burn_in!r}.")
        if values["burn_in_len"] not in (0, burn_in):
            raise ConfigError(f"burn_in_len={values['burn_in_len']} and replay_buffer_config['replay_burn_in']="
                              f"{burn_in} disagree; set only burn_in_len.")
        values["burn_in_len"] = burn_in
    if zero is not None:
        values["zero_init_states"] = bool(zero)
    values["model"] = model
    values["replay_buffer_config"] = rb
    max_seq_len = model.get("max_seq_len") or 20
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or max_seq_len < 1:
        raise ConfigError(f"model['max_seq_len'] must be a positive int, got {max_seq_len!r}.")


def check_recurrent_setup(config: AlgorithmConfig, algo_name: str, multi_agent: bool = False) -> None:
    """NotSupportedYetError for a recurrent replay algorithm in a multi-agent setup (sequences
    replay one module)."""
    if config.model.get("use_lstm") and (multi_agent or config.is_multi_agent):
        raise NotSupportedYetError(f"model use_lstm with multi-agent {algo_name}",
                                   f"recurrent {algo_name} replays the sequences of one single-agent module",
                                   fix="Use PPO for recurrent multi-agent policies, or leave use_lstm off.")


def make_sequence_replay_buffer(config: AlgorithmConfig) -> SequenceReplayBuffer:
    """The SequenceReplayBuffer of a recurrent config: replay_buffer_config's type (uniform or
    prioritized) holding capacity // max_seq_len sequences of burn_in_len + model['max_seq_len']
    steps (RLlib's R2D2 replays max_seq_len trained steps after the burn-in)."""
    max_seq_len = int(config.model.get("max_seq_len") or 20)
    rb = dict(config.replay_buffer_config)
    rb["capacity"] = max(1, int(rb.get("capacity", 50000)) // max_seq_len)
    seed = None if config.seed is None else int(config.seed) + 17
    burn_in = int(config.burn_in_len)
    return SequenceReplayBuffer(make_replay_buffer(rb, seed=seed), max_seq_len + burn_in, burn_in)


def setup_sequence_replay(algo: Any, config: AlgorithmConfig, algo_name: str,
                          setup: Callable[[AlgorithmConfig], None]) -> None:
    """An OffPolicyAlgorithm's `setup` (the `setup` callable) for a config that may be recurrent:
    refuses multi-agent recurrent runs and, with model use_lstm, replays sequences."""
    check_recurrent_setup(config, algo_name)
    setup(config)
    if config.model.get("use_lstm"):
        if algo.learners.sole_module_id is None:  # a multi-agent env, found only once it was built
            algo.stop()
            check_recurrent_setup(config, algo_name, multi_agent=True)
        algo.local_replay_buffer = make_sequence_replay_buffer(config)
        algo._prioritized = algo.local_replay_buffer.prioritized


def nstep_targets(rewards: torch.Tensor, seq_lens: torch.Tensor, terminated: torch.Tensor,
                  n_step: int, gamma: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(discounted reward sums [N, L], bootstrap index [N, L] into the L + 1 observations,
    bootstrap discount [N, L]) of n-step targets inside zero-padded sequences.

    The target of step t sums the rewards of steps t .. t+m-1 (m = min(n, steps left in the
    sequence)) and bootstraps from observation t+m, unless that ends the episode by termination.
    """
    N, L = rewards.shape
    steps = torch.arange(L, device=rewards.device).expand(N, L)
    m = (seq_lens.unsqueeze(1) - steps).clamp(min=1, max=n_step)
    padded = torch.cat([rewards, rewards.new_zeros(N, n_step)], dim=1)
    sums = torch.zeros_like(rewards)
    for k in range(n_step):  # rewards past a sequence's end are zero padding
        sums = sums + (gamma ** k) * padded[:, k:k + L] * (k < m)
    boot = steps + m
    ends_episode = terminated.unsqueeze(1) & (boot == seq_lens.unsqueeze(1))
    discount = (gamma ** m.to(rewards.dtype)) * (~ends_episode).to(rewards.dtype)
    return sums, boot, discount


def burn_in_groups(burn_in: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """(order, [(burn-in length, lo, hi), ...]): sorting sequences by `order` puts those with the
    same burn-in (burn_in_len, or 0 at an episode's start) in the rows lo:hi, so each group
    unrolls its burn-in steps without gradients in one pass."""
    burn_in = np.asarray(burn_in).reshape(-1)
    order = np.argsort(-burn_in, kind="stable")
    values, starts = np.unique(-burn_in[order], return_index=True)
    ends = starts[1:].tolist() + [len(order)]
    return order, [(-int(v), int(lo), int(hi)) for v, lo, hi in zip(values.tolist(), starts.tolist(), ends)]


def unroll(run: Callable[[torch.Tensor, dict[str, torch.Tensor]], tuple[torch.Tensor, dict[str, torch.Tensor]]],
           obs: torch.Tensor, state: dict[str, torch.Tensor], groups: list[tuple[int, int, int]]) -> torch.Tensor:
    """`run(obs [n, T, ...], state) -> (outputs [n, T, ...], state after)` over sequences in the
    `burn_in_groups` order; each group's burn-in steps run without gradients. Outputs [N, T, ...]."""
    parts = []
    for burn_in, lo, hi in groups:
        o, s = obs[lo:hi], {k: v[lo:hi] for k, v in state.items()}
        if burn_in == 0:
            parts.append(run(o, s)[0])
            continue
        with torch.no_grad():
            warm, s = run(o[:, :burn_in], s)
        rest, _ = run(o[:, burn_in:], s)
        parts.append(torch.cat([warm, rest], dim=1))
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def masked_mean(x: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of `x` [..., N, L] over the `mask` [N, L] steps: each sequence's mean over its
    trained steps (times its importance weight, if given), then the mean over the sequences
    that have any (R2D2's per-sequence weighting). Padded and burn-in steps add nothing."""
    mask = mask.to(x.dtype)
    count = mask.sum(dim=-1)
    per_seq = (x * mask).sum(dim=-1) / count.clamp(min=1)
    if weights is not None:
        per_seq = per_seq * weights
    return per_seq.sum(dim=-1) / (count > 0).sum().clamp(min=1)


#: R2D2's mix of max and mean |TD error| in a sequence's priority.
PRIORITY_ETA = 0.9


def sequence_priorities(abs_td: torch.Tensor, mask: torch.Tensor, order: np.ndarray) -> np.ndarray:
    """R2D2's priority eta * max|td| + (1 - eta) * mean|td| over each sequence's `mask` steps,
    from |td| [N, L] in `order` (burn_in_groups'), as NumPy in the replayed batch's order."""
    abs_td = abs_td * mask
    count = mask.sum(dim=1).clamp(min=1)
    priority = PRIORITY_ETA * abs_td.max(dim=1).values + (1 - PRIORITY_ETA) * abs_td.sum(dim=1) / count
    out = np.empty(len(order), np.float64)
    out[order] = priority.detach().float().cpu().numpy()
    return out


@dataclass
class SequenceBatch:
    """A SequenceReplayBuffer batch as tensors on a Learner's device, rows sorted by `order` so
    that each `groups` entry (burn-in length, lo, hi) is one block (see burn_in_groups)."""

    order: np.ndarray
    groups: list[tuple[int, int, int]]
    obs: torch.Tensor  # [N, L + 1, ...]
    actions: torch.Tensor  # [N, L, ...]
    rewards: torch.Tensor  # [N, L]
    terminated: torch.Tensor  # [N] bool
    seq_lens: torch.Tensor  # [N]
    mask: torch.Tensor  # [N, L] float: real steps after the burn-in
    state: dict[str, torch.Tensor]  # {name: [N, ...]} before each sequence's first step
    weights: torch.Tensor | None  # [N] importance weights (prioritized replay)
    n_step: int

    def nstep_targets(self, gamma: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """nstep_targets() of this batch: (reward sums, bootstrap index, bootstrap discount), [N, L] each."""
        return nstep_targets(self.rewards, self.seq_lens, self.terminated, self.n_step, gamma)


def sequence_batch(learner: Any, batch: dict[str, np.ndarray], zero_init_states: bool = False) -> SequenceBatch:
    """The SequenceBatch of a replayed batch (`learner.tensor` puts arrays on its device);
    with `zero_init_states` the stored states are replaced by zeros."""
    order, groups = burn_in_groups(batch[BURN_IN])

    def col(value: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        return learner.tensor(np.ascontiguousarray(np.asarray(value)[order]), dtype)

    state = {k[len(STATE_PREFIX):]: col(v, torch.float32) for k, v in batch.items() if k.startswith(STATE_PREFIX)}
    if zero_init_states:
        state = {k: torch.zeros_like(v) for k, v in state.items()}
    return SequenceBatch(
        order=order, groups=groups, obs=col(batch[Columns.OBS], torch.float32), actions=col(batch[Columns.ACTIONS]),
        rewards=col(batch[Columns.REWARDS], torch.float32), terminated=col(batch[Columns.TERMINATEDS]).bool(),
        seq_lens=col(batch[SEQ_LENS]).long(), mask=col(batch[Columns.LOSS_MASK]).float(), state=state,
        weights=col(batch[Columns.WEIGHTS], torch.float32) if Columns.WEIGHTS in batch else None,
        n_step=int(np.asarray(batch.get("n_step", 1)).reshape(-1)[0]))

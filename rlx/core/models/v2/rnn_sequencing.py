"""Sequence helpers of the old API's recurrent models (RLlib's `ray.rllib.policy.rnn_sequencing`;
`rlx.policy.rnn_sequencing` is an alias of this module's names).

rlx's recurrent learners cut time-major batches into sequences themselves
(`rlx.algorithms.ppo.recurrent`); what old-API models call is `add_time_dimension`, which
turns a padded flat batch [B * T, ...] back into sequences [B, T, ...].
"""
from __future__ import annotations

from typing import Any

__all__ = ["add_time_dimension"]


def add_time_dimension(padded_inputs: Any, *, seq_lens: Any, framework: str = "torch",
                       time_major: bool = False) -> Any:
    """Reshape `padded_inputs` [B * T, ...] (B sequences, each zero-padded to T steps) to
    [B, T, ...], or [T, B, ...] with `time_major`; B is `len(seq_lens)`."""
    if framework not in ("torch", None):
        raise ValueError(f"framework={framework!r}: rlx is PyTorch-only; use framework='torch'.")
    num_sequences = int(len(seq_lens))
    if num_sequences == 0 or padded_inputs.shape[0] % num_sequences:
        raise ValueError(f"add_time_dimension: {padded_inputs.shape[0]} rows do not split into "
                         f"{num_sequences} sequences of equal (padded) length.")
    max_seq_len = padded_inputs.shape[0] // num_sequences
    out = padded_inputs.reshape(num_sequences, max_seq_len, *padded_inputs.shape[1:])
    return out.transpose(0, 1) if time_major else out

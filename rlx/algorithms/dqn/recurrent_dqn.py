"""Recurrent DQN's settings (R2D2-style): the checks of `burn_in_len` and the old sequence-replay
keys (rlx.algorithms.recurrent_replay, shared with recurrent SAC, DDPG and TD3) plus DQN's own
refusals (distributional DQN, multi-agent runs) with model use_lstm."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlx.algorithms import recurrent_replay
from rlx.utils.errors import NotSupportedYetError

if TYPE_CHECKING:
    from rlx.algorithms.algorithm_config import AlgorithmConfig


def fold_sequence_replay_settings(values: dict[str, Any]) -> None:
    """Check DQN's recurrent settings in a config's `values` (in place): the shared folding of
    rlx.algorithms.recurrent_replay, and num_atoms=1 (no distributional recurrent DQN)."""
    recurrent_replay.fold_sequence_replay_settings(values, "DQN")
    if values["model"].get("use_lstm") and values["num_atoms"] != 1:
        raise NotSupportedYetError("num_atoms > 1 (distributional DQN) with model use_lstm",
                                   "recurrent DQN learns expected Q-values", fix="Set num_atoms=1.")


def check_recurrent_setup(config: AlgorithmConfig, multi_agent: bool = False) -> None:
    """NotSupportedYetError for recurrent DQN in a multi-agent setup (sequences replay one module)."""
    recurrent_replay.check_recurrent_setup(config, "DQN", multi_agent)

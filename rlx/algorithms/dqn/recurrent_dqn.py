"""Recurrent DQN's settings (R2D2-style): validation of `burn_in_len`, the old sequence-replay
keys of `replay_buffer_config`, and the sequence replay buffer DQN builds for `use_lstm`."""
from __future__ import annotations

from typing import Any

from rlx.utils.errors import ConfigError, NotSupportedYetError

#: Old (RLlib 1.x/2.0 R2D2) replay_buffer_config keys and the DQN settings they map to.
OLD_SEQUENCE_KEYS = {"replay_sequence_length": "model['max_seq_len']", "replay_burn_in": "burn_in_len",
                     "replay_zero_init_states": "zero_init_states"}


def fold_sequence_replay_settings(values: dict[str, Any]) -> None:
    """Check DQN's recurrent settings in a config's `values` (in place).

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
                                  f"model={{'use_lstm': True, ...}} (recurrent DQN) or leave {key} at {off!r}.")
        return
    rb = dict(values["replay_buffer_config"])
    seq_len = rb.pop("replay_sequence_length", None)
    burn_in = rb.pop("replay_burn_in", None)
    zero = rb.pop("replay_zero_init_states", None)
    zero = rb.pop("zero_init_states", None) if zero is None else zero  # R2D2's own name in the buffer config
    if getattr(rb.get("storage_unit"), "value", rb.get("storage_unit")) == "sequences":
        rb.pop("storage_unit")  # what recurrent DQN stores anyway
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
    if values["burn_in_len"] >= max_seq_len:
        raise ConfigError(f"burn_in_len ({values['burn_in_len']}) must be smaller than model['max_seq_len'] "
                          f"({max_seq_len}): the steps of a replayed sequence after its burn-in are the ones "
                          "trained on. Decrease burn_in_len or increase max_seq_len.")
    if values["num_atoms"] != 1:
        raise NotSupportedYetError("num_atoms > 1 (distributional DQN) with model use_lstm",
                                   "recurrent DQN learns expected Q-values", fix="Set num_atoms=1.")


def check_recurrent_setup(config: Any, multi_agent: bool = False) -> None:
    """NotSupportedYetError for recurrent DQN in a multi-agent setup (sequences replay one module)."""
    if config.model.get("use_lstm") and (multi_agent or config.is_multi_agent):
        raise NotSupportedYetError("model use_lstm with multi-agent DQN",
                                   "recurrent DQN replays the sequences of one single-agent module",
                                   fix="Use PPO for recurrent multi-agent policies, or leave use_lstm off.")


def make_sequence_replay_buffer(config: Any) -> Any:
    """The SequenceReplayBuffer of a recurrent DQN config: replay_buffer_config's type (uniform or
    prioritized) holding capacity // max_seq_len sequences of model['max_seq_len'] steps."""
    from rlx.utils.replay_buffers import make_replay_buffer
    from rlx.utils.replay_buffers.sequence_replay_buffer import SequenceReplayBuffer

    max_seq_len = int(config.model.get("max_seq_len") or 20)
    rb = dict(config.replay_buffer_config)
    rb["capacity"] = max(1, int(rb.get("capacity", 50000)) // max_seq_len)
    seed = None if config.seed is None else int(config.seed) + 17
    return SequenceReplayBuffer(make_replay_buffer(rb, seed=seed), max_seq_len, int(config.burn_in_len))

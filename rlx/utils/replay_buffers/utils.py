"""Build a replay buffer from an RLlib-style `replay_buffer_config` dict."""
from __future__ import annotations

import inspect
from typing import Any

from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean
from rlx.utils.registry import import_object
from rlx.utils.replay_buffers.multi_agent_replay_buffer import check_replay_mode
from rlx.utils.replay_buffers.prioritized_replay_buffer import PrioritizedReplayBuffer
from rlx.utils.replay_buffers.replay_buffer import ReplayBuffer

#: RLlib buffer names and the rlx buffer that stands in for each. The episode and multi-agent
#: variants map to the single-transition buffers: rlx links transitions into episodes itself.
BUFFER_TYPES: dict[str, type[ReplayBuffer]] = {
    "ReplayBuffer": ReplayBuffer,
    "EpisodeReplayBuffer": ReplayBuffer,
    "MultiAgentReplayBuffer": ReplayBuffer,
    "MultiAgentEpisodeReplayBuffer": ReplayBuffer,
    "PrioritizedReplayBuffer": PrioritizedReplayBuffer,
    "PrioritizedEpisodeReplayBuffer": PrioritizedReplayBuffer,
    "MultiAgentPrioritizedReplayBuffer": PrioritizedReplayBuffer,
    "MultiAgentPrioritizedEpisodeReplayBuffer": PrioritizedReplayBuffer,
}

#: Old-API RLlib spellings of the prioritized-replay keys.
_ALIASES = {
    "prioritized_replay_alpha": "alpha",
    "prioritized_replay_beta": "beta",
    "prioritized_replay_eps": "eps",
}
#: Keys RLlib configs carry for prioritized replay; a uniform buffer accepts and ignores them.
_PRIORITY_KEYS = ("alpha", "beta", "eps")
#: RLlib 2.0-era keys and the only value rlx gives them (single transitions, prioritized in
#: the driver); at that value they are accepted and dropped, any other value is an error.
_OLD_KEYS_AT_DEFAULT = {"replay_sequence_length": 1, "worker_side_prioritization": False, "replay_burn_in": 0,
                        "replay_zero_init_states": True, "zero_init_states": True, "_enable_replay_buffer_api": True}


def _resolve_type(buffer_type: Any) -> type:
    if isinstance(buffer_type, type):
        cls = buffer_type
    elif isinstance(buffer_type, str):
        name = buffer_type.replace(":", ".").rsplit(".", 1)[-1]
        if buffer_type in BUFFER_TYPES:
            return BUFFER_TYPES[buffer_type]
        if buffer_type.startswith("ray.rllib.") and name in BUFFER_TYPES:
            # RLlib configs may spell out RLlib's own import path; use the rlx stand-in, not Ray.
            return BUFFER_TYPES[name]
        if "." not in buffer_type and ":" not in buffer_type:
            raise ConfigError(
                f"unknown replay buffer type {buffer_type!r}.{did_you_mean(buffer_type, BUFFER_TYPES)} "
                f"Use one of {', '.join(BUFFER_TYPES)}, a ReplayBuffer subclass, or an import path "
                f"'package.module:Class'."
            )
        try:
            cls = import_object(buffer_type)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"cannot import replay buffer type {buffer_type!r}: {err}") from err
    else:
        raise ConfigError(
            f"replay buffer 'type' must be a name, an import path or a class, got {buffer_type!r}."
        )
    if not (isinstance(cls, type) and issubclass(cls, ReplayBuffer)):
        raise ConfigError(f"replay buffer type {buffer_type!r} is not a subclass of rlx's ReplayBuffer.")
    return cls


def make_replay_buffer(replay_buffer_config: dict, *, seed: Any = None) -> ReplayBuffer:
    """Create the buffer that `replay_buffer_config` describes.

    `type` is one of `BUFFER_TYPES` (RLlib's names; default "ReplayBuffer"), a `ReplayBuffer`
    subclass, or its import path ('package.module:Class' or 'package.module.Class'). The other
    keys (`capacity`, `alpha`, `beta`, `eps` alias `prioritized_replay_eps`, `storage_unit`, ...)
    go to the constructor; a key it does not take raises ConfigError. A buffer whose constructor
    takes no `alpha`, `beta` or `eps` (the uniform ones) accepts and ignores those keys, which
    RLlib configs carry whatever the buffer type. `seed`, when given, overrides a `seed` key.
    `replay_mode` ('independent' or 'lockstep') is checked and left to the multi-agent replay.
    """
    if not isinstance(replay_buffer_config, dict):
        raise ConfigError(f"replay_buffer_config must be a dict, got {type(replay_buffer_config).__name__}.")
    options = dict(replay_buffer_config)
    cls = _resolve_type(options.pop("type", "ReplayBuffer"))
    for alias, key in _ALIASES.items():
        if alias in options:
            if key in options:
                raise ConfigError(f"replay_buffer_config sets both {alias!r} and its alias {key!r}; keep one.")
            options[key] = options.pop(alias)
    if seed is not None:
        options["seed"] = seed
    if "replay_mode" in options:  # how multi-agent replay is organised (multi_agent_replay_buffer), not a buffer argument

        check_replay_mode("replay_buffer_config['replay_mode']", options.pop("replay_mode"))
    for key, only in _OLD_KEYS_AT_DEFAULT.items():
        if key in options:
            value = options.pop(key)
            if value != only:
                raise NotSupportedYetError(f"replay_buffer_config[{key!r}]={value!r}",
                                           f"rlx replays single transitions; only {only!r} is accepted")
    prioritized_flag = options.pop("prioritized_replay", None)
    if prioritized_flag is not None and bool(prioritized_flag) != issubclass(cls, PrioritizedReplayBuffer):
        cls = PrioritizedReplayBuffer if prioritized_flag else ReplayBuffer

    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    accepted = [n for n, p in params.items() if n != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    if not takes_any:
        ignorable = [k for k in _PRIORITY_KEYS if k not in accepted]
        for key in ignorable:
            options.pop(key, None)
        for key in options:
            if key not in accepted:
                names = accepted + ignorable + list(_ALIASES)
                raise ConfigError(
                    f"unknown replay_buffer_config key {key!r} for {cls.__name__}.{did_you_mean(key, names)} "
                    f"Accepted keys: type, {', '.join(names)}."
                )
    return cls(**options)

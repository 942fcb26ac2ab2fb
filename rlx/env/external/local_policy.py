"""A policy server's module rebuilt on a client, from GET /spec and GET /weights (no pickle).

The server describes its Algorithm class, config (as checkpoint JSON: classes as import
paths, checked by rlx.utils.checkpoint_trust) and spaces; the client builds the same
Algorithm without envs or training input and loads the server's safetensors weights into
its module, then acts with its `Policy`.
"""
from __future__ import annotations

import logging
from typing import Any

from rlx.utils.errors import CheckpointError, ConfigError

logger = logging.getLogger("rlx")

#: Settings about where data comes from or goes, which a client never uses.
_SERVER_ONLY = ("env", "env_config", "input_", "input", "input_config", "output", "output_config", "logger_creator",
                "num_env_runners", "evaluation_interval", "evaluation_config", "callbacks", "callbacks_class")
SOURCE = "the policy server's /spec"


def build_local_algorithm(spec: dict) -> Any:
    """The Algorithm a /spec answer describes, with no envs and no training input."""
    from rlx.utils.checkpoint_trust import import_checked
    from rlx.utils.checkpoints import decode_value, space_from_dict

    if not isinstance(spec, dict) or not isinstance(spec.get("config"), dict):
        raise ConfigError(f"{SOURCE} is not a description of a policy (no 'config' object).")
    algo_cls = import_checked(spec.get("algorithm_class"), "algorithm_class", SOURCE)
    settings = {}
    for key, value in spec["config"].items():
        if key in _SERVER_ONLY:
            continue
        try:
            settings[key] = decode_value(value, key, SOURCE)
        except CheckpointError as err:
            logger.debug("PolicyClient: leaving config key %r at its default: %s", key, err)
    config = algo_cls.get_default_config()
    config.update_from_dict(settings)
    config.environment(env=None, observation_space=space_from_dict(spec["observation_space"]),
                       action_space=space_from_dict(spec["action_space"]))
    config.env_runners(num_env_runners=0)
    config.offline_data(input_="sampler", output=None)
    return config.build()

"""A policy server's module rebuilt on a client, from GET /spec and GET /weights (no pickle).

The server describes its Algorithm class, config (as checkpoint JSON: classes as import
paths, checked by rlx.utils.checkpoint_trust) and spaces; the client builds the same
Algorithm without envs or training input and loads the server's safetensors weights into
its module, then acts with its `Policy`. A multi-agent server's spec lists every policy with
its spaces: the client builds all of them, and the server maps agents to policies.
"""
from __future__ import annotations

import logging
from typing import Any

from rlx.env.config_view import EnvConfig
from rlx.utils.errors import CheckpointError, ConfigError

logger = logging.getLogger("rlx")

#: Settings about where data comes from or goes, which a client never uses.
_SERVER_ONLY = ("env", "env_config", "input_", "input", "input_config", "output", "output_config", "logger_creator",
                "num_env_runners", "evaluation_interval", "evaluation_config", "callbacks", "callbacks_class",
                "policy_mapping_fn")
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
    if spec.get("multi_agent"):
        _multi_agent_policies(config, spec)
    else:
        config.environment(env=None, observation_space=space_from_dict(spec["observation_space"]),
                           action_space=space_from_dict(spec["action_space"]))
    config.env_runners(num_env_runners=0)
    config.offline_data(input_="sampler", output=None)
    return config.build()


def _multi_agent_policies(config: EnvConfig, spec: dict) -> None:
    """Every policy of a multi-agent spec, with the server's spaces and the per-policy settings
    its config held; agents are mapped by the server (MAP_AGENTS), never here."""
    from rlx.core.rl_module.agent_mapping import PolicySpec
    from rlx.utils.checkpoints import space_from_dict

    policies = spec.get("policies")
    if not isinstance(policies, dict) or not policies:
        raise ConfigError(f"{SOURCE} is multi-agent but lists no policies.")
    ours = config.policies if isinstance(config.policies, dict) else {}
    specs = {}
    for pid, item in policies.items():
        if not isinstance(item, dict):
            raise ConfigError(f"{SOURCE}: policy {pid!r} is not described by an object.")
        overrides = getattr(ours.get(pid), "config", None)
        specs[pid] = PolicySpec(observation_space=space_from_dict(item["observation_space"]),
                                action_space=space_from_dict(item["action_space"]),
                                config=overrides if isinstance(overrides, dict) else None)
    config.environment(env=None)
    config.multi_agent(policies=specs, policy_mapping_fn=mapped_by_server)


def mapped_by_server(agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
    """The policy_mapping_fn of a local-inference client's policies: the server maps agents."""
    raise ConfigError(f"agent {agent_id!r}: a local-inference PolicyClient asks the server which policy each agent "
                      "uses (MAP_AGENTS); it does not map agents itself.")

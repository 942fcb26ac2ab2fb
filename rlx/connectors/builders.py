"""Build the connector pipelines a config names: `env_to_module_connector`,
`module_to_env_connector` (and the LSTM's previous-inputs piece) and `learner_connector`.

A builder returns a ConnectorV2 piece, a list of them or a pipeline; it is called with as many
of RLlib's arguments as it takes (newer builders take (env, spaces, device), older ones (env)).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import gymnasium as gym

from rlx.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from rlx.connectors.connector_v2 import ConnectorV2
from rlx.connectors.env_to_module import EnvToModulePipeline
from rlx.connectors.env_to_module.prev_actions_prev_rewards import PrevActionsPrevRewards
from rlx.connectors.module_to_env import ModuleToEnvPipeline
from rlx.utils.errors import ConfigError

__all__ = ["build_env_to_module", "build_module_to_env", "call_builder", "connector_pieces", "has_env_to_module_pieces",
           "lstm_prev_inputs_piece"]


def connector_pieces(value: Any, option: str) -> list[ConnectorV2]:
    """The pieces of what a connector builder returned (a piece, a list of pieces or a pipeline)."""
    if isinstance(value, ConnectorPipelineV2):
        return list(value.connectors)
    if isinstance(value, ConnectorV2):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, ConnectorV2) for v in value):
        return list(value)
    raise ConfigError(f"config.{option} must return a ConnectorV2 piece or a list of them; it returned "
                      f"{value!r:.100}.")


def call_builder(fn: Callable, args: tuple, option: str) -> Any:
    """Call a connector builder with as many of `args` as it takes (RLlib's newer builders take
    (env, spaces, device), older ones (env) only)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(*args)
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return fn(*args)
    n = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return fn(*args[:n])


def build_env_to_module(config: Any, env: Any, obs_space: gym.Space, act_space: gym.Space) -> Any:
    """The EnvToModulePipeline of the user's config.env_to_module_connector (None when unset)."""
    builder = config.env_to_module_connector
    prev = lstm_prev_inputs_piece(config)
    if builder is None and prev is None:
        return None
    pieces = []
    if builder is not None:
        spaces = {"__env__": (obs_space, act_space), "__env_single__": (obs_space, act_space)}
        pieces = connector_pieces(call_builder(builder, (env, spaces, None), "env_to_module_connector"),
                         "env_to_module_connector")
    if prev is not None:
        pieces.append(prev)
    return EnvToModulePipeline(obs_space, act_space, connectors=pieces)


def lstm_prev_inputs_piece(config: Any) -> ConnectorV2 | None:
    """The PrevActionsPrevRewards piece that `lstm_use_prev_action` / `lstm_use_prev_reward` (with
    use_lstm) or `attention_use_n_prev_actions` / `attention_use_n_prev_rewards` (with use_attention)
    add (None when none is set): the module's input then carries the previous action(s) (one-hot for
    Discrete spaces) and reward(s), zeros at an episode's start, which the memory sees every step."""
    model = getattr(config, "model", None) or {}
    if model.get("use_attention"):
        # GTrXL's attention_use_n_prev_actions/rewards: the last n actions and rewards.
        n_actions = int(model.get("attention_use_n_prev_actions") or 0)
        n_rewards = int(model.get("attention_use_n_prev_rewards") or 0)
    elif model.get("use_lstm"):
        n_actions = int(bool(model.get("lstm_use_prev_action")))
        n_rewards = int(bool(model.get("lstm_use_prev_reward")))
    else:
        return None
    if not (n_actions or n_rewards):
        return None

    return PrevActionsPrevRewards(n_prev_actions=n_actions, n_prev_rewards=n_rewards)


def has_env_to_module_pieces(config: Any) -> bool:
    """Whether sub-envs need the connector wrapper: user pipelines or the LSTM's previous inputs."""
    return (config.env_to_module_connector is not None or config.module_to_env_connector is not None
            or lstm_prev_inputs_piece(config) is not None)


def build_module_to_env(config: Any, env: Any, obs_space: gym.Space, act_space: gym.Space) -> Any:
    """The ModuleToEnvPipeline of the user's config.module_to_env_connector (None when unset)."""
    builder = config.module_to_env_connector
    if builder is None:
        return None
    spaces = {"__env__": (obs_space, act_space), "__env_single__": (obs_space, act_space)}
    pieces = connector_pieces(call_builder(builder, (env, spaces), "module_to_env_connector"),
                              "module_to_env_connector")
    return ModuleToEnvPipeline(obs_space, act_space, connectors=pieces)

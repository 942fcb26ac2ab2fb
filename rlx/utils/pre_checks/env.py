"""The env checker at RLlib's path: `check_env` (also `rlx.utils.check_env`) and
`check_multiagent_environments`.

Both run rlx's own checks (rlx.env.env_checker for Gymnasium envs, rlx.env.multi_agent_env_checker
for MultiAgentEnvs), which reset the env and take random steps; the EnvRunner runs the same checks
on its first sub-env unless `config.environment(disable_env_checking=True)`. This module sits
beside rlx.env (tools/import_graph.py puts it in rlx.env's layer).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.env import env_checker
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.multi_agent_env_checker import check_multi_agent_env
from rlx.utils.errors import EnvError

#: The seed RLlib's checker resets a multi-agent env with.
_CHECK_SEED = 42


def check_multiagent_environments(env: MultiAgentEnv) -> None:
    """Check a MultiAgentEnv for common errors: reset it (seed 42), step it with random actions and
    validate every dict it returns. Raises ValueError (EnvError) for an env that is no
    MultiAgentEnv or breaks the multi-agent API, naming the agent or key at fault."""
    if not isinstance(env, MultiAgentEnv):
        raise EnvError(f"check_multiagent_environments: {type(env).__name__} is not a MultiAgentEnv; "
                       "use check_env for a gymnasium.Env.")
    check_multi_agent_env(env, seed=_CHECK_SEED)


def check_env(env: Any, config: Any = None) -> None:
    """Check an env for common errors before training on it, as RLlib's `check_env` does: a
    MultiAgentEnv with `check_multiagent_environments`, a `gymnasium.Env` by resetting it, checking
    its observations against the spaces and stepping it with a random action.

    Args:
        env: The env instance to check (not its class or name).
        config: An AlgorithmConfig or config dict; with `disable_env_checking=True` nothing is checked.

    Raises:
        ValueError (rlx's EnvError): the first problem found, or an env of a type rlx cannot check.
    """
    if _checking_disabled(config):
        return
    if isinstance(env, MultiAgentEnv):
        check_multiagent_environments(env)
    elif isinstance(env, gym.Env) or env_checker.looks_like_old_gym_api(env):
        # An env of the old gym API is refused with the fix, as RLlib refuses it.
        env_checker.check_env(env, auto_wrap_old_gym_envs=False)
    else:
        raise EnvError(
            f"check_env: {type(env).__name__} is neither a gymnasium.Env nor an rlx MultiAgentEnv, the env types "
            "rlx checks. Pass an env instance (e.g. gymnasium.make('CartPole-v1'), not the id or the class); for "
            "a gymnasium vector env, check one of its sub-envs.")


def _checking_disabled(config: Any) -> bool:
    """Whether `config` (an AlgorithmConfig, a dict or None) sets disable_env_checking=True."""
    if config is None:
        return False
    if isinstance(config, dict):
        return bool(config.get("disable_env_checking", False))
    return bool(getattr(config, "disable_env_checking", False))

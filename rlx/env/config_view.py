"""EnvConfig: the typed view of an algorithm's resolved config that rlx/env reads.

It extends rlx/core's ResolvedConfig with the env, sampling and fault-tolerance settings of the
env layer; `AlgorithmConfig` (the algorithm layer, which rlx/env may not import) satisfies it
structurally. Settings not listed here are read by name, as in ResolvedConfig.
"""
from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym

from rlx.core.config_view import ResolvedConfig


class EnvConfig(ResolvedConfig, Protocol):
    """What rlx/env reads from an algorithm's config (AlgorithmConfig satisfies it)."""

    # -- the env
    @property
    def env(self) -> Any:
        """The env: a registered name, a Gymnasium id, an import path, a class or None."""
        ...

    @property
    def env_config(self) -> dict[str, Any]:
        """Passed to the env creator as an EnvContext."""
        ...

    @property
    def observation_space(self) -> gym.Space | None:
        """The env's observation space when given in the config."""
        ...

    @property
    def action_space(self) -> gym.Space | None:
        """The env's action space when given in the config."""
        ...

    @property
    def disable_env_checking(self) -> bool:
        """Skip the env checks when the env is created."""
        ...

    @property
    def auto_wrap_old_gym_envs(self) -> bool:
        """Wrap old-gym API envs into Gymnasium's API."""
        ...

    @property
    def normalize_actions(self) -> bool:
        """Map actions from [-1, 1] into the Box action space's bounds."""
        ...

    @property
    def normalize_rewards(self) -> bool:
        """Scale the sampled rewards by the running std of the discounted return (rlx.utils.reward_scaling)."""
        ...

    @property
    def policies(self) -> Any:
        """The multi_agent(policies=...) setting (None for a single-agent config)."""
        ...

    # -- sampling
    @property
    def explore(self) -> bool:
        """Act with exploration (the default of compute_single_action(explore=None))."""
        ...

    @property
    def sample_timeout_s(self) -> float | None:
        """How long a remote sample() may take (None: no limit)."""
        ...

    def get_rollout_fragment_length(self, worker_index: int = 0) -> int:
        """Env steps per sample() call of EnvRunner `worker_index`."""
        ...

    # -- EnvRunner fault tolerance
    @property
    def restart_failed_env_runners(self) -> bool:
        """Restart EnvRunners that fail."""
        ...

    @property
    def ignore_env_runner_failures(self) -> bool:
        """Go on without EnvRunners that fail."""
        ...

    @property
    def max_num_env_runner_restarts(self) -> int:
        """Restarts allowed per EnvRunner."""
        ...

    @property
    def delay_between_env_runner_restarts_s(self) -> float:
        """Seconds between restarts of one EnvRunner."""
        ...

    @property
    def num_consecutive_env_runner_failures_tolerance(self) -> int:
        """Consecutive failures of one EnvRunner tolerated before giving up on it."""
        ...

    @property
    def env_runner_health_probe_timeout_s(self) -> float:
        """Seconds a restarted EnvRunner has to come up."""
        ...

    @property
    def env_runner_restore_timeout_s(self) -> float:
        """Seconds a restarted EnvRunner has to take the current weights and state."""
        ...

    # -- methods (as ResolvedConfig's, returning the env layer's view)
    def get_config_for_module(self, module_id: str) -> EnvConfig:
        """The config module `module_id` acts with (per-module overrides applied)."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict."""
        ...

"""SingleAgentEnvRunner at its RLlib path (`ray.rllib.env.env_runner`), and the runner helpers
code imports from here.

The runner lives in the `rlx.env.runner` package: one EnvRunner (rlx.env.runner.runner) of which
a single-agent env is the one-agent, one-module case (rlx.env.runner.single_agent).
"""
from __future__ import annotations

from rlx.core import DEFAULT_AGENT_ID
from rlx.core.columns import state_column
from rlx.env.runner.actions import ActionAdapter
from rlx.env.runner.env_checks import all_finite
from rlx.env.runner.episode_events import (AGENT_RETURNS_KEY, EPISODE_LENGTHS_KEY, EPISODE_POLICY_RETURNS_KEY,
                                           EPISODE_RETURNS_KEY, MODULE_RETURNS_KEY, episode_extras)
from rlx.env.runner.module_slot import has_float_values, module_chosen_actions, without_time_axis
from rlx.env.runner.runner import clip_rewards
from rlx.env.runner.single_agent import SingleAgentEnvRunner
from rlx.env.runner.sub_envs import (DeepMindAtariCreator, EnvInfo, MultiAgentEnvFoundError, episode_step_limit,
                                     is_atari_env)
from rlx.env.runner.trajectories import write_back_postprocessed

#: The old name of the single-agent runner class.
EnvRunner = SingleAgentEnvRunner

__all__ = ["AGENT_RETURNS_KEY", "DEFAULT_AGENT_ID", "EPISODE_LENGTHS_KEY", "EPISODE_POLICY_RETURNS_KEY",
           "EPISODE_RETURNS_KEY", "MODULE_RETURNS_KEY", "ActionAdapter", "DeepMindAtariCreator", "EnvInfo",
           "EnvRunner", "MultiAgentEnvFoundError", "SingleAgentEnvRunner", "all_finite", "clip_rewards",
           "episode_extras", "episode_step_limit", "has_float_values", "is_atari_env", "module_chosen_actions",
           "state_column", "without_time_axis", "write_back_postprocessed"]

"""MultiAgentEnvRunner at its RLlib path (`ray.rllib.env.multi_agent_env_runner`).

The runner lives in the `rlx.env.runner` package (rlx.env.runner.multi_agent; its sampling
loop in rlx.env.runner.agent_steps).
"""
from __future__ import annotations

from rlx.env.runner.module_slot import ModuleSlot
from rlx.env.runner.multi_agent import MultiAgentEnvRunner, PerPolicy
from rlx.env.runner.sub_envs import SingleAgentAsMultiAgent

__all__ = ["ModuleSlot", "MultiAgentEnvRunner", "PerPolicy", "SingleAgentAsMultiAgent"]

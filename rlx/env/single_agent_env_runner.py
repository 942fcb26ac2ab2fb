"""SingleAgentEnvRunner at RLlib's path `ray.rllib.env.single_agent_env_runner`."""
from __future__ import annotations

from rlx.env.runner.single_agent import SingleAgentEnvRunner

__all__ = ["SingleAgentEnvRunner"]

"""Wrappers that turn third-party multi-agent envs (PettingZoo) into rlx MultiAgentEnvs."""

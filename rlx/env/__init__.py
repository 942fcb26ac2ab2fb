"""Environment creation, checking and vectorized stepping."""
from rlx.env.env_context import EnvContext
from rlx.env.registry import register_env

__all__ = ["EnvContext", "register_env"]

"""RLlib's `ray.rllib.core.rl_module.apis.value_function_api`: ValueFunctionAPI (defined in rlx.core.rl_module.apis)."""
from rlx.core.rl_module.apis import ValueFunctionAPI

__all__ = ["ValueFunctionAPI"]

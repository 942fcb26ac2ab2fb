"""RLlib's `ray.rllib.core.rl_module.apis.inference_only_api`: InferenceOnlyAPI (defined in rlx.core.rl_module.apis)."""
from rlx.core.rl_module.apis import InferenceOnlyAPI

__all__ = ["InferenceOnlyAPI"]

"""RLlib's `ray.rllib.core.rl_module.apis.self_supervised_loss_api`: SelfSupervisedLossAPI (defined in rlx.core.rl_module.apis)."""
from rlx.core.rl_module.apis import SelfSupervisedLossAPI

__all__ = ["SelfSupervisedLossAPI"]

"""DefaultPPOTorchRLModule (RLlib's `ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module`):
the module PPO builds by default, rlx's actor-critic module under RLlib's name. It is the same
class, so a spec naming it gets the algorithm's default model settings."""
from rlx.core.models import ActorCriticModule

DefaultPPOTorchRLModule = ActorCriticModule

__all__ = ["DefaultPPOTorchRLModule"]

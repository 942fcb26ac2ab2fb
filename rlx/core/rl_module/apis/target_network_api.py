"""RLlib's `ray.rllib.core.rl_module.apis.target_network_api`: TargetNetworkAPI (defined in rlx.core.rl_module.apis)."""
from rlx.core.rl_module.apis import TargetNetworkAPI, TARGET_NETWORK_ACTION_DIST_INPUTS

__all__ = ["TargetNetworkAPI", "TARGET_NETWORK_ACTION_DIST_INPUTS"]

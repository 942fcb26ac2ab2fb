"""RLlib's path of the old API's Policy (compat alias).

The Policy view lives in rlx.env.policy_view, with the runner that hands it out; these are the
same objects, so `isinstance(algo.get_policy(), rlx.policy.policy.Policy)` holds.
"""
from rlx.core.rl_module.agent_mapping import PolicySpec
from rlx.core.rl_module.model_view import ModelView
from rlx.env.policy_view import Policy, check_observation

__all__ = ["ModelView", "Policy", "PolicySpec", "check_observation"]

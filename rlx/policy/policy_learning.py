"""Old path of `rlx.env.policy_learning` (Policy.learn_on_batch through the Algorithm's Learner)."""
from rlx.env.policy_learning import LEARNER_STATS_KEY, learn_on_batch, register_algorithm

__all__ = ["register_algorithm", "learn_on_batch", "LEARNER_STATS_KEY"]

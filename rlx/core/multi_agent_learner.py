"""MultiAgentLearner: the learner container's old name (see rlx.core.learner.container).

One Learner per module of a MultiRLModule, each in this process or a group of learner
processes (`num_learners > 0`), updated on its own batch; weights and state as `{module_id: ...}`.
"""
from rlx.core.learner.container import LearnerContainer

MultiAgentLearner = LearnerContainer

__all__ = ["MultiAgentLearner"]

"""IMPALA: importance-weighted actor-learner architecture (asynchronous sampling, V-trace)."""
from rlx.algorithms.impala.impala import DEFAULT_CONFIG, IMPALA, Impala, ImpalaConfig, IMPALAConfig, ImpalaTrainer
from rlx.algorithms.impala.impala_learner import IMPALALearner
from rlx.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner

#: RLlib's other spelling.
ImpalaTorchLearner = IMPALATorchLearner

__all__ = ["IMPALA", "IMPALAConfig", "IMPALALearner", "IMPALATorchLearner", "Impala", "ImpalaConfig",
           "ImpalaTorchLearner", "ImpalaTrainer", "DEFAULT_CONFIG"]

"""IMPALA: importance-weighted actor-learner architecture (asynchronous sampling, V-trace)."""
from rlx.algorithms.impala.impala import DEFAULT_CONFIG, IMPALA, Impala, ImpalaConfig, IMPALAConfig, ImpalaTrainer

__all__ = ["IMPALA", "IMPALAConfig", "Impala", "ImpalaConfig", "ImpalaTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "IMPALALearner":
        from rlx.algorithms.impala.impala_learner import IMPALALearner

        return IMPALALearner
    if name in ("IMPALATorchLearner", "ImpalaTorchLearner"):
        from rlx.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner

        return IMPALATorchLearner
    raise AttributeError(name)

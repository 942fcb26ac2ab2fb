"""MARWIL: advantage-weighted imitation learning, usually from offline data."""
from rlx.algorithms.marwil.marwil import DEFAULT_CONFIG, MARWIL, MARWILConfig, MARWILTrainer

__all__ = ["MARWIL", "MARWILConfig", "MARWILTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "MARWILLearner":
        from rlx.algorithms.marwil.marwil_learner import MARWILLearner

        return MARWILLearner
    if name == "MARWILTorchLearner":
        from rlx.algorithms.marwil.torch.marwil_torch_learner import MARWILTorchLearner

        return MARWILTorchLearner
    raise AttributeError(name)

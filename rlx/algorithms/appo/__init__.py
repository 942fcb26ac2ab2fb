"""APPO: asynchronous PPO (IMPACT) on IMPALA's asynchronous sampling."""
from rlx.algorithms.appo.appo import APPO, DEFAULT_CONFIG, APPOConfig, APPOTrainer

__all__ = ["APPO", "APPOConfig", "APPOTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "APPOLearner":
        from rlx.algorithms.appo.appo_learner import APPOLearner

        return APPOLearner
    if name == "APPOTorchLearner":
        from rlx.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner

        return APPOTorchLearner
    raise AttributeError(name)

"""APPO: asynchronous PPO (IMPACT) on IMPALA's asynchronous sampling."""
from rlx.algorithms.appo.appo import APPO, DEFAULT_CONFIG, APPOConfig, APPOTrainer
from rlx.algorithms.appo.appo_learner import APPOLearner
from rlx.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner

__all__ = ["APPO", "APPOConfig", "APPOLearner", "APPOTorchLearner", "APPOTrainer", "DEFAULT_CONFIG"]

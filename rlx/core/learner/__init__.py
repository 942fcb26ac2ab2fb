"""The Learner (RLlib's `ray.rllib.core.learner`): `Learner` in `rlx.core.learner.learner`,
`TorchLearner` in `rlx.core.learner.torch.torch_learner`; every name of the learner module is
importable from this package too."""
from rlx.core.learner.learner import (  # noqa: F401
    DEFAULT_OPTIMIZER,
    ENTROPY_KEY,
    LR_KEY,
    POLICY_LOSS_KEY,
    VF_LOSS_KEY,
    Learner,
    SingleModuleView,
    build_optimizer,
    building_learner_for,
    clip_gradients,
    clip_gradients_dict,
    unwrap_module,
)
from rlx.core.learner.target_networks import make_target_network, update_target_network  # noqa: F401

__all__ = [
    "DEFAULT_OPTIMIZER", "ENTROPY_KEY", "LR_KEY", "POLICY_LOSS_KEY", "VF_LOSS_KEY", "Learner", "SingleModuleView",
    "build_optimizer", "building_learner_for", "clip_gradients", "clip_gradients_dict", "make_target_network",
    "unwrap_module", "update_target_network",
]


# Loaded on first use: the learner containers and groups of learner processes (RLlib's
# `ray.rllib.core.learner.LearnerGroup`), the functional inner learners and the meta learner.
_LAZY = {
    "LearnerContainer": "rlx.core.learner.container",
    "LearnerGroup": "rlx.core.learner.learner_group",
    "TrainingData": "rlx.core.learner.training_data",
    "DifferentiableLearner": "rlx.core.learner.differentiable_learner",
    "DifferentiableLearnerConfig": "rlx.core.learner.differentiable_learner_config",
    "TorchDifferentiableLearner": "rlx.core.learner.torch.torch_differentiable_learner",
    "TorchMetaLearner": "rlx.core.learner.torch.torch_meta_learner",
}


def __getattr__(name: str):
    if name == "TorchLearner":
        from rlx.core.learner.torch.torch_learner import TorchLearner

        return TorchLearner
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx.core.learner' has no attribute {name!r}")

"""DifferentiableAlgorithmConfig (RLlib's `ray.rllib.algorithms.algorithm_config.DifferentiableAlgorithmConfig`):
the config of a meta learner (TorchMetaLearner) and its inner DifferentiableLearners.

    config = (DifferentiableAlgorithmConfig()
              .learners(differentiable_learner_configs=[
                  DifferentiableLearnerConfig(MyDifferentiableLearner, lr=0.01, minibatch_size=5)])
              .training(lr=0.001))                       # the outer (meta) step
    meta_learner = MyMetaLearner(config=config, module_spec=RLModuleSpec(...))
    meta_learner.build()

The outer step uses the config's `lr`, `optimizer` and `grad_clip`; each inner learner its
own `DifferentiableLearnerConfig` (see rlx.core.learner.differentiable_learner_config).
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option
from rlx.core.learner.differentiable_learner_config import DifferentiableLearnerConfig
from rlx.core.learner.torch.torch_meta_learner import TorchMetaLearner
from rlx.utils.errors import ConfigError
from rlx.utils.registry import import_object


def _differentiable_learner_configs(name: str, value: Any) -> list:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"'{name}' must be a list of DifferentiableLearnerConfig, got {type(value).__name__}.")
    wrong = [v for v in value if not isinstance(v, DifferentiableLearnerConfig)]
    if wrong:
        raise ConfigError(f"'{name}' must hold DifferentiableLearnerConfig instances only, got {wrong[0]!r:.80}.")
    return list(value)


class DifferentiableAlgorithmConfig(AlgorithmConfig):
    """An AlgorithmConfig with the inner learners of meta-learning
    (`learners(differentiable_learner_configs=[...])`)."""

    _extra_options = [
        Option("differentiable_learner_configs", [], ("learners",), _differentiable_learner_configs,
               doc="The DifferentiableLearnerConfigs of a TorchMetaLearner's inner (functional) learners, in the "
                   "order they adapt the parameters."),
    ]

    def get_default_learner_class(self) -> Any:
        """The meta learner class: config.training(learner_class=...) when set, else TorchMetaLearner."""
        return self.get("learner_class") or TorchMetaLearner

    def get_differentiable_learner_classes(self) -> list[Any]:
        """The DifferentiableLearner class of each inner learner."""
        return [c.learner_class for c in self.differentiable_learner_configs]

    def get_differentiable_learner_configs(self) -> list[Any]:
        """The DifferentiableLearnerConfigs of the inner learners."""
        return list(self.differentiable_learner_configs)

    def validate(self) -> None:
        """Check the meta and inner learner classes; with an env (or spaces) configured, also
        every setting an Algorithm checks. A meta learner used on its own needs no env."""
        learner = self.get_default_learner_class()
        if isinstance(learner, str):
            learner = import_object(learner)

        if not (isinstance(learner, type) and issubclass(learner, TorchMetaLearner)):
            raise ConfigError(f"DifferentiableAlgorithmConfig needs a TorchMetaLearner (sub)class as learner_class, "
                              f"got {learner!r}.")
        _differentiable_learner_configs("differentiable_learner_configs", self.differentiable_learner_configs)
        if self.env is not None or (self.observation_space is not None and self.action_space is not None):
            super().validate()

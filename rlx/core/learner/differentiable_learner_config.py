"""DifferentiableLearnerConfig (RLlib's `ray.rllib.core.learner.differentiable_learner_config`):
one inner-loop learner of a meta learner, with its own step size and minibatching."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable


@dataclasses.dataclass
class DifferentiableLearnerConfig:
    """Configures one DifferentiableLearner of a TorchMetaLearner.

    Args:
        learner_class: a DifferentiableLearner subclass (e.g. TorchDifferentiableLearner's).
        learner_connector: not supported yet (the learners train on batches).
        add_default_connectors_to_learner_pipeline: RLlib's; without connectors it changes nothing.
        is_multi_agent: RLlib's; rlx reads the module ids from the batches.
        policies_to_update: the module ids whose parameters the inner steps change (None: all).
        lr: the inner step size: params <- params - lr * grad (plain gradient descent, differentiable).
        num_total_minibatches: > 0: stop after this many inner minibatch steps.
        num_epochs: passes over the inner batch.
        minibatch_size: rows per inner step (None: the whole batch).
        shuffle_batch_per_epoch: shuffle the rows before each pass.
    """

    learner_class: Callable
    learner_connector: Callable | None = None
    add_default_connectors_to_learner_pipeline: bool = True
    is_multi_agent: bool = False
    policies_to_update: list[str] | None = None
    lr: float = 3e-5
    num_total_minibatches: int = 0
    num_epochs: int = 1
    minibatch_size: int | None = None
    shuffle_batch_per_epoch: bool = False

    def __post_init__(self) -> None:
        from rlx.core.learner.differentiable_learner import DifferentiableLearner
        from rlx.utils.errors import ConfigError, NotSupportedYetError

        if not isinstance(self.learner_class, type) or not issubclass(self.learner_class, DifferentiableLearner):
            raise ConfigError(f"DifferentiableLearnerConfig.learner_class must be a subclass of DifferentiableLearner "
                              f"(e.g. TorchDifferentiableLearner), got {self.learner_class!r}.")
        if self.learner_connector is not None:
            raise NotSupportedYetError("DifferentiableLearnerConfig(learner_connector=...)",
                                       "differentiable learners train on batches, not episodes",
                                       fix="Prepare the batch's columns yourself and leave learner_connector=None.")
        if not isinstance(self.lr, (int, float)) or isinstance(self.lr, bool) or self.lr < 0:
            raise ConfigError(f"DifferentiableLearnerConfig.lr must be a number >= 0, got {self.lr!r}.")
        if int(self.num_epochs) < 1:
            raise ConfigError(f"DifferentiableLearnerConfig.num_epochs must be at least 1, got {self.num_epochs!r}.")
        if self.minibatch_size is not None and int(self.minibatch_size) < 1:
            raise ConfigError(f"DifferentiableLearnerConfig.minibatch_size must be None or at least 1, got "
                              f"{self.minibatch_size!r}.")

    def update_from_kwargs(self, **kwargs: Any) -> None:
        """Set the given fields (unknown names raise)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            from rlx.utils.errors import ConfigError, did_you_mean

            raise ConfigError(f"DifferentiableLearnerConfig has no field {unknown[0]!r}."
                              f"{did_you_mean(unknown[0], names)}")
        for key, value in kwargs.items():
            setattr(self, key, value)
        self.__post_init__()

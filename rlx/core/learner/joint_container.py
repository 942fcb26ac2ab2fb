"""The learner container of a MultiRLModule whose forward couples its modules: one Learner of
the whole MultiRLModule, seen through the per-module faces of rlx.core.learner.container."""
from __future__ import annotations

from typing import Any, Callable

from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.async_updates import LOCAL_ASYNC_UPDATE_ERROR, RL_MODULE_STATE_AFTER_UPDATE, state_for_result
from rlx.core.learner.container import GroupFactory, LearnerContainer
from rlx.core.learner.learner import Learner
from rlx.core.rl_module.multi_rl_module import MultiRLModule
from rlx.utils.errors import NotSupportedYetError

__all__ = ["JointLearnerContainer", "JointModuleLearner"]


class JointLearnerContainer(LearnerContainer):
    """The learner container of a MultiRLModule whose forward couples its modules
    (`MultiRLModule.runs_modules_jointly`, e.g. RLlib's shared-encoder example): ONE Learner
    (`joint`) holds the whole MultiRLModule (`learner.module` is it, `learner.module_id` is
    ALL_MODULES), computes `forward_train` through it on {module_id: batch}, sums the policies'
    losses and steps its optimizers once per minibatch: the learner class's
    `configure_optimizers` may register one optimizer over every module's parameters (by
    default each module gets its own). Modules no batch holds (a shared encoder no agent maps
    to) get no loss of their own; their weights move with the gradients of the others' losses.

    Everything else sees the container's usual per-module faces (`by_module()`: weights, state
    and checkpoint files per module id), each a `JointModuleLearner` over the one Learner.
    """

    def __init__(self, config: ResolvedConfig, learner_class: type, module: MultiRLModule,
                 group_factory: GroupFactory | None = None):
        name = type(module).__name__
        if int(config.num_learners or 0) > 0:
            raise NotSupportedYetError(
                f"num_learners > 0 with {name} (a MultiRLModule whose forward couples its modules)",
                "its modules train together in one Learner in the driver's process",
                fix="Set config.learners(num_learners=0).")
        if getattr(learner_class, "update_from_batch", None) is not Learner.update_from_batch:
            raise NotSupportedYetError(
                f"{learner_class.__name__} with {name} (a MultiRLModule whose forward couples its modules)",
                f"{learner_class.__name__} implements its own update_from_batch for one module; all modules of such a "
                "MultiRLModule train together through RLlib's loss API (forward_train of the MultiRLModule, then "
                "compute_loss_for_module per policy)",
                fix="Use a Learner that implements compute_loss_for_module (or compute_losses) and not "
                    "update_from_batch, e.g. the VPG example's VPGTorchLearner, or leave multi_rl_module_class unset.")
        capacity = config.policy_map_capacity
        if capacity is not None and len(module) > int(capacity):
            raise NotSupportedYetError(
                f"policy_map_capacity={capacity} below the {len(module)} modules of {name}",
                "a MultiRLModule whose forward couples its modules keeps all of them in memory",
                fix=f"Set config.multi_agent(policy_map_capacity={len(module)}) or more.")
        self.config = config
        self.learner_class = learner_class
        self.module = module
        self.group_factory = None
        self.sole_module_id = None
        self._cache_attached = None
        self.policies_to_train = config.policies_to_train
        #: The one Learner of every module.
        self.joint = learner_class(config, module)
        self.learners = {module_id: JointModuleLearner(self.joint, module_id) for module_id in module.keys()}

    def add_module(self, module_id: str, config: ResolvedConfig | None = None) -> Any:
        """NotSupportedYetError: the modules of a jointly run MultiRLModule are fixed when it is built."""
        raise NotSupportedYetError(
            f"adding module {module_id!r} to {type(self.module).__name__} (a MultiRLModule whose forward couples "
            "its modules)", "its Learner's optimizers are made once, over the modules it was built with",
            fix="Name every module in the MultiRLModuleSpec (and every policy in config.multi_agent(policies=...)).")

    def remove_module(self, module_id: str) -> None:
        """NotSupportedYetError, as add_module."""
        self.add_module(module_id)

    def update_from_batch(self, batch: Any, timestep: int) -> dict[str, dict[str, Any]]:
        """One update of every module on the trainable modules' batches; {module_id: metrics}."""
        parts = self.joint.training_part(batch)
        if parts is None:
            return {}
        return self.joint.results_by_module(self.joint.run_update(parts, timestep=timestep))

    def update(self, batch: Any = None, episodes: list[Any] | None = None, timesteps: dict[str, Any] | None = None,
               async_update: bool = False, return_state: bool = False, **kwargs: Any) -> Any:
        """RLlib's `Learner.update` of the one Learner on `batch` or `episodes`; {module_id: metrics}
        (with RL_MODULE_STATE_AFTER_UPDATE when `return_state`). The Learner is in this process:
        `async_update=True` raises ValueError, as RLlib's local group does."""
        if async_update:
            raise ValueError(LOCAL_ASYNC_UPDATE_ERROR)
        results = self.joint.update(batch=batch, episodes=episodes, timesteps=timesteps, **kwargs)
        if return_state:
            results[RL_MODULE_STATE_AFTER_UPDATE] = state_for_result(self.get_state()["learner"])
        return results

    def foreach_learner(self, fn: Callable[[Any], Any]) -> list[Any]:
        """[fn(the one Learner)]: as RLlib's local Learner, it holds every module."""
        return [fn(self.joint)]

    def __repr__(self) -> str:
        return f"JointLearnerContainer({type(self.joint).__name__} of {', '.join(map(repr, self.learners))})"


class JointModuleLearner:
    """Module `module_id`'s face of the one Learner of a JointLearnerContainer: `module` is that
    module, weights are its own; optimizers, extra state and tensors are the one Learner's (a
    checkpoint keeps them beside each module, identical). Anything else is the Learner's."""

    is_local = True

    def __init__(self, learner: Any, module_id: str):
        self.learner = learner
        self.module_id = module_id

    @property
    def module(self) -> Any:
        """The module `module_id` of the MultiRLModule the Learner trains."""
        return self.learner.module[self.module_id]

    @property
    def optimizers(self) -> dict[str, Any]:
        """The Learner's optimizers (shared by every module)."""
        return self.learner.optimizers

    def get_weights(self) -> dict[str, Any]:
        """This module's weights as NumPy arrays."""
        return self.module.get_state()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load this module's weights."""
        self.module.set_state(weights)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "learner":
            raise AttributeError(name)
        return getattr(self.learner, name)

    def __repr__(self) -> str:
        return f"JointModuleLearner({self.module_id!r} of {type(self.learner).__name__})"

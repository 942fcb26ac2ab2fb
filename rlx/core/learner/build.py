"""What an Algorithm trains with: the learner container of its MultiRLModule (per-module or
joint), or for a single module that module's Learner or group of learner processes."""
from __future__ import annotations

import copy
from typing import Any

from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.container import GroupFactory, LearnerContainer, build_module_learner
from rlx.core.learner.device import learner_trains_a_copy
from rlx.core.learner.joint_container import JointLearnerContainer
from rlx.core.learner.learner import unwrap_module
from rlx.core.rl_module.multi_rl_module import MultiRLModule

__all__ = ["build_learner"]


def build_learner(config: ResolvedConfig, learner_class: type, module: Any, group_factory: GroupFactory | None = None) -> Any:
    """What an Algorithm trains with: a LearnerContainer over a MultiRLModule, or for a single
    module (single-agent) that module's Learner or group, from the same per-module decision.

    `module` is the local EnvRunner's. When a module's Learner in this process trains on another
    device or compiles (`learner_trains_a_copy`), the Learners train a copy of it, and the
    EnvRunner keeps acting with its own and gets the new weights after each update
    (EnvRunnerGroup.sync_weights copies them when the modules differ)."""
    multi = isinstance(unwrap_module(module), MultiRLModule)
    configs = [config.get_config_for_module(mid) for mid in module.keys()] if multi else [config]
    if any(int(c.num_learners or 0) == 0 and learner_trains_a_copy(c) for c in configs):
        module = copy.deepcopy(module)
    if multi:
        # A MultiRLModule whose forward couples its modules trains in one Learner of all of them.
        container = JointLearnerContainer if unwrap_module(module).runs_modules_jointly() else LearnerContainer
        return container(config, learner_class, module, group_factory=group_factory)
    return build_module_learner(config, learner_class, module, group_factory=group_factory)

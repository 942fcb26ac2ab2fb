"""A3C on the runners: each remote EnvRunner computes the gradient of the fragment it sampled.

`runner_gradients` is A3CConfig's `runner_fragment_hook`: on a remote runner (a worker process,
a Ray actor or a thread) it turns every asynchronous fragment into A2C's clipped gradient on the
weights that sampled it, computed by an A3CLearner that trains the runner's own module (built on
the runner at its first fragment), and answers a RemoteFragment carrying the gradient, the loss
metrics and the fragment's step counts. The driver's Learner only applies the gradients
(`A3CLearner.apply_runner_gradients`), as in RLlib's A3C.

The runner sends its fragment instead (and the driver computes the gradient) where the update
must see the batch in the driver or cannot run on the runner: a learner connector pipeline, an
`on_learn_on_batch` callback, a learner class that is no A3CLearner, a learner that trains a
copy of the module on another device or compiled, or mixed precision.
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.a3c.a3c_learner import A3CLearner
from rlx.core.learner.device import learner_trains_a_copy
from rlx.core.learner.learner import building_learner_for
from rlx.core.remote_fragment import RemoteFragment
from rlx.core.rl_module.agent_mapping import DEFAULT_POLICY_ID, is_trainable
from rlx.core.rl_module.multi_rl_module import MultiRLModule
from rlx.core.sample_batch import as_multi_agent

#: The key of RemoteFragment payloads that carry gradients.
GRADIENTS = "gradients"


def runner_gradients(runner: Any, batch: Any) -> Any:
    """The fragment's gradients as a RemoteFragment (see the module docstring), or the fragment
    itself where the driver has to compute them."""
    computer = getattr(runner, "_a3c_gradients", None)
    if computer is None:
        computer = RunnerGradients(runner)
        runner._a3c_gradients = computer
    return computer(batch) if computer.enabled else batch


def runner_computes_gradients(config: Any) -> str | None:
    """None when the runners can compute A3C's gradients with `config`, else why not."""
    learner_class = config.learner_class or A3CLearner
    if not (isinstance(learner_class, type) and issubclass(learner_class, A3CLearner)):
        return f"learner_class {learner_class!r} is no A3CLearner"
    if config.learner_connector is not None:
        return "a learner connector pipeline runs in the driver"
    if config.make_callback_dispatcher().get("on_learn_on_batch") is not None:
        return "an on_learn_on_batch callback sees each batch in the driver"
    if learner_trains_a_copy(config):
        return "the learner trains a copy of the module (another device, or compiled)"
    if config.mixed_precision is not None:
        return f"mixed_precision={config.mixed_precision!r} (its loss scaling lives in the driver's learner)"
    return None


class RunnerGradients:
    """A runner's A3CLearners (one per module, built at first use) and its gradient step."""

    def __init__(self, runner: Any):
        self.runner = runner
        self.config = runner.config
        self.enabled = runner_computes_gradients(self.config) is None
        self.multi = isinstance(runner.module, MultiRLModule)
        self.learners: dict[str, A3CLearner] = {}

    def _learner(self, module_id: str) -> A3CLearner:
        learner = self.learners.get(module_id)
        if learner is None:
            cfg = self.config.get_config_for_module(module_id) if self.multi else self.config
            module = self.runner.module[module_id] if self.multi else self.runner.module
            learner_class = cfg.learner_class or A3CLearner
            with building_learner_for(module_id):
                learner = self.learners[module_id] = learner_class(cfg, module)
        return learner

    def __call__(self, batch: Any) -> RemoteFragment:
        counts = as_multi_agent(batch)
        timestep = int(getattr(self.runner, "num_env_steps_sampled_lifetime", 0))
        gradients: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        policies_to_train = self.config.policies_to_train if self.multi else None
        for module_id, part in counts.policy_batches.items():
            module_id = module_id or DEFAULT_POLICY_ID
            if not is_trainable(policies_to_train, module_id, part):
                continue
            grads, module_metrics = self._learner(module_id).compute_gradients_on_batch(part, timestep)
            if grads:
                gradients[module_id] = grads
            metrics[module_id] = module_metrics
        return RemoteFragment({GRADIENTS: gradients, "metrics": metrics}, counts.env_steps(), counts.agent_steps())

"""DifferentiableLearner (RLlib's `ray.rllib.core.learner.differentiable_learner`): a learner
whose updates are functional, for the inner loop of meta-learning.

It holds no module of its own: it works on the module of the TorchMetaLearner that owns it,
and its `update(params, training_data)` takes a dict of parameter tensors (clones of the
module's parameters, or the result of an earlier inner update) and returns new ones
computed from them, leaving the module's own parameters alone. Because every step is built
from differentiable tensor operations, the meta learner can take the gradient of a loss
after the inner steps with respect to the module's parameters (MAML's second-order
gradient). rlx's TorchDifferentiableLearner implements the steps; subclasses define the loss
(`compute_loss_for_module`).
"""
from __future__ import annotations

import abc
from typing import Any

import torch

from rlx.core import ALL_MODULES
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.functional import NamedParams, minibatches, module_batches
from rlx.core.learner.training_data import TrainingData
from rlx.utils.metrics.metrics_logger import MetricsLogger

#: RLlib's metric keys of the steps trained.
NUM_MODULE_STEPS_TRAINED = "num_module_steps_trained"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
WEIGHTS_SEQ_NO = "weights_seq_no"


def log_steps_trained(metrics: MetricsLogger, batch: dict[str, dict[str, Any]],
                      weights_seq_no: int | None = None) -> None:
    """Log the rows of each module's batch (and their sum over modules) as RLlib's steps-trained
    metrics, and the weights' sequence number per module when one is given."""
    from rlx.core.learner.functional import _rows

    total = 0
    for mid, columns in batch.items():
        rows = _rows(columns)
        total += rows
        metrics.log_value((mid, NUM_MODULE_STEPS_TRAINED), rows, reduce="sum", clear_on_reduce=True)
        if weights_seq_no is not None:
            metrics.log_value((mid, WEIGHTS_SEQ_NO), weights_seq_no, window=1)
    metrics.log_value((ALL_MODULES, NUM_ENV_STEPS_TRAINED), total, reduce="sum", clear_on_reduce=True)


class DifferentiableLearner(abc.ABC):
    """Functional updates of given parameters of a (borrowed) module.

    Args:
        config: the AlgorithmConfig (its `policies_to_train` and `skip_nonfinite_updates` apply).
        learner_config: this learner's DifferentiableLearnerConfig (inner lr, minibatching).
        module: the owning meta learner's module (a {module_id: RLModule} mapping); set later
            by the meta learner's `build()` when None.
    """

    framework_str = "torch"
    #: The key of each module's loss in the results.
    TOTAL_LOSS_KEY = "total_loss"

    def __init__(self, *, config: ResolvedConfig, learner_config: Any, module: Any = None, **kwargs: Any):
        self.config = config
        self.learner_config = learner_config
        self._module = module
        self._device: torch.device | None = None
        self._weights_seq_no = 0
        self._is_built = False
        self.metrics = MetricsLogger()
        self._generator = torch.Generator()
        seed = getattr(config, "seed", None)
        if seed is not None:
            self._generator.manual_seed(int(seed) + 4093)

    @property
    def module(self) -> Any:
        """The {module_id: RLModule} mapping the updates run on (the meta learner's)."""
        return self._module

    @module.setter
    def module(self, module: Any) -> None:
        self._module = module

    def build(self, device: Any = None) -> None:
        """Make the learner ready (on the meta learner's device)."""
        if device is not None:
            self._device = torch.device(device)
        self._is_built = True

    def _check_is_built(self) -> None:
        if not self._is_built or self._module is None:
            raise RuntimeError(f"{type(self).__name__} is not built: its TorchMetaLearner builds it (call "
                               "meta_learner.build() before update()).")

    @property
    def device(self) -> torch.device:
        """Where the update's tensors live."""
        return self._device if self._device is not None else torch.device("cpu")

    def should_module_be_updated(self, module_id: str, multi_agent_batch: Any = None) -> bool:
        """Whether `module_id` trains, by `config.policies_to_train` (None: every module)."""
        which = getattr(self.config, "policies_to_train", None)
        if which is None:
            return True
        if callable(which):
            return bool(which(module_id, multi_agent_batch))
        return module_id in set(which)

    # ------------------------------------------------------------------ losses

    def compute_losses(self, *, fwd_out: dict[str, Any], batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """{module_id: loss} from the functional forward outputs (no forward pass of its own)."""
        return {
            mid: self.compute_loss_for_module(module_id=mid, config=self.config.get_config_for_module(mid)
                                              if hasattr(self.config, "get_config_for_module") else self.config,
                                              batch=batch[mid], fwd_out=out)
            for mid, out in fwd_out.items()
        }

    @abc.abstractmethod
    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """The loss of `module_id` on its `batch`, from its functional forward output `fwd_out`."""

    # ------------------------------------------------------------------ functional steps

    @abc.abstractmethod
    def compute_gradients(self, loss_per_module: dict[str, torch.Tensor], params: NamedParams,
                          **kwargs: Any) -> NamedParams:
        """Gradients of the summed losses with respect to `params`, differentiable themselves."""

    @abc.abstractmethod
    def apply_gradients(self, gradients: NamedParams, params: NamedParams) -> NamedParams:
        """New parameters from `params` and `gradients`, without changing either in place."""

    @abc.abstractmethod
    def _update(self, batch: dict[str, Any], params: NamedParams) -> tuple[Any, dict, NamedParams, dict]:
        """One inner step on a minibatch: (forward outputs, losses, new params, metrics)."""

    # ------------------------------------------------------------------ update

    def update(self, params: NamedParams, training_data: TrainingData, *, _no_metrics_reduce: bool = False,
               **kwargs: Any) -> tuple[NamedParams, dict[str, torch.Tensor], dict[str, Any]]:
        """Run the configured inner steps (epochs x minibatches of `learner_config`) on
        `training_data`, starting from `params`; returns (the new params, the last step's
        losses, this update's metrics)."""
        self._check_is_built()
        cfg = self.learner_config
        batch = module_batches(training_data.as_batch(type(self).__name__), list(self.module.keys()), self.device)
        batch = {mid: cols for mid, cols in batch.items() if self.should_module_be_updated(mid, batch)}
        if not batch:
            return params, {}, {}
        self._weights_seq_no += 1
        loss_per_module: dict[str, torch.Tensor] = {}
        for minibatch in minibatches(batch, num_epochs=cfg.num_epochs, minibatch_size=cfg.minibatch_size,
                                     shuffle=cfg.shuffle_batch_per_epoch,
                                     num_total_minibatches=cfg.num_total_minibatches, generator=self._generator):
            _, loss_per_module, params, _ = self._update(minibatch, params)
            self._log_steps_trained(minibatch)
        for mid, loss in loss_per_module.items():
            self.metrics.log_value((mid, self.TOTAL_LOSS_KEY), float(loss.detach()), window=1)
        results = {} if _no_metrics_reduce else self.metrics.reduce(return_stats_objects=True)
        return params, loss_per_module, results

    def _log_steps_trained(self, batch: dict[str, dict[str, Any]]) -> None:
        log_steps_trained(self.metrics, batch, weights_seq_no=self._weights_seq_no)

    # ------------------------------------------------------------------ state

    def get_state(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The learner's own state (the module is its meta learner's, not part of it)."""
        return {WEIGHTS_SEQ_NO: self._weights_seq_no,
                "should_module_be_updated": getattr(self.config, "policies_to_train", None)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore `get_state()`."""
        if int(state.get(WEIGHTS_SEQ_NO, 0)) > 0:
            self._weights_seq_no = int(state[WEIGHTS_SEQ_NO])

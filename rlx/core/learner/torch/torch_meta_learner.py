"""TorchMetaLearner (RLlib's `ray.rllib.core.learner.torch.torch_meta_learner`): the outer loop
of meta-learning (MAML) on rlx's TorchLearner.

Each minibatch of `update()`:

1. clones the module's parameters (the clones keep the gradient path to them);
2. lets every DifferentiableLearner of `config.differentiable_learner_configs` run its
   functional inner steps from those tensors on its own data (`others_training_data`),
   each starting where the previous one ended;
3. runs the module with the adapted tensors on the meta learner's batch and computes the
   meta loss (`compute_loss_for_module`, which also sees the inner losses);
4. back-propagates the meta loss through the inner steps into the module's parameters and
   steps the optimizer, with rlx's gradient clipping and non-finite checks.

The module is built in `build()` from `module_spec` (an RLModuleSpec, or a MultiRLModuleSpec
of one module), as RLlib's Learner does; rlx's Learners train one module each.
"""
from __future__ import annotations

import contextlib
from itertools import cycle
from typing import Any, Iterator

import torch

from rlx.core import DEFAULT_MODULE_ID
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.differentiable_learner import log_steps_trained
from rlx.core.learner.functional import NamedParams, _rows, functional_forward, minibatches, module_batches, \
    named_parameters, sum_losses
from rlx.core.learner.learner import building_learner_for
from rlx.core.learner.torch.torch_learner import TorchLearner
from rlx.core.learner.training_data import TrainingData
from rlx.utils.errors import NotSupportedYetError

#: The results key of the differentiable learners' metrics (RLlib's name).
DIFFERENTIABLE_LEARNER_RESULTS = "differentiable_learners"


class TorchMetaLearner(TorchLearner):
    """A TorchLearner whose update differentiates through the functional inner updates of its
    DifferentiableLearners (`self.others`).

    Args:
        config: a DifferentiableAlgorithmConfig (lr, optimizer, grad_clip of the outer step;
            `differentiable_learner_configs` for the inner learners).
        module_spec: the RLModuleSpec (or one-module MultiRLModuleSpec) to build the module from.
        module: an existing RLModule (or one-module MultiRLModule) to train instead.
    """

    def __init__(self, *, config: ResolvedConfig, module_spec: Any = None, module: Any = None, **kwargs: Any):
        # Learner.__init__ (optimizers on the module's parameters) runs in build(), once the
        # module exists, as in RLlib.
        self.config = config
        self._module_spec = module_spec
        self._given_module = module
        self._is_built = False
        get_configs = getattr(config, "get_differentiable_learner_configs", None)
        configs = get_configs() if callable(get_configs) else []
        self.others = [c.learner_class(config=config, learner_config=c, module=None) for c in configs]

    # ------------------------------------------------------------------ building

    def build(self) -> None:
        """Build the module, the optimizers and the differentiable learners."""
        if self._is_built:
            return
        module_id, module = self._one_module()
        with building_learner_for(module_id):
            TorchLearner.__init__(self, self.config, module)
        #: RLlib's name of the device.
        self._device = self.device
        for other in self.others:
            other.module = self.module
            other.build(device=self.device)
        self._is_built = True

    def _one_module(self) -> tuple[str, Any]:
        """(module id, RLModule) of the module to train."""
        from rlx.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
        from rlx.core.rl_module.rl_module import RLModuleSpec

        source = self._given_module if self._given_module is not None else self._module_spec
        if source is None:
            raise ValueError(f"{type(self).__name__} needs module_spec=RLModuleSpec(...) or module=... to train.")
        if isinstance(source, RLModuleSpec):
            return DEFAULT_MODULE_ID, source.build()
        if isinstance(source, MultiRLModuleSpec):
            source = source.build()
        if isinstance(source, MultiRLModule):
            if len(source) != 1:
                raise NotSupportedYetError(f"{type(self).__name__} with {len(source)} modules",
                                           "rlx's Learners train one module each",
                                           fix="Give a spec of one module (one meta learner per module).")
            return source.keys()[0], source[source.keys()[0]]
        return DEFAULT_MODULE_ID, source

    def _check_is_built(self) -> None:
        if not self._is_built:
            raise RuntimeError(f"{type(self).__name__}.build() must be called after constructing it and before "
                               "update() or any other use.")

    # ------------------------------------------------------------------ update

    def update(self, batch: Any = None, batches: list[Any] | None = None,  # type: ignore[override]  # RLlib's TorchMetaLearner.update signature
               batch_refs: list[Any] | None = None,
               episodes: list[Any] | None = None, episodes_refs: list[Any] | None = None,
               data_iterators: list[Any] | None = None, training_data: TrainingData | None = None, *,
               timesteps: dict[str, Any] | None = None, num_total_minibatches: int = 0, num_epochs: int = 1,
               minibatch_size: int | None = None, shuffle_batch_per_epoch: bool = False,
               _no_metrics_reduce: bool = False, others_training_data: list[TrainingData] | None = None,
               **kwargs: Any) -> dict[str, Any] | None:
        """One meta update on `training_data` (or the data given by the other arguments): per
        minibatch, the inner learners adapt cloned parameters on `others_training_data` (the
        meta batch itself when None), then the meta loss of the adapted parameters on the
        minibatch trains the module. Returns the reduced metrics (Stats objects: `.peek()`).

        The update runs with `config.torch_num_threads` torch threads (1 by default, as rlx's
        Algorithms run): small networks step fastest that way, and far faster on busy cores."""
        self._check_is_built()
        with _torch_threads(getattr(self.config, "torch_num_threads", None)):
            return self._meta_update(batch, batches, batch_refs, episodes, episodes_refs, data_iterators,
                                     training_data, timesteps=timesteps, num_total_minibatches=num_total_minibatches,
                                     num_epochs=num_epochs, minibatch_size=minibatch_size,
                                     shuffle_batch_per_epoch=shuffle_batch_per_epoch,
                                     _no_metrics_reduce=_no_metrics_reduce, others_training_data=others_training_data)

    def _meta_update(self, batch: Any, batches: Any, batch_refs: Any, episodes: Any, episodes_refs: Any,
                     data_iterators: Any, training_data: TrainingData | None, *, timesteps: dict[str, Any] | None,
                     num_total_minibatches: int, num_epochs: int, minibatch_size: int | None,
                     shuffle_batch_per_epoch: bool, _no_metrics_reduce: bool,
                     others_training_data: list[TrainingData] | None) -> dict[str, Any] | None:
        self.before_gradient_based_update(timesteps=timesteps or {})
        if training_data is None:
            training_data = TrainingData(batch=batch, batches=batches, batch_refs=batch_refs, episodes=episodes,
                                         episodes_refs=episodes_refs, data_iterators=data_iterators)
        data = module_batches(training_data.as_batch(type(self).__name__), list(self.module.keys()), self.device)
        if others_training_data is None:
            inner_data: Any = cycle([training_data])
        else:
            if len(others_training_data) != len(self.others):
                raise ValueError(f"others_training_data has {len(others_training_data)} entries for "
                                 f"{len(self.others)} differentiable learners; give one TrainingData per learner "
                                 "(in the order of differentiable_learner_configs).")
            inner_data = others_training_data
        inner_data = list(zip(self.others, inner_data))
        loss_per_module: dict[str, torch.Tensor] = {}
        for minibatch in minibatches(data, num_epochs=num_epochs, minibatch_size=minibatch_size,
                                     shuffle=shuffle_batch_per_epoch, num_total_minibatches=num_total_minibatches):
            params = self._clone_named_parameters()
            others_loss_per_module = []
            for other, other_data in inner_data:
                params, other_losses, other_results = other.update(params=params, training_data=other_data,
                                                                   _no_metrics_reduce=_no_metrics_reduce)
                others_loss_per_module.append(other_losses)
                self._log_inner_results(other, other_results)
            _, loss_per_module, _ = self._update(minibatch, params, others_loss_per_module)
            self._log_steps_trained(minibatch)
        for mid, loss in loss_per_module.items():
            self.metrics.log_value((mid, self.TOTAL_LOSS_KEY), float(loss.detach()), window=1)
        self.after_gradient_based_update(timesteps=timesteps or {})
        if _no_metrics_reduce:
            return None
        return self.metrics.reduce(return_stats_objects=True)

    #: The key of each module's meta loss in the results (RLlib's).
    TOTAL_LOSS_KEY = "total_loss"

    def _clone_named_parameters(self) -> NamedParams:
        """Clones of the module's parameters that carry gradients back to them."""
        return named_parameters(self.module, clone=True)

    def _make_functional_call(self, params: NamedParams, batch: dict[str, Any]) -> dict[str, Any]:
        """Each module's forward on its batch, computed with the (adapted) `params`."""
        return functional_forward(self.module, params, batch)

    def _update(self, batch: dict[str, Any], params: NamedParams,
                others_loss_per_module: list[dict[str, torch.Tensor]] | None = None) -> tuple[Any, dict, dict]:
        """The outer step on one minibatch: the meta loss of `params`, back-propagated through the
        inner steps into the module's parameters, then one (clipped, checked) optimizer step."""
        fwd_out = self._make_functional_call(params, batch)
        loss_per_module = self.compute_losses(fwd_out=fwd_out, batch=batch,
                                              others_loss_per_module=others_loss_per_module)
        self.apply_loss_to_all_optimizers(sum_losses(loss_per_module), terms=loss_per_module)
        return fwd_out, loss_per_module, {}

    def compute_losses(self, *, fwd_out: dict[str, Any], batch: Any,
                       others_loss_per_module: list[dict[str, torch.Tensor]] | None = None,
                       **kwargs: Any) -> dict[str, torch.Tensor]:
        """{module_id: meta loss} from the forward outputs; each module's loss may read the inner
        learners' losses (`others_loss_per_module`, one dict per learner)."""
        return {
            mid: self.compute_loss_for_module(module_id=mid, config=self.config, batch=batch[mid], fwd_out=out,
                                              others_loss_per_module=others_loss_per_module)
            for mid, out in fwd_out.items()
        }

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any],
                                others_loss_per_module: list[dict[str, torch.Tensor]] | None = None) -> torch.Tensor:
        """The meta loss of one module (override it; the default is the Learner's)."""
        return super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)

    def _log_inner_results(self, other: Any, results: dict[str, Any]) -> None:
        from rlx.utils.metrics.metrics_logger import Stats

        name = _snake_case(type(other).__name__)
        for mid, values in (results or {}).items():
            for key, stat in (values.items() if isinstance(values, dict) else ()):
                value = stat.peek() if isinstance(stat, Stats) else stat
                if isinstance(value, (int, float)):
                    self.metrics.log_value((DIFFERENTIABLE_LEARNER_RESULTS, name, mid, key), value, window=1)

    def _log_steps_trained(self, batch: dict[str, dict[str, Any]]) -> None:
        log_steps_trained(self.metrics, batch)

    def _convert_batch_type(self, batch: Any) -> Any:
        """`batch` (a MultiAgentBatch) with its columns as tensors on this learner's device."""
        from rlx.core.sample_batch import MultiAgentBatch

        tensors = module_batches(batch, list(self.module.keys()), self.device)
        return MultiAgentBatch(tensors, env_steps=batch.env_steps() if hasattr(batch, "env_steps") else
                               max(_rows(c) for c in tensors.values()))


@contextlib.contextmanager
def _torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with `count` torch intra-op threads (None: leave torch's setting)."""
    previous = torch.get_num_threads()
    if count is None or int(count) == previous:
        yield
        return
    torch.set_num_threads(int(count))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _snake_case(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()

"""RLModule: the torch.nn.Module that maps observations to action-distribution inputs.

Subclasses build their layers in `setup()` and implement `forward_train` (and, when
inference differs, `forward_inference` / `forward_exploration`). Every forward method
takes a dict batch keyed by `Columns` names and returns a dict.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, dist_class_for_space
from rlx.core.catalog import Catalog, model_config_as_dict
# DefaultModelConfig: RLlib's users import it from this module too.
from rlx.core.rl_module.default_model_config import DefaultModelConfig  # noqa: F401
from rlx.core.rl_module.module_checkpoint import load_module_state, module_spec_args, save_module
from rlx.utils.errors import CheckpointError, ConfigError, NotSupportedYetError, RLXError
from rlx.utils.model_summary import summarize


class RLModule(nn.Module):
    """Base class of rlx's neural-network modules.

    Args:
        observation_space: the (preprocessed) observation space the module reads.
        action_space: the env's action space.
        model_config: model settings (see rlx.models.MODEL_DEFAULTS).
        inference_only: build only what inference needs (e.g. no value head).
        learner_only: the module is trained by the Learner but not run by EnvRunners.
        catalog_class: the Catalog (rlx.core.models.catalog) the networks come from: rlx's
            actor-critic module builds its layers with it; other modules find an instance of it
            as `self.catalog` in `setup()`.
    """

    #: Whether `setup()` builds the networks with `self.catalog_class` itself (rlx's modules that
    #: do set it; for the others `__init__` makes `self.catalog` for their own setup to use).
    builds_from_catalog = False

    def __init__(
        self,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        model_config: dict | None = None,
        inference_only: bool = False,
        learner_only: bool = False,
        catalog_class: type | None = None,
    ):
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = dict(model_config or {})
        self.inference_only = inference_only
        self.learner_only = learner_only
        self.catalog_class = catalog_class
        self.catalog: Any = None
        if catalog_class is not None and not type(self).builds_from_catalog:
            self.catalog = catalog_class(observation_space, action_space, self.model_config)
        self.setup()

    def setup(self) -> None:
        """Create the layers (override in subclasses)."""

    def _spaces(self) -> tuple[gym.Space, gym.Space]:
        """(observation_space, action_space) of a module whose networks need both (an RLModuleSpec
        always gives both); a ConfigError when the module was built without them."""
        if self.observation_space is None or self.action_space is None:
            raise ConfigError(f"{type(self).__name__} needs observation_space and action_space to build its "
                              "networks; pass both to its constructor or RLModuleSpec.")
        return self.observation_space, self.action_space

    # -------------------------------------------------------------- forward passes

    # A module implements either the public methods (rlx's own modules) or, as RLlib's new API
    # stack documents, `_forward` and optionally `_forward_train` / `_forward_inference` /
    # `_forward_exploration`. When sampling, a module may return `actions` itself (and then
    # `action_logp`) instead of `action_dist_inputs`.

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Forward pass for the loss; must return at least `action_dist_inputs`."""
        return self._forward_train(batch, **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Forward pass while sampling with exploration (defaults to forward_inference)."""
        return self._forward_exploration(batch, **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Forward pass for acting without exploration (defaults to forward_train)."""
        return self._forward_inference(batch, **kwargs)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The forward pass every mode uses unless it has its own (RLlib's new-API hook)."""
        if type(self).forward_train is not RLModule.forward_train:
            return self.forward_train(batch, **kwargs)
        raise TypeError(f"{type(self).__name__} must implement _forward(batch) (or forward_train(batch)).")

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, **kwargs)

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        import torch

        with torch.no_grad():  # acting needs no gradients (as RLlib's TorchRLModule)
            return self._forward(batch, **kwargs)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if type(self).forward_inference is not RLModule.forward_inference:
            return self.forward_inference(batch, **kwargs)
        if type(self)._forward_inference is not RLModule._forward_inference:
            return self._forward_inference(batch, **kwargs)
        import torch

        with torch.no_grad():
            return self._forward(batch, **kwargs)

    def forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # noqa: D102
        return self.forward_train(batch, **kwargs)

    # -------------------------------------------------------------- recurrent modules

    def get_initial_state(self) -> dict[str, Any]:
        """The state a recurrent module starts each episode with ({name: array without a batch
        axis}); {} for stateless modules."""
        return {}

    def is_stateful(self) -> bool:
        """Whether the module is recurrent: it then reads `state_in` and returns `state_out`, and
        its batches carry a time axis (`obs` shaped [B, T, ...])."""
        return bool(self.get_initial_state())

    def numpy_inference_fn(self) -> Any:
        """The action-distribution inputs forward_exploration and forward_inference compute, as a
        NumPy function of observation rows [B, ...] -> [B, k] that reads this module's weights
        (rlx.core.numpy_forward), or None. The EnvRunner acts through it when it is not None: rlx's
        default MLP modules provide one; any other module (and any subclass overriding their
        forward methods) acts through torch."""
        return None

    # -------------------------------------------------------------- distributions

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """Distribution class built from forward_train's `action_dist_inputs`."""
        cls, kwargs = dist_class_for_space(self.action_space, self.model_config)
        return BoundDistribution(cls, **kwargs)

    def get_exploration_action_dist_cls(self) -> BoundDistribution:
        """Distribution class used while sampling with exploration."""
        return self.get_train_action_dist_cls()

    def get_inference_action_dist_cls(self) -> BoundDistribution:
        """Distribution class used for deterministic inference."""
        return self.get_train_action_dist_cls()

    # -------------------------------------------------------------- state

    def save_to_path(self, path: str | Any = None) -> str:
        """Write this module (weights and the spec that rebuilds it) into the directory `path`
        (a new temporary one when None); return the path. `RLModule.from_checkpoint(path)`
        rebuilds it, `module.restore_from_path(path)` loads the weights into a module."""
        return save_module(self, path)

    def restore_from_path(self, path: str | Any) -> None:
        """Load the weights of a module directory: one written by `save_to_path`, or the
        `learner_group/learner/rl_module/<module_id>` directory of an Algorithm checkpoint."""
        load_module_state(self, path)

    @classmethod
    def from_checkpoint(cls, path: str | Any) -> "RLModule":
        """Build the module stored in a module directory (see restore_from_path) and load its weights."""
        spec = RLModuleSpec(**module_spec_args(path, expected=cls))
        try:
            return spec.build()
        except RLXError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RuntimeError) as err:
            raise CheckpointError(f"The module directory {path} describes a module that cannot be built (its "
                                  f"rlx_module.json may be damaged): {type(err).__name__}: {err}.") from err

    def get_state(self) -> dict[str, np.ndarray]:
        """Weights as a flat dict of NumPy arrays."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.state_dict().items()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Load weights from a flat dict of arrays or tensors (shapes must match)."""
        own = self.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(
                f"Weights do not match {type(self).__name__}: missing {missing or 'none'}, "
                f"unexpected {unexpected or 'none'}."
            )
        tensors = {}
        for k, v in state.items():
            if not isinstance(v, torch.Tensor):
                v = np.asarray(v)
                # Ray's object store hands out read-only arrays, which torch warns about sharing.
                t = torch.as_tensor(v) if v.flags.writeable else torch.tensor(v)
            else:
                t = v
            if tuple(t.shape) != tuple(own[k].shape):
                raise ValueError(f"Weight '{k}' has shape {tuple(t.shape)}, the module expects {tuple(own[k].shape)}.")
            tensors[k] = t
        with torch.no_grad():
            self.load_state_dict(tensors)

    @property
    def has_value_function(self) -> bool:
        """Whether `compute_values` is available."""
        return hasattr(self, "compute_values")

    def summary(self, print_fn: Any = print) -> str:
        """Print (with `print_fn`; None: do not print) and return a Keras-style table of the
        module's layers: output shapes for one observation, parameter counts and totals."""
        text = str(summarize(self, self._example_forward, title=type(self).__name__))
        if print_fn is not None:
            print_fn(text)
        return text

    def _example_forward(self) -> Any:
        """forward_train on one sampled observation (one time step for recurrent modules)."""
        obs = np.asarray(self._spaces()[0].sample())
        obs_t = torch.as_tensor(obs[None] if obs.dtype == np.uint8 else obs[None].astype(np.float32))
        device = next((p.device for p in self.parameters()), torch.device("cpu"))
        batch: dict[str, Any] = {Columns.OBS: obs_t.to(device)}
        initial = self.get_initial_state()
        if initial:
            batch[Columns.OBS] = batch[Columns.OBS][:, None]
            batch[Columns.STATE_IN] = {k: torch.as_tensor(np.asarray(v))[None].to(device) for k, v in initial.items()}
        return self.forward_train(batch)

    def output_specs_inference(self) -> list[str]:
        """Keys forward_inference returns."""
        return [Columns.ACTION_DIST_INPUTS]


@dataclasses.dataclass
class RLModuleSpec:
    """Recipe for an RLModule: its class, spaces and model config.

    Spaces left as None are filled in from the environment when the Algorithm builds.
    `catalog_class` is the Catalog the module's networks come from (rlx's actor-critic module
    honours it; building another rlx module with one is a NotSupportedYetError). `learner_only`
    marks a module only the Learner needs (not with `inference_only`). `load_state_path` is a
    module directory (`module.save_to_path(...)`, or `<algorithm checkpoint>/learner_group/
    learner/rl_module/<module_id>`) whose weights the module gets when built.
    """

    module_class: type[RLModule] | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    model_config: dict | None = None
    inference_only: bool = False
    learner_only: bool = False
    catalog_class: type | None = None
    load_state_path: str | None = None

    def __post_init__(self) -> None:
        if self.load_state_path is not None:
            # Kept as str: the config (and its checkpoint's config.json) stores plain data.
            self.load_state_path = os.fspath(self.load_state_path)

    def build(self) -> RLModule:
        """Instantiate the module (and load `load_state_path`'s weights into it)."""
        if self.module_class is None:
            raise ConfigError("RLModuleSpec.module_class is not set.")
        if self.observation_space is None or self.action_space is None:
            raise ConfigError("RLModuleSpec needs observation_space and action_space to build a module.")
        if not (isinstance(self.module_class, type) and issubclass(self.module_class, RLModule)):
            raise ConfigError(
                f"RLModuleSpec.module_class must be a subclass of rlx.core.rl_module.RLModule, got {self.module_class!r}."
            )
        if self.inference_only and self.learner_only:
            raise ConfigError("RLModuleSpec has inference_only=True and learner_only=True: a module only the Learner "
                              "needs cannot be an inference-only copy; set one of them.")
        kwargs: dict[str, Any] = {}
        if self.catalog_class is not None:
            check_catalog_class(self.module_class, self.catalog_class)
            kwargs["catalog_class"] = self.catalog_class
        if self.learner_only:
            kwargs["learner_only"] = True
        model_config = self.model_config
        if model_config is not None and not isinstance(model_config, dict):
            model_config = model_config_as_dict(model_config)
        module = self.module_class(
            observation_space=self.observation_space,
            action_space=self.action_space,
            model_config=model_config,
            inference_only=self.inference_only,
            **kwargs,
        )
        if self.load_state_path is not None:
            module.restore_from_path(self.load_state_path)
        return module

    @classmethod
    def from_module(cls, module: RLModule) -> "RLModuleSpec":
        """The spec that builds a module like `module` (its class, spaces, model config and catalog)."""
        return cls(module_class=type(module), observation_space=module.observation_space,
                   action_space=module.action_space, model_config=getattr(module, "model_config", None),
                   inference_only=bool(getattr(module, "inference_only", False)),
                   learner_only=bool(getattr(module, "learner_only", False)),
                   catalog_class=getattr(module, "catalog_class", None))

    # Older name used by RLlib's docs.
    @property
    def model_config_dict(self) -> dict | None:
        """Old name of model_config."""
        return self.model_config


SingleAgentRLModuleSpec = RLModuleSpec


def built_layer(module: nn.Module, layer: nn.Module | None, name: str) -> nn.Module:
    """`layer` of `module`, which an inference-only module leaves out (None): a clear error then."""
    if layer is None:
        raise ConfigError(f"{type(module).__name__} has no {name}: it was built with inference_only=True, which "
                          "builds only what acting needs. Build it with inference_only=False to train it or to "
                          "compute values.")
    return layer


def check_catalog_class(module_class: type, catalog_class: Any) -> None:
    """ConfigError unless `catalog_class` is a Catalog subclass; NotSupportedYetError when
    `module_class`'s layers come from an rlx module that does not build them with a catalog
    (the catalog would be ignored)."""
    if not (isinstance(catalog_class, type) and issubclass(catalog_class, Catalog)):
        raise ConfigError(f"RLModuleSpec.catalog_class must be a subclass of rlx.core.models.catalog.Catalog, got "
                          f"{catalog_class!r:.80}.")
    # Whoever defines setup() builds the layers: a user's class can use self.catalog there, an
    # rlx module only when it says it builds from the catalog.
    builder = next((k for k in module_class.__mro__ if "setup" in k.__dict__), RLModule)
    if builder is RLModule or not builder.__module__.startswith("rlx.") or getattr(builder, "builds_from_catalog", False):
        return
    raise NotSupportedYetError(
        f"RLModuleSpec(catalog_class={catalog_class.__name__}) with {module_class.__name__}",
        "rlx's default actor-critic module (PPO, APPO, IMPALA, A2C, PG) builds its networks from a catalog; "
        f"{builder.__name__} builds its own",
        fix="Drop catalog_class, or write a custom RLModule whose setup() builds from self.catalog.")


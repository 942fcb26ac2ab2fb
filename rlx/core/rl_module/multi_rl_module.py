"""MultiRLModule: the modules of a multi-agent algorithm, keyed by module (policy) id.

A single-agent algorithm is the one-module case: its MultiRLModule holds one module under
`DEFAULT_MODULE_ID` ("default_policy").
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, MutableMapping, cast

import numpy as np
from torch import nn

from rlx.core import DEFAULT_MODULE_ID  # noqa: F401  (RLlib offers it here too)
from rlx.core.rl_module.module_cache import ModuleCache
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec


#: The forward passes a MultiRLModule subclass overrides to couple its modules (runs_modules_jointly).
_FORWARD_METHODS = ("forward", "forward_train", "forward_exploration", "forward_inference", "_forward",
                    "_forward_train", "_forward_exploration", "_forward_inference")


class MultiRLModule(nn.Module):
    """A dict of RLModules keyed by module id (RLlib's MultiRLModule, formerly MultiAgentRLModule).

    `multi_module["p0"]` is one module; `get_state()`/`set_state()` take `{module_id: weights}`.

    `set_policy_map_capacity(n)` (RLlib's policy_map_capacity) keeps at most n modules' tensors in
    memory once it holds more: the least recently used ones are swapped out to disk and come
    back when used (indexing, forward passes, state); see rlx.core.rl_module.module_cache.
    """

    _cache_settings: tuple[int, bool] | None = None
    _runs_jointly: bool | None = None
    _module_cache: Any = None

    def __init__(self, modules: dict[str, RLModule] | None = None, *, observation_space: Any = None,
                 action_space: Any = None, inference_only: bool | None = None, learner_only: bool | None = None,
                 model_config: dict | None = None, rl_module_specs: dict[str, RLModuleSpec] | None = None):
        """Hold `modules` ({module_id: RLModule}), plus one module built from each of RLlib's
        `rl_module_specs` ({module_id: RLModuleSpec} with spaces); then run `setup()`. The other
        arguments are RLlib's and kept as attributes (the MultiRLModule's own spaces and flags)."""
        super().__init__()
        # A ModuleDict (so the modules' parameters are this module's) used as the mapping it is;
        # it holds only the RLModules that add_module puts in.
        self._rl_modules = cast("MutableMapping[str, RLModule]", nn.ModuleDict())
        #: (capacity, swappable) of set_policy_map_capacity; the ModuleCache exists once it swaps.
        self._cache_settings = None
        self._module_cache = None
        self.observation_space = observation_space
        self.action_space = action_space
        self.inference_only = bool(inference_only)
        self.learner_only = bool(learner_only)
        self.model_config = dict(model_config or {})
        for module_id, module in (modules or {}).items():
            self.add_module(module_id, module)
        for module_id, spec in (rl_module_specs or {}).items():
            self.add_module(module_id, spec.build())
        self.setup()

    def setup(self) -> None:
        """RLlib's hook, run once at the end of the constructor when every sub-module exists (in
        `self._rl_modules`): override it (calling super) to e.g. keep a shared sub-module at hand."""

    def set_policy_map_capacity(self, capacity: int | None, swappable: bool = False) -> None:
        """Keep at most `capacity` modules in memory (None: all), swapping the least recently used
        out (RLlib's policy_map_capacity); `swappable`: RLlib's policy_states_are_swappable."""
        self._cache_settings = None if capacity is None else (int(capacity), bool(swappable))
        if self._module_cache is not None and capacity is not None:
            self._module_cache.set_capacity(int(capacity), bool(swappable))
        elif self._module_cache is not None:
            self._module_cache.set_capacity(max(1, len(self._rl_modules)))
        else:
            self._maybe_start_cache()

    @property
    def module_cache(self) -> Any:
        """The ModuleCache swapping modules in and out, or None while every module is in memory."""
        return self._module_cache

    def use_module(self, module_id: str) -> None:
        """Bring module `module_id` into memory if it was swapped out (policy_map_capacity)."""
        if self._module_cache is not None:
            self._module_cache.use(module_id)

    def using_module(self, module_id: str) -> Any:
        """A context in which module `module_id` stays in memory (policy_map_capacity), e.g. for a
        Learner update while another thread uses other modules."""
        if self._module_cache is None:
            return contextlib.nullcontext()
        return self._module_cache.pinned(module_id)

    def _maybe_start_cache(self) -> None:
        settings = self._cache_settings
        if settings is None or self._module_cache is not None or len(self._rl_modules) <= settings[0]:
            return
        cache = ModuleCache(*settings)
        for module_id, module in self._rl_modules.items():
            cache.add(module_id, module)
        self._module_cache = cache

    def add_module(self, module_id: str, module: RLModule, *, override: bool = False) -> None:  # type: ignore[override]
        """Add `module` under `module_id` (ValueError when the id exists, unless `override`)."""
        if not isinstance(module_id, str) or not module_id:
            raise ValueError(f"Module ids are non-empty strings, got {module_id!r}.")
        if module_id in self._rl_modules and not override:
            raise ValueError(f"Module id {module_id!r} already exists; pass override=True to replace it.")
        self._rl_modules[module_id] = module
        if self._module_cache is not None:
            self._module_cache.add(module_id, module)
        else:
            self._maybe_start_cache()

    def remove_module(self, module_id: str, *, raise_err_if_not_found: bool = True) -> None:
        """Remove the module `module_id`."""
        if module_id not in self._rl_modules:
            if raise_err_if_not_found:
                raise KeyError(self._unknown(module_id))
            return
        del self._rl_modules[module_id]
        if self._module_cache is not None:
            self._module_cache.remove(module_id)

    def _unknown(self, module_id: str) -> str:
        return f"Unknown module id {module_id!r}; this MultiRLModule has {sorted(self._rl_modules)}."

    def __getitem__(self, module_id: str) -> RLModule:
        if module_id not in self._rl_modules:
            raise KeyError(self._unknown(module_id))
        if self._module_cache is not None:
            self._module_cache.use(module_id)
        return self._rl_modules[module_id]

    def __contains__(self, module_id: object) -> bool:
        return module_id in self._rl_modules

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]
        return iter(list(self._rl_modules.keys()))

    def __len__(self) -> int:
        return len(self._rl_modules)

    def keys(self) -> list[str]:
        """The module ids."""
        return list(self._rl_modules.keys())

    def items(self) -> list[tuple[str, RLModule]]:
        """(module id, module) pairs."""
        return list(self._rl_modules.items())

    def values(self) -> list[RLModule]:
        """The modules."""
        return list(self._rl_modules.values())

    def get(self, module_id: str, default: Any = None) -> Any:
        """The module `module_id`, or `default`."""
        return self._rl_modules[module_id] if module_id in self._rl_modules else default

    def forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # noqa: D102
        return self.forward_train(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """forward_train of each module on its own batch ({module_id: batch} -> {module_id: out});
        through `_forward_train`, which subclasses override as in RLlib."""
        return self._forward_train(batch, **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """forward_exploration of each module on its own batch (through `_forward_exploration`)."""
        return self._forward_exploration(batch, **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """forward_inference of each module on its own batch (through `_forward_inference`)."""
        return self._forward_inference(batch, **kwargs)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """RLlib's generic hook: each module's `_forward` on its own batch (modules not held are
        skipped). The `forward_*` methods go through `_forward_train`/`_forward_exploration`/
        `_forward_inference`, which subclasses override (RLlib's semantics)."""
        return {mid: self[mid]._forward(b, **kwargs) for mid, b in batch.items() if mid in self}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {mid: self[mid].forward_train(b, **kwargs) for mid, b in batch.items()}

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {mid: self[mid].forward_exploration(b, **kwargs) for mid, b in batch.items()}

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {mid: self[mid].forward_inference(b, **kwargs) for mid, b in batch.items()}

    @classmethod
    def runs_modules_jointly(cls) -> bool:
        """Whether this class computes its modules' outputs together (it overrides a forward pass,
        e.g. a shared encoder feeding every policy): then EnvRunners act, and Learners train,
        through this MultiRLModule's forward with {module_id: batch}, and one Learner trains
        all of its modules. rlx's own MultiRLModule runs each module alone (False)."""
        joint = cls.__dict__.get("_runs_jointly")  # (asked at every env step: decided once per class)
        if joint is None:
            joint = any(getattr(cls, name) is not getattr(MultiRLModule, name) for name in _FORWARD_METHODS)
            cls._runs_jointly = joint
        return bool(joint)

    def get_state(self, module_ids: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{module_id: weights as NumPy arrays} of all modules (or of `module_ids`)."""
        ids = self.keys() if module_ids is None else list(module_ids)
        return {mid: self[mid].get_state() for mid in ids}

    def set_state(self, state: dict[str, dict[str, Any]]) -> None:
        """Load {module_id: weights}; modules not in `state` keep theirs."""
        for mid, weights in state.items():
            self[mid].set_state(weights)

    def __repr__(self) -> str:
        inner = ", ".join(f"{mid}: {type(m).__name__}" for mid, m in self._rl_modules.items())
        return f"MultiRLModule({{{inner}}})"


@dataclasses.dataclass
class MultiRLModuleSpec:
    """Recipe for a MultiRLModule: one RLModuleSpec per module id (RLlib's MultiRLModuleSpec)."""

    multi_rl_module_class: type = MultiRLModule
    rl_module_specs: dict[str, RLModuleSpec] | RLModuleSpec | None = None
    # RLlib's older name of rl_module_specs.
    module_specs: dict[str, RLModuleSpec] | RLModuleSpec | None = None
    #: The spec of module ids not in rl_module_specs (rlx fills it with the algorithm's default).
    default_spec: RLModuleSpec | None = None

    def __post_init__(self) -> None:
        if self.rl_module_specs is None:
            self.rl_module_specs = self.module_specs
        self.module_specs = self.rl_module_specs

    def spec_for(self, module_id: str) -> RLModuleSpec | None:
        """The spec of `module_id`: its own, or the one spec shared by every module."""
        specs = self.rl_module_specs
        if isinstance(specs, RLModuleSpec):
            return specs
        return (specs or {}).get(module_id, self.default_spec)

    def build(self) -> MultiRLModule:
        """Build every module (their specs need spaces)."""
        specs = self.rl_module_specs
        if not isinstance(specs, dict):
            raise ValueError("MultiRLModuleSpec.build() needs a dict of RLModuleSpecs keyed by module id.")
        return self.multi_rl_module_class({mid: spec.build() for mid, spec in specs.items()})


# RLlib's older names.
MultiAgentRLModule = MultiRLModule
MultiAgentRLModuleSpec = MultiRLModuleSpec

"""The `Exploration` base class and the helpers its built-in subclasses share.

An Exploration object turns a module's action distribution into the action that is sent
to the env (and its log-likelihood), possibly exploratory, as a function of the global
sampling timestep.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import Distribution
from rlx.core.numpy_distributions import numpy_deterministic_fn, numpy_sampler
from rlx.utils.errors import ConfigError
from rlx.utils.schedules import PiecewiseSchedule

#: (distribution inputs, global timestep) -> (actions, logp), or None for a step to take through torch.
NumpyActionFn = Callable[[np.ndarray, int], Optional[Tuple[np.ndarray, np.ndarray]]]

#: Keyword arguments that rlx passes to every Exploration itself; they do not belong in
#: `exploration_config`.
RESERVED_KWARGS = ("action_space", "framework", "policy_config", "model", "num_workers", "worker_index", "seed")


class Exploration:
    """Base class of all exploration strategies; also usable directly.

    Without exploration (`explore=False`) it returns the distribution's deterministic
    sample (argmax / mean); with exploration it samples from the distribution.

    Args:
        action_space: the space the module acts in (with normalize_actions on, a finite
            Box arrives as Box(-1, 1) of the same shape).
        framework: must be "torch".
        policy_config: the algorithm config (as a dict or config object), for reference.
        model: the RLModule, for reference.
        num_workers: number of remote env runners.
        worker_index: 0 for the local env runner, 1..num_workers for remote ones.
        seed: seeds the NumPy and torch generators; None draws fresh entropy.
    """

    #: Constructor kwargs of a parent class that a subclass fixes itself, so that
    #: exploration_config must not set them (validation rejects them).
    fixed_kwargs: tuple[str, ...] = ()

    def __init__(
        self,
        action_space: gym.Space,
        *,
        framework: str = "torch",
        policy_config: Any = None,
        model: Any = None,
        num_workers: int = 0,
        worker_index: int = 0,
        seed: int | None = None,
    ):
        if framework not in ("torch", None):
            raise ConfigError(f"Exploration framework must be 'torch' (rlx is PyTorch-only), got {framework!r}.")
        if action_space is None:
            raise ConfigError(f"{type(self).__name__} needs an action_space, got None.")
        self.action_space = action_space
        self.framework = "torch"
        self.policy_config = policy_config if policy_config is not None else {}
        self.model = model
        self.num_workers = int(num_workers)
        self.worker_index = int(worker_index)
        self.seed = seed
        np_seq, torch_seq = np.random.SeedSequence(seed).spawn(2)
        self.np_random = np.random.Generator(np.random.PCG64(np_seq))
        self._torch_seed = int(torch_seq.generate_state(1, np.uint64)[0] >> np.uint64(1))
        self.torch_generator = torch.Generator().manual_seed(self._torch_seed)
        self._device_generators: dict[torch.device, torch.Generator] = {}
        self.last_timestep = 0
        self._space_kind = _space_kind(action_space)
        if self._space_kind == "box":
            self._low = np.asarray(action_space.low, dtype=np.float64)
            self._high = np.asarray(action_space.high, dtype=np.float64)
            self._finite = np.isfinite(self._low) & np.isfinite(self._high)
            self._all_finite = bool(self._finite.all())

    # ----------------------------------------------------------------- acting

    def get_exploration_action(
        self,
        *,
        action_distribution: Distribution,
        timestep: int | torch.Tensor | None,
        explore: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return `(action, logp)`: a sample when `explore`, else the deterministic action.

        `timestep` is the global number of env steps sampled so far; `logp` is the
        log-likelihood of a sampled action and zeros for a deterministic one.
        """
        self._see_timestep(timestep)
        if explore:
            action = action_distribution.sample(self._generator_like(action_distribution.inputs))
            return action, _as_logp(action_distribution.logp(action))
        action = action_distribution.deterministic_sample()
        return action, self.zero_logp(action)

    def numpy_action_fn(self, dist_cls: Any, explore: bool) -> NumpyActionFn | None:
        """`get_exploration_action` as a NumPy function `(inputs, timestep) -> (action, logp)` for
        the distribution class `dist_cls` over NumPy distribution inputs, or None where this
        exploration (or the distribution) has no NumPy form. The function may return None for a
        step it cannot take; the caller then acts through torch. The EnvRunner acts through it."""
        if type(self).get_exploration_action is not Exploration.get_exploration_action:
            return None
        return numpy_sample_or_mode(self, dist_cls, explore)

    def before_compute_actions(self, *, timestep: int | torch.Tensor | None = None,
                               explore: bool | None = None, **kwargs: Any) -> None:
        """Hook called before each action computation; records the timestep."""
        self._see_timestep(timestep)

    def on_episode_start(self, *args: Any, **kwargs: Any) -> None:
        """Hook called when an episode starts (nothing to do by default)."""

    def on_episode_end(self, *args: Any, **kwargs: Any) -> None:
        """Hook called when an episode ends (nothing to do by default)."""

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict:
        """JSON-safe state beyond the timestep-driven schedules (which the timestep restores).

        The RNG states are left out on purpose: restoring one state into every env
        runner would make their exploration identical.
        """
        return {"last_timestep": int(self.last_timestep)}

    def set_state(self, state: dict) -> None:
        """Restore what `get_state` returned (unknown keys are ignored)."""
        self.last_timestep = int(state.get("last_timestep", self.last_timestep))

    def get_info(self) -> dict:
        """Current values worth reporting, e.g. {"cur_epsilon": 0.3}."""
        return {}

    # ---------------------------------------------------------------- helpers

    def generator_for(self, device: torch.device | str) -> torch.Generator:
        """The torch generator for `device` (the CPU one, or a lazily seeded device one)."""
        device = torch.device(device)
        if device.type == "cpu":
            return self.torch_generator
        gen = self._device_generators.get(device)
        if gen is None:
            gen = torch.Generator(device=device).manual_seed(self._torch_seed)
            self._device_generators[device] = gen
        return gen

    def _generator_like(self, tensor: torch.Tensor) -> torch.Generator:
        return self.torch_generator if tensor.is_cpu else self.generator_for(tensor.device)

    def random_actions(self, batch_size: int, device: torch.device | str | None = None) -> torch.Tensor:
        """`batch_size` actions drawn uniformly from `action_space` with the NumPy generator.

        Discrete -> int64 [B] in [0, n); MultiDiscrete -> int64 [B, k]; Box -> float32
        [B, *shape]: uniform where both bounds are finite, else standard normal clipped
        into the bounds.
        """
        kind = self._space_kind
        rng = self.np_random
        if kind == "discrete":
            out = rng.integers(0, int(self.action_space.n), size=batch_size, dtype=np.int64)
        elif kind == "multi_discrete":
            nvec = np.asarray(self.action_space.nvec, dtype=np.int64).reshape(-1)
            out = rng.integers(0, nvec, size=(batch_size, nvec.size), dtype=np.int64)
        elif kind == "box":
            shape = (batch_size,) + tuple(self.action_space.shape)
            if self._all_finite:
                out = rng.uniform(self._low, self._high, size=shape)
            else:
                normal = np.clip(rng.standard_normal(shape), self._low, self._high)
                if self._finite.any():
                    low = np.where(self._finite, self._low, 0.0)
                    high = np.where(self._finite, self._high, 0.0)
                    normal = np.where(self._finite, rng.uniform(low, high, size=shape), normal)
                out = normal
            out = out.astype(np.float32)
        else:
            raise ConfigError(
                f"{type(self).__name__} cannot draw random actions from {self.action_space}: "
                "only Discrete, MultiDiscrete and Box action spaces are supported."
            )
        tensor = torch.from_numpy(out)
        return tensor if device is None else tensor.to(device)

    @staticmethod
    def zero_logp(action: torch.Tensor) -> torch.Tensor:
        """float32 zeros, one per batch row of `action`."""
        if action.is_cpu:
            return torch.zeros(action.shape[0], dtype=torch.float32)
        return torch.zeros(action.shape[0], dtype=torch.float32, device=action.device)

    def _see_timestep(self, timestep: int | torch.Tensor | None) -> int:
        if timestep is not None:
            self.last_timestep = int(timestep)
        return self.last_timestep

    def _require_random_actions(self, why: str = "") -> None:
        if self._space_kind is None:
            what = f"{type(self).__name__} {why}" if why else type(self).__name__
            raise ConfigError(
                f"{what} needs random actions, which exist for Discrete, MultiDiscrete "
                f"and Box action spaces only; got {self.action_space}."
            )


def _space_kind(space: gym.Space) -> str | None:
    if isinstance(space, gym.spaces.Discrete):
        return "discrete"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return "multi_discrete"
    if isinstance(space, gym.spaces.Box):
        return "box"
    return None


def numpy_sample_or_mode(exploration: Exploration, dist_cls: Any, explore: bool) -> NumpyActionFn | None:
    """The NumPy action function of sampling `dist_cls` with the exploration's generator when
    `explore`, else taking its deterministic action (logp zeros); None without a NumPy form."""
    if explore:
        sample = numpy_sampler(dist_cls)
        if sample is None:
            return None
        rng = exploration.np_random

        def sampled(inputs: np.ndarray, timestep: int) -> tuple[np.ndarray, np.ndarray]:
            exploration.last_timestep = int(timestep)
            return sample(inputs, rng)

        return sampled
    mode = numpy_deterministic_fn(dist_cls)
    if mode is None:
        return None

    def deterministic(inputs: np.ndarray, timestep: int) -> tuple[np.ndarray, np.ndarray]:
        exploration.last_timestep = int(timestep)
        return mode(inputs), np.zeros(inputs.shape[0], np.float32)

    return deterministic


def _as_logp(logp: torch.Tensor) -> torch.Tensor:
    return logp if logp.dtype == torch.float32 else logp.to(torch.float32)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A NumPy view (CPU) or copy (other devices) of a tensor, detached from autograd."""
    if tensor.is_cpu and not tensor.requires_grad:
        return tensor.numpy()
    return tensor.detach().cpu().numpy()


def per_worker_value(num_workers: int, worker_index: int) -> float:
    """Ape-X per-worker constant: 0.4 ** (1 + (i - 1) / (N - 1) * 7) for i >= 1, 0.0 for i == 0."""
    if worker_index <= 0:
        return 0.0
    if num_workers <= 1:
        return 0.4
    return 0.4 ** (1 + (worker_index - 1) / (num_workers - 1) * 7)


def linear_schedule(initial: float, final: float, *, start: int, duration: int) -> PiecewiseSchedule:
    """Constant `initial` until `start`, linear to `final` over `duration` steps, then constant."""
    if duration <= 0:
        if start <= 0:
            return PiecewiseSchedule(float(final))
        # Integer timesteps: `initial` up to start - 1, `final` from `start` on.
        return PiecewiseSchedule([[0, initial], [start - 1, initial], [start, final]])
    points = [[start, initial], [start + duration, final]]
    if start > 0:
        points.insert(0, [0, initial])
    return PiecewiseSchedule(points)


def make_schedule(schedule: Any) -> PiecewiseSchedule:
    """A PiecewiseSchedule from a [[timestep, value], ...] list, a number, or a schedule."""
    if isinstance(schedule, PiecewiseSchedule):
        return schedule
    return PiecewiseSchedule(schedule)


# --------------------------------------------------------------------- option checks

_UNIT_INTERVAL = ("initial_epsilon", "final_epsilon", "epsilon")
_NON_NEGATIVE = ("stddev", "initial_scale", "final_scale", "ou_theta", "ou_sigma", "ou_base_scale")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                  low_open: bool = False, integer: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    if not _is_number(value) or not math.isfinite(float(value)):
        raise ConfigError(f"exploration_config['{name}'] must be {kind}, got {value!r}.")
    if integer and float(value) != int(value):
        raise ConfigError(f"exploration_config['{name}'] must be an integer number of timesteps, got {value!r}.")
    v = float(value)
    if low is not None and (v <= low if low_open else v < low):
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        rng = bound if high is None else f"in [{low:g}, {high:g}]"
        raise ConfigError(f"exploration_config['{name}'] must be {rng}, got {value!r}.")
    if high is not None and v > high:
        raise ConfigError(f"exploration_config['{name}'] must be in [{low:g}, {high:g}], got {value!r}.")


def _check_schedule(name: str, value: Any, *, low: float, high: float | None) -> None:
    if value is None or isinstance(value, PiecewiseSchedule):
        return
    if _is_number(value):
        _check_number(name, value, low=low, high=high)
        return
    shape_msg = (f"exploration_config['{name}'] must be a list of [timestep, value] pairs with increasing "
                 f"timesteps (or a single number), got {value!r}.")
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(shape_msg)
    prev = -math.inf
    for point in value:
        if not isinstance(point, (list, tuple)) or len(point) != 2 or not all(_is_number(p) for p in point):
            raise ConfigError(shape_msg)
        t, v = float(point[0]), float(point[1])
        if t < 0 or t < prev:
            raise ConfigError(shape_msg)
        prev = t
        if v < low or (high is not None and v > high):
            rng = f">= {low:g}" if high is None else f"in [{low:g}, {high:g}]"
            raise ConfigError(f"exploration_config['{name}'] values must be {rng}, got {v!r} in {value!r}.")


def check_option(name: str, value: Any) -> None:
    """Raise ConfigError (naming `name`) when a well-known exploration option is out of range.

    Options are recognized by name: epsilons in [0, 1], `*_timesteps` non-negative
    integers, noise scales and stddevs >= 0, temperature > 0, `*_schedule` lists of
    [timestep, value] pairs. Other names are not checked.
    """
    if name in _UNIT_INTERVAL:
        _check_number(name, value, low=0.0, high=1.0)
    elif name.endswith("_timesteps"):
        _check_number(name, value, low=0.0, integer=True)
    elif name in _NON_NEGATIVE:
        _check_number(name, value, low=0.0)
    elif name == "temperature":
        _check_number(name, value, low=0.0, low_open=True)
    elif name == "epsilon_schedule":
        _check_schedule(name, value, low=0.0, high=1.0)
    elif name == "scale_schedule":
        _check_schedule(name, value, low=0.0, high=None)


def check_options(**options: Any) -> None:
    """`check_option` for each keyword argument."""
    for name, value in options.items():
        check_option(name, value)


__all__ = ["Exploration", "RESERVED_KWARGS", "check_option", "check_options", "linear_schedule",
           "make_schedule", "per_worker_value", "to_numpy"]

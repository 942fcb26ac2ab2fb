"""Sampling rlx's common action distributions in NumPy, for acting in the EnvRunner.

The same math as the torch classes in rlx.core.distributions (Categorical, DiagGaussian,
SquashedGaussian, Deterministic), on one NumPy batch of distribution inputs: a handful of
vectorized NumPy calls instead of a dozen torch ops, which for one to a few observation rows
cost more in dispatch than in arithmetic. Other distributions (and subclasses of these) have no
NumPy form here; their callers act through torch.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from rlx.core.distributions import Categorical, Deterministic, DiagGaussian, SquashedGaussian

_HALF_LOG_2PI = np.float32(0.5 * math.log(2.0 * math.pi))
_SUPPORTED = (Categorical, DiagGaussian, SquashedGaussian, Deterministic)


def _class_and_kwargs(dist: Any) -> tuple[type | None, dict[str, Any]]:
    """(distribution class, constructor kwargs) of a BoundDistribution or a class; (None, {})
    when it has no NumPy form."""
    cls, kwargs = getattr(dist, "cls", dist), dict(getattr(dist, "kwargs", {}) or {})
    if cls not in _SUPPORTED:
        return None, {}
    allowed = {Categorical: {"temperature"}, DiagGaussian: {"log_std_clip"}, SquashedGaussian: {"log_std_clip"},
               Deterministic: set()}[cls]
    if set(kwargs) - allowed:
        return None, {}
    return cls, kwargs


def _gaussian_parts(inputs: np.ndarray, log_std_clip: float) -> tuple[np.ndarray, np.ndarray]:
    mean, log_std = np.split(inputs, 2, axis=-1)
    return mean, np.clip(log_std, -log_std_clip, log_std_clip)


def _gaussian_logp(z: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    return (-0.5 * z * z - log_std - _HALF_LOG_2PI).sum(-1)


Sampler = Callable[[np.ndarray, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def numpy_sampler(dist: Any) -> Sampler | None:
    """A function `(inputs, rng) -> (actions, logp)` drawing one sample of `dist` (a
    BoundDistribution or distribution class) per row of float32 `inputs` [B, k] with the NumPy
    generator `rng`, and its log-probability (float32 [B]); None without a NumPy form."""
    cls, kwargs = _class_and_kwargs(dist)
    if cls is Categorical:
        temperature = float(kwargs.get("temperature", 1.0))
        inv_temperature = np.float32(1.0 / temperature)

        def categorical(inputs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
            logits = inputs * inv_temperature if temperature != 1.0 else inputs
            # Gumbel-max, as Categorical.sample: argmax(logits - log(E)) with E ~ Exp(1).
            noise = rng.standard_exponential(logits.shape, dtype=np.float32)
            actions = (logits - np.log(noise)).argmax(-1)
            shifted = logits - logits.max(-1, keepdims=True)
            logp = shifted[np.arange(len(actions)), actions] - np.log(np.exp(shifted).sum(-1))
            return actions, logp.astype(np.float32, copy=False)

        return categorical
    if cls is Deterministic:
        return lambda inputs, rng: (inputs, np.zeros(inputs.shape[0], np.float32))
    if cls is None:
        return None
    log_std_clip = float(kwargs.get("log_std_clip", 20.0))
    squashed = cls is SquashedGaussian
    eps = np.float32(SquashedGaussian._EPS)

    def gaussian(inputs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        mean, log_std = _gaussian_parts(inputs, log_std_clip)
        noise = rng.standard_normal(mean.shape, dtype=np.float32)
        std = np.exp(log_std)
        pre = mean + std * noise
        if not squashed:
            return pre, _gaussian_logp(noise, log_std).astype(np.float32, copy=False)
        # tanh of the Gaussian sample; its logp as SquashedGaussian.logp computes it.
        actions = np.tanh(pre)
        clamped = np.clip(actions, -1 + eps, 1 - eps)
        logp = _gaussian_logp((np.arctanh(clamped) - mean) / std, log_std) - np.log1p(-clamped * clamped + eps).sum(-1)
        return actions, logp.astype(np.float32, copy=False)

    return gaussian


def numpy_deterministic_fn(dist: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function `inputs -> actions`: the deterministic action of `dist` per row (argmax, mean,
    tanh(mean), the inputs themselves); None without a NumPy form."""
    cls, _ = _class_and_kwargs(dist)
    if cls is Categorical:
        return lambda inputs: inputs.argmax(-1)
    if cls is Deterministic:
        return lambda inputs: inputs
    if cls is DiagGaussian:
        return lambda inputs: np.split(inputs, 2, axis=-1)[0]
    if cls is SquashedGaussian:
        return lambda inputs: np.tanh(np.split(inputs, 2, axis=-1)[0])
    return None

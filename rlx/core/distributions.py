"""Action distributions parameterized by a module's `action_dist_inputs`.

Light-weight replacements for torch.distributions (no argument validation, no per-call
object churn beyond one instance), with the old-API methods the seeds use: `sample`,
`logp`, `entropy`, `kl`, `deterministic_sample`, `sampled_action_logp`.
"""
from __future__ import annotations

import math
from typing import Any, TypeGuard

import gymnasium as gym
import numpy as np
import torch

from rlx.utils import registry
from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean

_LOG_2PI = math.log(2.0 * math.pi)


def _as_tensor(x: Any, like: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(like.device) if dtype is None else x.to(device=like.device, dtype=dtype)
    return torch.as_tensor(np.asarray(x), device=like.device, dtype=dtype)


class Distribution:
    """Base class: built from the flat `inputs` a module outputs for the action space.

    `model` is accepted (and ignored) for compatibility with the old API's
    `policy.dist_class(logits, policy.model)`.
    """

    def __init__(self, inputs: Any, model: Any = None):
        if not isinstance(inputs, torch.Tensor):
            inputs = torch.as_tensor(np.asarray(inputs), dtype=torch.float32)
        self.inputs = inputs
        self._last_sample: torch.Tensor | None = None

    @classmethod
    def from_logits(cls, logits: torch.Tensor, **kwargs: Any) -> "Distribution":
        """Build the distribution from a module output tensor."""
        return cls(logits, **kwargs)

    @staticmethod
    def required_input_dim(space: gym.Space, model_config: dict | None = None) -> int:
        """Size of the flat input vector this distribution needs for `space`."""
        raise TypeError("Distribution subclasses define required_input_dim")

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw one action per batch row."""
        raise TypeError("Distribution subclasses define sample")

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action (argmax or mean)."""
        raise TypeError("Distribution subclasses define deterministic_sample")

    def logp(self, actions: Any) -> torch.Tensor:
        """Log-likelihood of `actions`, one value per batch row."""
        raise TypeError("Distribution subclasses define logp")

    def entropy(self) -> torch.Tensor:
        """Entropy per batch row."""
        raise TypeError("Distribution subclasses define entropy")

    def kl(self, other: "Distribution") -> torch.Tensor:
        """KL(self || other) per batch row."""
        raise TypeError("Distribution subclasses define kl")

    def sampled_action_logp(self) -> torch.Tensor:
        """Log-likelihood of the last `sample()`."""
        if self._last_sample is None:
            raise ValueError("sampled_action_logp() needs a sample() call first.")
        return self.logp(self._last_sample)


class Categorical(Distribution):
    """Categorical distribution over `n` actions from unnormalized logits [B, n]."""

    def __init__(self, inputs: Any, model: Any = None, temperature: float = 1.0):
        super().__init__(inputs, model)
        if temperature != 1.0:
            self.inputs = self.inputs / temperature
        self._log_probs: torch.Tensor | None = None

    @property
    def log_probs(self) -> torch.Tensor:
        """Normalized log-probabilities [B, n]."""
        if self._log_probs is None:
            self._log_probs = torch.log_softmax(self.inputs, dim=-1)
        return self._log_probs

    @staticmethod
    def required_input_dim(space: gym.Space, model_config: dict | None = None) -> int:
        if not isinstance(space, gym.spaces.Discrete):
            raise NotSupportedYetError(f"Categorical over {space}", "it reads Discrete action spaces")
        return int(space.n)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        # Gumbel-max: argmax(logits - log(E)), E ~ Exp(1), is a sample from softmax(logits).
        e = torch.empty_like(self.inputs).exponential_(generator=generator)
        self._last_sample = torch.argmax(self.inputs - e.log_(), dim=-1)
        return self._last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self._last_sample = torch.argmax(self.inputs, dim=-1)
        return self._last_sample

    def logp(self, actions: Any) -> torch.Tensor:
        actions = _as_tensor(actions, self.inputs, torch.long)
        return self.log_probs.gather(-1, actions.reshape(-1, 1)).reshape(actions.shape)

    def entropy(self) -> torch.Tensor:
        lp = self.log_probs
        return -(lp.exp() * lp).sum(-1)

    def kl(self, other: "Distribution") -> torch.Tensor:
        lp = self.log_probs
        return (lp.exp() * (lp - other.log_probs)).sum(-1)  # type: ignore[attr-defined]


class MultiCategorical(Distribution):
    """Independent categoricals for a MultiDiscrete space; inputs are concatenated logits."""

    def __init__(self, inputs: Any, model: Any = None, input_lens: list[int] | tuple[int, ...] = ()):
        super().__init__(inputs, model)
        if not input_lens:
            raise ValueError("MultiCategorical needs input_lens (the nvec of the MultiDiscrete space).")
        self.input_lens = list(input_lens)
        self.cats = [Categorical(chunk) for chunk in torch.split(self.inputs, self.input_lens, dim=-1)]

    @staticmethod
    def required_input_dim(space: gym.Space, model_config: dict | None = None) -> int:
        if isinstance(space, gym.spaces.MultiBinary):
            return 2 * int(np.prod(space.shape))
        if not isinstance(space, gym.spaces.MultiDiscrete):
            raise NotSupportedYetError(f"MultiCategorical over {space}",
                                       "it reads MultiDiscrete and MultiBinary spaces")
        return int(np.sum(space.nvec))

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        self._last_sample = torch.stack([c.sample(generator) for c in self.cats], dim=-1)
        return self._last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self._last_sample = torch.stack([c.deterministic_sample() for c in self.cats], dim=-1)
        return self._last_sample

    def logp(self, actions: Any) -> torch.Tensor:
        actions = _as_tensor(actions, self.inputs, torch.long)
        return torch.stack([c.logp(actions[..., i]) for i, c in enumerate(self.cats)], dim=-1).sum(-1)

    def entropy(self) -> torch.Tensor:
        return torch.stack([c.entropy() for c in self.cats], dim=-1).sum(-1)

    def kl(self, other: "Distribution") -> torch.Tensor:
        return torch.stack([c.kl(o) for c, o in zip(self.cats, other.cats)], dim=-1).sum(-1)  # type: ignore[attr-defined]


class DiagGaussian(Distribution):
    """Diagonal Gaussian; inputs are [mean, log_std] concatenated on the last axis."""

    def __init__(self, inputs: Any, model: Any = None, log_std_clip: float = 20.0):
        super().__init__(inputs, model)
        self.mean, log_std = torch.chunk(self.inputs, 2, dim=-1)
        self.log_std = log_std.clamp(-log_std_clip, log_std_clip)
        self.std = self.log_std.exp()

    @staticmethod
    def required_input_dim(space: gym.Space, model_config: dict | None = None) -> int:
        return 2 * _space_size(space)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device)
        self._last_sample = self.mean + self.std * noise
        return self._last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self._last_sample = self.mean
        return self._last_sample

    def logp(self, actions: Any) -> torch.Tensor:
        actions = _as_tensor(actions, self.mean, self.mean.dtype)
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * _LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * (_LOG_2PI + 1.0)).sum(-1)

    def kl(self, other: "Distribution") -> torch.Tensor:
        o_log_std, o_std, o_mean = other.log_std, other.std, other.mean  # type: ignore[attr-defined]
        return (
            o_log_std - self.log_std + (self.std.pow(2) + (self.mean - o_mean).pow(2)) / (2.0 * o_std.pow(2)) - 0.5
        ).sum(-1)


class SquashedGaussian(DiagGaussian):
    """tanh-squashed diagonal Gaussian with values in (-1, 1) (used by SAC)."""

    _EPS = 1e-6

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        self._last_sample = torch.tanh(super().sample(generator))
        return self._last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self._last_sample = torch.tanh(self.mean)
        return self._last_sample

    def logp(self, actions: Any) -> torch.Tensor:
        actions = _as_tensor(actions, self.mean, self.mean.dtype).clamp(-1 + self._EPS, 1 - self._EPS)
        pre = torch.atanh(actions)
        return super().logp(pre) - torch.log1p(-actions.pow(2) + self._EPS).sum(-1)

    def entropy(self) -> torch.Tensor:
        raise ValueError("SquashedGaussian has no closed-form entropy; estimate it with -logp(sample()).")

    def kl(self, other: "Distribution") -> torch.Tensor:
        raise ValueError("SquashedGaussian has no closed-form KL divergence.")


class Deterministic(Distribution):
    """A point mass: inputs are the actions themselves (used by DDPG/TD3's deterministic policy)."""

    @staticmethod
    def required_input_dim(space: gym.Space, model_config: dict | None = None) -> int:
        return _space_size(space)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        self._last_sample = self.inputs
        return self._last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self._last_sample = self.inputs
        return self._last_sample

    def logp(self, actions: Any) -> torch.Tensor:
        return torch.zeros(self.inputs.shape[:-1], dtype=self.inputs.dtype, device=self.inputs.device)

    def entropy(self) -> torch.Tensor:
        return torch.zeros(self.inputs.shape[:-1], dtype=self.inputs.dtype, device=self.inputs.device)

    def kl(self, other: "Distribution") -> torch.Tensor:
        return torch.zeros(self.inputs.shape[:-1], dtype=self.inputs.dtype, device=self.inputs.device)


def action_space_leaves(space: gym.Space) -> list[gym.Space]:
    """The leaf spaces of a (possibly nested) Tuple/Dict action space, in the order of their
    components in the flat action vector (Tuple order; Dict order as gymnasium keeps it)."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in action_space_leaves(sub)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in action_space_leaves(sub)]
    return [space]


def is_structured_action_space(space: gym.Space | None) -> TypeGuard[gym.spaces.Tuple | gym.spaces.Dict]:
    """Whether `space` is a Tuple or Dict action space (served by MultiDistribution)."""
    return isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict))


def _space_size(space: gym.Space) -> int:
    """Components of one sample of `space` (a Box): the product of its shape."""
    if space.shape is None:
        raise NotSupportedYetError(f"action space {space}", "this distribution reads spaces with a shape (Box)")
    return int(np.prod(space.shape))


def flat_action_size(space: gym.Space) -> int:
    """Number of components one action of a leaf space takes in a flat action vector:
    1 for Discrete, len(nvec) for MultiDiscrete, prod(shape) for Box."""
    if isinstance(space, gym.spaces.Discrete):
        return 1
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.asarray(space.nvec).size)
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise NotSupportedYetError(
        f"action space part {space}", "Tuple/Dict action spaces may hold Discrete, MultiDiscrete and Box parts"
    )


def flat_action_dim(space: gym.Space) -> int:
    """Width of the flat action vector rlx stores for a Tuple/Dict action space (the parts'
    components concatenated, in the order of `flatten_space`)."""
    return sum(flat_action_size(leaf) for leaf in action_space_leaves(space))


def unflatten_action_parts(space: gym.Space, parts: list[Any]) -> Any:
    """The tuple/dict structure of `space` holding `parts` (one item per leaf, in leaf order)."""
    it = iter(parts)

    def build(sub: gym.Space) -> Any:
        if isinstance(sub, gym.spaces.Dict):
            return {k: build(s) for k, s in sub.spaces.items()}
        if isinstance(sub, gym.spaces.Tuple):
            return tuple(build(s) for s in sub.spaces)
        return next(it)

    return build(space)


def flatten_action_parts(space: gym.Space, action: Any) -> list[Any]:
    """The leaves of a structured action (tuple/list/dict nested like `space`), in leaf order."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for k, s in space.spaces.items() for leaf in flatten_action_parts(s, action[k])]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for s, a in zip(space.spaces, action) for leaf in flatten_action_parts(s, a)]
    return [action]


class MultiDistribution(Distribution):
    """Independent distributions, one per part of a Tuple/Dict action space (RLlib's
    TorchMultiDistribution; old API TorchMultiActionDistribution).

    The module outputs one flat vector: the parts' inputs concatenated (`input_lens`). Actions
    travel as one flat float32 vector per row, the parts' components concatenated in leaf order
    (Discrete: 1 component, MultiDiscrete: len(nvec), Box: prod(shape)); this is what `sample()`
    and `deterministic_sample()` return and what the EnvRunner stores in the batch, and
    `unflatten_actions()` turns it into the tuple/dict of per-part actions (the env runner's
    ActionAdapter gives the env that structure). `logp()` accepts the flat vector or the
    structure; logp, entropy and kl are the sums over the parts.
    """

    def __init__(self, inputs: Any, model: Any = None, child_distributions: list[Any] | tuple = (),
                 input_lens: list[int] | tuple[int, ...] = (), action_lens: list[int] | tuple[int, ...] = (),
                 space: gym.Space | None = None):
        super().__init__(inputs, model)
        if not child_distributions or len(child_distributions) != len(input_lens):
            raise ValueError("MultiDistribution needs one child distribution per entry of input_lens.")
        self.input_lens = [int(n) for n in input_lens]
        self.action_lens = [int(n) for n in action_lens] if action_lens else [1] * len(self.input_lens)
        self.space = space
        chunks = torch.split(self.inputs, self.input_lens, dim=-1)
        self.children = [child(chunk) for child, chunk in zip(child_distributions, chunks)]
        # Categorical parts act with one integer per row ([B]); the others with vectors [B, k].
        self._scalar = [isinstance(c, Categorical) for c in self.children]

    @staticmethod
    def required_input_dim(space: gym.Space, model_config: dict | None = None) -> int:
        total = 0
        for leaf in action_space_leaves(space):
            cls, _ = _leaf_dist_class(leaf, model_config or {})
            total += int(cls.required_input_dim(leaf, model_config))
        return total

    def _flat(self, parts: list[torch.Tensor]) -> torch.Tensor:
        rows = self.inputs.shape[:-1]
        return torch.cat([p.reshape(rows + (-1,)).to(torch.float32) for p in parts], dim=-1)

    def _parts(self, actions: Any) -> list[torch.Tensor]:
        """Per-part action tensors from a flat [.., D] vector or a tuple/dict structure."""
        if isinstance(actions, (tuple, list, dict)) and self.space is not None:
            rows = self.inputs.shape[:-1]
            leaves = [_as_tensor(a, self.inputs) for a in flatten_action_parts(self.space, actions)]
            return [a.reshape(rows) if scalar else a.reshape(rows + (-1,)) for a, scalar in zip(leaves, self._scalar)]
        flat = _as_tensor(actions, self.inputs)
        out = []
        for chunk, scalar in zip(torch.split(flat, self.action_lens, dim=-1), self._scalar):
            out.append(chunk[..., 0] if scalar else chunk)
        return out

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        self._last_sample = self._flat([c.sample(generator) for c in self.children])
        return self._last_sample

    def deterministic_sample(self) -> torch.Tensor:
        self._last_sample = self._flat([c.deterministic_sample() for c in self.children])
        return self._last_sample

    def unflatten_actions(self, actions: torch.Tensor) -> Any:
        """The tuple/dict of per-part actions (Discrete and MultiDiscrete parts as int64) of flat
        actions [B, D] (for example the result of `sample()`)."""
        parts = []
        for part, child in zip(self._parts(actions), self.children):
            parts.append(part.round().long() if isinstance(child, (Categorical, MultiCategorical)) else part)
        if self.space is None:
            return tuple(parts)
        return unflatten_action_parts(self.space, parts)

    def logp(self, actions: Any) -> torch.Tensor:
        parts = self._parts(actions)
        return torch.stack([c.logp(a) for c, a in zip(self.children, parts)], dim=-1).sum(-1)

    def entropy(self) -> torch.Tensor:
        return torch.stack([c.entropy() for c in self.children], dim=-1).sum(-1)

    def kl(self, other: "Distribution") -> torch.Tensor:
        return torch.stack([c.kl(o) for c, o in zip(self.children, other.children)],  # type: ignore[attr-defined]
                           dim=-1).sum(-1)


#: RLlib's names for the multi-action distribution (new and old API).
TorchMultiDistribution = MultiDistribution
TorchMultiActionDistribution = MultiDistribution


def _leaf_dist_class(space: gym.Space, model_config: dict) -> tuple[type[Distribution], dict]:
    """The distribution of one part of a Tuple/Dict action space (Box parts of any shape are
    flattened into one diagonal Gaussian)."""
    if isinstance(space, gym.spaces.Box):
        return DiagGaussian, {"log_std_clip": float(model_config.get("log_std_clip_param", 20.0))}
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return dist_class_for_space(space, model_config)
    flat_action_size(space)  # raises NotSupportedYetError naming the part
    raise AssertionError("unreachable")


def dist_class_for_space(space: gym.Space | None, model_config: dict | None = None
                         ) -> tuple[type[Distribution], dict]:
    """The default distribution class (and its extra constructor kwargs) for an action space
    (NotSupportedYetError for spaces without one, None included)."""
    model_config = model_config or {}
    if model_config.get("custom_action_dist"):
        return custom_action_dist_class(model_config["custom_action_dist"]), {}
    if is_structured_action_space(space):
        leaves = action_space_leaves(space)
        children, input_lens, action_lens = [], [], []
        for leaf in leaves:
            cls, kwargs = _leaf_dist_class(leaf, model_config)
            children.append(BoundDistribution(cls, **kwargs))
            input_lens.append(int(cls.required_input_dim(leaf, model_config)))
            action_lens.append(flat_action_size(leaf))
        if not leaves:
            raise NotSupportedYetError(f"action space {space}", "Tuple/Dict action spaces need at least one part")
        return MultiDistribution, {"child_distributions": children, "input_lens": input_lens,
                                   "action_lens": action_lens, "space": space}
    if isinstance(space, gym.spaces.Discrete):
        return Categorical, {}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiCategorical, {"input_lens": [int(n) for n in np.asarray(space.nvec).reshape(-1)]}
    if isinstance(space, gym.spaces.MultiBinary):
        # One two-way categorical per bit (RLlib's MultiCategorical over [2, 2, ...]).
        return MultiCategorical, {"input_lens": [2] * int(np.prod(space.shape))}
    if isinstance(space, gym.spaces.Box):
        # Box actions of any shape: one diagonal Gaussian over the flattened components.
        return DiagGaussian, {"log_std_clip": float(model_config.get("log_std_clip_param", 20.0))}
    raise NotSupportedYetError(
        f"action space {space}",
        "default distributions exist for Discrete, MultiDiscrete, MultiBinary, Box and Tuple/Dict spaces of those"
    )


class BoundDistribution:
    """A distribution class with fixed extra constructor kwargs, callable like the class."""

    def __init__(self, cls: type[Distribution], **kwargs: Any):
        self.cls = cls
        self.kwargs = kwargs
        self.__name__ = cls.__name__

    def __call__(self, inputs: Any, model: Any = None) -> Distribution:
        return self.cls(inputs, model, **self.kwargs)

    def from_logits(self, logits: torch.Tensor) -> Distribution:
        """Build the distribution from a module output tensor."""
        return self.cls(logits, None, **self.kwargs)

    def __repr__(self) -> str:
        return f"<class_object 'rlx.core.distributions.{self.cls.__name__}'>"


__all__ = [
    "Distribution", "Categorical", "MultiCategorical", "DiagGaussian", "SquashedGaussian", "Deterministic",
    "MultiDistribution", "TorchMultiDistribution", "TorchMultiActionDistribution",
    "dist_class_for_space", "BoundDistribution", "flat_action_dim", "flat_action_size", "is_structured_action_space",
    "action_space_leaves", "flatten_action_parts", "unflatten_action_parts",
]


def check_action_dist_class(cls: Any, name: str) -> None:
    """ConfigError unless `cls` is a Distribution subclass (what a custom action distribution must be)."""
    if not (isinstance(cls, type) and issubclass(cls, Distribution)):
        raise ConfigError(
            f"custom action distribution {name!r} must be a subclass of "
            f"rlx.models.torch.torch_action_dist.TorchDistributionWrapper, got {cls!r}.")


def custom_action_dist_class(custom_action_dist: Any) -> type:
    """The class a `model["custom_action_dist"]` setting names: a class, a name registered with
    `ModelCatalog.register_custom_action_dist`, or an import path."""
    cls = custom_action_dist if isinstance(custom_action_dist, type) else None
    if cls is None and isinstance(custom_action_dist, str):
        cls = registry.find_custom_class("custom_action_dists", custom_action_dist)
        if cls is None and ("." in custom_action_dist or ":" in custom_action_dist):
            try:
                cls = registry.import_object(custom_action_dist)
            except Exception as err:  # noqa: BLE001 - reported below with the name
                raise ConfigError(f"model['custom_action_dist']={custom_action_dist!r} could not be imported: "
                                  f"{err}") from err
    if cls is None:
        known = registry.registered_custom_names("custom_action_dists")
        raise ConfigError(
            f"Unknown custom action distribution {custom_action_dist!r}.{did_you_mean(str(custom_action_dist), known)} "
            "Register it first with ModelCatalog.register_custom_action_dist(name, DistClass)"
            + (f" (registered: {', '.join(known)})." if known else ".")
            + " Register it before the Algorithm is built, so that the processes rlx starts get it too.")
    check_action_dist_class(cls, str(custom_action_dist))
    return cls

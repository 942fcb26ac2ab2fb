"""Observation preprocessors: one-hot encoding, flattening of Dict/Tuple spaces, image resizing
(RLlib's `ray.rllib.models.preprocessors`, which rlx keeps as an alias of this module).

`get_preprocessor(space)` returns the preprocessor class for a space, as in the seeds:

    prep = get_preprocessor(env.observation_space)(env.observation_space)
    model_input = prep.transform(obs)
"""
from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np

__all__ = ["ATARI_OBS_SHAPE", "ATARI_RAM_OBS_SHAPE", "AtariRAMPreprocessor", "DictFlatteningPreprocessor",
           "GenericPixelPreprocessor", "MultiBinaryPreprocessor", "NoPreprocessor", "OneHotPreprocessor",
           "Preprocessor", "TupleFlatteningPreprocessor", "get_preprocessor"]

ATARI_OBS_SHAPE = (210, 160, 3)
ATARI_RAM_OBS_SHAPE = (128,)


def _with_original(space: gym.spaces.Box, original: gym.Space) -> gym.spaces.Box:
    """`space` carrying `original_space` (as RLlib's preprocessed spaces do)."""
    setattr(space, "original_space", original)  # an extra attribute gymnasium's Box does not declare
    return space


def _shape(space: gym.Space, preprocessor: str) -> tuple[int, ...]:
    """The shape of `space`; a TypeError naming `preprocessor` for spaces without one (Dict, Tuple)."""
    if space.shape is None:
        raise TypeError(f"{preprocessor} reads spaces with a shape; {space} has none.")
    return space.shape


class Preprocessor:
    """Turns an observation of `obs_space` into a float32 array of shape `self.shape`."""

    def __init__(self, obs_space: gym.Space, options: dict | None = None):
        self._obs_space = obs_space
        self._options = options or {}
        self.shape = tuple(self._init_shape(obs_space, self._options))
        self._size = int(np.prod(self.shape))

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        return tuple(_shape(obs_space, type(self).__name__))

    def transform(self, observation: Any) -> np.ndarray:
        """Return the preprocessed observation."""
        return np.asarray(observation, dtype=np.float32)

    def write(self, observation: Any, array: np.ndarray, offset: int) -> None:
        """Write the flattened preprocessed observation into `array[offset:offset+size]`."""
        array[offset : offset + self._size] = np.asarray(self.transform(observation), dtype=np.float32).reshape(-1)

    def check_shape(self, observation: Any) -> None:
        """Raise a ValueError naming the mismatch if `observation` is not in the space."""
        if not self._obs_space.contains(observation):
            shape = getattr(observation, "shape", None)
            raise ValueError(
                f"Observation {observation!r} (shape {shape}) is outside the observation space {self._obs_space}."
            )

    @property
    def size(self) -> int:
        """Number of floats in the flattened output."""
        return self._size

    @property
    def observation_space(self) -> gym.spaces.Box:
        """The space of preprocessed observations; its `original_space` is the space given
        to the preprocessor (old-API ModelV2s restore their `input_dict["obs"]` to it)."""
        return _with_original(gym.spaces.Box(-np.inf, np.inf, self.shape, dtype=np.float32), self._obs_space)


class NoPreprocessor(Preprocessor):
    """Identity (Box observations)."""

    @property
    def observation_space(self) -> gym.spaces.Box:
        space = self._obs_space
        if isinstance(space, gym.spaces.Box) and space.dtype == np.float32:
            return space
        if isinstance(space, gym.spaces.Box):
            # Same bounds as float32; `original_space` keeps the dtype (a CNN scales uint8 frames).
            return _with_original(gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32),
                                                 self.shape, dtype=np.float32), space)
        return gym.spaces.Box(-np.inf, np.inf, self.shape, dtype=np.float32)


class OneHotPreprocessor(Preprocessor):
    """One-hot encodes a Discrete observation (concatenated one-hots for MultiDiscrete)."""

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        if isinstance(obs_space, gym.spaces.Discrete):
            return (int(obs_space.n),)
        if not isinstance(obs_space, gym.spaces.MultiDiscrete):
            raise TypeError(f"OneHotPreprocessor reads Discrete and MultiDiscrete spaces, got {obs_space}.")
        return (int(np.sum(obs_space.nvec)),)

    def transform(self, observation: Any) -> np.ndarray:
        out = np.zeros(self.shape, dtype=np.float32)
        space = self._obs_space
        if isinstance(space, gym.spaces.Discrete):
            out[int(observation) - int(space.start)] = 1.0
        else:
            nvec = cast(gym.spaces.MultiDiscrete, space).nvec  # _init_shape accepted Discrete or MultiDiscrete
            offset = 0
            for n, v in zip(np.asarray(nvec).reshape(-1), np.asarray(observation).reshape(-1)):
                out[offset + int(v)] = 1.0
                offset += int(n)
        return out

    @property
    def observation_space(self) -> gym.spaces.Box:
        return _with_original(gym.spaces.Box(0.0, 1.0, self.shape, dtype=np.float32), self._obs_space)


class MultiBinaryPreprocessor(Preprocessor):
    """MultiBinary observations as float32."""

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        return (int(np.prod(_shape(obs_space, type(self).__name__))),)

    def transform(self, observation: Any) -> np.ndarray:
        return np.asarray(observation, dtype=np.float32).reshape(-1)


class GenericPixelPreprocessor(Preprocessor):
    """Downsamples Atari-sized RGB frames to `dim x dim` (optionally grayscale, zero-mean)."""

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        self._dim = int(options.get("dim", 84))
        self._grayscale = bool(options.get("grayscale", False))
        self._zero_mean = bool(options.get("zero_mean", True))
        channels = 1 if self._grayscale else int(_shape(obs_space, type(self).__name__)[-1])
        return (self._dim, self._dim, channels)

    def transform(self, observation: Any) -> np.ndarray:
        frame = np.asarray(observation)
        # Crop the score bar and bottom border as the classic Atari preprocessing does.
        frame = frame[25:-25, :, :]
        rows = np.linspace(0, frame.shape[0] - 1, self._dim).astype(np.int64)
        cols = np.linspace(0, frame.shape[1] - 1, self._dim).astype(np.int64)
        small = frame[rows][:, cols].astype(np.float32)
        if self._grayscale:
            small = small.mean(axis=-1, keepdims=True)
        if self._zero_mean:
            small = (small - 128.0) / 128.0
        else:
            small = small / 255.0
        return small


class AtariRAMPreprocessor(Preprocessor):
    """Scales Atari RAM bytes to [-1, 1)."""

    def transform(self, observation: Any) -> np.ndarray:
        return (np.asarray(observation, dtype=np.float32) - 128.0) / 128.0


class _ConcatenatingPreprocessor(Preprocessor):
    """Preprocesses each component of a composite space and concatenates them into one vector."""

    #: The components' preprocessors, in component order (built by `_init_shape`).
    preprocessors: list[Preprocessor]

    def _components(self, observation: Any) -> list[Any]:
        raise TypeError("subclasses list the observation's components in space order")

    def transform(self, observation: Any) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        self.write(observation, out, 0)
        return out

    def write(self, observation: Any, array: np.ndarray, offset: int) -> None:
        for p, o in zip(self.preprocessors, self._components(observation)):
            p.write(o, array, offset)
            offset += p.size


class TupleFlatteningPreprocessor(_ConcatenatingPreprocessor):
    """Flattens a Tuple space, component by component."""

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        if not isinstance(obs_space, gym.spaces.Tuple):
            raise TypeError(f"TupleFlatteningPreprocessor reads Tuple spaces, got {obs_space}.")
        self.preprocessors = [get_preprocessor(s)(s, options) for s in obs_space.spaces]
        return (sum(p.size for p in self.preprocessors),)

    def _components(self, observation: Any) -> list[Any]:
        return list(observation)


class DictFlatteningPreprocessor(_ConcatenatingPreprocessor):
    """Flattens a Dict space, value by value in the space's key order."""

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        if not isinstance(obs_space, gym.spaces.Dict):
            raise TypeError(f"DictFlatteningPreprocessor reads Dict spaces, got {obs_space}.")
        self.keys = list(obs_space.spaces.keys())
        self.preprocessors = [get_preprocessor(obs_space.spaces[k])(obs_space.spaces[k], options) for k in self.keys]
        return (sum(p.size for p in self.preprocessors),)

    def _components(self, observation: Any) -> list[Any]:
        missing = [k for k in self.keys if k not in observation]
        if missing:
            raise ValueError(f"Dict observation is missing key(s) {missing} of its observation space.")
        return [observation[k] for k in self.keys]


def get_preprocessor(space: gym.Space) -> type[Preprocessor]:
    """The preprocessor class for an observation space."""
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return OneHotPreprocessor
    if isinstance(space, gym.spaces.MultiBinary):
        return MultiBinaryPreprocessor
    if isinstance(space, gym.spaces.Tuple):
        return TupleFlatteningPreprocessor
    if isinstance(space, gym.spaces.Dict):
        return DictFlatteningPreprocessor
    if isinstance(space, gym.spaces.Box):
        if tuple(space.shape) == ATARI_OBS_SHAPE:
            return GenericPixelPreprocessor
        if tuple(space.shape) == ATARI_RAM_OBS_SHAPE and space.dtype == np.uint8:
            return AtariRAMPreprocessor
        return NoPreprocessor
    raise ValueError(
        f"No preprocessor for observation space {space!r}: use Box, Discrete, MultiDiscrete, "
        "MultiBinary, Tuple or Dict spaces."
    )

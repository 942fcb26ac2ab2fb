"""CartPoleWithProtobufObservationSpace: CartPole whose observations are serialized protobuf messages."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

#: Bytes per observation: a length byte, then the serialized message (at most 4 x 9 bytes), zero-padded.
OBS_BYTES = 64


def encode(state: np.ndarray) -> np.ndarray:
    """CartPole's state as a uint8 array: [message length, serialized CartPoleObservation, zeros]."""
    from rlx.examples.envs.classes.utils.cartpole_observations_proto import FIELDS, CartPoleObservation

    message = CartPoleObservation(**{name: float(v) for name, v in zip(FIELDS, state)})
    raw = message.SerializeToString()
    out = np.zeros(OBS_BYTES, dtype=np.uint8)
    out[0] = len(raw)
    out[1:1 + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


def decode(observation: np.ndarray) -> np.ndarray:
    """The four state values of an encode()d observation, as float32."""
    from rlx.examples.envs.classes.utils.cartpole_observations_proto import FIELDS, CartPoleObservation

    observation = np.asarray(observation, dtype=np.uint8)
    message = CartPoleObservation()
    message.ParseFromString(observation[1:1 + int(observation[0])].tobytes())
    return np.array([getattr(message, name) for name in FIELDS], dtype=np.float32)


class CartPoleWithProtobufObservationSpace(CartPoleEnv):
    """CartPole-v1 whose observations are protobuf bytes in a Box(0, 255, (64,), uint8); decode them
    with rlx.examples.connectors.classes.protobuf_cartpole_observation_decoder before a module
    reads them. Episodes are truncated at 500 steps."""

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.observation_space = gym.spaces.Box(0, 255, (OBS_BYTES,), np.uint8)
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        state, info = super().reset(seed=seed, options=options)
        self._steps = 0
        return encode(state), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        state, reward, terminated, truncated, info = super().step(action)
        self._steps += 1
        return encode(state), reward, terminated, truncated or self._steps >= 500, info

"""Atari (ALE) wrappers: DeepMind's preprocessing, at RLlib's `ray.rllib.env.wrappers.atari_wrappers`.

`wrap_deepmind` is what `preprocessor_pref="deepmind"` applies to Atari envs (no-op resets,
frame skip with max-pooling, one life per episode, fire on reset, 84x84 grayscale frames, the
last 4 frames stacked on the channel axis); reward clipping is applied by the env runner
(`clip_rewards`), as in RLlib. `wrap_atari_for_new_api_stack` is the new API stack's variant
(64x64, frames scaled to [-1, 1]). Frames are resized with Pillow, so OpenCV is not needed.
"""
from __future__ import annotations

from collections import deque
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlx.utils.images import resize, rgb2gray

__all__ = [
    "ClipRewardEnv", "EpisodicLifeEnv", "FireResetEnv", "FrameStack", "MaxAndSkipEnv", "NoopResetEnv",
    "NormalizedImageEnv", "WarpFrame", "get_wrapper_by_cls", "is_atari", "wrap_atari_for_new_api_stack",
    "wrap_deepmind",
]


def is_atari(env: gym.Env | str) -> bool:
    """Whether `env` (an env or a Gymnasium id) is an Atari game with image observations."""
    if isinstance(env, str):
        return env.startswith("ALE/") or env.startswith("ale_py:") or "NoFrameskip" in env
    space = getattr(env, "observation_space", None)
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 3:
        return False
    module = type(getattr(env, "unwrapped", env)).__module__
    return module.startswith(("ale_py", "gymnasium.envs.atari", "gym.envs.atari"))


def _image_space(env: gym.Env, wrapper: str) -> gym.spaces.Box:
    """The Box of frames `env` observes; a TypeError naming `wrapper` for other spaces."""
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(f"{wrapper} wraps envs observing image frames (a Box space), got {space}.")
    return space


def _lives(env: gym.Env) -> int:
    """Lives left in the ALE game under `env`."""
    # ALE envs (ale_py.AtariEnv) carry the emulator as `ale`; gymnasium's Env type does not declare it.
    return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]


def get_wrapper_by_cls(env: gym.Env, cls: type) -> gym.Env | None:
    """The wrapper of class `cls` in `env`'s wrapper chain, or None."""
    current: gym.Env | None = env
    while current is not None:
        if isinstance(current, cls):
            return current
        current = getattr(current, "env", None)
    return None


class ClipRewardEnv(gym.RewardWrapper):
    """Rewards clipped to their sign: -1, 0 or +1."""

    def reward(self, reward: SupportsFloat) -> float:  # noqa: D102
        return float(np.sign(float(reward)))


class NoopResetEnv(gym.Wrapper):
    """On reset, take a random number (1..noop_max) of no-op actions, so starts differ."""

    def __init__(self, env: gym.Env, noop_max: int = 30):
        super().__init__(env)
        self.noop_max = noop_max
        meanings = _action_meanings(env)
        self.noop_action = meanings.index("NOOP") if "NOOP" in meanings else 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:  # noqa: D102
        obs, info = self.env.reset(**kwargs)
        for _ in range(int(self.np_random.integers(1, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class FireResetEnv(gym.Wrapper):
    """Press FIRE after each reset, for games that wait for it to start."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = _action_meanings(env)
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise ValueError(f"FireResetEnv needs FIRE as action 1 (and 3+ actions); this game has {meanings}.")

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:  # noqa: D102
        self.env.reset(**kwargs)
        obs: Any = None
        info: dict[str, Any] = {}
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class EpisodicLifeEnv(gym.Wrapper):
    """A lost life ends the episode for the learner; the game itself resets only when it is over."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:  # noqa: D102
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = _lives(self.env)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:  # noqa: D102
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            # A no-op step from the state where the life was lost.
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = _lives(self.env)
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    """Repeat each action `skip` times; observe the max of the last two frames (Atari flicker)."""

    def __init__(self, env: gym.Env, skip: int = 4):
        super().__init__(env)
        self._skip = skip
        space = _image_space(env, "MaxAndSkipEnv")
        self._frames = np.zeros((2,) + space.shape, dtype=space.dtype)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:  # noqa: D102
        total = 0.0
        terminated = truncated = False
        info: dict = {}
        for i in range(self._skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self._skip - 2:
                self._frames[i - (self._skip - 2)] = obs
            total += float(reward)
            if terminated or truncated:
                break
        return self._frames.max(axis=0), total, terminated, truncated, info


class WarpFrame(gym.ObservationWrapper):
    """Frames resized to `dim` x `dim` (grayscale by default), shape [dim, dim, 1], uint8."""

    def __init__(self, env: gym.Env, dim: int = 84, grayscale: bool = True):
        super().__init__(env)
        self.dim = dim
        self.grayscale = grayscale
        channels = 1 if grayscale else _image_space(env, "WarpFrame").shape[-1]
        self.observation_space = gym.spaces.Box(0, 255, (dim, dim, channels), dtype=np.uint8)

    def observation(self, frame: np.ndarray) -> np.ndarray:  # noqa: D102
        if self.grayscale:
            frame = rgb2gray(frame) if frame.ndim == 3 else frame
            return resize(frame, self.dim, self.dim)[:, :, None]
        return resize(frame, self.dim, self.dim)


class NormalizedImageEnv(gym.ObservationWrapper):
    """uint8 frames as float32 in [-1, 1]."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, env.observation_space.shape, dtype=np.float32)

    def observation(self, frame: np.ndarray) -> np.ndarray:  # noqa: D102
        return (frame.astype(np.float32) / 128.0) - 1.0


class FrameStack(gym.Wrapper):
    """The last `k` frames concatenated on the channel (last) axis."""

    def __init__(self, env: gym.Env, k: int):
        super().__init__(env)
        self.k = k
        self.frames: deque = deque(maxlen=k)
        space = _image_space(env, "FrameStack")
        self.observation_space = gym.spaces.Box(
            np.repeat(space.low, k, axis=-1), np.repeat(space.high, k, axis=-1), dtype=space.dtype)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:  # noqa: D102
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.k):
            self.frames.append(obs)
        return self._stacked(), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:  # noqa: D102
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return self._stacked(), reward, terminated, truncated, info

    def _stacked(self) -> np.ndarray:
        return np.concatenate(list(self.frames), axis=-1)


def _action_meanings(env: gym.Env) -> list[str]:
    get = getattr(env.unwrapped, "get_action_meanings", None)
    return list(get()) if callable(get) else []


def _env_frameskip(env: gym.Env) -> int:
    """How many frames the ALE env itself repeats each action (ALE/...-v5: 4; NoFrameskip: 1)."""
    skip = getattr(env.unwrapped, "_frameskip", None)
    if isinstance(skip, int):
        return skip
    spec = getattr(env, "spec", None)
    return int((getattr(spec, "kwargs", None) or {}).get("frameskip", 1)) if spec else 1


def wrap_deepmind(env: gym.Env, dim: int = 84, framestack: bool = True, noframeskip: bool = False) -> gym.Env:
    """DeepMind's Atari preprocessing: no-op resets, frame skip 4 with max-pooling (unless the env
    skips frames itself), one life per episode, FIRE on reset, `dim`x`dim` grayscale, 4 frames stacked.
    """
    env = NoopResetEnv(env, noop_max=30)
    if not noframeskip and _env_frameskip(env) == 1:
        env = MaxAndSkipEnv(env, skip=4)
    env = EpisodicLifeEnv(env)
    if "FIRE" in _action_meanings(env):
        env = FireResetEnv(env)
    env = WarpFrame(env, dim)
    if framestack:
        env = FrameStack(env, 4)
    return env


def wrap_atari_for_new_api_stack(env: gym.Env, dim: int = 64, frameskip: int = 4, framestack: int | None = None,
                                 grayscale: bool = True) -> gym.Env:
    """The new API stack's Atari preprocessing: `dim`x`dim` frames scaled to [-1, 1], max-pooled frame
    skip (when the env does not skip frames itself), no-op resets, one life per episode, FIRE on reset,
    and optionally the last `framestack` frames stacked. Rewards are not clipped here.
    """
    env = gym.wrappers.TimeLimit(env, max_episode_steps=108000)
    env = WarpFrame(env, dim=dim, grayscale=grayscale)
    env = NormalizedImageEnv(env)
    if frameskip > 1 and _env_frameskip(env) == 1:
        env = MaxAndSkipEnv(env, skip=frameskip)
    env = NoopResetEnv(env, noop_max=30)
    env = EpisodicLifeEnv(env)
    if "FIRE" in _action_meanings(env):
        env = FireResetEnv(env)
    if framestack:
        env = FrameStack(env, k=framestack)
    return env

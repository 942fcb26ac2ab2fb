"""Small environments shared by the env tests (importable as 'envs_for_tests:CountingEnv')."""
from __future__ import annotations

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Observation is the step count (as a float32 [1] array); episodes last `length` steps.

    The constructor takes the env config (an EnvContext when rlx creates it) and keeps it
    in `self.config` so tests can see what the env was built with.
    """

    def __init__(self, config=None):
        self.config = config if config is not None else {}
        self.length = int(self.config.get("length", 5))
        self.observation_space = gym.spaces.Box(0.0, 1000.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([float(self.t)], dtype=np.float32)
        terminated = self.t >= self.length
        return obs, 1.0, terminated, False, {}


class OldApiEnv:
    """An env written against the pre-0.26 gym API: reset() -> obs, step() -> 4-tuple.

    With `truncate_at` set, the step that reaches it reports done=True and
    info['TimeLimit.truncated']=True (how old gym marked a time-limit cut).
    """

    def __init__(self, config=None):
        config = config if config is not None else {}
        self.length = int(config.get("length", 5))
        self.truncate_at = config.get("truncate_at")
        self.observation_space = gym.spaces.Box(0.0, 1000.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self):
        self.t = 0
        return np.array([0.0], dtype=np.float32)

    def step(self, action):
        self.t += 1
        obs = np.array([float(self.t)], dtype=np.float32)
        info = {}
        done = self.t >= self.length
        if self.truncate_at is not None and self.t >= self.truncate_at:
            done = True
            info["TimeLimit.truncated"] = True
        return obs, 1.0, done, info


class Float64ObsEnv(CountingEnv):
    """Slightly bad: returns float64 observations for a float32 Box (fails the env checker)."""

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs.astype(np.float64), info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs.astype(np.float64), reward, terminated, truncated, info


class CounterEnv(gym.Env):
    """obs = [t, 1.0] (t = steps taken in this episode), reward 1 per step; never ends on its own."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, 1.0], np.float32)

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, False, False, {}


class StepInfoEnv(CountingEnv):
    """CountingEnv whose reward depends on the action (1.0 + action) and whose infos say the step.

    reset() returns info {"t": 0, "resets": n} (n counts this env's resets); step() returns
    info {"t": t, "action": action}. Episodes last `length` steps (env_config, default 5).
    """

    def __init__(self, config=None):
        super().__init__(config)
        self.num_resets = 0

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        self.num_resets += 1
        return obs, {"t": 0, "resets": self.num_resets}

    def step(self, action):
        obs, _, terminated, truncated, _ = super().step(action)
        return obs, 1.0 + float(action), terminated, truncated, {"t": self.t, "action": int(action)}


class CueEnv(gym.Env):
    """A memory task: the first observation shows a bit, then only blanks follow; every step pays 1
    when the action equals that bit. 10 steps: a policy with memory earns 10, a feed-forward one
    1 + 9 * 0.5 = 5.5. The bit is shown as [2 * bit - 1, 1], or one-hot with config {"one_hot": True}."""

    def __init__(self, config=None):
        self.one_hot = bool((config or {}).get("one_hot", False))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.bit = int(self.np_random.integers(2))
        if self.one_hot:
            obs = np.zeros(2, np.float32)
            obs[self.bit] = 1.0
        else:
            obs = np.array([2.0 * self.bit - 1.0, 1.0], np.float32)
        return obs, {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), float(action == self.bit), False, self.t >= 10, {}

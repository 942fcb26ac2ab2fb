"""Module-level envs for the remote-EnvRunner tests: worker processes and Ray actors import
them by name, so they must live in an importable module, not inside a test function."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np


class WhereAmIEnv(gym.Env):
    """Observations say which runner and sub-env produced them and the step count within
    the episode: [worker_index, vector_index, t]. Episodes last `length` steps (default 7)."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        config = config if config is not None else {}
        self.worker_index = float(getattr(config, "worker_index", 0))
        self.vector_index = float(getattr(config, "vector_index", 0))
        self.length = int(config.get("length", 7))
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.worker_index, self.vector_index, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= self.length, False, {"pid": os.getpid()}


class FailingEnv(gym.Env):
    """CartPole-like dummy that raises in step() number `fail_at` of the runner whose
    worker_index is `fail_on` (once per process: a restarted runner does not fail again when
    `fail_once` is set, since the flag file then exists)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        config = config if config is not None else {}
        self.fail = int(getattr(config, "worker_index", 0)) == int(config.get("fail_on", 1)) \
            and int(getattr(config, "vector_index", 0)) == 0
        self.fail_at = int(config.get("fail_at", 20))
        self.flag = config.get("flag_file")
        self.steps = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        if self.fail and self.steps == self.fail_at:
            if self.flag is None or not os.path.exists(self.flag):
                if self.flag is not None:
                    open(self.flag, "w").close()
                raise RuntimeError("simulated env crash")
        return np.full(2, 0.01 * self.t, np.float32), 1.0, self.t >= 10, False, {}


class BrokenConstructorEnv(gym.Env):
    """Raises when built on a remote runner (worker_index > 0)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        if int(getattr(config, "worker_index", 0)) > 0:
            raise ValueError("this env cannot be built on a remote runner")

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


class FlakyConstructorEnv(WhereAmIEnv):
    """WhereAmIEnv that cannot be built on remote runner 1 while `flag_file` exists."""

    def __init__(self, config=None):
        flag = (config or {}).get("flag_file")
        if flag and os.path.exists(flag) and int(getattr(config, "worker_index", 0)) == 1:
            raise RuntimeError("runner 1 cannot be built right now")
        super().__init__(config)


class HangingEnv(WhereAmIEnv):
    """WhereAmIEnv whose step number `hang_at` on remote runner 1 sleeps for an hour (once:
    while `flag_file` does not exist yet; it is created before sleeping)."""

    def __init__(self, config=None):
        super().__init__(config)
        config = config if config is not None else {}
        self.hang = int(getattr(config, "worker_index", 0)) == 1 and int(getattr(config, "vector_index", 0)) == 0
        self.hang_at = int(config.get("hang_at", 10))
        self.flag = config.get("flag_file")
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.hang and self.steps == self.hang_at and self.flag and not os.path.exists(self.flag):
            open(self.flag, "w").close()
            import time as _time

            _time.sleep(3600)
        return super().step(action)

"""EnvWithSubprocess: an env that starts a subprocess, for testing that envs get cleaned up.

RLlib's `ray.rllib.examples.envs.classes.env_with_subprocess`.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
from typing import Any

import gymnasium as gym

__all__ = ["EnvWithSubprocess"]


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class EnvWithSubprocess(gym.Env):
    """A trivial env (one-step episodes, Discrete(2) spaces) that starts `sleep 20` as a subprocess.

    The env config must hold the paths `tmp_file1` .. `tmp_file4` of four files it deletes to
    show which clean-up ran: at interpreter exit it kills the subprocess and deletes
    `tmp_file1` (the env of worker 0) or `tmp_file2` (any other worker); `close()` deletes
    `tmp_file3` (worker 0) or `tmp_file4` (any other worker) and kills the subprocess too.
    """

    #: The command run as the subprocess.
    UNIQUE_CMD = "sleep 20"

    def __init__(self, config: dict):
        self.UNIQUE_FILE_0 = config["tmp_file1"]
        self.UNIQUE_FILE_1 = config["tmp_file2"]
        self.UNIQUE_FILE_2 = config["tmp_file3"]
        self.UNIQUE_FILE_3 = config["tmp_file4"]
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Discrete(2)
        self.config = config
        self.worker_index = int(getattr(config, "worker_index", 0))
        self.subproc = subprocess.Popen(self.UNIQUE_CMD.split(" "), shell=False)
        atexit.register(self._kill_subprocess)
        atexit.register(_unlink, self.UNIQUE_FILE_0 if self.worker_index == 0 else self.UNIQUE_FILE_1)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Observe 0."""
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Observe 0, reward 0, end the episode."""
        return 0, 0.0, True, False, {}

    def close(self) -> None:
        """Delete `tmp_file3` (worker 0) or `tmp_file4` and kill the subprocess."""
        _unlink(self.UNIQUE_FILE_2 if self.worker_index == 0 else self.UNIQUE_FILE_3)
        self._kill_subprocess()

    def _kill_subprocess(self) -> None:
        if self.subproc.poll() is None:
            self.subproc.kill()
            self.subproc.wait()

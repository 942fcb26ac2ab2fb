"""CartPoleCrashing: a CartPole that crashes or stalls now and then, for testing fault tolerance.

RLlib's `ray.rllib.examples.envs.classes.cartpole_crashing`.
"""
from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

from rlx.env.multi_agent_env import make_multi_agent
from rlx.utils.errors import EnvError

__all__ = ["CartPoleCrashing", "MultiAgentCartPoleCrashing"]

logger = logging.getLogger(__name__)


def _sample(value: Any, rng: np.random.RandomState, integer: bool = False) -> Any:
    """`value` itself, or for a 2-tuple `(low, high)` a uniform sample from it."""
    if isinstance(value, tuple):
        return rng.randint(value[0], value[1]) if integer else rng.uniform(value[0], value[1])
    return value


class CartPoleCrashing(CartPoleEnv):
    """CartPole whose `step()`/`reset()` raise EnvError (a simulated crash) or sleep (a stall).

    Env config keys (all optional):

    - `p_crash` (default 0.005) / `p_crash_reset` (default 0.0): the chance to crash in each
      `step()` / `reset()`.
    - `crash_after_n_steps`: crash at exactly this step of each episode; a 2-tuple
      `(low, high)` draws the step uniformly (per episode).
    - `crash_on_worker_indices`: crash only in envs of these EnvRunner indices.
    - `p_stall` / `p_stall_reset` (default 0.0), `stall_after_n_steps` (int or 2-tuple),
      `stall_on_worker_indices`: the same for stalls, which sleep `stall_time_sec` (a number
      or a 2-tuple to sample from).
    - `init_time_s`: seconds the constructor sleeps (a number or a 2-tuple to sample from).

    After a crash the env expects `reset()`. Crashes and stalls use their own unseeded random
    generator, so sub-envs do not fail in lockstep.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.config = config if config is not None else {}
        config = self.config
        worker_index = getattr(config, "worker_index", 0)
        self._rng = np.random.RandomState()

        self.p_crash = float(config.get("p_crash", 0.005))
        self.p_crash_reset = float(config.get("p_crash_reset", 0.0))
        self.crash_after_n_steps = config.get("crash_after_n_steps")
        _check_int_or_pair("crash_after_n_steps", self.crash_after_n_steps)
        faulty = config.get("crash_on_worker_indices")
        if faulty and worker_index not in faulty:
            self.p_crash = self.p_crash_reset = 0.0
            self.crash_after_n_steps = None

        self.p_stall = float(config.get("p_stall", 0.0))
        self.p_stall_reset = float(config.get("p_stall_reset", 0.0))
        self.stall_after_n_steps = config.get("stall_after_n_steps")
        _check_int_or_pair("stall_after_n_steps", self.stall_after_n_steps)
        self.stall_time_sec = config.get("stall_time_sec")
        stalling = config.get("stall_on_worker_indices")
        if stalling and worker_index not in stalling:
            self.p_stall = self.p_stall_reset = 0.0
            self.stall_after_n_steps = None

        self.timesteps = 0
        self._crash_at: int | None = None
        self._stall_at: int | None = None
        init_time = _sample(config.get("init_time_s", 0.0), self._rng)
        if init_time:
            logger.info("Initializing crashing env (with init-delay of %ss) ...", init_time)
            time.sleep(init_time)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset CartPole, unless this call crashes (EnvError) or first stalls."""
        self.timesteps = 0
        self._crash_at = self._stall_at = None
        if self._should_crash(self.p_crash_reset):
            raise EnvError(f"Simulated env crash on worker={getattr(self.config, 'worker_index', 0)} "
                           f"env-idx={getattr(self.config, 'vector_index', 0)} during `reset()`!")
        self._stall_if_necessary(self.p_stall_reset)
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Step CartPole, unless this call crashes (EnvError) or first stalls."""
        self.timesteps += 1
        if self._should_crash(self.p_crash):
            raise EnvError(f"Simulated env crash on worker={getattr(self.config, 'worker_index', 0)} "
                           f"env-idx={getattr(self.config, 'vector_index', 0)} during `step()`!")
        self._stall_if_necessary(self.p_stall)
        return super().step(action)

    def _should_crash(self, p: float) -> bool:
        if self._rng.rand() < p:
            logger.info("Crashing due to p(crash)!")
            return True
        if self.crash_after_n_steps is not None:
            if self._crash_at is None:
                self._crash_at = _sample(self.crash_after_n_steps, self._rng, integer=True)
            if self._crash_at == self.timesteps:
                logger.info("Crashing due to n timesteps reached!")
                return True
        return False

    def _stall_if_necessary(self, p: float) -> None:
        stall = self._rng.rand() < p
        if not stall and self.stall_after_n_steps is not None:
            if self._stall_at is None:
                self._stall_at = _sample(self.stall_after_n_steps, self._rng, integer=True)
            stall = self._stall_at == self.timesteps
        if stall:
            seconds = _sample(self.stall_time_sec or 0.0, self._rng)
            logger.info(" -> will stall for %ss ...", seconds)
            time.sleep(seconds)


def _check_int_or_pair(name: str, value: Any) -> None:
    if not (value is None or isinstance(value, int) or (isinstance(value, tuple) and len(value) == 2)):
        raise ValueError(f"CartPoleCrashing's `{name}` must be None, an int or a 2-tuple, got {value!r}.")


def _make_cartpole_crashing(config: dict) -> CartPoleCrashing:
    return CartPoleCrashing(config)


class MultiAgentCartPoleCrashing(make_multi_agent(_make_cartpole_crashing)):
    """CartPoleCrashing for `num_agents` agents (env config, default 1); agent ids 0..num_agents-1."""

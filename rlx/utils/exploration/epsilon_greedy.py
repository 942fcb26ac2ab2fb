"""EpsilonGreedy: the greedy (argmax) action, or with probability epsilon a random one."""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlx.core.action_masking import random_valid_actions
from rlx.core.distributions import Distribution
from rlx.utils.errors import ConfigError
from rlx.utils.exploration.exploration import (
    Exploration, NumpyActionFn, check_options, linear_schedule, make_schedule, to_numpy,
)

class EpsilonGreedy(Exploration):
    """Epsilon-greedy over Q-values (Categorical inputs) for Discrete / MultiDiscrete spaces.

    Epsilon is `initial_epsilon` for `warmup_timesteps`, then goes linearly to
    `final_epsilon` over `epsilon_timesteps` and stays there. `epsilon_schedule`, a list
    of [timestep, epsilon] pairs (piecewise linear), replaces that schedule.
    When exploring, each batch row independently takes a uniformly random action with
    probability epsilon (among the actions whose Q-value is above FLOAT_MIN, for
    Discrete spaces), else the argmax. logp is zeros.
    """

    def __init__(
        self,
        action_space: gym.Space,
        *,
        initial_epsilon: float = 1.0,
        final_epsilon: float = 0.05,
        warmup_timesteps: int = 0,
        epsilon_timesteps: int = int(1e5),
        epsilon_schedule: Sequence[Sequence[float]] | float | None = None,
        **base: Any,
    ):
        check_options(initial_epsilon=initial_epsilon, final_epsilon=final_epsilon,
                      warmup_timesteps=warmup_timesteps, epsilon_timesteps=epsilon_timesteps,
                      epsilon_schedule=epsilon_schedule)
        super().__init__(action_space, **base)
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            raise ConfigError(
                f"{type(self).__name__} needs a Discrete or MultiDiscrete action space, got {action_space}. "
                "For Box action spaces use GaussianNoise or OrnsteinUhlenbeckNoise."
            )
        self.initial_epsilon = float(initial_epsilon)
        self.final_epsilon = float(final_epsilon)
        self.warmup_timesteps = int(warmup_timesteps)
        self.epsilon_timesteps = int(epsilon_timesteps)
        if epsilon_schedule is not None:
            self.epsilon_schedule = make_schedule(epsilon_schedule)
        else:
            self.epsilon_schedule = linear_schedule(
                self.initial_epsilon, self.final_epsilon,
                start=self.warmup_timesteps, duration=self.epsilon_timesteps,
            )
        self._discrete = isinstance(action_space, gym.spaces.Discrete)
        self._n = int(action_space.n) if self._discrete else 0
        self._nvec = None if self._discrete else np.asarray(action_space.nvec, dtype=np.int64).reshape(-1)

    def epsilon(self, timestep: int) -> float:
        """Epsilon at global `timestep`."""
        return self.epsilon_schedule.value(timestep)

    def get_exploration_action(
        self,
        *,
        action_distribution: Distribution,
        timestep: int | torch.Tensor | None,
        explore: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row: a random action with probability epsilon when exploring, else the argmax."""
        t = self._see_timestep(timestep)
        inputs = action_distribution.inputs
        if self._discrete:
            q = to_numpy(inputs)
            greedy = q.argmax(-1).astype(np.int64, copy=False)
        else:
            q = None
            greedy = to_numpy(action_distribution.deterministic_sample()).astype(np.int64, copy=True)
        if explore:
            greedy = self._explore_rows(q, greedy, t)
        action = torch.from_numpy(greedy)
        if not inputs.is_cpu:
            action = action.to(inputs.device)
        return action, self.zero_logp(action)

    def numpy_action_fn(self, dist_cls: Any, explore: bool) -> NumpyActionFn | None:
        """get_exploration_action in NumPy for Discrete spaces (see Exploration.numpy_action_fn):
        the same draws from the same generator."""
        if not self._discrete or type(self).get_exploration_action is not EpsilonGreedy.get_exploration_action:
            return None

        def act(q: np.ndarray, timestep: int) -> tuple[np.ndarray, np.ndarray]:
            self.last_timestep = int(timestep)
            greedy = q.argmax(-1)
            if explore:
                greedy = self._explore_rows(q, greedy, self.last_timestep)
            return greedy, np.zeros(greedy.shape[0], np.float32)

        return act

    def _explore_rows(self, q: np.ndarray | None, greedy: np.ndarray, timestep: int) -> np.ndarray:
        """`greedy` with each row replaced by a random action with probability epsilon(timestep)."""
        eps = self.epsilon_schedule.value(timestep)
        if eps > 0.0:
            explore_rows = self.np_random.random(greedy.shape[0]) < eps
            if explore_rows.any():
                return self._with_random_rows(q, greedy, explore_rows)
        return greedy

    def _with_random_rows(self, q: np.ndarray | None, greedy: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """`greedy` with uniformly random actions in the rows where `rows` is True."""
        rng = self.np_random
        if q is None:
            random = (rng.random(greedy.shape) * self._nvec).astype(np.int64)
            return np.where(rows[:, None], random, greedy)
        random = random_valid_actions(q, rng)  # uniform among the unmasked actions
        return np.where(rows, random, greedy)

    def get_info(self) -> dict:
        """{"cur_epsilon": epsilon at the last timestep seen}."""
        return {"cur_epsilon": self.epsilon(self.last_timestep)}

"""RandomPolicy: the old API stack's hand-coded policy acting uniformly at random (RLlib's example
class of that name).

Used directly it is a plain old-API policy: `RandomPolicy(observation_space, action_space,
config).compute_actions(obs_batch)` samples one action per observation (with
`config["ignore_action_bounds"]`, a Box action space is sampled without its bounds). In a config,
`PolicySpec(policy_class=RandomPolicy)`, rlx plays it with the RLModule it names
(`rl_module_class`: RandomRLModule), as rlx builds every policy from an RLModule; it does not learn.
"""
from __future__ import annotations

import random
from typing import Any

import gymnasium as gym
import numpy as np

from rlx.examples.rl_modules.classes.random_rlm import RandomRLModule


class RandomPolicy:
    """Acts uniformly at random in its action space; nothing to learn, no weights."""

    #: The RLModule rlx builds for this policy inside an Algorithm.
    rl_module_class = RandomRLModule

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict | None = None):
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = dict(config or {})
        if self.config.get("ignore_action_bounds", False) and isinstance(action_space, gym.spaces.Box):
            self.action_space_for_sampling: gym.Space = gym.spaces.Box(-np.inf, np.inf, action_space.shape,
                                                                       action_space.dtype)
        else:
            self.action_space_for_sampling = action_space

    def compute_actions(self, obs_batch: Any, state_batches: Any = None, prev_action_batch: Any = None,
                        prev_reward_batch: Any = None, **kwargs: Any) -> tuple[list[Any], list[Any], dict]:
        """(one random action per observation, no state outputs, no extra outputs)."""
        first = obs_batch
        while isinstance(first, (dict, tuple)) and len(first):
            first = next(iter(first.values())) if isinstance(first, dict) else first[0]
        return [self.action_space_for_sampling.sample() for _ in range(len(first))], [], {}

    def learn_on_batch(self, samples: Any) -> dict:
        """No learning: an empty result."""
        return {}

    def compute_log_likelihoods(self, actions: Any, obs_batch: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        """Random numbers in [0, 1), one per observation (RLlib's example returns these too)."""
        return np.array([random.random()] * len(obs_batch))

    def get_weights(self) -> dict:
        """No weights: {}."""
        return {}

    def set_weights(self, weights: dict) -> None:
        """Accepts only {} (there are no weights to set)."""
        if weights:
            raise ValueError(f"RandomPolicy has no weights; got {sorted(weights)}.")

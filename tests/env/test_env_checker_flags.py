"""What RLlib accepts from an env but is likely a bug is flagged once, as a warning, never refused:

- terminated/truncated that are not bools (e.g. 0/1 ints, "yes"): read as their truth value, as
  RLlib's Gymnasium vector envs store them;
- observations outside the Box observation space's low/high, whenever in sampling they appear
  (not only in the env checker's first step);
- in multi-agent envs too (RLlib's multi-agent checker does not check bounds).

`disable_env_checking=True` turns the warnings off.
"""
from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np

from rlx.algorithms.ppo import PPOConfig
from rlx.env.multi_agent_env import MultiAgentEnv


def _train_once(config: PPOConfig) -> dict:
    algo = config.training(train_batch_size=64, minibatch_size=32, num_epochs=1).debugging(seed=0).build()
    try:
        return algo.train()
    finally:
        algo.stop()


def _warnings(caplog, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and needle in r.getMessage()]


def test_non_bool_terminated_is_read_as_its_truth_value_and_flagged_once(caplog):
    class IntFlagsEnv(gym.Env):
        """Ends every episode after 5 steps, saying so with ints (a common bug: int(done))."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            super().__init__()

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(2, np.float32), 1.0, int(self.t >= 5), 0, {}

    with caplog.at_level(logging.WARNING):
        result = _train_once(PPOConfig().environment(IntFlagsEnv))
    assert result["env_runners"]["episode_len_mean"] == 5  # 1 ends the episode, 0 does not, as in RLlib
    flagged = _warnings(caplog, "are bools")
    assert len(flagged) == 1, flagged  # once, for both flags
    assert "IntFlagsEnv.step() returned terminated=0 (int, read as False), truncated=0 (int, read as False)" \
        in flagged[0]


def test_string_terminated_later_in_an_episode_is_flagged_once(caplog):
    class StringDoneEnv(gym.Env):
        """Returns a proper bool until step 3, then terminated="yes"."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            super().__init__()

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(2, np.float32), 1.0, "yes" if self.t >= 3 else False, False, {}

    with caplog.at_level(logging.WARNING):
        result = _train_once(PPOConfig().environment(StringDoneEnv))
    assert result["env_runners"]["episode_len_mean"] == 3
    flagged = _warnings(caplog, "are bools")
    assert len(flagged) == 1, flagged
    assert "returned terminated='yes' (str, read as True)" in flagged[0]
    assert "Sub-env" in flagged[0] and "as RLlib does" in flagged[0]


def _drifting_env():
    class DriftingEnv(gym.Env):
        """In its bounds for 3 steps, then drifts above high=1.0."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            super().__init__()

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            value = 0.0 if self.t <= 3 else 1.0 + 0.1 * self.t
            return np.full(2, value, np.float32), 1.0, self.t >= 10, False, {}

    return DriftingEnv


def test_observations_leaving_the_box_during_sampling_are_flagged_once(caplog):
    # disable_env_checking=True: no flag (run first: the warning is given once per process).
    with caplog.at_level(logging.WARNING):
        _train_once(PPOConfig().environment(_drifting_env(), disable_env_checking=True))
    assert not _warnings(caplog, "outside the env's observation_space bounds")
    with caplog.at_level(logging.WARNING):
        result = _train_once(PPOConfig().environment(_drifting_env()).env_runners(num_envs_per_env_runner=2))
    assert result["env_runners"]["num_episodes"] > 0  # sampled as RLlib samples it
    flagged = _warnings(caplog, "outside the env's observation_space bounds")
    assert len(flagged) == 1, flagged
    assert "DriftingEnv.step()" in flagged[0] and "Sub-env" in flagged[0]


def test_multi_agent_observations_outside_the_box_are_flagged_not_refused(caplog):
    class TwoAgentsOutOfBounds(MultiAgentEnv):
        """Two agents whose observations are 2.0 in a Box(-1, 1)."""

        def __init__(self, config=None):
            super().__init__()
            self.agents = self.possible_agents = ["a", "b"]
            self.observation_spaces = {aid: gym.spaces.Box(-1.0, 1.0, (2,), np.float32) for aid in self.agents}
            self.action_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return {aid: np.full(2, 2.0, np.float32) for aid in self.agents}, {}

        def step(self, action_dict):
            self.t += 1
            done = self.t >= 5
            obs = {aid: np.full(2, 2.0, np.float32) for aid in self.agents}
            return obs, {aid: 1.0 for aid in self.agents}, {"__all__": done}, {"__all__": False}, {}

    config = PPOConfig().environment(TwoAgentsOutOfBounds).multi_agent(
        policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kwargs: "shared")
    with caplog.at_level(logging.WARNING):
        result = _train_once(config)
    assert result["env_runners"]["num_episodes"] > 0
    flagged = _warnings(caplog, "outside the env's observation_space bounds")
    assert len(flagged) == 1, flagged
    assert "TwoAgentsOutOfBounds.reset()" in flagged[0]

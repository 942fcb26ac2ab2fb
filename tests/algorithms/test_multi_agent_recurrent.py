"""Recurrent modules in multi-agent runs: the EnvRunner carries one state per (sub-env, agent),
resets it when an episode starts, hands each module's batch its state_in columns, and PPO
trains each policy's LSTM on its agents' sequences."""
from __future__ import annotations

import pytest

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.core.columns import Columns
from rlx.core.rl_module import RLModule, RLModuleSpec
from rlx.env.env_runner import state_column
from rlx.env.multi_agent_env import MultiAgentEnv


class TwoCues(MultiAgentEnv):
    """Two agents, each shown its own bit on the first step only; every later step pays an agent 1
    for repeating its bit. 10 steps: 10 per agent with memory, about 5.5 without."""

    def __init__(self, config: Any = None):
        super().__init__()
        self.possible_agents = self.agents = ["a", "b"]
        space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_spaces = {aid: space for aid in self.agents}
        self.action_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}
        self._rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.t = 0
        self.bits = {aid: int(self._rng.integers(2)) for aid in self.agents}
        return {aid: np.array([2.0 * bit - 1.0, 1.0], np.float32) for aid, bit in self.bits.items()}, {}

    def step(self, actions):
        self.t += 1
        blank = np.zeros(2, np.float32)
        rewards = {aid: float(actions[aid] == self.bits[aid]) for aid in actions}
        done = self.t >= 10
        return ({aid: blank for aid in self.agents}, rewards, {"__all__": False},
                {"__all__": done}, {})


class TakeTurns(MultiAgentEnv):
    """Agents "a" and "b" act in turns for 9 env steps (a, b, a, ...)."""

    def __init__(self, config: Any = None):
        super().__init__()
        self.possible_agents = self.agents = ["a", "b"]
        self.observation_spaces = {aid: gym.spaces.Box(0.0, 1.0, (1,), np.float32) for aid in self.agents}
        self.action_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": np.zeros(1, np.float32)}, {}

    def step(self, actions):
        self.t += 1
        nxt = "b" if "a" in actions else "a"
        done = self.t >= 9
        return {nxt: np.zeros(1, np.float32)}, {aid: 0.0 for aid in actions}, {"__all__": False}, \
            {"__all__": done}, {}


class StepCounter(RLModule):
    """A stateful module whose state counts the steps its agent has taken in the episode."""

    def setup(self) -> None:
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def get_initial_state(self) -> dict[str, Any]:
        return {"count": np.zeros(1, np.float32)}

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        logits = torch.zeros(obs.shape[0], obs.shape[1], 2) + self.dummy
        return {Columns.ACTION_DIST_INPUTS: logits,
                Columns.STATE_OUT: {"count": batch[Columns.STATE_IN]["count"] + 1.0}}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)


def test_each_agent_carries_its_own_state_across_turns_and_episodes():
    config = (PPOConfig().environment(TakeTurns)
              .multi_agent(policies={"pa", "pb"}, policy_mapping_fn=lambda aid, *a, **k: "p" + aid)
              .rl_module(rl_module_spec=RLModuleSpec(module_class=StepCounter))
              .env_runners(num_envs_per_env_runner=2))
    algo = config.build()
    try:
        batch = algo.env_runner.sample(num_timesteps=36)
        for pid, steps in (("pa", 5), ("pb", 4)):
            module_batch = batch.policy_batches[pid]
            counts = module_batch[state_column("count")][..., 0]
            valid = module_batch.get(Columns.VALID, np.ones(counts.shape, bool))
            # Each column is one (sub-env, agent): its rows count 0, 1, ... and restart at each episode.
            for c in range(counts.shape[1]):
                column = counts[valid[:, c], c]
                expected = np.concatenate([np.arange(steps)] * (len(column) // steps + 1))[:len(column)]
                np.testing.assert_array_equal(column, expected)
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_trains_an_lstm_per_policy_in_a_multi_agent_env():
    config = (PPOConfig().environment(TwoCues)
              .multi_agent(policies={"pa", "pb"}, policy_mapping_fn=lambda aid, *a, **k: "p" + aid)
              .env_runners(num_envs_per_env_runner=8)
              .training(model={"use_lstm": True, "lstm_cell_size": 32, "fcnet_hiddens": [32], "max_seq_len": 10},
                        train_batch_size=800, minibatch_size=200, num_epochs=6, lr=3e-3)
              .debugging(seed=0))
    algo = config.build()
    try:
        assert all(algo.get_module(pid).is_stateful() for pid in ("pa", "pb"))
        best = 0.0
        for _ in range(40):
            result = algo.train()
            returns = result["env_runners"]["module_episode_returns_mean"]
            best = max(best, min(returns["pa"], returns["pb"]))
            if best >= 9.3:
                break
        assert best >= 9.3  # a memoryless policy averages 5.5 per agent
        policy = algo.get_policy("pa")
        state = policy.get_initial_state()
        action, state_out, _ = algo.compute_single_action(np.array([1.0, 1.0], np.float32), state=state,
                                                          policy_id="pa", explore=False)
        assert action == 1 and len(state_out) == len(state) and np.any(state_out[0])
    finally:
        algo.stop()

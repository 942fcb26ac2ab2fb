"""The one EnvRunner (rlx.env.runner): one module->action path that sampling, the Policy view
and server-side inference share; one writer of per-module [T, C] columns, in lockstep for
single-agent and simultaneous agents and ragged (with a valid mask) for agents in turns."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.core.rl_module.agent_mapping import PolicySpec
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.runner import EnvRunner, ModuleSlot
from rlx.env.runner.columns import ModuleColumns
from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole


def by_parity(agent_id, episode, **kwargs):
    return f"p{int(agent_id) % 2}"


def test_both_runners_are_the_one_envrunner_at_rllibs_paths():
    from rlx.env.env_runner import SingleAgentEnvRunner
    from rlx.env.multi_agent_env_runner import MultiAgentEnvRunner
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner as AtRLlibPath

    assert AtRLlibPath is SingleAgentEnvRunner
    assert issubclass(SingleAgentEnvRunner, EnvRunner) and issubclass(MultiAgentEnvRunner, EnvRunner)
    assert not issubclass(MultiAgentEnvRunner, SingleAgentEnvRunner)


def test_sampling_and_the_policy_view_act_through_the_same_module_slot():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=3).debugging(seed=1).build()
    try:
        runner = algo.env_runner
        policy = algo.get_policy()
        slot = runner.module_slots["default_policy"]
        assert isinstance(slot, ModuleSlot) and policy.slot is slot
        batch = runner.sample(num_timesteps=30, explore=False)
        obs = batch["obs"].reshape(-1, 4)
        actions, _, extra = policy.compute_actions(obs, explore=False)
        np.testing.assert_array_equal(actions, batch["actions"].reshape(-1))
        np.testing.assert_allclose(extra["action_dist_inputs"], batch["action_dist_inputs"].reshape(-1, 2),
                                   rtol=1e-5, atol=1e-6)
        single, _, _ = policy.compute_single_action(obs[5], explore=False)
        assert single == batch["actions"].reshape(-1)[5]
    finally:
        algo.stop()


def test_a_multi_agent_policy_view_acts_as_its_module_sampled():
    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 4})
              .multi_agent(policies={"p0": PolicySpec(), "p1": PolicySpec()}, policy_mapping_fn=by_parity)
              .env_runners(num_envs_per_env_runner=2).debugging(seed=2))
    algo = config.build()
    try:
        runner = algo.env_runner
        batch = runner.sample(num_timesteps=20, explore=False)
        for pid, module_batch in batch.policy_batches.items():
            policy = runner.get_policy(pid)
            assert policy.slot is runner.slots[pid]
            valid = module_batch.get("valid", np.ones(module_batch["rewards"].shape, bool))
            actions, _, _ = policy.compute_actions(module_batch["obs"][valid], explore=False)
            np.testing.assert_array_equal(actions, module_batch["actions"][valid])
    finally:
        algo.stop()


def test_server_side_inference_acts_through_a_copy_of_the_runners_slot():
    from rlx.env.external.inference import BatchedPolicy

    algo = PPOConfig().environment("CartPole-v1").debugging(seed=3).build()
    try:
        runner = algo.env_runner
        served = BatchedPolicy(runner, explore=False)
        slot = served.policy.slot
        assert slot is not runner.slot and slot.module is not runner.module
        assert slot.preprocessor is runner.slot.preprocessor and slot.exploration is runner.slot.exploration
        obs = np.stack([runner.observation_space.sample() for _ in range(6)]).astype(np.float32)
        expected, _, _ = algo.get_policy().compute_actions(obs, explore=False)
        got = [served.act(served.prepare(o)).env_action for o in obs]
        np.testing.assert_array_equal(np.asarray(got), expected)
    finally:
        algo.stop()


# ---------------------------------------------------------------------------- the column writer


def test_ragged_columns_mark_the_rows_each_column_closed_and_carry_open_rows_over():
    columns = ModuleColumns((2,), (), np.int64, ragged=True)
    columns.alloc(4, 3)
    # Columns 0 and 2 act, then only column 0's transition completes.
    rows = columns.open_rows(np.array([0, 2]))
    columns.arrays["obs"][rows, [0, 2]] = [[1, 1], [3, 3]]
    columns.close_rows(np.array([0]), np.array([[2.0, 2.0]]), [0.5], [False], [False])
    rows = columns.open_rows(np.array([0]))
    columns.arrays["obs"][rows, [0]] = [[2, 2]]
    columns.close_rows(np.array([0]), np.array([[9.0, 9.0]]), [1.5], [True], [False])
    batch = columns.take_closed().batch
    assert batch["obs"].shape == (2, 1, 2)  # only column 0 closed rows: column 2's open row waits...
    np.testing.assert_array_equal(batch["valid"], [[True], [True]])
    np.testing.assert_array_equal(batch["obs"][:, 0], [[1, 1], [2, 2]])
    np.testing.assert_array_equal(batch["rewards"][:, 0], [0.5, 1.5])
    np.testing.assert_array_equal(batch["terminateds"][:, 0], [False, True])
    columns.alloc(4, 3)
    rows = columns.open_rows(np.array([0]))
    columns.close_rows(np.array([2, 0]), np.array([[4.0, 4.0], [5.0, 5.0]]), [2.0, 0.0], [False, False],
                       [True, False])
    taken = columns.take_closed()
    np.testing.assert_array_equal(taken.columns, [0, 2])  # columns in the order they first closed a row
    np.testing.assert_array_equal(taken.batch["obs"][0, 1], [3, 3])  # ...and is row 0 of the next batch
    np.testing.assert_array_equal(taken.batch["new_obs"][0], [[5, 5], [4, 4]])
    np.testing.assert_array_equal(taken.batch["valid"], [[True, True]])


class TakeTurns(MultiAgentEnv):
    """Two players move in turns for 5 moves (player 0 first). An observation is [move number,
    player]; the mover gets a reward of (its move number + 1)."""

    def __init__(self, config=None):
        super().__init__()
        self.possible_agents = [0, 1]
        self.agents = [0, 1]
        space = gym.spaces.Box(-1.0, 100.0, (2,), np.float32)
        self.observation_spaces = {0: space, 1: space}
        self.action_spaces = {0: gym.spaces.Discrete(2), 1: gym.spaces.Discrete(2)}

    def _obs(self, player):
        return np.array([self.t, player], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed, options=options)
        self.t = 0
        return {0: self._obs(0)}, {0: {}}

    def step(self, action_dict):
        mover = self.t % 2
        assert set(action_dict) == {mover}
        self.t += 1
        rewards = {mover: float(self.t)}
        if self.t == 5:
            obs = {0: self._obs(0), 1: self._obs(1)}
            return obs, rewards, {"__all__": True}, {"__all__": False}, {}
        return {self.t % 2: self._obs(self.t % 2)}, rewards, {"__all__": False}, {"__all__": False}, {}


def to_shared(agent_id, episode, **kwargs):
    return "shared"


def turn_based_runner():
    config = (PPOConfig().environment(TakeTurns)
              .multi_agent(policies={"shared": PolicySpec()}, policy_mapping_fn=to_shared)
              .env_runners(num_envs_per_env_runner=2).debugging(seed=0))
    return config.build()


def test_turn_based_agents_fill_ragged_columns_with_valid_masks():
    algo = turn_based_runner()
    try:
        batch = algo.env_runner.sample(num_timesteps=10).policy_batches["shared"]  # one episode per sub-env
        # Columns: (sub-env 0, player 0), (sub-env 1, player 0), then the players 1 (they act a step later).
        assert batch["obs"].shape == (3, 4, 2)
        np.testing.assert_array_equal(batch["valid"], [[True] * 4, [True] * 4, [True, True, False, False]])
        for c, player in enumerate([0, 0, 1, 1]):
            n = 3 if player == 0 else 2
            moves = np.arange(player, 5, 2)
            np.testing.assert_array_equal(batch["obs"][:n, c], np.stack([moves, np.full(n, player)], 1))
            np.testing.assert_array_equal(batch["new_obs"][:n, c, 0], [*moves[1:], 5])
            np.testing.assert_array_equal(batch["rewards"][:n, c], moves + 1)
            np.testing.assert_array_equal(batch["terminateds"][:n, c], [False] * (n - 1) + [True])
            assert not batch["obs"][n:, c].any() and not batch["rewards"][n:, c].any()
    finally:
        algo.stop()


def test_a_transition_open_when_sample_returns_is_the_first_row_of_the_next_batch():
    algo = turn_based_runner()
    try:
        runner = algo.env_runner
        first = runner.sample(num_timesteps=4).policy_batches["shared"]  # moves 0 and 1 of each sub-env
        # Player 0's move 0 completed (it observed again after move 1); player 1's move 1 waits for
        # its next observation, after move 2: its columns join the batches once they hold a row.
        assert first["obs"].shape == (1, 2, 2) and "valid" not in first
        np.testing.assert_array_equal(first["obs"][0], [[0, 0], [0, 0]])
        second = runner.sample(num_timesteps=6).policy_batches["shared"]  # moves 2, 3, 4: the episodes end
        np.testing.assert_array_equal(second["obs"][0, 2], [1, 1])
        np.testing.assert_array_equal(second["new_obs"][0, 2], [3, 1])
        assert second["rewards"][0, 2] == 2.0
        np.testing.assert_array_equal(second["obs"][:2, 0, 0], [2, 4])
        assert second["terminateds"][1, 0] and second["terminateds"][1, 2]
    finally:
        algo.stop()


# ---------------------------------------------------------------------------- the batch, as before


#: What the multi-agent runner sampled before it was moved onto rlx.env.runner (commit 5a61567):
#: MultiAgentCartPole with 4 agents, policies by agent parity, 2 sub-envs, seed 0, greedy actions,
#: two sample(num_timesteps=60) calls. Per call and policy: shape, each column's actions,
#: each column's valid rows, and sums of obs, new_obs, rewards, terminateds and truncateds.
_HEAD_BATCHES = {
    (0, "p0"): ((11, 4, 4), ["00000000000", "00000000000", "11111111100", "00000000000"], [11, 9, 9, 9],
                8.117, 10.544, 38.0, 4, 0),
    (0, "p1"): ((30, 4, 4), ["101010100101010101001010101010", "011010101010101010101010101101",
                             "010101011010101010110101010101", "010101011010101011010101101010"],
                [30, 30, 30, 30], 9.913, 10.481, 120.0, 0, 0),
    (1, "p1"): ((30, 4, 4), ["100101010101010101010101010110", "010101010101010101010010101010",
                             "010101101010101010010101010101", "101101010101010101010101001010"],
                [30, 30, 30, 30], 21.408, 21.472, 120.0, 0, 0),
}
_HEAD_STEPS = [(60, 158), (60, 120)]


def test_a_simultaneous_four_agent_batch_is_what_the_runner_sampled_before():
    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 4})
              .multi_agent(policies={"p0": PolicySpec(), "p1": PolicySpec()}, policy_mapping_fn=by_parity)
              .env_runners(num_envs_per_env_runner=2).debugging(seed=0))
    algo = config.build()
    try:
        for call in range(2):
            batch = algo.env_runner.sample(num_timesteps=60, explore=False)
            assert (batch.env_steps(), batch.agent_steps()) == _HEAD_STEPS[call]
            assert sorted(batch.policy_batches) == sorted(pid for c, pid in _HEAD_BATCHES if c == call)
            for pid, b in batch.policy_batches.items():
                shape, actions, valid_rows, obs, new_obs, rewards, terms, truncs = _HEAD_BATCHES[(call, pid)]
                assert b["obs"].shape == shape
                assert ["".join(map(str, b["actions"][:, c])) for c in range(shape[1])] == actions
                valid = b.get("valid", np.ones(shape[:2], bool))
                assert valid.sum(axis=0).tolist() == valid_rows
                assert b["obs"].sum() == pytest.approx(obs, abs=2e-3)
                assert b["new_obs"].sum() == pytest.approx(new_obs, abs=2e-3)
                assert (b["rewards"].sum(), b["terminateds"].sum(), b["truncateds"].sum()) == (rewards, terms, truncs)
    finally:
        algo.stop()

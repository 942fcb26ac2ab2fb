"""The example envs of rlx.examples.envs.classes (RLlib's ray.rllib.examples.envs.classes).

Each env's spaces and key behaviour, then one tiny PPO iteration per env (which also runs
rlx's env checker on it), Tuple action spaces included.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.env.env_checker import check_env
from rlx.env.env_context import EnvContext
from rlx.env.multi_agent_env import ALL_AGENTS
from rlx.env.multi_agent_env_checker import check_multi_agent_env
from rlx.examples.envs.classes.action_mask_env import ActionMaskEnv
from rlx.examples.envs.classes.cartpole_crashing import CartPoleCrashing, MultiAgentCartPoleCrashing
from rlx.examples.envs.classes.cartpole_sparse_rewards import CartPoleSparseRewards
from rlx.examples.envs.classes.cartpole_with_dict_observation_space import CartPoleWithDictObservationSpace
from rlx.examples.envs.classes.cartpole_with_large_observation_space import CartPoleWithLargeObservationSpace
from rlx.examples.envs.classes.cliff_walking_wall_env import (ACTION_DOWN, ACTION_LEFT, ACTION_RIGHT, ACTION_UP,
                                                             CliffWalkingWallEnv)
from rlx.examples.envs.classes.correlated_actions_env import CorrelatedActionsEnv
from rlx.examples.envs.classes.debug_counter_env import DebugCounterEnv, MultiAgentDebugCounterEnv
from rlx.examples.envs.classes.deterministic_envs import create_cartpole_deterministic
from rlx.examples.envs.classes.env_with_subprocess import EnvWithSubprocess
from rlx.examples.envs.classes.fast_image_env import FastImageEnv
from rlx.examples.envs.classes.look_and_push import LookAndPush, OneHot
from rlx.examples.envs.classes.memory_leaking_env import MemoryLeakingEnv
from rlx.examples.envs.classes.mock_env import MockEnv, MockEnv2, MockEnv3
from rlx.examples.envs.classes.multi_agent.double_row_corridor_env import DoubleRowCorridorEnv
from rlx.examples.envs.classes.multi_agent.guess_the_number_game import GuessTheNumberGame
from rlx.examples.envs.classes.multi_agent.rock_paper_scissors import RockPaperScissors
from rlx.examples.envs.classes.multi_agent.tic_tac_toe import TicTacToe
from rlx.examples.envs.classes.multi_agent.two_step_game import TwoStepGame, TwoStepGameWithGroupedAgents
from rlx.examples.envs.classes.nested_space_repeat_after_me_env import NestedSpaceRepeatAfterMeEnv
from rlx.examples.envs.classes.parametric_actions_cartpole import (ParametricActionsCartPole,
                                                                   ParametricActionsCartPoleNoEmbeddings)
from rlx.examples.envs.classes.random_env import (RandomEnv, RandomLargeObsSpaceEnv,
                                                  RandomLargeObsSpaceEnvContActions, RandomMultiAgentEnv)
from rlx.examples.envs.classes.repeat_after_me_env import RepeatAfterMeEnv
from rlx.examples.envs.classes.repeat_initial_obs_env import RepeatInitialObsEnv
from rlx.examples.envs.classes.simple_corridor import SimpleCorridor
from rlx.examples.envs.classes.six_room_env import HierarchicalSixRoomEnv, SixRoomEnv
from rlx.examples.envs.classes.stateless_cartpole import StatelessCartPole
from rlx.examples.envs.classes.stateless_pendulum import StatelessPendulum
from rlx.examples.envs.classes.ten_step_error_env import TenStepErrorEnv
from rlx.examples.envs.classes.transformed_action_space_env import (TransformedActionPendulum,
                                                                    transform_action_space)
from rlx.examples.envs.classes.windy_maze_env import WindyMazeEnv
from rlx.utils.errors import EnvError

# ---------------------------------------------------------------- RandomEnv and friends


def test_random_env_defaults():
    env = RandomEnv()
    assert env.action_space == gym.spaces.Discrete(2) and env.observation_space == gym.spaces.Discrete(2)
    assert env.p_terminated == 0.1 and env.max_episode_len is None and not env.check_action_bounds
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info == {}
    _, reward, terminated, truncated, _ = env.step(0)
    assert -1.0 <= reward <= 1.0 and isinstance(terminated, bool) and truncated is False


def test_random_env_config_keys():
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    env = RandomEnv({"observation_space": obs_space, "action_space": gym.spaces.Discrete(4),
                     "reward_space": gym.spaces.Box(5.0, 6.0, (), np.float32),
                     "p_terminated": 0.0, "max_episode_len": 7})
    obs, _ = env.reset(seed=1)
    assert obs_space.contains(obs)
    for t in range(1, 8):
        obs, reward, terminated, truncated, _ = env.step(3)
        assert obs_space.contains(obs) and 5.0 <= reward <= 6.0 and not terminated
        assert truncated == (t == 7)
    # p_terminated=1.0 ends every episode at its first step; `p_done` is the old name.
    for key in ("p_terminated", "p_done"):
        env = RandomEnv({key: 1.0})
        env.reset(seed=0)
        assert env.step(0)[2] is True


def test_random_env_check_action_bounds_and_static_samples():
    env = RandomEnv({"action_space": gym.spaces.Discrete(2), "check_action_bounds": True})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="Illegal action"):
        env.step(5)
    RandomEnv({"action_space": gym.spaces.Discrete(2)}).step(5)  # unchecked by default
    tuple_env = RandomEnv({"action_space": gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2)})
    with pytest.raises(ValueError, match="Illegal action"):
        tuple_env.step((0,))
    static = RandomEnv({"observation_space": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                        "static_samples": True, "p_terminated": 0.0})
    first, _ = static.reset()
    obs, reward1, *_ = static.step(0)
    _, reward2, *_ = static.step(1)
    np.testing.assert_array_equal(first, obs)
    assert reward1 == reward2


def test_random_env_seeded_resets_repeat():
    config = {"observation_space": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    a, b = RandomEnv(config), RandomEnv({"observation_space": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
    np.testing.assert_array_equal(a.reset(seed=3)[0], b.reset(seed=3)[0])


def test_random_large_obs_space_envs_and_old_import_path():
    assert RandomLargeObsSpaceEnv().observation_space.shape == (5000,)
    cont = RandomLargeObsSpaceEnvContActions({"observation_space": gym.spaces.Discrete(3)})
    assert cont.observation_space.shape == (5000,) and cont.action_space.shape == (5,)
    from rlx.examples.env.random_env import RandomEnv as OldPathRandomEnv

    assert OldPathRandomEnv is RandomEnv
    env = RandomMultiAgentEnv({"num_agents": 3, "p_terminated": 0.0, "max_episode_len": 2})
    assert env.possible_agents == [0, 1, 2]
    assert pickle.loads(pickle.dumps(RandomMultiAgentEnv)) is RandomMultiAgentEnv


def test_memory_leaking_env_leaks_once_per_episode():
    env = MemoryLeakingEnv({"p_terminated": 0.0})
    for _ in range(3):
        env.reset()
        for _ in range(5):
            env.step(0)
    assert len(env._leak) == 3


def test_action_mask_env_rejects_masked_actions():
    env = ActionMaskEnv({"action_space": gym.spaces.Discrete(10),
                         "observation_space": gym.spaces.Box(-1.0, 1.0, (5,), np.float32), "p_terminated": 0.0})
    assert set(env.observation_space.spaces) == {"action_mask", "observations"}
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and set(np.unique(obs["action_mask"])) <= {0.0, 1.0}
    for _ in range(20):
        mask = obs["action_mask"]
        if mask.all() or not mask.any():
            obs, *_ = env.step(int(np.argmax(mask))) if mask.any() else env.reset()
            continue
        with pytest.raises(ValueError, match="Invalid action"):
            env.step(int(np.argmin(mask)))
        obs, *_ = env.step(int(np.argmax(mask)))
        assert env.observation_space.contains(obs)


# ---------------------------------------------------------------- CartPole variants


def test_stateless_cartpole_hides_velocities():
    env, full = StatelessCartPole(), gym.make("CartPole-v1").unwrapped
    assert env.observation_space.shape == (2,) and env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=5)
    full_obs, _ = full.reset(seed=5)
    np.testing.assert_allclose(obs, full_obs[[0, 2]])
    obs, reward, *_ = env.step(1)
    full_obs, *_ = full.step(1)
    np.testing.assert_allclose(obs, full_obs[[0, 2]])
    assert reward == 1.0 and env.observation_space.contains(obs)


def test_stateless_pendulum_hides_angular_velocity():
    env = StatelessPendulum({"g": 9.81})
    assert env.g == 9.81 and env.observation_space.shape == (2,)
    obs, _ = env.reset(seed=0)
    obs, reward, *_ = env.step(np.array([0.5], np.float32))
    assert obs.shape == (2,) and np.isclose(obs[0] ** 2 + obs[1] ** 2, 1.0, atol=1e-5) and reward <= 0.0


def test_cartpole_with_dict_observation_space():
    env = CartPoleWithDictObservationSpace()
    space = env.observation_space
    assert set(space.spaces) == {"x-pos", "angular-pos", "velocs"}
    assert space["angular-pos"]["value"].shape == () and space["x-pos"].shape == (1,)
    assert isinstance(space["velocs"], gym.spaces.Tuple)
    obs, _ = env.reset(seed=0)
    full_obs, _ = gym.make("CartPole-v1").unwrapped.reset(seed=0)
    assert space.contains(obs)
    np.testing.assert_allclose([obs["x-pos"][0], obs["velocs"][0][0], obs["angular-pos"]["value"],
                                obs["velocs"][1]], full_obs)


def test_cartpole_with_large_observation_space():
    env = CartPoleWithLargeObservationSpace()
    assert len(env.observation_space.spaces) == 101
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    np.testing.assert_allclose(obs["actually-useful-stuff"], gym.make("CartPole-v1").unwrapped.reset(seed=0)[0])


def test_cartpole_sparse_rewards_pay_at_the_end():
    env = CartPoleSparseRewards()
    env.reset(seed=0)
    rewards, terminated = [], False
    while not terminated:
        obs, reward, terminated, truncated, _ = env.step(0)
        rewards.append(reward)
    assert rewards[:-1] == [0.0] * (len(rewards) - 1) and rewards[-1] == len(rewards)
    np.testing.assert_array_equal(obs["action_mask"], [1, 1])
    env.reset(seed=1)
    env.step(1)
    state = env.get_state()
    first = env.step(0)[0]["obs"]
    env.set_state(state)
    np.testing.assert_allclose(env.step(0)[0]["obs"], first)


def test_cartpole_crashing_crashes_after_n_steps_only_on_chosen_workers():
    env = CartPoleCrashing(EnvContext({"p_crash": 0.0, "crash_after_n_steps": 3}, worker_index=1))
    env.reset(seed=0)
    env.step(0)
    env.step(0)
    with pytest.raises(EnvError, match="Simulated env crash"):
        env.step(0)
    spared = CartPoleCrashing(EnvContext({"crash_after_n_steps": 1, "crash_on_worker_indices": [2]},
                                         worker_index=1))
    spared.reset(seed=0)
    spared.step(0)
    with pytest.raises(EnvError):
        CartPoleCrashing({"p_crash_reset": 1.0}).reset()


# ---------------------------------------------------------------- small custom envs


def test_correlated_actions_env_reward_rule():
    env = CorrelatedActionsEnv()
    assert isinstance(env.action_space, gym.spaces.Tuple)
    assert env.action_space[0] == gym.spaces.Discrete(3) and env.action_space[1].shape == (1,)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    x = float(obs[0])
    _, reward, terminated, truncated, _ = env.step((1, np.array([-0.3], np.float32)))
    assert np.isclose(reward, -abs(1.0 - (x + 1)) - abs(x + 1 - 0.3), atol=1e-6)
    assert terminated is True and truncated is False
    # The docstring's examples.
    assert np.isclose(CorrelatedActionsEnv.reward(-0.3, 1, 0.0), -0.3 - 0.7)
    assert np.isclose(CorrelatedActionsEnv.reward(0.5, 0, -0.7), -0.5 - 0.2)
    assert CorrelatedActionsEnv.reward(0.0, 1, -1.0) == 0.0  # the best answer to obs 0.0


def test_simple_corridor():
    env = SimpleCorridor({"corridor_length": 3})
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs, [0.0])
    assert env.step(0)[:3] == (env._obs(), -0.01, False)  # cannot go left of 0
    for expected in (1.0, 2.0):
        obs, reward, terminated, *_ = env.step(1)
        assert obs[0] == expected and reward == -0.01 and not terminated
    obs, reward, terminated, *_ = env.step(1)
    assert reward == 1.0 and terminated
    env.set_corridor_length(5)
    assert env.end_pos == 5
    with pytest.raises(ValueError):
        env.set_corridor_length(1000)


def test_cliff_walking_wall_env():
    env = CliffWalkingWallEnv()
    assert env.observation_space == gym.spaces.Discrete(48) and env.action_space == gym.spaces.Discrete(4)
    assert env.reset()[0] == 36
    assert env.step(ACTION_RIGHT)[0] == 36  # the wall is right of the start
    assert env.step(ACTION_LEFT)[:2] == (36, -1)
    assert env.step(ACTION_UP)[0] == 24
    for _ in range(11):
        pos, *_ = env.step(ACTION_RIGHT)
    assert pos == 35
    pos, reward, terminated, truncated, _ = env.step(ACTION_DOWN)
    assert (pos, reward, terminated, truncated) == (47, 10, True, False)
    assert CliffWalkingWallEnv({"seed": 1}).action_space.sample() == CliffWalkingWallEnv(1).action_space.sample()


def test_repeat_after_me_env():
    env = RepeatAfterMeEnv({"repeat_delay": 1, "episode_len": 5})
    first, _ = env.reset(seed=0)
    assert env.step(0)[1] == 1.0  # the token before the first is 0
    _, reward, *_ = env.step(first)
    assert reward == 1.0
    cont = RepeatAfterMeEnv({"continuous": True, "repeat_delay": 0})
    obs, _ = cont.reset(seed=0)
    assert cont.observation_space.contains(obs)
    assert cont.step(obs)[1] == 0.0


def test_repeat_initial_obs_env():
    env = RepeatInitialObsEnv({"episode_len": 3})
    token, _ = env.reset(seed=0)
    assert env.step(token)[:2] == (0, 1) and env.step(1 - token)[1] == -1
    assert env.step(token)[2:4] == (True, True)


def test_nested_space_repeat_after_me_env():
    env = NestedSpaceRepeatAfterMeEnv({"episode_len": 2})
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    _, reward, terminated, truncated, _ = env.step(obs)
    assert reward == 1.0 and not terminated and not truncated
    wrong = (1 - obs[0], {"a": obs[1]["a"] + 0.5})
    assert np.isclose(env.reward(wrong, obs), -1.0)
    assert env.step(obs)[3] is True


def test_debug_counter_envs():
    env = DebugCounterEnv({"start_at_t": 2})
    assert env.reset()[0][0] == 2.0
    for t in range(3, 18):
        obs, reward, terminated, truncated, _ = env.step(0)
        assert obs[0] == t and reward == t % 3 and truncated == (t == 17)
    ma = MultiAgentDebugCounterEnv({"num_agents": 2, "base_episode_len": 2})
    obs, _ = ma.reset()
    np.testing.assert_array_equal(obs[1], [1, 0, 0, 0])
    obs, rewards, *_ = ma.step({0: np.array([7.0, 8.0]), 1: np.array([1.0, 2.0])})
    np.testing.assert_array_equal(obs[0], [0, 7, 8, 1])
    assert rewards == {0: 1.0, 1: 1.0}


def test_mock_envs_and_fast_image_env():
    for env in (MockEnv(3), MockEnv({"episode_length": 3})):
        env.reset()
        assert [env.step(0)[1:3] for _ in range(3)] == [(1.0, False), (1.0, False), (1.0, True)]
    env2 = MockEnv2(2)
    env2.reset(seed=7)
    assert env2.rng_seed == 7 and env2.step(0)[:2] == (1, 100.0) and env2.render().shape == (300, 400, 3)
    assert MockEnv3(2).reset()[1] == {"timestep": 0}
    image = FastImageEnv()
    obs, _ = image.reset()
    assert image.observation_space.contains(obs)


def test_ten_step_error_env_fails_in_its_second_episode():
    env = TenStepErrorEnv({})
    env.reset(seed=0)
    results = [env.step(np.array([0.5], np.float32)) for _ in range(10)]
    assert results[-1][2] is True and not any(r[2] for r in results[:-1])
    assert env.reset()[1] == {"last_eps_errored": True}
    for _ in range(9):
        env.step(np.array([0.5], np.float32))
    with pytest.raises(Exception, match="Test error"):
        env.step(np.array([0.5], np.float32))


def test_look_and_push_optimal_play():
    env = OneHot(LookAndPush())
    for _ in range(10):
        obs, _ = env.reset()
        np.testing.assert_array_equal(obs, np.eye(5)[2])
        case, *_ = env.step(0)  # look
        case = int(np.argmax(case))
        env.step(1)  # back to 2
        env.step(1)
        env.step(1)  # now in 4
        _, reward, terminated, truncated, _ = env.step(1)
        assert terminated and not truncated and reward == (10.0 if case == 1 else -10.0)


def test_six_room_and_windy_maze_envs():
    env = SixRoomEnv({"time_limit": 3})
    assert env.observation_space == gym.spaces.Discrete(9 * 13)
    assert env.reset()[0] == 14
    assert env.step(0)[0] == 14  # a wall above
    assert env.step(1)[0] == 27
    assert env.step(1)[3] is True  # time limit
    hier = HierarchicalSixRoomEnv({})
    obs, _ = hier.reset()
    obs, rewards, *_ = hier.step({"high_level_agent": (15, 2)})
    assert list(obs) == ["low_level_agent_2"] and obs["low_level_agent_2"] == (14, 15)
    obs, rewards, *_ = hier.step({"low_level_agent_2": 3})  # move right onto the target
    assert list(obs) == ["high_level_agent"] and rewards == {"high_level_agent": 1.0, "low_level_agent_2": 1.0}
    maze = WindyMazeEnv({})
    obs, _ = maze.reset(seed=0)
    assert maze.observation_space.contains(obs) and tuple(obs[0]) == maze.start_pos


def test_parametric_actions_cartpole():
    env = ParametricActionsCartPole(6)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and obs["action_mask"].sum() == 2
    np.testing.assert_allclose(obs["avail_actions"][env.left_idx], env.left_action_embed)
    with pytest.raises(ValueError):
        env.step(int(np.flatnonzero(obs["action_mask"] == 0)[0]))
    obs, reward, *_ = env.step(env.right_idx)
    assert reward == 1.0 and env.observation_space.contains(obs)
    no_embed = ParametricActionsCartPoleNoEmbeddings({"max_avail_actions": 5})
    obs, _ = no_embed.reset(seed=0)
    assert no_embed.observation_space.contains(obs) and obs["valid_avail_actions_mask"].sum() == 2.0


def test_transformed_action_space():
    env = TransformedActionPendulum({"low": -15.0})
    assert env.action_space == gym.spaces.Box(-15.0, 1.0, (1,), np.float32)
    assert np.allclose(env.action(np.array([-15.0])), [-2.0]) and np.allclose(env.action(np.array([1.0])), [2.0])
    env = transform_action_space("Pendulum-v1")({"_low": 0.0, "_high": 4.0, "g": 9.0})
    assert env.action_space.low[0] == 0.0 and env.unwrapped.g == 9.0
    assert np.allclose(env.action(np.array([2.0])), [0.0])
    assert pickle.loads(pickle.dumps(TransformedActionPendulum))({}).action_space.high[0] == 1.0


def test_env_with_subprocess_cleans_up(tmp_path):
    files = {f"tmp_file{i}": str(tmp_path / f"f{i}") for i in range(1, 5)}
    for path in files.values():
        open(path, "w").close()
    env = EnvWithSubprocess(EnvContext(files, worker_index=0))
    check_env(env)
    assert env.subproc.poll() is None
    env.close()
    assert env.subproc.poll() is not None
    assert not os.path.exists(files["tmp_file3"]) and os.path.exists(files["tmp_file4"])
    # At interpreter exit, worker 1's env deletes tmp_file2.
    code = ("import sys; from rlx.env.env_context import EnvContext; "
            "from rlx.examples.envs.classes.env_with_subprocess import EnvWithSubprocess; "
            f"EnvWithSubprocess(EnvContext({files!r}, worker_index=1))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert not os.path.exists(files["tmp_file2"]) and os.path.exists(files["tmp_file1"])


# ---------------------------------------------------------------- multi-agent envs


def test_two_step_game_payoffs():
    env = TwoStepGame({})
    assert env.observation_space == gym.spaces.Discrete(6) and env.action_space == gym.spaces.Discrete(2)
    assert env.reset(seed=0)[0] == {0: 0, 1: 3}
    obs, rewards, terms, *_ = env.step({0: 0, 1: 1})
    assert obs == {0: 1, 1: 4} and rewards == {0: 0.0, 1: 0.0} and not terms[ALL_AGENTS]
    assert env.step({0: 1, 1: 0})[1:3] == ({0: 3.5, 1: 3.5}, {ALL_AGENTS: True})
    for a0, a1, total in ((1, 1, 8), (0, 0, 0), (0, 1, 1)):
        env.reset()
        env.step({0: 1, 1: 0})
        assert sum(env.step({0: a0, 1: a1})[1].values()) == total
    one_hot = TwoStepGame({"one_hot_state_encoding": True, "separate_state_space": True})
    obs, _ = one_hot.reset()
    np.testing.assert_array_equal(obs[1]["obs"], [1, 0, 0, 2])
    assert one_hot.observation_space.contains(obs[0])


def test_two_step_game_with_grouped_agents():
    env = TwoStepGameWithGroupedAgents({})
    assert env.get_action_space("agents") == gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2)
    obs, _ = env.reset()
    assert obs == {"agents": (0, 3)}
    env.step({"agents": (1, 0)})
    obs, rewards, terms, _, infos = env.step({"agents": (1, 1)})
    assert rewards == {"agents": 8.0} and terms[ALL_AGENTS]
    assert infos["agents"]["_group_rewards"] == [4.0, 4.0]
    check_multi_agent_env(TwoStepGameWithGroupedAgents({}), seed=0)


def test_guess_the_number_game():
    env = GuessTheNumberGame({"max_number": 5, "max_steps": 3})
    assert env.action_space == gym.spaces.MultiDiscrete([3, 5])
    assert env.reset()[0] == {0: 0}
    obs, rewards, *_ = env.step({0: np.array([0, 2])})
    assert obs == {1: 0} and rewards == {0: 0.0}
    assert env.step({1: np.array([0, 4])})[1] == {1: 1.0, 0: 1.0}  # "is 4 lower?" -> 2 is lower: yes
    assert env.step({1: np.array([1, 4])})[1] == {1: 0.0, 0: 1.0}
    _, rewards, terms, truncs, _ = env.step({1: np.array([2, 1])})  # wrong guess, last step
    assert rewards == {1: 0.0, 0: 100.0} and truncs[ALL_AGENTS] and not terms[ALL_AGENTS]
    env.reset()
    env.step({0: np.array([2, 3])})
    _, rewards, terms, *_ = env.step({1: np.array([2, 3])})
    assert rewards == {1: 100.0, 0: -100.0} and terms[ALL_AGENTS]


def test_double_row_corridor_env():
    env = DoubleRowCorridorEnv({"length": 3})
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs["agent_1"], [1, 2])
    assert env.get_observation_space("agent_0").contains(obs["agent_0"])
    obs, rewards, *_ = env.step({"agent_0": 3, "agent_1": 2})  # to [0, 1] and [1, 1]
    assert rewards == {"agent_0": -0.1, "agent_1": -0.1}
    obs, rewards, *_ = env.step({"agent_0": 1, "agent_1": 1})  # both on [1, 1]: they meet
    assert np.isclose(rewards["agent_0"], 4.9) and np.isclose(rewards["agent_1"], 4.9)
    obs, rewards, *_ = env.step({"agent_0": 1, "agent_1": 1})  # still on [1, 1]: meeting again pays nothing
    assert rewards == {"agent_0": -0.1, "agent_1": -0.1}
    obs, rewards, terms, *_ = env.step({"agent_0": 0, "agent_1": 2})  # agent_1 reaches [1, 0]
    assert np.isclose(rewards["agent_1"], 9.9) and terms["agent_1"] and not terms[ALL_AGENTS]
    assert "agent_1" in obs  # a last observation
    obs, rewards, terms, *_ = env.step({"agent_0": 3})  # agent_0 reaches [0, 2]
    assert set(rewards) == {"agent_0"} and np.isclose(rewards["agent_0"], 9.9) and terms[ALL_AGENTS]


def test_rock_paper_scissors_with_sheldon_cooper_mode():
    env = RockPaperScissors({})
    assert env.get_action_space("player1") == gym.spaces.Discrete(3)
    env.reset()
    obs, rewards, *_ = env.step({"player1": RockPaperScissors.PAPER, "player2": RockPaperScissors.ROCK})
    assert obs == {"player1": 0, "player2": 1} and rewards == {"player1": 1.0, "player2": -1.0}
    for _ in range(9):
        *_, terms, _, _ = env.step({"player1": 0, "player2": 0})
    assert terms[ALL_AGENTS]
    sheldon = RockPaperScissors({"sheldon_cooper_mode": True})
    assert sheldon.get_observation_space("player2") == gym.spaces.Discrete(5)
    m = RockPaperScissors.WIN_MATRIX
    assert m[RockPaperScissors.SPOCK, RockPaperScissors.ROCK] == (1, -1)
    assert m[RockPaperScissors.LIZARD, RockPaperScissors.SCISSORS] == (-1, 1)
    assert m[RockPaperScissors.PAPER, RockPaperScissors.SPOCK] == (1, -1)
    assert all(m[a, b] == tuple(-x for x in m[b, a]) for a in range(5) for b in range(5))


def test_tic_tac_toe_turns_invalid_moves_and_wins():
    env = TicTacToe()
    obs, _ = env.reset(seed=0)
    (first,) = obs
    second = "player2" if first == "player1" else "player1"
    obs, rewards, *_ = env.step({first: 0})
    np.testing.assert_array_equal(obs[second], [-1, 0, 0, 0, 0, 0, 0, 0, 0])
    obs, rewards, *_ = env.step({second: 0})  # occupied: -0.5, the turn passes
    assert rewards == {second: -0.5} and list(obs) == [first]
    env.step({first: 1})
    env.step({second: 4})
    obs, rewards, terms, truncs, _ = env.step({first: 2})  # 0, 1, 2: a row
    assert rewards == {first: 1.0, second: -1.0} and terms[ALL_AGENTS] and not truncs[ALL_AGENTS]
    np.testing.assert_array_equal(obs[first], -obs[second])


# ---------------------------------------------------------------- one PPO iteration on each env


def _ppo(env, env_config=None, multi_agent=None):
    config = (PPOConfig().environment(env, env_config=env_config or {})
              .training(train_batch_size=200, minibatch_size=50, num_epochs=1).debugging(seed=0))
    if multi_agent is not None:
        config = config.multi_agent(**multi_agent)
    return config


def _per_agent(prefix=""):
    return lambda agent_id, episode, **kwargs: f"{prefix}{agent_id}"


def _policies(*agent_ids, prefix=""):
    return {"policies": {f"{prefix}{aid}" for aid in agent_ids}, "policy_mapping_fn": _per_agent(prefix)}



_TRAINABLE = [
    pytest.param(RandomEnv, {}, None, id="RandomEnv"),
    pytest.param(RandomEnv, {"observation_space": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
                             "action_space": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                             "max_episode_len": 20, "check_action_bounds": False}, None, id="RandomEnv-box"),
    pytest.param("rlx.examples.env.random_env.RandomEnv", {}, None, id="RandomEnv-old-path"),
    pytest.param(RandomLargeObsSpaceEnv, {}, None, id="RandomLargeObsSpaceEnv"),
    pytest.param(RandomLargeObsSpaceEnvContActions, {}, None, id="RandomLargeObsSpaceEnvContActions"),
    pytest.param(MemoryLeakingEnv, {}, None, id="MemoryLeakingEnv"),
    pytest.param(StatelessCartPole, {}, None, id="StatelessCartPole"),
    pytest.param(StatelessPendulum, {}, None, id="StatelessPendulum"),
    pytest.param(CartPoleWithDictObservationSpace, {}, None, id="CartPoleWithDictObservationSpace"),
    pytest.param(CartPoleWithLargeObservationSpace, {}, None, id="CartPoleWithLargeObservationSpace"),
    pytest.param(CartPoleSparseRewards, {}, None, id="CartPoleSparseRewards"),
    pytest.param(CartPoleCrashing, {"p_crash": 0.0}, None, id="CartPoleCrashing"),
    pytest.param(SimpleCorridor, {"corridor_length": 5}, None, id="SimpleCorridor"),
    pytest.param(CliffWalkingWallEnv, {}, None, id="CliffWalkingWallEnv"),
    pytest.param(RepeatAfterMeEnv, {}, None, id="RepeatAfterMeEnv"),
    pytest.param(RepeatAfterMeEnv, {"continuous": True}, None, id="RepeatAfterMeEnv-continuous"),
    pytest.param(RepeatInitialObsEnv, {"episode_len": 10}, None, id="RepeatInitialObsEnv"),
    pytest.param(NestedSpaceRepeatAfterMeEnv, {"space": gym.spaces.Box(-1.0, 1.0, (3,), np.float32)}, None,
                 id="NestedSpaceRepeatAfterMeEnv-box"),
    pytest.param(DebugCounterEnv, {}, None, id="DebugCounterEnv"),
    pytest.param(MockEnv, {"episode_length": 5}, None, id="MockEnv"),
    pytest.param(MockEnv2, {"episode_length": 5}, None, id="MockEnv2"),
    pytest.param(MockEnv3, {"episode_length": 5}, None, id="MockEnv3"),
    pytest.param(FastImageEnv, {}, None, id="FastImageEnv"),
    pytest.param(LookAndPush, {}, None, id="LookAndPush"),
    pytest.param(SixRoomEnv, {}, None, id="SixRoomEnv"),
    pytest.param(WindyMazeEnv, {}, None, id="WindyMazeEnv"),
    pytest.param(TransformedActionPendulum, {"low": -15.0}, None, id="TransformedActionPendulum"),
    pytest.param(create_cartpole_deterministic, {"seed": 3}, None, id="create_cartpole_deterministic"),
    pytest.param(TwoStepGame, {}, _policies(0, 1, prefix="p"), id="TwoStepGame"),
    pytest.param(TwoStepGame, {"one_hot_state_encoding": True}, _policies(0, 1, prefix="p"),
                 id="TwoStepGame-one-hot"),
    pytest.param(GuessTheNumberGame, {}, _policies(0, 1, prefix="p"), id="GuessTheNumberGame"),
    pytest.param(DoubleRowCorridorEnv, {"length": 5}, _policies("agent_0", "agent_1"), id="DoubleRowCorridorEnv"),
    pytest.param(RockPaperScissors, {"sheldon_cooper_mode": True}, _policies("player1", "player2"),
                 id="RockPaperScissors"),
    pytest.param(TicTacToe, {}, _policies("player1", "player2"), id="TicTacToe"),
    pytest.param(RandomMultiAgentEnv, {"num_agents": 2}, _policies(0, 1, prefix="p"), id="RandomMultiAgentEnv"),
    pytest.param(MultiAgentDebugCounterEnv, {"num_agents": 2, "base_episode_len": 10},
                 _policies(0, 1, prefix="p"), id="MultiAgentDebugCounterEnv"),
    pytest.param(MultiAgentCartPoleCrashing, {"num_agents": 2, "p_crash": 0.0}, _policies(0, 1, prefix="p"),
                 id="MultiAgentCartPoleCrashing"),
]


@pytest.mark.slow
@pytest.mark.parametrize("env, env_config, multi_agent", _TRAINABLE)
def test_one_ppo_iteration(env, env_config, multi_agent):
    algo = _ppo(env, env_config, multi_agent).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["num_env_steps_sampled_lifetime"] >= 200


def test_one_ppo_iteration_on_env_with_subprocess(tmp_path):
    files = {f"tmp_file{i}": str(tmp_path / f"f{i}") for i in range(1, 5)}
    for path in files.values():
        open(path, "w").close()
    algo = _ppo(EnvWithSubprocess, files).build()
    try:
        assert algo.train()["num_env_steps_sampled_lifetime"] >= 200
    finally:
        algo.stop()


@pytest.mark.parametrize("env, env_config, multi_agent", [
    pytest.param(CorrelatedActionsEnv, {}, None, id="CorrelatedActionsEnv"),
    pytest.param(NestedSpaceRepeatAfterMeEnv, {}, None, id="NestedSpaceRepeatAfterMeEnv"),
    pytest.param(TwoStepGameWithGroupedAgents, {}, {"policies": {"agents"},
                                                    "policy_mapping_fn": _per_agent()},
                 id="TwoStepGameWithGroupedAgents"),
    pytest.param(HierarchicalSixRoomEnv, {}, _policies("high_level_agent", *[f"low_level_agent_{i}" for i in
                                                                             range(3)]),
                 id="HierarchicalSixRoomEnv"),
])
def test_one_ppo_iteration_tuple_action_spaces(env, env_config, multi_agent):
    # The envs themselves pass the env checkers ...
    instance = env(env_config)
    if multi_agent is None:
        check_env(instance, seed=0)
    else:
        check_multi_agent_env(instance, seed=0)
    # ... and PPO's default model acts in their Tuple action spaces (a multi-action distribution).
    algo = _ppo(env, env_config, multi_agent).build()
    try:
        result = algo.train()
        assert result["num_env_steps_sampled_lifetime"] >= 200
    finally:
        algo.stop()

"""PettingZooEnv and ParallelPettingZooEnv: turn order, reward accounting, episode ends, spaces, errors."""
from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import gymnasium as gym
import numpy as np
import pettingzoo
import pytest
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import aec_to_parallel, parallel_to_aec, parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv
from rlx.utils.errors import EnvError

# ---------------------------------------------------------------- envs


def rps_aec(max_cycles: int = 5, **kwargs):
    return pettingzoo.make("aec", "classic/rps-v2", max_cycles=max_cycles, **kwargs)


def rps_parallel(max_cycles: int = 5):
    return pettingzoo.make("parallel", "classic/rps-v2", max_cycles=max_cycles)


def tictactoe():
    return pettingzoo.make("aec", "classic/tictactoe-v3")


class TurnGame(AECEnv):
    """Three agents take turns. The mover gets `action + 0.1 * its move count`, every other live
    agent -0.25 (so agents earn rewards while others move). An agent terminates after
    `lifetimes[agent]` moves (None: never); everyone left is truncated after `max_turns` turns."""

    metadata = {"name": "turn_game_v0", "is_parallelizable": False}

    def __init__(self, lifetimes=None, max_turns: int = 8):
        super().__init__()
        self.lifetimes = lifetimes or {"a0": None, "a1": 2, "a2": None}
        self.max_turns = max_turns
        self.possible_agents = list(self.lifetimes)
        self.last_seed = "never reset"

    def observation_space(self, agent):
        return gym.spaces.Discrete(100)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.last_seed = seed
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {"turn": 0} for agent in self.agents}
        self.moves = dict.fromkeys(self.agents, 0)
        self.turn = 0
        self.agent_selection = self.agents[0]

    def observe(self, agent):
        return self.moves[agent]

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0
        self.turn += 1
        self.moves[agent] += 1
        for other in self.agents:
            self.rewards[other] = action + 0.1 * self.moves[agent] if other == agent else -0.25
            self.infos[other]["turn"] = self.turn
        if self.lifetimes[agent] is not None and self.moves[agent] >= self.lifetimes[agent]:
            self.terminations[agent] = True
        if self.turn >= self.max_turns:
            self.truncations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.agents[(self.agents.index(agent) + 1) % len(self.agents)]
        self._accumulate_rewards()
        self._deads_step_first()


class Gatherers(ParallelEnv):
    """Three agents act at once; each gets `action * (index + 1) - 0.1`. g1 terminates after
    `g1_life` steps; everyone left is truncated after `max_steps` steps."""

    metadata = {"name": "gatherers_v0"}

    def __init__(self, g1_life: int = 2, max_steps: int = 4):
        self.possible_agents = ["g0", "g1", "g2"]
        self.g1_life, self.max_steps = g1_life, max_steps
        self.render_mode = None

    def observation_space(self, agent):
        return gym.spaces.Discrete(100)

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents = self.possible_agents[:]
        self.t = 0
        return dict.fromkeys(self.agents, 0), {agent: {} for agent in self.agents}

    def step(self, actions):
        self.t += 1
        rewards = {a: actions[a] * (self.possible_agents.index(a) + 1) - 0.1 for a in self.agents}
        terminations = {a: a == "g1" and self.t >= self.g1_life for a in self.agents}
        truncations = {a: self.t >= self.max_steps and not terminations[a] for a in self.agents}
        obs = dict.fromkeys(self.agents, self.t)
        infos = {a: {"t": self.t} for a in self.agents}
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return obs, rewards, terminations, truncations, infos


def policy(agent, n: int, num_actions: int = 3) -> int:
    """A fixed, agent-dependent action sequence (n: how many times `agent` has acted)."""
    return (n * 7 + len(str(agent)) + sum(map(ord, str(agent)))) % num_actions


# ---------------------------------------------------------------- runners


def play_wrapped(env: MultiAgentEnv, seed: int = 0, num_actions: int = 3, max_steps: int = 1000):
    """Play one episode of a wrapped env with `policy`; (per-agent reward totals, list of step outputs, movers)."""
    obs, _ = env.reset(seed=seed)
    totals, counts, steps, movers = defaultdict(float), defaultdict(int), [], []
    acting = list(obs)
    for _ in range(max_steps):
        actions = {}
        for agent in acting:
            actions[agent] = policy(agent, counts[agent], num_actions)
            counts[agent] += 1
        movers.append(sorted(actions))
        out = env.step(actions)
        steps.append(out)
        obs, rewards, terms, truncs, _ = out
        for agent, r in rewards.items():
            totals[agent] += r
        if terms[ALL_AGENTS] or truncs[ALL_AGENTS]:
            return dict(totals), steps, movers
        acting = [a for a in obs if not (terms.get(a) or truncs.get(a))]
    raise AssertionError("the episode never ended")


def play_aec_last(env, seed: int = 0, num_actions: int = 3):
    """PettingZoo's own AEC loop (agent_iter + last()): per-agent sums of the cumulative rewards."""
    env.reset(seed=seed)
    totals, counts = defaultdict(float), defaultdict(int)
    for agent in env.agent_iter():
        _, reward, term, trunc, _ = env.last()
        totals[agent] += reward
        if term or trunc:
            env.step(None)
        else:
            env.step(policy(agent, counts[agent], num_actions))
            counts[agent] += 1
    return dict(totals)


def play_parallel_raw(env, seed: int = 0, num_actions: int = 3):
    """A raw PettingZoo parallel episode: per-agent sums of the step rewards."""
    env.reset(seed=seed)
    totals, counts = defaultdict(float), defaultdict(int)
    while env.agents:
        actions = {}
        for agent in env.agents:
            actions[agent] = policy(agent, counts[agent], num_actions)
            counts[agent] += 1
        _, rewards, _, _, _ = env.step(actions)
        for agent, r in rewards.items():
            totals[agent] += r
    return dict(totals)


def assert_totals_equal(a: dict, b: dict):
    assert set(a) == set(b), (a, b)
    for agent in a:
        assert a[agent] == pytest.approx(b[agent]), (agent, a, b)


# ---------------------------------------------------------------- PettingZooEnv (AEC)


def test_rps_turn_order_obs_and_spaces():
    env = PettingZooEnv(rps_aec(max_cycles=3))
    assert isinstance(env, MultiAgentEnv)
    assert env.possible_agents == ["player_0", "player_1"]
    assert env.agents == []  # before reset
    for agent in env.possible_agents:
        assert env.get_observation_space(agent) == gym.spaces.Discrete(4)
        assert env.get_action_space(agent) == gym.spaces.Discrete(3)
    assert env.observation_spaces == {a: gym.spaces.Discrete(4) for a in env.possible_agents}
    assert env.action_space == gym.spaces.Dict({a: gym.spaces.Discrete(3) for a in env.possible_agents})

    obs, infos = env.reset(seed=0)
    assert list(obs) == ["player_0"] and list(infos) == ["player_0"]
    assert obs["player_0"] == 3  # "no move yet"
    assert env.agents == ["player_0", "player_1"]
    _, steps, movers = play_wrapped(env)
    assert movers == [["player_0"], ["player_1"]] * 3
    for out in steps[:-1]:
        # The next mover observes; the other one waits.
        assert len(out[0]) == 1
    assert env.agents == []


def test_rps_rewards_reach_both_players_and_match_pettingzoo():
    env = PettingZooEnv(rps_aec(max_cycles=5))
    totals, steps, _ = play_wrapped(env)
    # Every live agent is in every step's rewards; the round's outcome arrives when the round ends.
    for i, (_, rewards, _, _, _) in enumerate(steps):
        assert set(rewards) == {"player_0", "player_1"}
        if i % 2 == 0:
            assert rewards == {"player_0": 0.0, "player_1": 0.0}
        else:
            assert rewards["player_0"] == -rewards["player_1"]
    assert any(r != 0 for r in totals.values()), "the scripted game should not be all draws"
    # The same game three ways in PettingZoo: its AEC loop (last() rewards) and its parallel env.
    assert_totals_equal(totals, play_aec_last(rps_aec(max_cycles=5)))
    assert_totals_equal(totals, play_parallel_raw(rps_parallel(max_cycles=5)))


def test_rps_episode_end_all_truncated_with_final_obs():
    env = PettingZooEnv(rps_aec(max_cycles=2))
    _, steps, _ = play_wrapped(env)
    assert len(steps) == 4
    obs, rewards, terms, truncs, infos = steps[-1]
    assert set(obs) == {"player_0", "player_1"} == set(infos)  # final observations of both
    assert truncs == {"player_0": True, "player_1": True, ALL_AGENTS: True}
    assert terms == {"player_0": False, "player_1": False, ALL_AGENTS: False}
    for out in steps[:-1]:
        assert out[2][ALL_AGENTS] is False and out[3][ALL_AGENTS] is False
    # A new episode starts cleanly.
    obs, _ = env.reset(seed=1)
    assert list(obs) == ["player_0"] and env.agents == ["player_0", "player_1"]


def test_agent_dies_mid_game_is_skipped_and_rewards_are_not_lost():
    env = PettingZooEnv(TurnGame(lifetimes={"a0": None, "a1": 2, "a2": None}, max_turns=8))
    totals, steps, movers = play_wrapped(env, num_actions=2)
    # a1 leaves after its 2nd move (turn 5); then a0 and a2 alternate until turn 8.
    assert [m[0] for m in movers] == ["a0", "a1", "a2", "a0", "a1", "a2", "a0", "a2"]
    obs, rewards, terms, truncs, infos = steps[4]  # a1's last move
    assert terms["a1"] is True and truncs["a1"] is False
    assert set(obs) == {"a1", "a2"} and obs["a1"] == 2  # a1's final obs, and the next mover
    assert infos["a1"] == {"turn": 5}
    assert terms[ALL_AGENTS] is False and truncs[ALL_AGENTS] is False
    # Rewards of every step go to every agent in the episode, the waiting ones included.
    assert set(steps[0][1]) == {"a0", "a1", "a2"}
    assert steps[0][1]["a1"] == steps[0][1]["a2"] == -0.25
    # After a1 left it gets no more rewards or flags.
    for out in steps[5:]:
        assert "a1" not in out[1] and "a1" not in out[2] and "a1" not in out[0]
    # The last step truncates the two left (a0 was removed by a dead step, a2 moved last).
    obs, rewards, terms, truncs, _ = steps[-1]
    assert truncs == {"a0": True, "a2": True, ALL_AGENTS: True}
    assert terms == {"a0": False, "a2": False, ALL_AGENTS: False}
    assert_totals_equal(totals, play_aec_last(TurnGame(lifetimes={"a0": None, "a1": 2, "a2": None}, max_turns=8),
                                              num_actions=2))


def test_flags_reported_once_per_agent():
    env = PettingZooEnv(TurnGame(lifetimes={"a0": 1, "a1": 3, "a2": None}, max_turns=20))
    _, steps, _ = play_wrapped(env, num_actions=2)
    done_reports = defaultdict(int)
    for _, _, terms, truncs, _ in steps:
        for agent in set(terms) | set(truncs):
            if agent != ALL_AGENTS and (terms.get(agent) or truncs.get(agent)):
                done_reports[agent] += 1
    assert done_reports == {"a0": 1, "a1": 1, "a2": 1}
    assert steps[-1][3][ALL_AGENTS] is True  # a2 ended by truncation


def test_mixed_terminated_and_truncated_ending_ends_the_episode():
    # a1 terminates on the very turn that truncates everyone: mixed reasons, so "__all__" is truncated.
    env = PettingZooEnv(TurnGame(lifetimes={"a0": None, "a1": 2, "a2": None}, max_turns=5))
    _, steps, _ = play_wrapped(env, num_actions=2)
    _, _, terms, truncs, _ = steps[-1]
    assert terms["a1"] is True and truncs["a0"] is True and truncs["a2"] is True
    assert terms[ALL_AGENTS] is False and truncs[ALL_AGENTS] is True


def test_tictactoe_win_pays_both_players_in_the_last_step():
    env = PettingZooEnv(tictactoe())
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_1"] and set(obs["player_1"]) == {"observation", "action_mask"}
    moves = [("player_1", 0), ("player_2", 3), ("player_1", 1), ("player_2", 4), ("player_1", 2)]
    totals = defaultdict(float)
    for agent, square in moves:
        assert list(obs) == [agent]
        obs, rewards, terms, truncs, infos = env.step({agent: square})
        for a, r in rewards.items():
            totals[a] += r
    assert dict(totals) == {"player_1": 1.0, "player_2": -1.0}
    assert rewards == {"player_1": 1.0, "player_2": -1.0}
    assert terms == {"player_1": True, "player_2": True, ALL_AGENTS: True}
    assert truncs[ALL_AGENTS] is False
    assert set(obs) == {"player_1", "player_2"}


def test_tictactoe_illegal_move_ends_the_game_with_a_loss():
    env = PettingZooEnv(tictactoe())
    env.reset(seed=0)
    env.step({"player_1": 4})
    obs, rewards, terms, truncs, _ = env.step({"player_2": 4})  # occupied square
    assert rewards == {"player_1": 0.0, "player_2": -1.0}
    # PettingZoo's TerminateIllegalWrapper sets both flags of every agent.
    assert terms[ALL_AGENTS] is True and truncs[ALL_AGENTS] is True
    assert env.agents == []


def test_parallel_to_aec_does_not_double_count_stale_cumulative_rewards():
    # parallel_to_aec leaves `_cumulative_rewards` of an agent that acted early in a cycle untouched
    # until the cycle ends, so reading it after every move would count last cycle's reward twice.
    aec = OrderEnforcingWrapper(parallel_to_aec_wrapper(rps_parallel(max_cycles=6)))
    totals, steps, _ = play_wrapped(PettingZooEnv(aec))
    assert_totals_equal(totals, play_parallel_raw(rps_parallel(max_cycles=6)))
    for i, (_, rewards, _, _, _) in enumerate(steps):
        if i % 2 == 0:
            assert rewards == {"player_0": 0.0, "player_1": 0.0}

    totals, steps, _ = play_wrapped(PettingZooEnv(parallel_to_aec(Gatherers())))
    assert_totals_equal(totals, play_parallel_raw(Gatherers()))


def test_seed_render_close_and_sub_environment():
    game = TurnGame()
    env = PettingZooEnv(game)
    env.reset(seed=7)
    assert game.last_seed == 7
    assert env.get_sub_environments is game

    rps = rps_aec(render_mode="rgb_array")
    env = PettingZooEnv(rps)
    assert env.get_sub_environments is rps.unwrapped and env.render_mode == "rgb_array"
    env.reset(seed=0)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.ndim == 3
    env.close()


def test_wrong_agent_and_bad_action_dicts_raise_env_error():
    env = PettingZooEnv(rps_aec())
    with pytest.raises(EnvError, match="before reset"):
        env.step({"player_0": 0})
    env.reset(seed=0)
    with pytest.raises(EnvError, match=r"agent 'player_0'.s turn"):
        env.step({"player_1": 0})
    with pytest.raises(EnvError, match="one agent at a time"):
        env.step({"player_0": 0, "player_1": 1})
    with pytest.raises(EnvError, match="player_0"):
        env.step({})
    with pytest.raises(EnvError, match="got a int"):
        env.step(0)
    # The failed calls did not step the env.
    assert list(env.step({"player_0": 0})[0]) == ["player_1"]


def test_step_after_episode_end_raises():
    env = PettingZooEnv(rps_aec(max_cycles=1))
    env.reset(seed=0)
    env.step({"player_0": 0})
    assert env.step({"player_1": 1})[3][ALL_AGENTS] is True
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step({"player_0": 0})


def test_wrappers_reject_what_is_not_a_pettingzoo_env():
    with pytest.raises(EnvError, match="PettingZooEnv wraps a PettingZoo AECEnv, got CartPoleEnv"):
        PettingZooEnv(gym.make("CartPole-v1").unwrapped)
    with pytest.raises(EnvError, match=r"ParallelEnv: wrap it with ParallelPettingZooEnv"):
        PettingZooEnv(rps_parallel())
    with pytest.raises(EnvError, match=r"AEC env: wrap it with PettingZooEnv"):
        ParallelPettingZooEnv(rps_aec())
    with pytest.raises(EnvError, match="pass an env instance"):
        PettingZooEnv(TurnGame)
    with pytest.raises(EnvError, match="pass an env instance"):
        ParallelPettingZooEnv(pettingzoo)
    with pytest.raises(EnvError, match="pettingzoo.ParallelEnv"):
        ParallelPettingZooEnv({"player_0": 1})


def test_module_imports_without_pettingzoo():
    code = (
        "import sys; sys.modules['pettingzoo'] = None\n"
        "from rlx.env.wrappers.pettingzoo_env import PettingZooEnv, ParallelPettingZooEnv\n"
        "try:\n"
        "    PettingZooEnv(object())\n"
        "except ImportError as e:\n"
        "    assert 'pip install' in str(e) and 'pettingzoo' in str(e), e\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---------------------------------------------------------------- ParallelPettingZooEnv


def test_parallel_rps_reset_step_and_all_flags():
    env = ParallelPettingZooEnv(rps_parallel(max_cycles=2))
    assert env.possible_agents == ["player_0", "player_1"]
    assert env.get_action_space("player_1") == gym.spaces.Discrete(3)
    assert env.env is env.par_env
    obs, infos = env.reset(seed=0)
    assert set(obs) == {"player_0", "player_1"} == set(infos)
    obs, rewards, terms, truncs, _ = env.step({"player_0": 0, "player_1": 1})
    assert rewards == {"player_0": -1.0, "player_1": 1.0}  # paper beats rock
    assert terms[ALL_AGENTS] is False and truncs[ALL_AGENTS] is False
    obs, rewards, terms, truncs, _ = env.step({"player_0": 2, "player_1": 1})
    assert rewards == {"player_0": 1.0, "player_1": -1.0}  # scissors beat paper
    assert truncs == {"player_0": True, "player_1": True, ALL_AGENTS: True}
    assert terms[ALL_AGENTS] is False
    assert env.agents == []
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step({"player_0": 0, "player_1": 0})


def test_parallel_agent_leaves_early_and_unknown_agents_raise():
    env = ParallelPettingZooEnv(Gatherers(g1_life=2, max_steps=4))
    with pytest.raises(EnvError, match="before reset"):
        env.step({"g0": 0})
    totals, steps, movers = play_wrapped(env)
    assert movers == [["g0", "g1", "g2"]] * 2 + [["g0", "g2"]] * 2
    _, _, terms, truncs, _ = steps[1]
    assert terms == {"g0": False, "g1": True, "g2": False, ALL_AGENTS: False}
    _, _, terms, truncs, _ = steps[-1]
    assert truncs == {"g0": True, "g2": True, ALL_AGENTS: True} and terms[ALL_AGENTS] is False
    assert_totals_equal(totals, play_parallel_raw(Gatherers(g1_life=2, max_steps=4)))

    env.reset(seed=0)
    env.step({"g0": 0, "g1": 0, "g2": 0})
    env.step({"g0": 0, "g1": 0, "g2": 0})
    with pytest.raises(EnvError, match="agent 'g1', which is not in the episode"):
        env.step({"g0": 0, "g1": 0, "g2": 0})


@pytest.mark.parametrize("max_cycles", [1, 4])
def test_parallel_and_aec_wrappers_agree_across_conversions(max_cycles):
    # The same rps game through both wrappers and both conversion directions.
    aec_totals, aec_steps, _ = play_wrapped(PettingZooEnv(rps_aec(max_cycles)))
    par_totals, par_steps, _ = play_wrapped(ParallelPettingZooEnv(aec_to_parallel(rps_aec(max_cycles))))
    back_totals, _, _ = play_wrapped(PettingZooEnv(parallel_to_aec(rps_parallel(max_cycles))))
    assert_totals_equal(aec_totals, par_totals)
    assert_totals_equal(aec_totals, back_totals)
    assert len(aec_steps) == 2 * len(par_steps) == 2 * max_cycles
    # Both end the same way.
    for a, p in zip(aec_steps[-1][2:4], par_steps[-1][2:4]):
        assert a == p

    # A genuine ParallelEnv and its AEC conversion agree too, agent leaving early included.
    par_totals, par_steps, _ = play_wrapped(ParallelPettingZooEnv(Gatherers(max_steps=max_cycles + 1)))
    aec_totals, aec_steps, _ = play_wrapped(PettingZooEnv(parallel_to_aec(Gatherers(max_steps=max_cycles + 1))))
    assert_totals_equal(par_totals, aec_totals)
    assert par_steps[-1][3][ALL_AGENTS] == aec_steps[-1][3][ALL_AGENTS]
    assert par_steps[-1][2][ALL_AGENTS] == aec_steps[-1][2][ALL_AGENTS]


# ---------------------------------------------------------------- the multi-agent env checker


@pytest.mark.parametrize("make", [
    lambda: PettingZooEnv(rps_aec()),
    lambda: PettingZooEnv(tictactoe()),
    lambda: PettingZooEnv(TurnGame(max_turns=3)),
    lambda: PettingZooEnv(parallel_to_aec(Gatherers())),
    lambda: ParallelPettingZooEnv(rps_parallel()),
    lambda: ParallelPettingZooEnv(Gatherers(g1_life=1, max_steps=2)),
], ids=["rps", "tictactoe", "turn_game", "gatherers_as_aec", "rps_parallel", "gatherers"])
def test_multi_agent_env_checker_accepts_wrapped_envs(make):
    try:
        from rlx.env.multi_agent_env_checker import check_multi_agent_env
    except ImportError as err:  # written concurrently by another helper
        pytest.skip(f"rlx.env.multi_agent_env_checker is not importable yet: {err}")
    for seed in range(3):
        check_multi_agent_env(make(), seed=seed)

"""MultiAgentEnv, make_multi_agent, the multi-agent env checker and the example multi-agent envs."""
from __future__ import annotations

import pickle

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv, make_multi_agent
from rlx.env.multi_agent_env_checker import check_multi_agent_env, check_multi_agent_step, check_step_output
from rlx.examples.envs.classes.multi_agent import (MultiAgentCartPole, MultiAgentPendulum, SimpleRockPaperScissors,
                                                   SimpleTicTacToe)
from rlx.utils.errors import EnvError

# ---------------------------------------------------------------- make_multi_agent


def _step_until(env, pick_action, stop):
    """Step `env` with `pick_action(agent, t)` for every active agent until `stop(out)`; return the last out."""
    obs, _ = env.reset(seed=0)
    active = list(obs)
    for t in range(1000):
        out = env.step({aid: pick_action(aid, t) for aid in active})
        if stop(out):
            return out
        obs, _, terms, truncs, _ = out
        active = [aid for aid in obs if not (terms.get(aid) or truncs.get(aid))]
    raise AssertionError("the stop condition never held")


def test_make_multi_agent_agent_ids_and_spaces():
    env = MultiAgentCartPole({"num_agents": 3})
    assert env.possible_agents == [0, 1, 2] and env.agents == [0, 1, 2]
    cartpole = gym.make("CartPole-v1")
    for aid in env.possible_agents:
        assert env.get_observation_space(aid) == cartpole.observation_space
        assert env.get_action_space(aid) == gym.spaces.Discrete(2)
    obs, infos = env.reset(seed=1)
    assert set(obs) == {0, 1, 2}
    assert all(obs[aid].shape == (4,) for aid in obs)
    # Each copy gets its own seed, so the agents' starts differ.
    assert not np.allclose(obs[0], obs[1])


def test_make_multi_agent_default_one_agent_and_pendulum_spaces():
    env = MultiAgentPendulum()
    assert env.possible_agents == [0]
    assert env.get_action_space(0).shape == (1,)
    with pytest.raises(ValueError, match="num_agents >= 1"):
        MultiAgentCartPole({"num_agents": 0})


def test_make_multi_agent_agent_leaves_and_all_only_when_everyone_done():
    env = MultiAgentCartPole({"num_agents": 2})
    # Agent 0 always pushes left (falls within ~10 steps); agent 1 balances by alternating.
    policy = lambda aid, t: 0 if aid == 0 else t % 2  # noqa: E731
    obs, rewards, terms, truncs, _ = _step_until(env, policy, lambda out: out[2].get(0))
    assert terms[0] is True and not terms.get(1)
    assert terms[ALL_AGENTS] is False and truncs[ALL_AGENTS] is False
    assert env.agents == [1]
    # Agent 0 has left: the next steps have only agent 1 acting, until it is done too.
    out = env.step({1: 0})
    assert set(out[1]) == {1}
    while not (out[2][ALL_AGENTS] or out[3][ALL_AGENTS]):
        assert not out[2].get(1) and not out[3].get(1)
        out = env.step({1: 0})
    assert out[2][1] is True and out[2][ALL_AGENTS] is True
    assert env.agents == []


def test_make_multi_agent_passes_env_config_to_a_creator():
    seen = []

    def creator(config):
        seen.append(dict(config))
        return gym.make("CartPole-v1", max_episode_steps=int(config["max_steps"]))

    cls = make_multi_agent(creator)
    env = cls({"num_agents": 2, "max_steps": 3})
    assert seen == [{"num_agents": 2, "max_steps": 3}] * 2
    env.reset(seed=0)
    out = [env.step({0: 0, 1: 1}) for _ in range(3)][-1]
    assert out[3] == {0: True, 1: True, ALL_AGENTS: True}  # the 3-step time limit reached both copies
    assert out[2][ALL_AGENTS] is False


def test_make_multi_agent_does_not_pass_num_agents_to_a_gymnasium_id():
    # gym.make("CartPole-v1", num_agents=2) raises TypeError; the made class drops the key.
    cls = make_multi_agent("CartPole-v1")
    env = cls({"num_agents": 2})
    assert len(env.envs) == 2
    assert env.envs[0].spec.kwargs.get("num_agents") is None
    # Other keys still reach the Gymnasium env.
    env = make_multi_agent("Pendulum-v1")({"num_agents": 1, "g": 3.0})
    assert env.envs[0].unwrapped.g == 3.0


def test_made_class_round_trips_through_cloudpickle():
    cls = make_multi_agent("CartPole-v1")
    clone = cloudpickle.loads(cloudpickle.dumps(cls))
    env = clone({"num_agents": 2})
    obs, _ = env.reset(seed=0)
    ref, _ = cls({"num_agents": 2}).reset(seed=0)
    assert set(obs) == {0, 1} and np.allclose(obs[0], ref[0])
    # An instance pickles too (process-based env runners ship envs' classes).
    assert cloudpickle.loads(cloudpickle.dumps(env)).possible_agents == [0, 1]


def test_example_made_classes_pickle_by_reference():
    assert pickle.loads(pickle.dumps(MultiAgentCartPole)) is MultiAgentCartPole
    assert MultiAgentCartPole.__name__ == "MultiAgentCartPole"


# ---------------------------------------------------------------- per-agent spaces


class _SpacesEnv(MultiAgentEnv):
    def __init__(self, possible_agents, observation_space=None, observation_spaces=None):
        self.possible_agents = list(possible_agents)
        self.agents = list(possible_agents)
        if observation_space is not None:
            self.observation_space = observation_space
        self.observation_spaces = observation_spaces
        self.action_space = gym.spaces.Discrete(2)


def test_get_space_per_agent_dict():
    env = _SpacesEnv(["a", "b"], observation_spaces={"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(5)})
    assert env.get_observation_space("a") == gym.spaces.Discrete(3)
    assert env.get_observation_space("b") == gym.spaces.Discrete(5)
    assert env.get_action_space("a") == gym.spaces.Discrete(2)  # shared action_space


def test_get_space_unknown_agent_raises_key_error_naming_it():
    env = _SpacesEnv(["a"], observation_spaces={"a": gym.spaces.Discrete(3)})
    with pytest.raises(KeyError, match="zombie"):
        env.get_observation_space("zombie")


def test_get_space_old_convention_dict_keyed_by_agents():
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(0, 1, (2,))})
    env = _SpacesEnv(["a", "b"], observation_space=space)
    assert env.get_observation_space("a") == gym.spaces.Discrete(3)
    assert env.get_observation_space("b") == gym.spaces.Box(0, 1, (2,))


def test_get_space_shared_dict_not_keyed_by_agents_is_returned_whole():
    space = gym.spaces.Dict({"pos": gym.spaces.Discrete(3), "vel": gym.spaces.Discrete(3)})
    env = _SpacesEnv(["a", "b"], observation_space=space)
    assert env.get_observation_space("a") is space


def test_get_space_without_any_space_names_the_fix():
    env = _SpacesEnv(["a"])
    with pytest.raises(KeyError, match="observation_spaces"):
        env.get_observation_space("a")


# ---------------------------------------------------------------- the checker


class _TwoAgentEnv(MultiAgentEnv):
    """A valid two-agent env; subclasses break one thing each."""

    def __init__(self, config=None):
        self.possible_agents = ["a", "b"]
        self.agents = ["a", "b"]
        self.observation_spaces = {aid: gym.spaces.Box(-1.0, 1.0, (2,), np.float32) for aid in self.agents}
        self.action_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}
        self.t = 0
        self.actions = []

    def obs(self, aid):
        return np.zeros(2, np.float32)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {aid: self.obs(aid) for aid in self.agents}, {}

    def step(self, action_dict):
        self.actions.append(dict(action_dict))
        self.t += 1
        obs = {aid: self.obs(aid) for aid in self.agents}
        rewards = {aid: 1.0 for aid in self.agents}
        return obs, rewards, {ALL_AGENTS: False}, {ALL_AGENTS: False}, {}


class _WrongObsKey(_TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return {"a": self.obs("a"), "c": self.obs("c")}, {}


class _ObsOutsideSpace(_TwoAgentEnv):
    def obs(self, aid):
        return np.full(2, 5.0 if aid == "b" else 0.0, np.float32)


class _ObsWrongShape(_TwoAgentEnv):
    def obs(self, aid):
        return np.zeros(3 if aid == "b" else 2, np.float32)


class _ObsWrongDtype(_TwoAgentEnv):
    def obs(self, aid):
        return np.zeros(2, np.float64 if aid == "a" else np.float32)


class _MissingAll(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, _, truncs, infos = super().step(action_dict)
        return obs, rewards, {"a": False, "b": False}, truncs, infos


class _MissingAllInTruncateds(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, terms, _, infos = super().step(action_dict)
        return obs, rewards, terms, {"a": False}, infos


class _RewardForGhost(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, terms, truncs, infos = super().step(action_dict)
        rewards["ghost"] = 1.0
        return obs, rewards, terms, truncs, infos


class _ResetNotATuple(_TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return {aid: self.obs(aid) for aid in self.agents}


class _ObsNotADict(_TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return [self.obs("a"), self.obs("b")], {}


class _StepRewardsNotADict(_TwoAgentEnv):
    def step(self, action_dict):
        obs, _, terms, truncs, infos = super().step(action_dict)
        return obs, 1.0, terms, truncs, infos


class _StepFourTuple(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, terms, _, infos = super().step(action_dict)
        return obs, rewards, terms, infos


class _BoolReward(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, terms, truncs, infos = super().step(action_dict)
        rewards["b"] = True
        return obs, rewards, terms, truncs, infos


class _IntFlag(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, _, truncs, infos = super().step(action_dict)
        return obs, rewards, {"a": 0, ALL_AGENTS: False}, truncs, infos


class _InfoForNonObserver(_TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return {"a": self.obs("a")}, {"b": {"x": 1}}


class _StepObsWrongShape(_TwoAgentEnv):
    def obs(self, aid):
        return np.zeros(4 if self.t == 2 and aid == "a" else 2, np.float32)


class _NanReward(_TwoAgentEnv):
    def step(self, action_dict):
        obs, rewards, terms, truncs, infos = super().step(action_dict)
        rewards["a"] = float("nan")
        return obs, rewards, terms, truncs, infos


def test_checker_flags_observations_outside_the_box_once_without_refusing(caplog):
    # RLlib's multi-agent checker does not check bounds: rlx warns (once) and goes on.
    with caplog.at_level("WARNING"):
        check_multi_agent_env(_ObsOutsideSpace(), seed=0)
    assert "agent 'b'" in caplog.text and "outside the env's observation_space bounds" in caplog.text


@pytest.mark.parametrize("env_cls, needles", [
    (_WrongObsKey, ["'c'", "observation_spaces"]),
    (_ObsWrongShape, ["agent 'b'", "shape (3,)", "shapes differ: (3,) vs (2,)"]),
    (_ObsWrongDtype, ["agent 'a'", "dtypes differ: float64 vs float32"]),
    (_MissingAll, ["terminateds", "'__all__'", "RLlib requires"]),
    (_MissingAllInTruncateds, ["truncateds", "'__all__'", "RLlib requires"]),
    (_RewardForGhost, ["rewards", "agent 'ghost'", "never observed"]),
    (_ResetNotATuple, ["reset()", "(obs_dict, infos_dict)"]),
    (_ObsNotADict, ["obs", "list", "must be a dict keyed by agent id"]),
    (_StepRewardsNotADict, ["rewards", "float 1.0", "must be a dict"]),
    (_StepFourTuple, ["4 values", "5 dicts"]),
    (_BoolReward, ["agent 'b'", "real number"]),
    (_IntFlag, ["terminateds['a']", "bools"]),
    (_InfoForNonObserver, ["agent 'b'", "'__common__'"]),
    (_NanReward, ["agent 'a'", "finite"]),
    (_StepObsWrongShape, ["step 2 after reset", "agent 'a'", "shapes differ: (4,) vs (2,)"]),
])
def test_checker_names_the_agent_or_key(env_cls, needles):
    with pytest.raises(EnvError) as err:
        check_multi_agent_env(env_cls(), seed=0)
    for needle in needles:
        assert needle in str(err.value), f"{needle!r} not in: {err.value}"
    assert env_cls.__name__ in str(err.value)


def test_checker_passes_a_valid_env_and_acts_only_for_observers():
    env = _TwoAgentEnv()
    check_multi_agent_env(env, seed=0)
    assert len(env.actions) == 3
    assert all(set(a) == {"a", "b"} for a in env.actions)


class _AgentLeavesAfterStepOne(_TwoAgentEnv):
    """Agent 'a' is done after the first step (its final obs still comes back); acting for it again is a bug."""

    def step(self, action_dict):
        assert self.t == 0 or "a" not in action_dict, "an action for the done agent 'a'"
        obs, rewards, _, _, infos = super().step(action_dict)
        if self.t == 1:
            self.agents = ["b"]
            return obs, rewards, {"a": True, ALL_AGENTS: False}, {ALL_AGENTS: False}, infos
        return obs, rewards, {ALL_AGENTS: False}, {ALL_AGENTS: False}, infos


def test_checker_does_not_act_for_done_agents():
    env = _AgentLeavesAfterStepOne()
    check_multi_agent_env(env, seed=0)
    assert [set(a) for a in env.actions] == [{"a", "b"}, {"b"}, {"b"}]


class _NobodyLeftToAct(_TwoAgentEnv):
    def step(self, action_dict):
        _, rewards, terms, truncs, infos = super().step(action_dict)
        return {}, rewards, terms, truncs, infos


def test_checker_rejects_a_step_that_leaves_no_agent_to_act():
    with pytest.raises(EnvError, match="no agent can act"):
        check_multi_agent_env(_NobodyLeftToAct(), seed=0)


def test_checker_is_deterministic_and_does_not_draw_from_the_env_spaces():
    env1, env2 = _TwoAgentEnv(), _TwoAgentEnv()
    env1.action_spaces["a"].seed(123)
    check_multi_agent_env(env1, seed=3)
    check_multi_agent_env(env2, seed=3)
    assert env1.actions == env2.actions
    fresh = gym.spaces.Discrete(2, seed=123)
    assert [env1.action_spaces["a"].sample() for _ in range(20)] == [fresh.sample() for _ in range(20)]


@pytest.mark.parametrize("make_env", [
    lambda: MultiAgentCartPole({"num_agents": 2}),
    lambda: MultiAgentPendulum({"num_agents": 3}),
    lambda: SimpleRockPaperScissors({"num_moves": 2}),
    lambda: SimpleTicTacToe({}),
])
def test_checker_passes_the_example_envs(make_env):
    env = make_env()
    check_multi_agent_env(env, seed=0)
    obs, _ = env.reset(seed=1)  # still usable afterwards
    assert obs


def test_checker_stops_at_the_episode_end():
    env = SimpleRockPaperScissors({"num_moves": 1})
    calls = []
    original = env.step
    env.step = lambda actions: calls.append(actions) or original(actions)
    check_multi_agent_env(env, seed=0)
    assert len(calls) == 1


def test_check_multi_agent_step_rejects_an_action_of_an_agent_that_did_not_observe():
    check_multi_agent_step("Env", {"a": 0}, ["a", "b"])
    with pytest.raises(EnvError, match="agent 'b'.*agents that observed: \\['a'\\]"):
        check_multi_agent_step("Env", {"a": 0, "b": 1}, ["a"])
    with pytest.raises(EnvError, match="dict of actions"):
        check_multi_agent_step("Env", [0, 1], ["a"])


def test_tictactoe_rejects_an_action_of_the_waiting_player():
    env = SimpleTicTacToe()
    env.reset()
    with pytest.raises(EnvError, match="'player2'"):
        env.step({"player1": 0, "player2": 1})


def _ok_step():
    return ({"a": 0}, {"a": 1.0}, {ALL_AGENTS: False}, {ALL_AGENTS: False}, {})


def test_check_step_output_accepts_valid_output():
    check_step_output("Env", _ok_step(), ["a"], {"a"})
    # An agent that observes in this step may get a reward in the same step.
    obs, rewards, terms, truncs, infos = _ok_step()
    obs["new"], rewards["new"] = 0, 0.0
    check_step_output("Env", (obs, rewards, terms, truncs, infos), ["a"], {"a"})
    # A non-moving but known agent may get its reward and done flag (turn-based games' final step).
    check_step_output("Env", ({}, {"a": 1.0, "b": -1.0}, {"b": True, ALL_AGENTS: True}, {ALL_AGENTS: False},
                              {"__common__": {}}), ["a"], {"a", "b"})


def test_check_step_output_errors():
    obs, rewards, terms, truncs, infos = _ok_step()
    with pytest.raises(EnvError, match="'ghost'"):
        check_step_output("Env", (obs, {"ghost": 1.0}, terms, truncs, infos), ["a"], {"a"})
    with pytest.raises(EnvError, match="terminateds.*'__all__'"):
        check_step_output("Env", (obs, rewards, {"a": True}, truncs, infos), ["a"], {"a"})
    with pytest.raises(EnvError, match="truncateds.*'__all__'"):
        check_step_output("Env", (obs, rewards, terms, {"a": False}, infos), ["a"], {"a"})
    # An empty truncateds dict says "nothing truncated", as RLlib's own example envs return it.
    check_step_output("Env", (obs, rewards, terms, {}, infos), ["a"], {"a"})
    with pytest.raises(EnvError, match="infos for agent 'ghost'"):
        check_step_output("Env", (obs, rewards, terms, truncs, {"ghost": {}}), ["a"], {"a"})
    with pytest.raises(EnvError, match="4 values"):
        check_step_output("Env", (obs, rewards, terms, infos), ["a"], {"a"})
    with pytest.raises(EnvError, match="rewards as float"):
        check_step_output("Env", (obs, 1.0, terms, truncs, infos), ["a"], {"a"})


# ---------------------------------------------------------------- SimpleRockPaperScissors


@pytest.mark.parametrize("m1, m2, r1", [
    (SimpleRockPaperScissors.ROCK, SimpleRockPaperScissors.SCISSORS, 1),
    (SimpleRockPaperScissors.SCISSORS, SimpleRockPaperScissors.PAPER, 1),
    (SimpleRockPaperScissors.PAPER, SimpleRockPaperScissors.ROCK, 1),
    (SimpleRockPaperScissors.SCISSORS, SimpleRockPaperScissors.ROCK, -1),
    (SimpleRockPaperScissors.ROCK, SimpleRockPaperScissors.PAPER, -1),
    (SimpleRockPaperScissors.PAPER, SimpleRockPaperScissors.PAPER, 0),
])
def test_rps_payoff_and_observations(m1, m2, r1):
    env = SimpleRockPaperScissors({})
    obs, _ = env.reset()
    assert obs == {"player1": 0, "player2": 0}
    obs, rewards, _, _, _ = env.step({"player1": m1, "player2": m2})
    assert rewards == {"player1": r1, "player2": -r1}
    assert obs == {"player1": m2, "player2": m1}  # each sees the opponent's last move
    assert all(env.get_observation_space(aid).contains(o) for aid, o in obs.items())


def test_rps_ends_after_num_moves():
    env = SimpleRockPaperScissors({"num_moves": 3})
    env.reset()
    dones = []
    for _ in range(3):
        _, _, terms, truncs, _ = env.step({"player1": 0, "player2": 1})
        dones.append(terms[ALL_AGENTS] or truncs[ALL_AGENTS])
    assert dones == [False, False, True]
    assert SimpleRockPaperScissors().num_moves == 10


# ---------------------------------------------------------------- SimpleTicTacToe


def _play(env, cells):
    """Alternate moves (player1 first) through `cells`; return every step's output."""
    obs, _ = env.reset()
    outs = []
    for cell in cells:
        (mover,) = obs
        out = env.step({mover: cell})
        outs.append(out)
        obs = out[0]
    return outs


def test_tictactoe_turn_order_and_perspective():
    env = SimpleTicTacToe()
    obs, _ = env.reset()
    assert list(obs) == ["player1"] and not obs["player1"].any()
    obs, rewards, terms, _, _ = env.step({"player1": 4})
    assert list(obs) == ["player2"] and terms == {ALL_AGENTS: False}
    assert "player2" not in rewards
    assert obs["player2"][4] == -1.0 and obs["player2"].dtype == np.float32  # the opponent's mark
    obs, _, _, _, _ = env.step({"player2": 0})
    assert list(obs) == ["player1"]
    assert obs["player1"][4] == 1.0 and obs["player1"][0] == -1.0  # own mark +1, opponent -1
    assert env.get_observation_space("player1").contains(obs["player1"])


@pytest.mark.parametrize("cells, winner", [
    ([0, 3, 1, 4, 2], "player1"),  # top row
    ([0, 1, 3, 4, 8, 7], "player2"),  # middle column
    ([2, 0, 4, 1, 6], "player1"),  # anti-diagonal
])
def test_tictactoe_win_ends_the_game_for_both(cells, winner):
    outs = _play(SimpleTicTacToe(), cells)
    assert all(not out[2][ALL_AGENTS] for out in outs[:-1])
    obs, rewards, terms, truncs, _ = outs[-1]
    loser = "player2" if winner == "player1" else "player1"
    assert rewards == {winner: 1.0, loser: -1.0}
    assert terms == {"player1": True, "player2": True, ALL_AGENTS: True}
    assert truncs[ALL_AGENTS] is False
    assert set(obs) == {"player1", "player2"}  # the final obs of both players


def test_tictactoe_illegal_move_loses():
    outs = _play(SimpleTicTacToe(), [4, 4])
    _, rewards, terms, _, _ = outs[-1]
    assert rewards == {"player2": -1.0, "player1": 1.0}
    assert terms[ALL_AGENTS] is True and terms["player1"] is True


def test_tictactoe_draw():
    # X O X / X O O / O X X: nobody has three in a row.
    outs = _play(SimpleTicTacToe(), [0, 1, 2, 4, 3, 5, 7, 6, 8])
    _, rewards, terms, _, _ = outs[-1]
    assert rewards == {"player1": 0.0, "player2": 0.0}
    assert terms[ALL_AGENTS] is True
    assert all(not out[2][ALL_AGENTS] for out in outs[:-1])


def test_tictactoe_random_games_follow_the_api():
    env = SimpleTicTacToe()
    rng = np.random.default_rng(0)
    for _ in range(50):
        obs, _ = env.reset()
        observed = set(obs)
        while True:
            (mover,) = obs
            out = env.step({mover: int(rng.integers(9))})
            check_step_output("SimpleTicTacToe", out, [mover], observed)
            obs, rewards, terms, _, _ = out
            observed |= set(obs)
            if terms[ALL_AGENTS]:
                assert sum(rewards.values()) == 0 and set(rewards) == {"player1", "player2"}
                break
            assert len(obs) == 1 and mover not in obs

"""Exploration API: built-in strategies, schedules, state, and building from exploration_config."""
from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.core.distributions import Categorical, DiagGaussian, Deterministic, MultiCategorical, SquashedGaussian
from rlx.utils.errors import ConfigError, NotSupportedYetError
from rlx.utils.exploration import (
    EpsilonGreedy, Exploration, GaussianNoise, OrnsteinUhlenbeckNoise, PerWorkerEpsilonGreedy,
    PerWorkerGaussianNoise, PerWorkerOrnsteinUhlenbeckNoise, Random, SoftQ, StochasticSampling, make_exploration,
    validate_exploration_config,
)

DISCRETE = gym.spaces.Discrete(4)
MULTI = gym.spaces.MultiDiscrete([2, 3])
UNIT_BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
WIDE_BOX = gym.spaces.Box(np.array([0.0, -5.0], np.float32), np.array([4.0, 5.0], np.float32))
Q = [[0.5, 3.0, -1.0, 0.0], [2.0, -2.0, 0.0, 1.0]]  # argmax: 1, 0


def categorical(q=Q) -> Categorical:
    return Categorical(torch.tensor(q, dtype=torch.float32))


def gaussian(mean, log_std=0.0, cls=DiagGaussian):
    mean = torch.tensor(mean, dtype=torch.float32)
    return cls(torch.cat([mean, torch.full_like(mean, log_std)], dim=-1))


def act(exp: Exploration, dist, timestep=10**6, explore=True):
    return exp.get_exploration_action(action_distribution=dist, timestep=timestep, explore=explore)


class MyExploration(Exploration):
    """A user exploration: always `action_value` when exploring, argmax otherwise."""

    def __init__(self, action_space, *, action_value: int = 0, **kwargs):
        super().__init__(action_space, **kwargs)
        self.action_value = action_value

    def get_exploration_action(self, *, action_distribution, timestep, explore=True):
        if not explore:
            return super().get_exploration_action(
                action_distribution=action_distribution, timestep=timestep, explore=False)
        n = action_distribution.inputs.shape[0]
        return torch.full((n,), self.action_value, dtype=torch.int64), torch.zeros(n)


class MyEpsilonGreedy(EpsilonGreedy):
    """A subclass of a built-in that adds its own option."""

    def __init__(self, action_space, *, bonus: float = 0.0, **kwargs):
        super().__init__(action_space, **kwargs)
        self.bonus = bonus


# --------------------------------------------------------------------------- explore switch

_MU = [[0.3, -0.4], [0.9, 0.1]]
_MULTI_LOGITS = [[0.0, 1.0, 2.0, 0.5, -1.0], [3.0, 1.0, 0.0, 0.5, 4.0]]

DETERMINISTIC_CASES = [
    (StochasticSampling, {"random_timesteps": 100}, DISCRETE, lambda: categorical(), [1, 0]),
    (StochasticSampling, {}, UNIT_BOX, lambda: gaussian(_MU), _MU),
    (StochasticSampling, {}, UNIT_BOX, lambda: gaussian(_MU, cls=SquashedGaussian), np.tanh(_MU)),
    (StochasticSampling, {}, MULTI, lambda: MultiCategorical(torch.tensor(_MULTI_LOGITS), input_lens=[2, 3]),
     [[1, 0], [0, 2]]),
    (EpsilonGreedy, {"initial_epsilon": 1.0}, DISCRETE, lambda: categorical(), [1, 0]),
    (EpsilonGreedy, {}, MULTI, lambda: MultiCategorical(torch.tensor(_MULTI_LOGITS), input_lens=[2, 3]),
     [[1, 0], [0, 2]]),
    (PerWorkerEpsilonGreedy, {"num_workers": 2, "worker_index": 2}, DISCRETE, lambda: categorical(), [1, 0]),
    (SoftQ, {"temperature": 100.0}, DISCRETE, lambda: categorical(), [1, 0]),
    (Random, {}, DISCRETE, lambda: categorical(), [1, 0]),
    (Random, {}, UNIT_BOX, lambda: gaussian(_MU), _MU),
    (GaussianNoise, {"stddev": 1.0}, UNIT_BOX, lambda: Deterministic(torch.tensor(_MU)), _MU),
    (OrnsteinUhlenbeckNoise, {}, UNIT_BOX, lambda: Deterministic(torch.tensor(_MU)), _MU),
    (PerWorkerGaussianNoise, {"num_workers": 2, "worker_index": 1}, UNIT_BOX,
     lambda: Deterministic(torch.tensor(_MU)), _MU),
    (PerWorkerOrnsteinUhlenbeckNoise, {"num_workers": 2, "worker_index": 1}, UNIT_BOX,
     lambda: gaussian(_MU, cls=SquashedGaussian), np.tanh(_MU)),
]


@pytest.mark.parametrize("cls, kwargs, space, make_dist, expected", DETERMINISTIC_CASES,
                         ids=[c[0].__name__ for c in DETERMINISTIC_CASES])
def test_explore_false_is_deterministic(cls, kwargs, space, make_dist, expected):
    exp = cls(space, seed=0, **kwargs)
    for timestep in (0, 50, 10**6):  # inside and after any random / annealing phase
        for _ in range(5):
            action, logp = act(exp, make_dist(), timestep=timestep, explore=False)
            np.testing.assert_allclose(action.numpy(), np.asarray(expected), rtol=1e-6)
            assert logp.dtype == torch.float32 and logp.shape == (2,) and not logp.any()


def test_base_exploration_samples_or_takes_the_mode():
    exp = Exploration(DISCRETE, seed=0)
    dist = categorical([[0.0, 0.0, 0.0, 0.0]] * 2000)
    action, logp = act(exp, dist)
    assert set(action.tolist()) == {0, 1, 2, 3}
    np.testing.assert_allclose(logp.numpy(), math.log(0.25), rtol=1e-5)
    action, logp = act(exp, categorical(), explore=False)
    assert action.tolist() == [1, 0] and not logp.any()


# --------------------------------------------------------------------------- epsilon greedy

def test_epsilon_schedule_warmup_then_linear_then_constant():
    exp = EpsilonGreedy(DISCRETE, initial_epsilon=1.0, final_epsilon=0.1, warmup_timesteps=100,
                        epsilon_timesteps=200, seed=0)
    assert exp.epsilon(0) == pytest.approx(1.0)
    assert exp.epsilon(100) == pytest.approx(1.0)
    assert exp.epsilon(200) == pytest.approx(0.55)
    assert exp.epsilon(300) == pytest.approx(0.1)
    assert exp.epsilon(10**7) == pytest.approx(0.1)
    act(exp, categorical(), timestep=200)
    assert exp.get_info() == {"cur_epsilon": pytest.approx(0.55)}


def test_epsilon_schedule_edge_cases_and_explicit_schedule():
    step = EpsilonGreedy(DISCRETE, initial_epsilon=0.9, final_epsilon=0.2, warmup_timesteps=10, epsilon_timesteps=0)
    assert step.epsilon(9) == pytest.approx(0.9) and step.epsilon(10) == pytest.approx(0.2)
    exp = EpsilonGreedy(DISCRETE, epsilon_schedule=[[0, 1.0], [100, 0.5], [300, 0.0]], initial_epsilon=0.3)
    assert exp.epsilon(0) == pytest.approx(1.0)
    assert exp.epsilon(50) == pytest.approx(0.75)
    assert exp.epsilon(200) == pytest.approx(0.25)
    assert exp.epsilon(1000) == pytest.approx(0.0)


@pytest.mark.parametrize("batch", [1, 2000])
def test_epsilon_greedy_random_rate_matches_epsilon(batch):
    eps, n = 0.3, 4
    exp = EpsilonGreedy(DISCRETE, initial_epsilon=eps, final_epsilon=eps, seed=1)
    q = [[0.0, 5.0, 1.0, 2.0]] * batch
    actions = np.concatenate([act(exp, categorical(q), timestep=t)[0].numpy() for t in range(2000 // batch)])
    assert actions.dtype == np.int64 and actions.shape == (2000,)
    # A random action equals the greedy one 1/n of the time.
    assert np.mean(actions != 1) == pytest.approx(eps * (n - 1) / n, abs=0.03)
    assert set(np.unique(actions)) == {0, 1, 2, 3}


def test_epsilon_greedy_respects_masked_actions_and_multidiscrete():
    exp = EpsilonGreedy(DISCRETE, epsilon_schedule=1.0, seed=2)
    q = [[0.0, -math.inf, 1.0, float(np.finfo(np.float32).min)]] * 3000
    actions = act(exp, categorical(q))[0].numpy()
    assert set(np.unique(actions)) == {0, 2}
    multi = EpsilonGreedy(MULTI, epsilon_schedule=1.0, seed=2)
    dist = MultiCategorical(torch.zeros(3000, 5), input_lens=[2, 3])
    actions = act(multi, dist)[0].numpy()
    assert actions.shape == (3000, 2) and actions.dtype == np.int64
    assert set(np.unique(actions[:, 0])) == {0, 1} and set(np.unique(actions[:, 1])) == {0, 1, 2}


def test_per_worker_epsilon_greedy():
    def eps(num_workers, worker_index):
        exp = PerWorkerEpsilonGreedy(DISCRETE, num_workers=num_workers, worker_index=worker_index)
        assert exp.epsilon(0) == exp.epsilon(10**7)  # constant over time
        return exp.epsilon(0)

    assert eps(4, 0) == 0.0
    assert eps(4, 1) == pytest.approx(0.4)
    assert eps(4, 4) == pytest.approx(0.4 ** 8)
    assert eps(4, 2) == pytest.approx(0.4 ** (1 + 7 / 3))
    assert eps(1, 1) == pytest.approx(0.4)
    plain = PerWorkerEpsilonGreedy(DISCRETE, num_workers=0, epsilon_timesteps=100, final_epsilon=0.0)
    assert plain.epsilon(0) == 1.0 and plain.epsilon(100) == 0.0
    local = PerWorkerEpsilonGreedy(DISCRETE, num_workers=4, worker_index=0, seed=0)
    assert act(local, categorical(Q * 100), timestep=0)[0].tolist() == [1, 0] * 100


# --------------------------------------------------------------------------- soft-q

def test_soft_q_follows_tempered_softmax():
    q, temperature = [1.0, 2.0, 0.0, -1.0], 2.0
    exp = SoftQ(DISCRETE, temperature=temperature, seed=3)
    action, logp = act(exp, categorical([q] * 20000))
    probs = torch.softmax(torch.tensor(q) / temperature, -1).numpy()
    freqs = np.bincount(action.numpy(), minlength=4) / 20000
    np.testing.assert_allclose(freqs, probs, atol=0.015)
    np.testing.assert_allclose(logp.numpy(), np.log(probs)[action.numpy()], rtol=1e-5)
    cold = SoftQ(DISCRETE, temperature=0.01, seed=3)
    assert act(cold, categorical(Q * 500))[0].tolist() == [1, 0] * 500


# --------------------------------------------------------------------------- stochastic sampling

def test_stochastic_sampling_random_phase_then_samples():
    exp = StochasticSampling(DISCRETE, random_timesteps=10, seed=4)
    peaked = [[0.0, 30.0, 0.0, 0.0]] * 4000
    action, logp = act(exp, categorical(peaked), timestep=9)
    assert not logp.any()
    np.testing.assert_allclose(np.bincount(action.numpy(), minlength=4) / 4000, 0.25, atol=0.03)
    action, logp = act(exp, categorical(peaked), timestep=10)
    assert (action == 1).all()
    dist = gaussian([[0.5, -0.5]] * 4000, log_std=math.log(0.2))
    box_exp = StochasticSampling(WIDE_BOX, seed=4)
    action, logp = act(box_exp, dist)
    assert action.shape == (4000, 2) and logp.shape == (4000,) and logp.dtype == torch.float32
    torch.testing.assert_close(logp, dist.logp(action))
    np.testing.assert_allclose(action.numpy().mean(0), [0.5, -0.5], atol=0.02)
    np.testing.assert_allclose(action.numpy().std(0), [0.2, 0.2], atol=0.02)


def test_same_seed_same_actions():
    dist = gaussian([[0.0, 0.0]] * 8)
    a = act(StochasticSampling(UNIT_BOX, seed=7), dist)[0]
    b = act(StochasticSampling(UNIT_BOX, seed=7), dist)[0]
    c = act(StochasticSampling(UNIT_BOX, seed=8), dist)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


# --------------------------------------------------------------------------- random

def test_random_is_uniform_within_the_space():
    exp = Random(DISCRETE, seed=5)
    action, logp = act(exp, categorical(Q * 4000))
    assert action.dtype == torch.int64 and not logp.any()
    np.testing.assert_allclose(np.bincount(action.numpy(), minlength=4) / 8000, 0.25, atol=0.02)
    box = Random(WIDE_BOX, seed=5)
    action = act(box, gaussian([[9.0, 9.0]] * 8000))[0].numpy()
    assert action.dtype == np.float32
    assert (action >= WIDE_BOX.low).all() and (action <= WIDE_BOX.high).all()
    np.testing.assert_allclose(action.mean(0), [2.0, 0.0], atol=0.1)
    np.testing.assert_allclose(action.std(0), [4 / math.sqrt(12), 10 / math.sqrt(12)], atol=0.05)


def test_random_actions_for_unbounded_and_multidiscrete_spaces():
    space = gym.spaces.Box(np.array([-np.inf, 0.0, 0.0], np.float32), np.array([np.inf, np.inf, 2.0], np.float32))
    sample = Exploration(space, seed=6).random_actions(8000).numpy()
    assert sample.shape == (8000, 3) and np.isfinite(sample).all()
    assert sample[:, 0].std() == pytest.approx(1.0, abs=0.05)  # standard normal
    assert (sample[:, 1] >= 0).all()  # clipped into [0, inf)
    assert (sample[:, 2] >= 0).all() and (sample[:, 2] <= 2).all() and sample[:, 2].mean() == pytest.approx(1, abs=0.05)
    multi = Exploration(MULTI, seed=6).random_actions(5)
    assert multi.dtype == torch.int64 and multi.shape == (5, 2)
    assert (multi[:, 0] < 2).all() and (multi[:, 1] < 3).all()


# --------------------------------------------------------------------------- gaussian noise

def test_gaussian_noise_random_phase_noise_std_and_annealing():
    exp = GaussianNoise(WIDE_BOX, random_timesteps=100, stddev=0.1, initial_scale=1.0, final_scale=0.1,
                        scale_timesteps=1000, seed=8)
    det = Deterministic(torch.tensor([[2.0, 0.0]] * 4000))
    action, logp = act(exp, det, timestep=99)
    assert not logp.any()
    np.testing.assert_allclose(action.numpy().mean(0), [2.0, 0.0], atol=0.15)
    assert action.numpy().std(0)[1] > 2.0  # uniform over [-5, 5], not det + small noise
    assert exp.scale(100) == pytest.approx(1.0)  # annealing starts after the random phase
    assert exp.scale(600) == pytest.approx(0.55)
    assert exp.scale(1100) == pytest.approx(0.1)
    for timestep, scale in ((100, 1.0), (600, 0.55), (10**6, 0.1)):
        noise = act(exp, det, timestep=timestep)[0].numpy() - [2.0, 0.0]
        np.testing.assert_allclose(noise.std(0), 0.1 * scale, rtol=0.06)
        np.testing.assert_allclose(noise.mean(0), 0.0, atol=0.01 * scale)
    assert exp.get_info() == {"cur_scale": pytest.approx(0.1)}
    scheduled = GaussianNoise(UNIT_BOX, scale_schedule=[[0, 2.0], [10, 0.0]])
    assert scheduled.scale(5) == pytest.approx(1.0) and scheduled.scale(50) == 0.0


def test_gaussian_noise_clips_to_bounds_and_needs_a_box():
    exp = GaussianNoise(UNIT_BOX, random_timesteps=0, stddev=1.0, seed=9)
    action = act(exp, Deterministic(torch.full((4000, 2), 0.95)), timestep=0)[0].numpy()
    assert action.dtype == np.float32 and action.max() == 1.0 and action.min() >= -1.0
    assert np.mean(action == 1.0) > 0.3
    with pytest.raises(ConfigError, match="Discrete"):
        GaussianNoise(DISCRETE)


def test_per_worker_noise_scales():
    det = Deterministic(torch.tensor([[0.1, -0.2]] * 3))
    local = PerWorkerGaussianNoise(UNIT_BOX, num_workers=3, worker_index=0, random_timesteps=0, seed=0)
    assert torch.equal(act(local, det, timestep=0)[0], det.inputs)  # scale 0.0
    assert PerWorkerGaussianNoise(UNIT_BOX, num_workers=1, worker_index=1).scale(0) == pytest.approx(0.4)
    assert PerWorkerGaussianNoise(UNIT_BOX, num_workers=3, worker_index=3).scale(0) == pytest.approx(0.4 ** 8)
    assert PerWorkerGaussianNoise(UNIT_BOX, num_workers=0, random_timesteps=0).scale(10**6) == pytest.approx(0.02)
    ou = PerWorkerOrnsteinUhlenbeckNoise(UNIT_BOX, num_workers=3, worker_index=2)
    assert ou.scale(0) == ou.scale(10**6) == pytest.approx(0.4 ** 4.5)


# --------------------------------------------------------------------------- ornstein-uhlenbeck

def test_ou_state_reverts_to_zero_without_sigma():
    exp = OrnsteinUhlenbeckNoise(UNIT_BOX, ou_theta=0.15, ou_sigma=0.0, ou_base_scale=0.1, random_timesteps=0,
                                 initial_scale=1.0, final_scale=1.0, seed=10)
    exp.set_state({"last_timestep": 5, "ou_state": [[1.0, -2.0]]})
    det = Deterministic(torch.zeros(1, 2))
    for k in range(1, 4):
        action = act(exp, det, timestep=5 + k)[0].numpy()
        state = np.array([[1.0, -2.0]]) * 0.85 ** k
        np.testing.assert_allclose(exp.get_state()["ou_state"], state, rtol=1e-5)
        np.testing.assert_allclose(action, 0.1 * state * 2.0, rtol=1e-5)  # range high - low = 2
    action = act(exp, Deterministic(torch.zeros(3, 2)), timestep=9)[0]  # new batch size: state restarts at 0
    assert exp.get_state()["ou_state"] == [[0.0, 0.0]] * 3 and not action.any()


def test_ou_noise_is_temporally_correlated():
    exp = OrnsteinUhlenbeckNoise(WIDE_BOX, random_timesteps=0, initial_scale=1.0, final_scale=1.0, seed=11)
    det = Deterministic(torch.tensor([[2.0, 0.0]]))
    noise = np.stack([act(exp, det, timestep=t)[0].numpy()[0, 1] for t in range(400)])
    assert np.corrcoef(noise[:-1], noise[1:])[0, 1] > 0.6


def test_state_round_trip_gives_identical_next_actions():
    kwargs = dict(random_timesteps=2, scale_timesteps=50, seed=12)
    first = OrnsteinUhlenbeckNoise(UNIT_BOX, **kwargs)
    det = Deterministic(torch.tensor([[0.2, -0.3], [0.0, 0.5]]))
    for t in range(10):
        act(first, det, timestep=t)
    state = json.loads(json.dumps(first.get_state()))
    second = OrnsteinUhlenbeckNoise(UNIT_BOX, **kwargs)
    second.set_state(state)
    # The RNG is per runner and not part of the state; align it to compare the rest.
    second.np_random.bit_generator.state = first.np_random.bit_generator.state
    for t in range(10, 13):
        torch.testing.assert_close(act(first, det, timestep=t)[0], act(second, det, timestep=t)[0])
    assert second.get_info() == first.get_info()

    eps = EpsilonGreedy(DISCRETE, epsilon_timesteps=100)
    act(eps, categorical(), timestep=40)
    restored = EpsilonGreedy(DISCRETE, epsilon_timesteps=100)
    restored.set_state(json.loads(json.dumps(eps.get_state())))
    assert restored.get_info() == eps.get_info() == {"cur_epsilon": pytest.approx(1.0 - 0.4 * 0.95)}


def test_hooks():
    exp = StochasticSampling(DISCRETE)
    exp.before_compute_actions(timestep=torch.tensor(17), explore=True)
    assert exp.get_state() == {"last_timestep": 17}
    assert exp.on_episode_start(episode=None, env_index=0) is None
    assert exp.on_episode_end(episode=None) is None


# --------------------------------------------------------------------------- make / validate

@pytest.mark.parametrize("etype, cls", [
    ("EpsilonGreedy", EpsilonGreedy),
    (EpsilonGreedy, EpsilonGreedy),
    ("rlx.utils.exploration.epsilon_greedy.EpsilonGreedy", EpsilonGreedy),
    ("rlx.utils.exploration.epsilon_greedy:EpsilonGreedy", EpsilonGreedy),
    ("ray.rllib.utils.exploration.soft_q.SoftQ", SoftQ),
    ("ray.rllib.utils.exploration.SoftQ", SoftQ),
])
def test_make_exploration_resolves_types(etype, cls):
    exp = make_exploration({"type": etype}, action_space=DISCRETE, num_workers=3, worker_index=2, seed=0,
                           policy_config={"gamma": 0.9}, model="module")
    assert type(exp) is cls
    assert (exp.num_workers, exp.worker_index, exp.policy_config, exp.model) == (3, 2, {"gamma": 0.9}, "module")


def test_make_exploration_passes_kwargs_and_defaults():
    exp = make_exploration({"type": "EpsilonGreedy", "initial_epsilon": 0.5, "final_epsilon": 0.0,
                            "epsilon_timesteps": 10}, action_space=DISCRETE)
    assert exp.epsilon(0) == 0.5 and exp.epsilon(5) == pytest.approx(0.25)
    default = make_exploration({}, action_space=UNIT_BOX)
    assert type(default) is StochasticSampling and default.random_timesteps == 0
    assert validate_exploration_config({}) == {"type": "StochasticSampling"}


@pytest.mark.parametrize("etype", [MyExploration, f"{__name__}.MyExploration", f"{__name__}:MyExploration"])
def test_user_subclass(etype):
    exp = make_exploration({"type": etype, "action_value": 3}, action_space=DISCRETE, seed=0)
    assert type(exp) is MyExploration
    assert act(exp, categorical())[0].tolist() == [3, 3]
    assert act(exp, categorical(), explore=False)[0].tolist() == [1, 0]
    with pytest.raises(ConfigError, match="Did you mean 'action_value'"):
        validate_exploration_config({"type": etype, "action_valu": 3})


def test_subclass_of_a_builtin_accepts_both_sets_of_kwargs():
    config = {"type": MyEpsilonGreedy, "bonus": 1.0, "final_epsilon": 0.5}
    assert validate_exploration_config(config) == config
    exp = make_exploration(config, action_space=DISCRETE)
    assert exp.bonus == 1.0 and exp.final_epsilon == 0.5


def test_validate_does_not_instantiate():
    class Exploding(Exploration):
        def __init__(self, action_space, *, knob: int = 1, **kwargs):
            raise AssertionError("validation must not build the exploration")

    assert validate_exploration_config({"type": Exploding, "knob": 2}) == {"type": Exploding, "knob": 2}
    path = "ray.rllib.utils.exploration.gaussian_noise.GaussianNoise"
    assert validate_exploration_config({"type": path, "stddev": 0.2}) == {"type": path, "stddev": 0.2}


@pytest.mark.parametrize("config, match", [
    ({"type": "EpsilonGredy"}, "Did you mean.*'EpsilonGreedy'"),
    ({"type": "SoftQ", "temprature": 2.0}, "Did you mean 'temperature'.*Accepted keys: temperature"),
    ({"type": "EpsilonGreedy", "initial_epsilon": 1.5}, "initial_epsilon"),
    ({"type": "EpsilonGreedy", "epsilon_timesteps": -1}, "epsilon_timesteps"),
    ({"type": "EpsilonGreedy", "epsilon_schedule": [[0, 1.0], [10, 2.0]]}, "epsilon_schedule"),
    ({"type": "GaussianNoise", "stddev": -0.1}, "stddev"),
    ({"type": "SoftQ", "temperature": 0}, "temperature"),
    ({"type": "OrnsteinUhlenbeckNoise", "stddev": 0.3}, "stddev"),
    ({"type": "EpsilonGreedy", "worker_index": 1}, "set by rlx"),
    ({"type": dict}, "not a subclass"),
    ({"type": "json.JSONDecoder"}, "not a subclass"),
    ({"type": "rlx.utils.exploration.no_such_module.Thing"}, "cannot be imported"),
    ({"type": 3}, "must be a built-in name"),
    ("EpsilonGreedy", "must be a dict"),
])
def test_bad_configs(config, match):
    with pytest.raises(ConfigError, match=match):
        validate_exploration_config(config)
    with pytest.raises(ConfigError, match=match):
        make_exploration(config, action_space=DISCRETE)


def test_rllib_types_not_built_yet():
    for etype in ("ParameterNoise", "ray.rllib.utils.exploration.curiosity.Curiosity"):
        with pytest.raises(NotSupportedYetError, match="not supported yet"):
            validate_exploration_config({"type": etype})


def test_space_mismatches_name_the_space():
    with pytest.raises(ConfigError, match="Box"):
        EpsilonGreedy(UNIT_BOX)
    with pytest.raises(ConfigError, match="Box"):
        make_exploration({"type": "SoftQ"}, action_space=UNIT_BOX)
    with pytest.raises(ConfigError, match="Dict"):
        Random(gym.spaces.Dict({"a": DISCRETE}))

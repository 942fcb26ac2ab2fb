"""The EnvRunner's NumPy acting path: rlx's default MLP modules, distributions and explorations
computed in NumPy must act exactly as their torch forms, and anything else must act through torch."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ddpg import DDPGConfig
from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, Categorical, DiagGaussian, SquashedGaussian
from rlx.core.models import ActorCriticModule
from rlx.core.numpy_distributions import numpy_deterministic_fn, numpy_sampler
from rlx.core.rl_module import RLModuleSpec
from rlx.utils.exploration.epsilon_greedy import EpsilonGreedy
from rlx.utils.exploration.gaussian_noise import GaussianNoise
from rlx.utils.exploration.ornstein_uhlenbeck_noise import OrnsteinUhlenbeckNoise
from rlx.utils.exploration.stochastic_sampling import StochasticSampling

MODULE_CASES = [
    ("ppo-discrete", lambda: PPOConfig().environment("CartPole-v1")),
    ("ppo-box", lambda: PPOConfig().environment("Pendulum-v1")),
    ("ppo-box-free-log-std-shared", lambda: PPOConfig().environment("Pendulum-v1").rl_module(
        model_config={"free_log_std": True, "vf_share_layers": True, "fcnet_activation": "relu"})),
    ("ppo-swish-elu", lambda: PPOConfig().environment("CartPole-v1").rl_module(
        model_config={"fcnet_hiddens": [16, 16], "fcnet_activation": "swish"})),
    ("sac-box", lambda: SACConfig().environment("Pendulum-v1")),
    ("sac-discrete", lambda: SACConfig().environment("CartPole-v1")),
    ("ddpg", lambda: DDPGConfig().environment("Pendulum-v1")),
    ("dqn-dueling", lambda: DQNConfig().environment("CartPole-v1")),
    ("dqn-plain", lambda: DQNConfig().environment("CartPole-v1").training(dueling=False)),
]


@pytest.mark.parametrize("name,make", MODULE_CASES, ids=[c[0] for c in MODULE_CASES])
def test_numpy_forward_matches_the_modules_torch_forward(name, make):
    algo = make().debugging(seed=0).build()
    module = algo.env_runner.module
    with torch.no_grad():  # move the weights off their initialization so every layer matters
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    forward = module.numpy_inference_fn()
    assert forward is not None
    obs = np.stack([algo.env_runner.observation_space.sample() for _ in range(7)]).astype(np.float32)
    with torch.no_grad():
        expected = module.forward_inference({Columns.OBS: torch.from_numpy(obs)})[Columns.ACTION_DIST_INPUTS]
    got = forward(obs)
    assert got.dtype == np.float32 and got.shape == tuple(expected.shape)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)
    algo.stop()


def test_modules_without_a_numpy_form_act_through_torch():
    noisy = DQNConfig().environment("CartPole-v1").training(noisy=True).build()
    assert noisy.env_runner.module.numpy_inference_fn() is None
    noisy.stop()
    lstm = PPOConfig().environment("CartPole-v1").rl_module(model_config={"use_lstm": True}).build()
    assert lstm.env_runner._numpy_actor(True, False) is None
    lstm.stop()


class ForcedActionModule(ActorCriticModule):
    """Overrides forward_inference: logits that always pick action 1 (whatever the MLP says)."""

    def forward_inference(self, batch, **kwargs):
        n = batch[Columns.OBS].shape[0]
        return {Columns.ACTION_DIST_INPUTS: torch.tensor([[-50.0, 50.0]]).expand(n, 2)}


def test_a_subclass_overriding_forward_acts_through_its_own_forward():
    algo = (PPOConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(ForcedActionModule))
            .debugging(seed=0).build())
    assert algo.env_runner.module.numpy_inference_fn() is None
    batch = algo.env_runner.sample(num_timesteps=64)
    assert (batch[Columns.ACTIONS] == 1).all()
    algo.stop()


def test_forward_hooks_make_the_runner_act_through_torch():
    algo = PPOConfig().environment("CartPole-v1").debugging(seed=0).build()
    calls = []
    algo.env_runner.module.pi.register_forward_hook(lambda *args: calls.append(1))
    algo.env_runner.sample(num_timesteps=16)
    assert calls  # the hook ran: the NumPy path would have skipped it
    algo.stop()


def test_the_numpy_path_acts_with_weights_changed_in_place():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2).debugging(seed=0).build()
    runner = algo.env_runner
    assert runner._numpy_actor(True, False) is not None
    last = runner.module.pi.linears[-1]
    with torch.no_grad():  # as an optimizer step does: the same tensors, new values
        last.weight.zero_()
        last.bias.copy_(torch.tensor([30.0, -30.0]))
    batch = runner.sample(num_timesteps=64)
    assert (batch[Columns.ACTIONS] == 0).all()
    np.testing.assert_allclose(batch[Columns.ACTION_LOGP], 0.0, atol=1e-6)
    algo.stop()


# ----------------------------------------------------------------- distributions


def _torch_logp(dist, inputs, actions):
    return dist.from_logits(torch.from_numpy(inputs)).logp(torch.from_numpy(np.asarray(actions))).numpy()


@pytest.mark.parametrize("dist", [BoundDistribution(Categorical), BoundDistribution(Categorical, temperature=0.5),
                                  BoundDistribution(DiagGaussian), BoundDistribution(SquashedGaussian)],
                         ids=["categorical", "categorical-t0.5", "diag-gaussian", "squashed-gaussian"])
def test_numpy_samples_carry_the_torch_distributions_logp(dist):
    rng = np.random.default_rng(0)
    width = 3 if dist.cls is Categorical else 4
    inputs = rng.normal(size=(64, width)).astype(np.float32)
    actions, logp = numpy_sampler(dist)(inputs, np.random.default_rng(1))
    assert logp.dtype == np.float32 and logp.shape == (64,)
    np.testing.assert_allclose(logp, _torch_logp(dist, inputs, actions), rtol=1e-4, atol=1e-4)
    mode = numpy_deterministic_fn(dist)(inputs)
    expected = dist.from_logits(torch.from_numpy(inputs)).deterministic_sample().numpy()
    np.testing.assert_allclose(mode, expected, rtol=1e-6, atol=1e-6)


def test_numpy_categorical_samples_follow_the_softmax():
    logits = np.array([[0.0, 1.0, -1.0]], np.float32).repeat(40_000, axis=0)
    actions, _ = numpy_sampler(BoundDistribution(Categorical))(logits, np.random.default_rng(0))
    freq = np.bincount(actions, minlength=3) / len(actions)
    probs = np.exp(logits[0]) / np.exp(logits[0]).sum()
    np.testing.assert_allclose(freq, probs, atol=0.01)


def test_numpy_gaussian_samples_have_the_inputs_mean_and_std():
    inputs = np.array([[1.5, -2.0, math.log(0.5), math.log(2.0)]], np.float32).repeat(40_000, axis=0)
    actions, _ = numpy_sampler(BoundDistribution(DiagGaussian))(inputs, np.random.default_rng(0))
    np.testing.assert_allclose(actions.mean(0), [1.5, -2.0], atol=0.03)
    np.testing.assert_allclose(actions.std(0), [0.5, 2.0], atol=0.03)


def test_distributions_without_a_numpy_form_are_refused():
    class MyCategorical(Categorical):
        pass

    assert numpy_sampler(BoundDistribution(MyCategorical)) is None
    assert numpy_deterministic_fn(MyCategorical) is None


# ----------------------------------------------------------------- explorations


def _torch_action(exploration, dist, inputs, timestep, explore):
    action, logp = exploration.get_exploration_action(
        action_distribution=dist.from_logits(torch.from_numpy(inputs)), timestep=timestep, explore=explore)
    return action.numpy(), logp.numpy()


@pytest.mark.parametrize("make,space,dist", [
    (lambda s: EpsilonGreedy(s, seed=3, epsilon_timesteps=100), gym.spaces.Discrete(4), BoundDistribution(Categorical)),
    (lambda s: GaussianNoise(s, seed=3, random_timesteps=10), gym.spaces.Box(-1, 1, (2,)),
     BoundDistribution(__import__("rlx.core.distributions", fromlist=["Deterministic"]).Deterministic)),
    (lambda s: OrnsteinUhlenbeckNoise(s, seed=3, random_timesteps=10), gym.spaces.Box(-1, 1, (2,)),
     BoundDistribution(__import__("rlx.core.distributions", fromlist=["Deterministic"]).Deterministic)),
], ids=["epsilon-greedy", "gaussian-noise", "ou-noise"])
def test_numpy_explorations_draw_what_their_torch_forms_draw(make, space, dist):
    a, b = make(space), make(space)
    rng = np.random.default_rng(0)
    width = space.n if isinstance(space, gym.spaces.Discrete) else 2
    for timestep in (0, 5, 20, 60, 200):
        for explore in (True, False):
            inputs = np.tanh(rng.normal(size=(6, width))).astype(np.float32)
            expected = _torch_action(a, dist, inputs, timestep, explore)
            got = b.numpy_action_fn(dist, explore)(inputs, timestep)
            np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
            np.testing.assert_array_equal(got[1], expected[1])
            assert b.last_timestep == a.last_timestep


def test_stochastic_sampling_leaves_its_random_phase_to_torch():
    space = gym.spaces.Discrete(3)
    act = StochasticSampling(space, random_timesteps=100, seed=0).numpy_action_fn(BoundDistribution(Categorical), True)
    inputs = np.zeros((2, 3), np.float32)
    assert act(inputs, 50) is None
    actions, logp = act(inputs, 150)
    assert actions.shape == (2,) and np.allclose(logp, math.log(1 / 3))


def test_custom_exploration_subclasses_act_through_torch():
    class Greedyish(EpsilonGreedy):
        def get_exploration_action(self, **kwargs):
            return super().get_exploration_action(**kwargs)

    assert Greedyish(gym.spaces.Discrete(2), seed=0).numpy_action_fn(BoundDistribution(Categorical), True) is None

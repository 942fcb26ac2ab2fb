"""DDPG and TD3: TD targets, delayed and Polyak updates, separate optimizers, exploration, config, checkpoints."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ddpg import DDPG, DDPGConfig
from rlx.algorithms.ddpg.ddpg_learner import DDPGLearner
from rlx.algorithms.ddpg.ddpg_rl_module import DDPGRLModule
from rlx.algorithms.td3 import TD3, TD3Config
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError

OBS_DIM, ACT_DIM, B = 3, 2, 8
TINY = {"actor_hiddens": [16, 16], "critic_hiddens": [16, 16]}


def make_learner(config_cls=TD3Config, **training) -> DDPGLearner:
    """A learner over a fresh module with small networks, built as the algorithm builds it."""
    cfg = config_cls().environment("Pendulum-v1").training(**{**TINY, **training}).debugging(seed=0)
    model = {"twin_q": cfg.twin_q, "actor_hiddens": cfg.actor_hiddens, "critic_hiddens": cfg.critic_hiddens,
             "actor_hidden_activation": "relu", "critic_hidden_activation": "relu"}
    module = DDPGRLModule(observation_space=gym.spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32),
                          action_space=gym.spaces.Box(-2.0, 2.0, (ACT_DIM,), np.float32), model_config=model)
    return DDPGLearner(cfg, module)


def make_batch(seed: int = 0, n: int = B) -> dict[str, np.ndarray]:
    """A replayed batch with varied rewards, terminations and n-step lengths."""
    rng = np.random.default_rng(seed)
    return {
        Columns.OBS: rng.uniform(-1, 1, (n, OBS_DIM)).astype(np.float32),
        Columns.ACTIONS: rng.uniform(-1, 1, (n, ACT_DIM)).astype(np.float32),
        Columns.REWARDS: rng.normal(size=n).astype(np.float32),
        Columns.NEXT_OBS: rng.uniform(-1, 1, (n, OBS_DIM)).astype(np.float32),
        Columns.TERMINATEDS: (np.arange(n) % 3 == 0),
        "n_step": (np.arange(n) % 3 + 1).astype(np.int64),
        Columns.WEIGHTS: np.ones(n, np.float32),
    }


def set_constant_critics(qf: torch.nn.Module, constants: list[float]) -> None:
    """Make ensemble member i output constants[i] whatever its input."""
    with torch.no_grad():
        for w, b in zip(qf.weights, qf.biases):
            w.zero_()
            b.zero_()
        for i, c in enumerate(constants):
            qf.biases[-1][i].fill_(c)


def set_critics_to_first_action(qf: torch.nn.Module) -> None:
    """Make every member output Q(s, a) = a[0] exactly for a[0] in [-1, 1] (relu layers pass a[0] + 2)."""
    with torch.no_grad():
        for w, b in zip(qf.weights, qf.biases):
            w.zero_()
            b.zero_()
        qf.weights[0][:, OBS_DIM, 0] = 1.0
        qf.biases[0][:, :, 0] = 2.0
        for w in qf.weights[1:]:
            w[:, 0, 0] = 1.0
        qf.biases[-1][:, :, 0] = -2.0


def set_constant_actor(pi: torch.nn.Module, pre_tanh: float) -> None:
    """Make the actor output tanh(pre_tanh) in every dimension."""
    with torch.no_grad():
        for lin in pi.linears:
            lin.weight.zero_()
            lin.bias.zero_()
        pi.linears[-1].bias.fill_(pre_tanh)


def snapshot(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def changed(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))


# --------------------------------------------------------------------------- TD targets


@pytest.mark.parametrize("config_cls, constants, expected_next_q", [
    (TD3Config, [3.0, -1.0], -1.0),  # twin critics: the minimum
    (TD3Config, [-2.5, 4.0], -2.5),
    (DDPGConfig, [3.0], 3.0),  # one critic
])
def test_td_targets_use_min_of_target_critics_n_step_discount_and_terminated_mask(
        config_cls, constants, expected_next_q):
    learner = make_learner(config_cls, gamma=0.9)
    set_constant_critics(learner.target_qf, constants)
    batch = make_batch()
    targets = learner.compute_td_targets(batch).numpy()
    not_done = 1.0 - batch[Columns.TERMINATEDS].astype(np.float64)
    expected = batch[Columns.REWARDS] + 0.9 ** batch["n_step"] * not_done * expected_next_q
    np.testing.assert_allclose(targets, expected, rtol=1e-5, atol=1e-6)
    assert batch[Columns.TERMINATEDS].any() and len(set(batch["n_step"])) == 3


def test_td_targets_evaluate_the_target_actor_not_the_online_one():
    learner = make_learner(DDPGConfig, gamma=1.0)
    set_critics_to_first_action(learner.target_qf)
    set_constant_actor(learner.target_pi, 0.5)
    set_constant_actor(learner.module.pi, -0.5)
    batch = make_batch()
    batch[Columns.REWARDS][:] = 0.0
    batch[Columns.TERMINATEDS][:] = False
    np.testing.assert_allclose(learner.compute_td_targets(batch).numpy(), math.tanh(0.5), rtol=1e-6)


def test_target_smoothing_noise_is_bounded_by_target_noise_clip():
    learner = make_learner(TD3Config, gamma=1.0, target_noise=1.0, target_noise_clip=0.3)
    set_critics_to_first_action(learner.target_qf)
    set_constant_actor(learner.target_pi, 0.0)  # a' = 0, so the target is the noise itself
    batch = make_batch(n=512)
    batch[Columns.REWARDS][:] = 0.0
    batch[Columns.TERMINATEDS][:] = False
    batch["n_step"][:] = 1
    noise = learner.compute_td_targets(batch).numpy()
    assert np.abs(noise).max() <= 0.3 + 1e-6
    assert np.isclose(noise.max(), 0.3) and np.isclose(noise.min(), -0.3)  # N(0, 1) often exceeds 0.3
    assert np.abs(noise).min() < 0.3 and len(np.unique(noise)) > 100


def test_smoothed_target_actions_stay_in_the_action_range():
    learner = make_learner(TD3Config, gamma=1.0, target_noise=1.0, target_noise_clip=0.5)
    set_critics_to_first_action(learner.target_qf)
    set_constant_actor(learner.target_pi, 2.0)  # tanh(2) ~ 0.96: noise pushes it past 1
    batch = make_batch(n=256)
    batch[Columns.REWARDS][:] = 0.0
    batch[Columns.TERMINATEDS][:] = False
    actions = learner.compute_td_targets(batch).numpy()
    assert actions.max() == pytest.approx(1.0) and actions.min() >= math.tanh(2.0) - 0.5 - 1e-6


def test_without_smoothing_the_target_action_is_exact():
    learner = make_learner(DDPGConfig, gamma=1.0, target_noise=1.0)
    set_critics_to_first_action(learner.target_qf)
    set_constant_actor(learner.target_pi, 0.0)
    batch = make_batch()
    batch[Columns.REWARDS][:] = 0.0
    assert not learner.compute_td_targets(batch).any()


def test_critic_loss_weighted_huber_and_l2():
    learner = make_learner(DDPGConfig, use_huber=True, huber_threshold=1.0, l2_reg=0.1)
    q = torch.tensor([[0.5, 3.0]])
    targets = torch.zeros(2)
    weights = torch.tensor([1.0, 0.5])
    l2 = sum(float(w.detach().pow(2).sum()) for w in learner.module.qf.weights)
    # Huber: 0.5 * 0.5**2 = 0.125 and 1.0 * (3.0 - 0.5) = 2.5; weighted mean (0.125 + 1.25) / 2.
    expected = (0.125 + 0.5 * 2.5) / 2 + 0.1 * 0.5 * l2
    assert float(learner.critic_loss(q, targets, weights).detach()) == pytest.approx(expected, rel=1e-5)
    mse = make_learner(DDPGConfig)
    assert float(mse.critic_loss(q, targets, None)) == pytest.approx((0.125 + 4.5) / 2)


# --------------------------------------------------------------------------- updates


def test_policy_delay_updates_actor_and_targets_every_nth_critic_update():
    learner = make_learner(TD3Config, policy_delay=3, tau=0.5)
    module = learner.module
    for i in range(1, 7):
        nets = {name: snapshot(net) for name, net in
                (("pi", module.pi), ("qf", module.qf), ("target_pi", learner.target_pi),
                 ("target_qf", learner.target_qf))}
        metrics = learner.update_from_batch(make_batch(seed=i), timestep=100 * i)
        actor_turn = i % 3 == 0
        assert changed(nets["qf"], module.qf)
        assert changed(nets["pi"], module.pi) == actor_turn
        assert changed(nets["target_pi"], learner.target_pi) == actor_turn
        assert changed(nets["target_qf"], learner.target_qf) == actor_turn
        assert metrics["num_grad_updates"] == i and metrics["num_actor_updates"] == i // 3
    assert learner.get_extra_state()["num_grad_updates"] == 6


def test_polyak_update_with_tau():
    learner = make_learner(DDPGConfig, tau=0.3)
    module = learner.module
    old_targets = [snapshot(learner.target_pi), snapshot(learner.target_qf)]
    learner.update_from_batch(make_batch(), timestep=10)
    for old, target, online in zip(old_targets, (learner.target_pi, learner.target_qf), (module.pi, module.qf)):
        for t_old, t_new, o in zip(old, target.parameters(), online.parameters()):
            torch.testing.assert_close(t_new, 0.3 * o.detach() + 0.7 * t_old)
            assert not torch.equal(t_new, o)


def test_target_network_update_freq_counts_sampled_steps():
    learner = make_learner(DDPGConfig, tau=0.5, target_network_update_freq=100)
    updated = []
    for timestep in (50, 99, 100, 150, 199, 200):
        before = snapshot(learner.target_qf)
        learner.update_from_batch(make_batch(seed=timestep), timestep=timestep)
        updated.append(changed(before, learner.target_qf))
    assert updated == [False, False, True, False, False, True]
    assert learner.get_extra_state()["last_target_update"] == 200


def test_actor_step_changes_only_actor_params():
    learner = make_learner(DDPGConfig, critic_lr=0.0, actor_lr=1e-2)
    pi, qf = snapshot(learner.module.pi), snapshot(learner.module.qf)
    learner.update_from_batch(make_batch(), timestep=1)
    assert changed(pi, learner.module.pi) and not changed(qf, learner.module.qf)


def test_critic_step_changes_only_critic_params():
    learner = make_learner(DDPGConfig, critic_lr=1e-2, actor_lr=0.0)
    pi, qf = snapshot(learner.module.pi), snapshot(learner.module.qf)
    learner.update_from_batch(make_batch(), timestep=1)
    assert changed(qf, learner.module.qf) and not changed(pi, learner.module.pi)


def test_actor_loss_is_minus_first_critic_at_the_actor_action():
    learner = make_learner(TD3Config)
    set_constant_critics(learner.module.qf, [2.0, -7.0])
    obs = torch.from_numpy(make_batch()[Columns.OBS])
    assert float(learner.actor_loss(obs).detach()) == pytest.approx(-2.0)


def test_update_metrics_and_td_error():
    learner = make_learner(TD3Config)
    metrics = learner.update_from_batch(make_batch(), timestep=1)
    assert math.isnan(float(metrics["actor_loss"]))  # no actor step yet with policy_delay=2
    metrics = learner.update_from_batch(make_batch(seed=1), timestep=2)
    for key in ("critic_loss", "actor_loss", "qf_mean", "gradients_critic_global_norm",
                "gradients_actor_global_norm", "num_grad_updates"):
        assert math.isfinite(float(metrics[key])), key
    td = metrics["td_error"]
    assert isinstance(td, np.ndarray) and td.shape == (B,) and (td >= 0).all()


# --------------------------------------------------------------------------- module and exploration


def test_module_actions_lie_in_unit_box_and_q_has_one_row_per_critic():
    learner = make_learner(TD3Config)
    obs = torch.from_numpy(make_batch()[Columns.OBS]) * 100.0
    actions = learner.module.actions(obs)
    assert actions.shape == (B, ACT_DIM) and actions.abs().max() <= 1.0
    assert learner.module.q_values(obs, actions).shape == (2, B)
    assert make_learner(DDPGConfig).module.q_values(obs, actions).shape == (1, B)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2, 2), np.float32)])
def test_module_refuses_non_1d_box_actions(space):
    with pytest.raises(ConfigError, match="1-D Box.*DQN or SAC"):
        DDPGRLModule(observation_space=gym.spaces.Box(-1, 1, (3,), np.float32), action_space=space)


def test_ddpg_on_discrete_env_raises_clear_error():
    with pytest.raises(ConfigError, match=r"Discrete\(2\).*DQN or SAC"):
        DDPGConfig().environment("CartPole-v1").build()


@pytest.mark.parametrize("config_cls, exploration", [
    (TD3Config, {"random_timesteps": 0}),
    (DDPGConfig, {"random_timesteps": 0, "scale_timesteps": 1, "final_scale": 1.0}),
])
def test_exploration_noise_only_when_exploring_and_within_bounds(config_cls, exploration):
    algo = (config_cls().environment("Pendulum-v1").training(**TINY).exploration(exploration_config=exploration)
            .debugging(seed=3).build())
    obs = np.random.default_rng(0).uniform(-1, 1, (256, 3)).astype(np.float32)
    module = algo.get_module()
    with torch.no_grad():
        expected = 2.0 * module.actions(torch.from_numpy(obs)).numpy()  # Pendulum's bounds are [-2, 2]
    np.testing.assert_allclose(algo.compute_actions(obs, explore=False), expected, rtol=1e-5, atol=1e-6)
    noisy = algo.compute_actions(obs, explore=True)
    assert noisy.min() >= -2.0 and noisy.max() <= 2.0
    assert not np.allclose(noisy, expected)
    assert 0.0 < np.abs(noisy - expected).mean() < 0.5
    algo.stop()


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("key, value, error", [
    ("policy_delay", 0, ConfigError),
    ("target_noise", -0.1, ConfigError),
    ("target_noise_clip", -1.0, ConfigError),
    ("actor_hiddens", [64, 0], ConfigError),
    ("critic_hiddens", "64", ConfigError),
    ("actor_hidden_activation", "sigmoidal", ConfigError),
    ("use_state_preprocessor", True, NotSupportedYetError),
])
def test_config_validation_names_the_option(key, value, error):
    with pytest.raises(error, match=key):
        DDPGConfig().training(**{key: value})


def test_td3_defaults_and_registry_and_old_paths():
    from rlx.agents.ddpg import DDPGTrainer, DEFAULT_CONFIG as DDPG_DEFAULTS
    from rlx.agents.td3 import TD3Trainer, DEFAULT_CONFIG as TD3_DEFAULTS
    from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config, list_algorithms

    td3, ddpg = TD3Config(), DDPGConfig()
    assert (td3.twin_q, td3.policy_delay, td3.smooth_target_policy) == (True, 2, True)
    assert (ddpg.twin_q, ddpg.policy_delay, ddpg.smooth_target_policy) == (False, 1, False)
    assert td3.exploration_config["type"] == "GaussianNoise"
    assert ddpg.exploration_config["type"] == "OrnsteinUhlenbeckNoise"
    assert DDPGTrainer is DDPG and TD3Trainer is TD3 and issubclass(TD3, DDPG)
    assert DDPG_DEFAULTS["twin_q"] is False and TD3_DEFAULTS["twin_q"] is True
    assert get_algorithm_class("td3") is TD3 and isinstance(get_algorithm_config("DDPG"), DDPGConfig)
    assert {"DDPG", "TD3"} <= set(list_algorithms())


# --------------------------------------------------------------------------- training and checkpoints


def tiny_config(config_cls=TD3Config, **training):
    opts = dict(TINY, train_batch_size=32, num_steps_sampled_before_learning_starts=64)
    opts.update(training)
    return (config_cls().environment("Pendulum-v1").training(**opts)
            .exploration(exploration_config={"random_timesteps": 64})
            .reporting(min_sample_timesteps_per_iteration=100).debugging(seed=1))


@pytest.mark.parametrize("config_cls, training", [
    (TD3Config, {}),
    (DDPGConfig, {"replay_buffer_config": {"type": "PrioritizedEpisodeReplayBuffer", "alpha": 0.6, "beta": 0.4},
                  "n_step": 3, "use_huber": True, "l2_reg": 1e-6}),
])
def test_two_training_iterations_report_finite_learner_metrics(config_cls, training):
    algo = tiny_config(config_cls, **training).build()
    for _ in range(2):
        result = algo.train()
    metrics = result["learners"]["default_policy"]
    for key in ("critic_loss", "actor_loss", "qf_mean", "gradients_critic_global_norm",
                "gradients_actor_global_norm", "num_grad_updates"):
        assert math.isfinite(metrics[key]), key
    assert metrics["num_grad_updates"] == result["num_env_steps_sampled_lifetime"] - 64 + 1
    algo.stop()


def test_checkpoint_round_trip_restores_actions_targets_and_counters(tmp_path):
    algo = tiny_config(TD3Config).build()
    algo.train()
    path = algo.save_to_path(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    assert isinstance(restored, TD3)
    obs = np.random.default_rng(0).uniform(-1, 1, (16, 3)).astype(np.float32)
    np.testing.assert_array_equal(restored.compute_actions(obs, explore=False),
                                  algo.compute_actions(obs, explore=False))
    for name in ("target_pi", "target_qf"):
        own, other = getattr(algo.learner, name).state_dict(), getattr(restored.learner, name).state_dict()
        assert own.keys() == other.keys()
        for k in own:
            torch.testing.assert_close(other[k], own[k], rtol=0, atol=0)
    assert restored.learner.get_extra_state() == algo.learner.get_extra_state()
    assert not torch.equal(restored.learner.target_pi.linears[0].weight, restored.get_module().pi.linears[0].weight)
    algo.stop()
    restored.stop()

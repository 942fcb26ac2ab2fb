"""SAC: the squashed-Gaussian sample and its log-probability, twin-Q soft Bellman targets (Box and
Discrete), entropy tuning, which parameters each of the three steps moves, Polyak target
updates, the learning-rate options and checkpoints.

Expected values are computed here with independent formulas from the module's own outputs.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.sac import SAC, SACConfig
from rlx.algorithms.sac import sac_learner
from rlx.algorithms.sac.sac_learner import squashed_gaussian_rsample
from rlx.core.columns import Columns
from rlx.core.distributions import SquashedGaussian
from rlx.utils.errors import ConfigError

B = 32


def sac_config(env: str = "Pendulum-v1", seed: int = 0, **training) -> SACConfig:
    """Tiny SAC: 16-unit nets, 16-row batches, learning after 32 steps, 64 steps per iteration."""
    opts = dict(q_model_config={"fcnet_hiddens": [16]}, policy_model_config={"fcnet_hiddens": [16]},
                train_batch_size=16, num_steps_sampled_before_learning_starts=32)
    opts.update(training)
    return (SACConfig().environment(env).training(**opts)
            .reporting(min_sample_timesteps_per_iteration=64).debugging(seed=seed))


@pytest.fixture
def built():
    algos = []

    def make(env: str = "Pendulum-v1", **training):
        algo = sac_config(env, **training).build()
        algos.append(algo)
        return algo

    yield make
    for algo in algos:
        algo.stop()


def crafted_batch(discrete: bool, seed: int = 1, n: int = B) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs_dim = 4 if discrete else 3
    terminateds = np.zeros(n, dtype=bool)
    terminateds[[0, 3, 7]] = True
    truncateds = np.zeros(n, dtype=bool)
    truncateds[[4]] = True
    actions = rng.integers(0, 2, n).astype(np.int64) if discrete else rng.uniform(-0.9, 0.9, (n, 1)).astype(np.float32)
    return {
        Columns.OBS: rng.uniform(-1.0, 1.0, (n, obs_dim)).astype(np.float32),
        Columns.NEXT_OBS: rng.uniform(-1.0, 1.0, (n, obs_dim)).astype(np.float32),
        Columns.ACTIONS: actions,
        Columns.REWARDS: rng.uniform(-2.0, 2.0, n).astype(np.float32),
        Columns.TERMINATEDS: terminateds,
        Columns.TRUNCATEDS: truncateds,
        Columns.WEIGHTS: rng.uniform(0.2, 1.0, n).astype(np.float32),
        "n_step": rng.integers(1, 4, n).astype(np.int64),
        "batch_indexes": np.arange(n, dtype=np.int64),
    }


def perturb(module: torch.nn.Module, scale: float = 0.3, seed: int = 5) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def snapshot(params) -> list[torch.Tensor]:
    return [p.detach().clone() for p in params]


def changed(before: list[torch.Tensor], params) -> list[bool]:
    return [not torch.equal(b, p.detach()) for b, p in zip(before, params)]


def reference_tanh_gaussian(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor):
    """(action, logp) by the change of variables with torch.distributions, in float64."""
    mean, log_std, noise = mean.double(), log_std.double(), noise.double()
    std = log_std.exp()
    u = mean + std * noise
    normal = torch.distributions.Normal(mean, std)
    logp = normal.log_prob(u) - torch.log(1.0 - torch.tanh(u) ** 2)
    return torch.tanh(u), logp.sum(-1)


# ----------------------------------------------------------------------------- squashed Gaussian


def test_squashed_gaussian_rsample_matches_change_of_variables():
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(64, 3, generator=gen)
    log_std = torch.rand(64, 3, generator=gen) * 1.5 - 1.0
    noise = torch.randn(64, 3, generator=gen)
    inputs = torch.cat([mean, log_std], -1).requires_grad_(True)
    action, logp = squashed_gaussian_rsample(inputs, noise)
    ref_action, ref_logp = reference_tanh_gaussian(mean, log_std, noise)
    assert action.shape == (64, 3) and logp.shape == (64,)
    torch.testing.assert_close(action.double(), ref_action, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logp.double(), ref_logp, rtol=1e-4, atol=1e-4)
    assert (action.abs() < 1.0).all()
    # Reparameterized: gradients reach the distribution inputs through the action.
    (action.sum() + logp.sum()).backward()
    assert inputs.grad is not None and inputs.grad.abs().sum() > 0


def test_squashed_gaussian_logp_is_finite_for_saturated_actions():
    inputs = torch.tensor([[30.0, 0.0], [-30.0, 0.5]])
    _, logp = squashed_gaussian_rsample(inputs, torch.tensor([[1.0], [-1.0]]))
    assert torch.isfinite(logp).all()


def test_learner_logp_agrees_with_the_sampling_distribution():
    gen = torch.Generator().manual_seed(1)
    mean = torch.randn(16, 2, generator=gen) * 0.5
    log_std = torch.rand(16, 2, generator=gen) - 1.0
    noise = torch.randn(16, 2, generator=gen)
    inputs = torch.cat([mean, log_std], -1)
    action, logp = squashed_gaussian_rsample(inputs, noise)
    dist_logp = SquashedGaussian(inputs).logp(action)
    torch.testing.assert_close(logp, dist_logp, rtol=1e-3, atol=1e-3)


# ----------------------------------------------------------------------------- critic targets


@pytest.fixture
def fixed_noise(monkeypatch):
    """Replace the learner's Gaussian noise with a fixed tensor (per row), recording each call."""
    gen = torch.Generator().manual_seed(42)
    noise = torch.randn(B, 1, generator=gen)
    calls = []
    original = sac_learner.squashed_gaussian_rsample

    def fixed(dist_inputs, _noise):
        assert _noise.shape == noise.shape
        calls.append(dist_inputs.detach().clone())
        return original(dist_inputs, noise)

    monkeypatch.setattr(sac_learner, "squashed_gaussian_rsample", fixed)
    return noise, calls


def test_continuous_critic_target_uses_min_target_q_and_entropy_bonus(built, fixed_noise):
    gamma = 0.9
    algo = built(gamma=gamma, initial_alpha=0.5)
    learner, module = algo.learner, algo.learner.module
    perturb(learner.target_qf)  # target critics clearly differ from the online ones
    noise, calls = fixed_noise
    batch = crafted_batch(discrete=False)
    obs, nxt = torch.from_numpy(batch[Columns.OBS]), torch.from_numpy(batch[Columns.NEXT_OBS])
    with torch.no_grad():
        mean, log_std = module.policy_outputs(nxt).chunk(2, -1)
        a_next, logp_next = reference_tanh_gaussian(mean, log_std, noise)
        sa_next = torch.cat([nxt, a_next.float()], -1)
        q_targ = learner.target_qf(sa_next).squeeze(-1).double()  # [2, B]
        q_online_next = module.q_values(nxt, a_next.float()).double()
        q = module.q_values(obs, torch.from_numpy(batch[Columns.ACTIONS])).double()  # [2, B]
    assert q_targ.shape == (2, B) and q.shape == (2, B)
    r = torch.from_numpy(batch[Columns.REWARDS]).double()
    disc = gamma ** torch.from_numpy(batch["n_step"]).double() * (1.0 - torch.from_numpy(batch[Columns.TERMINATEDS]).double())
    w = torch.from_numpy(batch[Columns.WEIGHTS]).double()

    def target(next_q):
        return r + disc * (next_q - 0.5 * logp_next)

    y = target(q_targ.min(0).values)
    expected_loss = 0.5 * (w * (q - y) ** 2).mean(1).sum()
    expected_td = (q - y).abs().mean(0)
    # Preconditions: max over the twins, or the online critics, give other targets.
    live = ~batch[Columns.TERMINATEDS]
    assert not torch.allclose(y[live], target(q_targ.max(0).values)[live], atol=1e-3)
    assert not torch.allclose(y[live], target(q_online_next.min(0).values)[live], atol=1e-3)
    metrics = learner.update_from_batch(batch, timestep=0)
    # Both policy evaluations (s for the actor, s' for the target) went through the sampler.
    assert len(calls) == 2
    assert float(metrics["critic_loss"]) == pytest.approx(float(expected_loss), rel=1e-4)
    np.testing.assert_allclose(metrics["td_error"], expected_td.numpy(), rtol=1e-4, atol=1e-5)
    assert float(metrics["alpha_value"]) == pytest.approx(0.5)


def test_discrete_critic_target_is_the_soft_state_value(built):
    gamma = 0.9
    algo = built("CartPole-v1", gamma=gamma, initial_alpha=0.5)
    learner, module = algo.learner, algo.learner.module
    assert module.discrete
    perturb(learner.target_qf)
    batch = crafted_batch(discrete=True)
    obs, nxt = torch.from_numpy(batch[Columns.OBS]), torch.from_numpy(batch[Columns.NEXT_OBS])
    with torch.no_grad():
        logp_next = torch.log_softmax(module.policy_outputs(nxt).double(), -1)  # [B, 2]
        q_targ = learner.target_qf(nxt).double()  # [2, B, 2]
        rows = torch.arange(B)
        q = module.q_values(obs).double()[:, rows, torch.from_numpy(batch[Columns.ACTIONS])]  # [2, B]
    v_next = (logp_next.exp() * (q_targ.min(0).values - 0.5 * logp_next)).sum(-1)
    r = torch.from_numpy(batch[Columns.REWARDS]).double()
    disc = gamma ** torch.from_numpy(batch["n_step"]).double() * (1.0 - torch.from_numpy(batch[Columns.TERMINATEDS]).double())
    y = r + disc * v_next
    w = torch.from_numpy(batch[Columns.WEIGHTS]).double()
    metrics = learner.update_from_batch(batch, timestep=0)
    assert float(metrics["critic_loss"]) == pytest.approx(float(0.5 * (w * (q - y) ** 2).mean(1).sum()), rel=1e-4)
    np.testing.assert_allclose(metrics["td_error"], (q - y).abs().mean(0).numpy(), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- entropy tuning


@pytest.mark.parametrize("env", ["Pendulum-v1", "CartPole-v1"])
@pytest.mark.parametrize("target_entropy,direction", [(100.0, 1), (-100.0, -1)])
def test_alpha_rises_below_the_target_entropy_and_falls_above(built, env, target_entropy, direction):
    alpha_lr = 1e-2
    algo = built(env, target_entropy=target_entropy, alpha_lr=alpha_lr, initial_alpha=0.3)
    learner = algo.learner
    assert learner.target_entropy == target_entropy
    before = float(learner.log_alpha.detach())
    assert before == pytest.approx(math.log(0.3))
    learner.update_from_batch(crafted_batch(discrete=env == "CartPole-v1"), timestep=0)
    step = float(learner.log_alpha.detach()) - before
    # Adam's first step moves by the learning rate, in the direction that closes the entropy gap.
    assert step == pytest.approx(direction * alpha_lr, rel=1e-3)


def test_target_entropy_auto(built):
    assert built("CartPole-v1").learner.target_entropy == pytest.approx(0.5 * math.log(2))
    assert built("Pendulum-v1").learner.target_entropy == pytest.approx(-1.0)


def test_initial_alpha_sets_log_alpha(built):
    learner = built(initial_alpha=0.2).learner
    assert float(learner.log_alpha.detach()) == pytest.approx(math.log(0.2))
    assert learner.log_alpha.requires_grad


# ----------------------------------------------------------------------------- which params move


@pytest.mark.parametrize("env", ["Pendulum-v1", "CartPole-v1"])
def test_each_step_moves_only_its_own_parameters(built, env):
    algo = built(env)
    learner = algo.learner
    actor, critic, alpha = learner.actor_params, learner.critic_params, [learner.log_alpha]
    groups = {"actor": actor, "critic": critic, "alpha": alpha}
    everything = actor + critic + alpha
    for p in everything:
        p.grad = None
    log = []

    def wrap(name):
        opt = learner.optimizers[name]
        step = opt.step

        def recording_step(*args, **kwargs):
            before = snapshot(everything)
            grads = {g: [None if p.grad is None else p.grad.detach().clone() for p in ps]
                     for g, ps in groups.items()}
            out = step(*args, **kwargs)
            log.append((name, grads, changed(before, everything)))
            return out

        opt.step = recording_step

    for name in groups:
        wrap(name)
    learner.update_from_batch(crafted_batch(discrete=env == "CartPole-v1"), timestep=0)
    assert [entry[0] for entry in log] == ["critic", "actor", "alpha"]
    n_a, n_c = len(actor), len(critic)
    for name, grads, moved in log:
        moved_actor, moved_critic, moved_alpha = moved[:n_a], moved[n_a:n_a + n_c], moved[n_a + n_c:]
        assert any({"actor": moved_actor, "critic": moved_critic, "alpha": moved_alpha}[name]), name
        if name != "actor":
            assert not any(moved_actor), name
        if name != "critic":
            assert not any(moved_critic), name
        if name != "alpha":
            assert not any(moved_alpha), name
    critic_grads_at_critic_step = log[0][1]["critic"]
    actor_grads_at_actor_step = log[1][1]["actor"]
    # The critic step set no gradients on the policy or log-alpha...
    assert all(g is None for g in log[0][1]["actor"]) and log[0][1]["alpha"] == [None]
    assert all(g is not None for g in critic_grads_at_critic_step)
    # ...and the actor loss (which reads the critics) left the critics' gradients alone.
    for g0, g1 in zip(critic_grads_at_critic_step, log[1][1]["critic"]):
        assert torch.equal(g0, g1)
    assert all(g is not None for g in actor_grads_at_actor_step)
    assert log[1][1]["alpha"] == [None]
    # The alpha step did not touch the networks' gradients either.
    for g0, g1 in zip(actor_grads_at_actor_step, log[2][1]["actor"]):
        assert torch.equal(g0, g1)


def test_target_critics_follow_polyak_averaging(built):
    tau = 0.1
    algo = built(tau=tau)
    learner = algo.learner
    perturb(learner.target_qf)
    old = snapshot(learner.target_qf.parameters())
    learner.update_from_batch(crafted_batch(discrete=False), timestep=0)
    online = snapshot(learner.module.qf.parameters())
    for new, o_old, on in zip(learner.target_qf.parameters(), old, online):
        torch.testing.assert_close(new.detach(), (1 - tau) * o_old + tau * on, rtol=1e-5, atol=1e-6)


def test_target_critics_need_no_gradients(built):
    learner = built().learner
    assert all(not p.requires_grad for p in learner.target_qf.parameters())
    assert not any(p is q for p in learner.target_qf.parameters() for q in learner.module.qf.parameters())


# ----------------------------------------------------------------------------- training runs


def finite_metrics(result: dict) -> dict:
    metrics = result["learners"]["default_policy"]
    for key in ("critic_loss", "actor_loss", "alpha_loss", "alpha_value", "entropy", "qf_mean", "total_loss"):
        assert key in metrics and math.isfinite(metrics[key]), key
    return metrics


def test_discrete_sac_trains_on_cartpole(built):
    algo = built("CartPole-v1")
    for _ in range(2):
        result = algo.train()
        metrics = finite_metrics(result)
    assert result["num_env_steps_sampled_lifetime"] == 128
    assert result["num_env_steps_trained_lifetime"] > 0
    assert 0.0 <= metrics["entropy"] <= math.log(2) + 1e-6
    assert algo.learner.target_entropy == pytest.approx(0.5 * math.log(2))
    assert algo.compute_single_action(np.zeros(4, np.float32), explore=False) in (0, 1)


def test_continuous_sac_trains_on_pendulum(built):
    algo = built()
    for _ in range(2):
        result = algo.train()
        finite_metrics(result)
    assert result["num_env_steps_trained_lifetime"] > 0
    action = algo.compute_single_action(np.array([1.0, 0.0, 0.0], np.float32))
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0


def test_greedy_action_is_the_unsquashed_tanh_of_the_mean(built):
    algo = built()
    obs = np.random.default_rng(3).uniform(-1, 1, (10, 3)).astype(np.float32)
    with torch.no_grad():
        mean, _ = algo.get_module().policy_outputs(torch.from_numpy(obs)).chunk(2, -1)
    expected = 2.0 * torch.tanh(mean).numpy()  # Pendulum's actions lie in [-2, 2]
    got = np.stack([algo.compute_single_action(o, explore=False) for o in obs])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_twin_q_false_uses_a_single_critic(built):
    module = built(twin_q=False).learner.module
    q = module.q_values(torch.zeros(5, 3), torch.zeros(5, 1))
    assert q.shape == (1, 5)



def test_model_config_initializers_reach_the_hidden_layers_of_policy_and_critics(built):
    """fcnet_kernel_initializer / fcnet_bias_initializer of policy_model_config and q_model_config
    set the hidden layers of the policy and of every critic; output layers keep their own init."""
    module = built(policy_model_config={"fcnet_hiddens": [16, 16], "fcnet_kernel_initializer": "constant_",
                                        "fcnet_kernel_initializer_kwargs": {"val": 0.25}},
                   q_model_config={"fcnet_hiddens": [16, 16], "fcnet_kernel_initializer": "ones_",
                                   "fcnet_bias_initializer": "constant_",
                                   "fcnet_bias_initializer_kwargs": {"val": -0.5}}).learner.module
    pi_linears = [m for m in module.pi.modules() if isinstance(m, torch.nn.Linear)]
    assert len(pi_linears) == 3
    for hidden in pi_linears[:2]:
        assert torch.all(hidden.weight == 0.25)
    assert not torch.all(pi_linears[2].weight == 0.25)
    weights, biases = list(module.qf.weights), list(module.qf.biases)
    for w, b in zip(weights[:2], biases[:2]):
        assert w.shape[0] == 2 and torch.all(w == 1.0) and torch.all(b == -0.5)
    assert not torch.all(weights[2] == 1.0)


def test_default_critic_init_is_pytorchs_linear_default_per_layer_fan_in(built):
    module = built(q_model_config={"fcnet_hiddens": [64]}).learner.module
    first, last = module.qf.weights  # [members, in, out]
    assert first.abs().max() <= 1.0 / math.sqrt(first.shape[1])
    assert last.abs().max() <= 1.0 / math.sqrt(64) and last.abs().max() > 0.5 / math.sqrt(64)
    assert not torch.equal(first[0], first[1])  # twin critics start apart


def test_default_policy_init_is_pytorchs_linear_default_per_layer_fan_in(built):
    """The policy keeps torch.nn.Linear's init (bounds 1/sqrt(fan_in), nonzero biases), as RLlib's
    and SB3's SAC, not the orthogonal init with a near-zero output layer PPO uses."""
    module = built(policy_model_config={"fcnet_hiddens": [64, 64]}).learner.module
    linears = [m for m in module.pi.modules() if isinstance(m, torch.nn.Linear)]
    assert [lin.in_features for lin in linears] == [linears[0].in_features, 64, 64]
    for lin in linears:
        bound = 1.0 / math.sqrt(lin.in_features)
        assert lin.weight.abs().max() <= bound and lin.weight.abs().max() > 0.5 * bound
        assert lin.bias.abs().max() <= bound and lin.bias.abs().max() > 0.0


def test_make_mlp_refuses_an_unknown_layer_init():
    from rlx.core.mlp import make_mlp
    with pytest.raises(ValueError, match="layer_init must be 'orthogonal' or 'torch', got 'xavier'"):
        make_mlp(3, [4], "relu", 2, layer_init="xavier")


# ----------------------------------------------------------------------------- learning rates


def test_actor_critic_and_alpha_learning_rates_reach_their_optimizers(built):
    learner = built(actor_lr=1e-3, critic_lr=2e-3, alpha_lr=3e-3).learner
    assert set(learner.optimizers) == {"actor", "critic", "alpha"}
    lrs = {name: opt.param_groups[0]["lr"] for name, opt in learner.optimizers.items()}
    assert lrs == pytest.approx({"actor": 1e-3, "critic": 2e-3, "alpha": 3e-3})


def test_old_optimization_config_maps_onto_the_learning_rates(built):
    algo = built(optimization_config={"actor_learning_rate": 1e-3, "critic_learning_rate": 2e-3,
                                      "entropy_learning_rate": 3e-3})
    cfg = algo.config
    assert (cfg.actor_lr, cfg.critic_lr, cfg.alpha_lr) == (1e-3, 2e-3, 3e-3)
    lrs = {name: opt.param_groups[0]["lr"] for name, opt in algo.learner.optimizers.items()}
    assert lrs == pytest.approx({"actor": 1e-3, "critic": 2e-3, "alpha": 3e-3})


def test_bad_sac_options_raise_config_errors():
    with pytest.raises(ConfigError, match="actor_learning_rte.*Did you mean.*'actor_learning_rate'"):
        sac_config(optimization_config={"actor_learning_rte": 1e-3}).build()
    with pytest.raises(ConfigError, match="target_entropy"):
        SACConfig().training(target_entropy="high")
    with pytest.raises(ConfigError, match="initial_alpha"):
        SACConfig().training(initial_alpha=0.0)
    with pytest.raises(ConfigError, match="fcnet_hiddens"):
        SACConfig().training(q_model_config={"fcnet_hidden": [16]})


def test_actor_lr_schedule_is_applied_per_timestep(built):
    learner = built(actor_lr=[[0, 1e-3], [100, 1e-4]]).learner
    learner.update_from_batch(crafted_batch(discrete=False), timestep=100)
    assert learner.optimizers["actor"].param_groups[0]["lr"] == pytest.approx(1e-4)
    assert learner.optimizers["critic"].param_groups[0]["lr"] == pytest.approx(SACConfig().critic_lr)


def test_sac_config_defaults():
    cfg = SACConfig()
    assert cfg.tau == 5e-3 and cfg.twin_q and cfg.initial_alpha == 1.0 and cfg.target_entropy == "auto"
    assert cfg.replay_buffer_config["type"] == "EpisodeReplayBuffer"
    assert cfg.exploration_config == {"type": "StochasticSampling"}


def test_sac_rejects_multi_dimensional_box_actions():
    import gymnasium as gym

    from rlx import register_env

    class BoxActions2D(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            return np.zeros(2, np.float32), 0.0, False, False, {}

    register_env("rlx_test_sac_box2d", lambda ctx: BoxActions2D())
    with pytest.raises(ConfigError, match="1-D Box"):
        sac_config("rlx_test_sac_box2d").build()


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_restores_alpha_targets_and_optimizers(built, tmp_path):
    algo = built(initial_alpha=0.5)
    algo.train()
    algo.train()
    learner = algo.learner
    assert float(learner.log_alpha.detach()) != pytest.approx(math.log(0.5))  # alpha has been tuned
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    try:
        assert isinstance(restored, SAC)
        rl = restored.learner
        assert float(rl.log_alpha.detach()) == float(learner.log_alpha.detach())
        for k, v in learner.target_qf.state_dict().items():
            torch.testing.assert_close(rl.target_qf.state_dict()[k], v, rtol=0, atol=0, msg=k)
        assert set(rl.optimizers) == {"actor", "critic", "alpha"}
        for name, opt in learner.optimizers.items():
            sa, sb = opt.state_dict(), rl.optimizers[name].state_dict()
            assert sa["state"] and sa["state"].keys() == sb["state"].keys(), name
            for idx in sa["state"]:
                for key, value in sa["state"][idx].items():
                    other = sb["state"][idx][key]
                    if isinstance(value, torch.Tensor):
                        torch.testing.assert_close(other, value, rtol=0, atol=0)
                    else:
                        assert other == value
            assert sb["param_groups"][0]["lr"] == sa["param_groups"][0]["lr"]
        obs = np.random.default_rng(3).uniform(-1, 1, (10, 3)).astype(np.float32)
        for o in obs:
            np.testing.assert_array_equal(restored.compute_single_action(o, explore=False),
                                          algo.compute_single_action(o, explore=False))
        # The optimizer "alpha" still drives the restored log_alpha tensor.
        rl.update_from_batch(crafted_batch(discrete=False), timestep=200)
        assert float(rl.log_alpha.detach()) != float(learner.log_alpha.detach())
    finally:
        restored.stop()


@pytest.mark.slow
def test_discrete_auto_entropy_target_keeps_alpha_bounded():
    """With the 'auto' target, alpha settles below its start instead of growing without bound
    (RLlib's 0.98 * log(n) target made alpha grow ~e^(steps * alpha_lr) on CartPole)."""
    algo = (
        SACConfig().environment("CartPole-v1").debugging(seed=0)
        .training(q_model_config={"fcnet_hiddens": [32, 32]}, policy_model_config={"fcnet_hiddens": [32, 32]},
                  train_batch_size=64, num_steps_sampled_before_learning_starts=500)
        .reporting(min_sample_timesteps_per_iteration=1000)
        .build()
    )
    try:
        for _ in range(4):
            result = algo.train()
        alpha = result["learners"]["default_policy"]["alpha_value"]
        assert alpha < SACConfig().initial_alpha, f"alpha grew to {alpha}"
    finally:
        algo.stop()

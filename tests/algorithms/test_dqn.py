"""DQN: TD targets (double Q, n-step, huber/mse, importance weights, C51 projection), target-network
updates, the Rainbow module options, DQN-specific config options, the explore switch and DQN
checkpoints.

The expected values are computed here from the module's own outputs (online and target nets)
with independent formulas and compared with what the learner reports it optimized
(`total_loss`, and the per-sample `td_error` it hands to prioritized replay).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.dqn import DQN, DQNConfig
from rlx.algorithms.dqn.dqn_learner import project_distribution, td_loss
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError
from rlx.utils.exploration.epsilon_greedy import EpsilonGreedy

POLICY_DIR = Path("policies") / "default_policy"
B = 32  # rows of a crafted replay batch


def dqn_config(seed: int = 0, **training) -> DQNConfig:
    """A tiny DQN on CartPole: 16-unit nets, 16-row batches, learning after 32 steps, 64 steps/iter."""
    opts = dict(hiddens=[16], model={"fcnet_hiddens": [16]}, train_batch_size=16,
                num_steps_sampled_before_learning_starts=32)
    opts.update(training)
    return (DQNConfig().environment("CartPole-v1").training(**opts)
            .reporting(min_sample_timesteps_per_iteration=64).debugging(seed=seed))


@pytest.fixture
def built():
    """Build DQN algos from training kwargs; stops them afterwards."""
    algos = []

    def make(**training):
        algo = dqn_config(**training).build()
        algos.append(algo)
        return algo

    yield make
    for algo in algos:
        algo.stop()


def crafted_batch(seed: int = 1, n: int = B, reward_scale: float = 3.0) -> dict[str, np.ndarray]:
    """A replay batch as the buffer returns it, with varied n_step, terminateds and weights."""
    rng = np.random.default_rng(seed)
    terminateds = np.zeros(n, dtype=bool)
    terminateds[[1, 5, 9]] = True
    truncateds = np.zeros(n, dtype=bool)
    truncateds[[2, 6]] = True
    return {
        Columns.OBS: rng.uniform(-1.0, 1.0, (n, 4)).astype(np.float32),
        Columns.NEXT_OBS: rng.uniform(-1.0, 1.0, (n, 4)).astype(np.float32),
        Columns.ACTIONS: rng.integers(0, 2, n).astype(np.int64),
        Columns.REWARDS: rng.uniform(-reward_scale, reward_scale, n).astype(np.float32),
        Columns.TERMINATEDS: terminateds,
        Columns.TRUNCATEDS: truncateds,
        Columns.WEIGHTS: rng.uniform(0.2, 1.0, n).astype(np.float32),
        "n_step": rng.integers(1, 4, n).astype(np.int64),
        "batch_indexes": np.arange(n, dtype=np.int64),
    }


def perturb_target(learner, scale: float = 1.0, seed: int = 3) -> None:
    """Make the target net clearly differ from the online net."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in learner.target.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def q_of(net, obs: np.ndarray) -> torch.Tensor:
    """Greedy (inference) Q-values [B, A] of a DQN module for NumPy observations."""
    with torch.no_grad():
        return net.forward_inference({Columns.OBS: torch.from_numpy(obs)})["qf_preds"]


def huber(x: torch.Tensor) -> torch.Tensor:
    ax = x.abs()
    return torch.where(ax <= 1.0, 0.5 * x * x, ax - 0.5)


def expected_td(learner, batch, gamma: float, double_q: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(td errors, bootstrap Q-values of s') computed independently from the two nets' outputs."""
    module, target = learner.module, learner.target
    rows = torch.arange(batch[Columns.OBS].shape[0])
    actions = torch.from_numpy(batch[Columns.ACTIONS])
    q = q_of(module, batch[Columns.OBS])[rows, actions]
    q_next_target = q_of(target, batch[Columns.NEXT_OBS])
    if double_q:
        a_star = q_of(module, batch[Columns.NEXT_OBS]).argmax(1)
        boot = q_next_target[rows, a_star]
    else:
        boot = q_next_target.max(1).values
    r = torch.from_numpy(batch[Columns.REWARDS]).double()
    n = torch.from_numpy(batch["n_step"]).double()
    not_term = 1.0 - torch.from_numpy(batch[Columns.TERMINATEDS]).double()
    y = r + gamma ** n * not_term * boot.double()
    return q.double() - y, boot


# ----------------------------------------------------------------------------- TD targets


def test_double_q_picks_next_action_with_online_net_and_values_it_with_target_net(built):
    algo = built(double_q=True, gamma=0.9)
    learner = algo.learner
    perturb_target(learner)
    batch = crafted_batch()
    td, boot = expected_td(learner, batch, 0.9, double_q=True)
    td_max, boot_max = expected_td(learner, batch, 0.9, double_q=False)
    # Precondition: online and target nets disagree on the next action for several rows, so
    # plain max-over-target would give other targets.
    live = ~batch[Columns.TERMINATEDS]
    assert ((boot - boot_max).abs().numpy()[live] > 1e-3).sum() >= 3
    metrics = learner.update_from_batch(batch, timestep=0)
    np.testing.assert_allclose(metrics["td_error"], td.abs().numpy(), rtol=1e-4, atol=1e-5)
    assert not np.allclose(metrics["td_error"], td_max.abs().numpy(), rtol=1e-4, atol=1e-5)
    w = torch.from_numpy(batch[Columns.WEIGHTS]).double()
    assert float(metrics["total_loss"]) == pytest.approx(float((w * huber(td)).mean()), rel=1e-4)


def test_without_double_q_the_target_is_the_max_over_the_target_net(built):
    algo = built(double_q=False, gamma=0.9)
    learner = algo.learner
    perturb_target(learner)
    batch = crafted_batch()
    td, boot = expected_td(learner, batch, 0.9, double_q=False)
    td_double, boot_double = expected_td(learner, batch, 0.9, double_q=True)
    live = ~batch[Columns.TERMINATEDS]
    assert ((boot - boot_double).abs().numpy()[live] > 1e-3).sum() >= 3
    metrics = learner.update_from_batch(batch, timestep=0)
    np.testing.assert_allclose(metrics["td_error"], td.abs().numpy(), rtol=1e-4, atol=1e-5)
    w = torch.from_numpy(batch[Columns.WEIGHTS]).double()
    assert float(metrics["total_loss"]) == pytest.approx(float((w * huber(td)).mean()), rel=1e-4)


def test_n_step_discount_and_terminated_masking(built):
    gamma = 0.5  # makes gamma**n very different for n = 1, 2, 3
    algo = built(gamma=gamma)
    learner = algo.learner
    perturb_target(learner, scale=0.5)
    batch = crafted_batch(seed=4)
    batch["n_step"] = np.array([1, 2, 3, 4] * (B // 4), dtype=np.int64)
    td, boot = expected_td(learner, batch, gamma, double_q=True)
    rows = torch.arange(B)
    q = q_of(learner.module, batch[Columns.OBS])[rows, torch.from_numpy(batch[Columns.ACTIONS])]
    metrics = learner.update_from_batch(batch, timestep=0)
    got = metrics["td_error"]
    np.testing.assert_allclose(got, td.abs().numpy(), rtol=1e-4, atol=1e-5)
    # Terminated rows: the target is the reward alone.
    term = batch[Columns.TERMINATEDS]
    np.testing.assert_allclose(got[term], np.abs(q.numpy() - batch[Columns.REWARDS])[term], rtol=1e-4, atol=1e-5)
    # Truncated (not terminated) rows still bootstrap.
    trunc = batch[Columns.TRUNCATEDS]
    assert not np.allclose(got[trunc], np.abs(q.numpy() - batch[Columns.REWARDS])[trunc], atol=1e-3)
    # A single-step discount would give other targets for the n > 1 rows.
    one_step = batch[Columns.REWARDS] + gamma * (~term) * boot.numpy()
    multi = (batch["n_step"] > 1) & ~term
    assert not np.allclose(got[multi], np.abs(q.numpy() - one_step)[multi], atol=1e-3)


def test_missing_n_step_column_means_one_step(built):
    algo = built(gamma=0.9)
    batch = crafted_batch()
    del batch["n_step"]
    perturb_target(algo.learner)
    full = dict(batch, n_step=np.ones(B, dtype=np.int64))
    td, _ = expected_td(algo.learner, full, 0.9, double_q=True)
    metrics = algo.learner.update_from_batch(batch, timestep=0)
    np.testing.assert_allclose(metrics["td_error"], td.abs().numpy(), rtol=1e-4, atol=1e-5)


def test_td_loss_huber_and_mse_per_sample():
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.5])
    huber_expected = torch.tensor([2.5, 0.5, 0.125, 0.0, 0.03125, 0.5, 2.0])
    torch.testing.assert_close(td_loss(x, "huber"), huber_expected)
    torch.testing.assert_close(td_loss(x, "mse"), 0.5 * x * x)


@pytest.mark.parametrize("loss_fn", ["huber", "mse"])
def test_learner_uses_the_configured_td_loss(built, loss_fn):
    algo = built(td_error_loss_fn=loss_fn, gamma=0.9)
    learner = algo.learner
    perturb_target(learner)
    batch = crafted_batch(reward_scale=5.0)  # TD errors well beyond huber's delta of 1
    td, _ = expected_td(learner, batch, 0.9, double_q=True)
    assert (td.abs() > 1.0).sum() >= 5
    w = torch.from_numpy(batch[Columns.WEIGHTS]).double()
    per_sample = huber(td) if loss_fn == "huber" else 0.5 * td * td
    other = 0.5 * td * td if loss_fn == "huber" else huber(td)
    metrics = learner.update_from_batch(batch, timestep=0)
    assert float(metrics["total_loss"]) == pytest.approx(float((w * per_sample).mean()), rel=1e-4)
    assert float(metrics["total_loss"]) != pytest.approx(float((w * other).mean()), rel=1e-2)


def test_importance_weights_scale_the_loss(built):
    a, b = built(gamma=0.9), built(gamma=0.9)  # same seed: identical nets
    batch = crafted_batch()
    batch[Columns.WEIGHTS] = np.ones(B, dtype=np.float32)
    doubled = dict(batch, **{Columns.WEIGHTS: np.full(B, 2.0, dtype=np.float32)})
    la = float(a.learner.update_from_batch(batch, timestep=0)["total_loss"])
    lb = float(b.learner.update_from_batch(doubled, timestep=0)["total_loss"])
    assert lb == pytest.approx(2.0 * la, rel=1e-5)
    assert la > 0


def test_zero_importance_weights_leave_the_network_unchanged(built):
    algo = built()
    learner = algo.learner
    before = {k: v.clone() for k, v in learner.module.state_dict().items()}
    batch = crafted_batch()
    batch[Columns.WEIGHTS] = np.zeros(B, dtype=np.float32)
    metrics = learner.update_from_batch(batch, timestep=0)
    assert float(metrics["total_loss"]) == 0.0
    for k, v in learner.module.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0, msg=k)
    # ...while real weights do move it (and only the online net: the target update is not due).
    target_before = {k: v.clone() for k, v in learner.target.state_dict().items()}
    batch[Columns.WEIGHTS] = np.ones(B, dtype=np.float32)
    learner.update_from_batch(batch, timestep=1)
    assert any(not torch.equal(v, before[k]) for k, v in learner.module.state_dict().items())
    for k, v in learner.target.state_dict().items():
        assert torch.equal(v, target_before[k]), k


# ----------------------------------------------------------------------------- C51 projection


def reference_projection(next_probs, rewards, discounts, support) -> np.ndarray:
    """C51's categorical projection, written as the paper's per-atom loop in float64."""
    next_probs = np.asarray(next_probs, dtype=np.float64)
    support = np.asarray(support, dtype=np.float64)
    n = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (n - 1)
    out = np.zeros_like(next_probs)
    for i in range(next_probs.shape[0]):
        for j in range(n):
            tz = min(max(rewards[i] + discounts[i] * support[j], v_min), v_max)
            b = min(max((tz - v_min) / delta, 0.0), n - 1.0)
            lo, hi = int(math.floor(b)), int(math.ceil(b))
            if lo == hi:
                out[i, lo] += next_probs[i, j]
            else:
                out[i, lo] += next_probs[i, j] * (hi - b)
                out[i, hi] += next_probs[i, j] * (b - lo)
    return out


def test_project_distribution_hand_computed_five_atoms():
    support = torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0])
    p = torch.tensor([0.1, 0.2, 0.3, 0.25, 0.15])
    probs = p.repeat(6, 1)
    rewards = torch.tensor([0.5, 1.0, 0.3, -10.0, 10.0, 0.0])
    discounts = torch.tensor([1.0, 1.0, 0.0, 0.99, 0.99, 0.5])
    out = project_distribution(probs, rewards, discounts, support)
    expected = torch.tensor([
        # r=0.5: atoms shift half-way up; the top atom (2.5) is clamped to 2.
        [0.05, 0.15, 0.25, 0.275, 0.275],
        # r=1: every atom lands exactly on the next one; the top one is clamped onto 2.
        [0.0, 0.1, 0.2, 0.3, 0.4],
        # terminated (discount 0): all mass at r=0.3, between atoms 0 and 1.
        [0.0, 0.0, 0.7, 0.3, 0.0],
        # far below v_min: everything clamped onto the lowest atom.
        [1.0, 0.0, 0.0, 0.0, 0.0],
        # far above v_max: everything on the highest atom.
        [0.0, 0.0, 0.0, 0.0, 1.0],
        # discount 0.5, r=0: support shrinks to [-1, -0.5, 0, 0.5, 1].
        [0.0, 0.2, 0.525, 0.275, 0.0],
    ])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.sum(1), torch.ones(6))


@pytest.mark.parametrize("v_min,v_max,num_atoms", [
    (-2.0, 2.0, 5), (-10.0, 10.0, 51), (0.0, 1.0, 3), (-1.0, 1.0, 11),
    (-10.0, 200.0, 51),  # float32 rounding puts v_max's index just above num_atoms - 1
])
def test_project_distribution_matches_reference_and_sums_to_one(v_min, v_max, num_atoms):
    rng = np.random.default_rng(0)
    support = torch.linspace(v_min, v_max, num_atoms)
    n = 64
    logits = rng.normal(size=(n, num_atoms))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    span = v_max - v_min
    rewards = rng.uniform(v_min - 0.5 * span, v_max + 0.5 * span, n)  # some land outside [v_min, v_max]
    rewards[:4] = [v_max + 1.0, v_min - 1.0, v_max, v_min]
    discounts = rng.choice([0.0, 0.5, 0.99, 1.0], n)
    out = project_distribution(torch.tensor(probs, dtype=torch.float32), torch.tensor(rewards, dtype=torch.float32),
                               torch.tensor(discounts, dtype=torch.float32), support)
    assert out.shape == (n, num_atoms)
    assert (out >= -1e-7).all()
    np.testing.assert_allclose(out.sum(1).numpy(), 1.0, atol=1e-5)
    np.testing.assert_allclose(out.numpy(), reference_projection(probs, rewards, discounts, support.numpy()),
                               atol=1e-4)


def test_distributional_loss_is_cross_entropy_to_the_projected_target(built):
    v_min, v_max, atoms = -2.0, 2.0, 5
    algo = built(num_atoms=atoms, v_min=v_min, v_max=v_max, gamma=0.9)
    learner = algo.learner
    module, target = learner.module, learner.target
    perturb_target(learner, scale=0.3)
    batch = crafted_batch(reward_scale=1.0)
    rows = torch.arange(B)
    support = np.linspace(v_min, v_max, atoms)
    with torch.no_grad():
        obs = torch.from_numpy(batch[Columns.OBS])
        nxt = torch.from_numpy(batch[Columns.NEXT_OBS])
        logits = module.q_outputs(obs, noisy=False)[rows, torch.from_numpy(batch[Columns.ACTIONS])]
        a_star = q_of(module, batch[Columns.NEXT_OBS]).argmax(1)  # double Q: online net picks
        next_probs = torch.softmax(target.q_outputs(nxt, noisy=False)[rows, a_star], -1).numpy()
    discounts = 0.9 ** batch["n_step"] * (~batch[Columns.TERMINATEDS])
    tp = reference_projection(next_probs, batch[Columns.REWARDS].astype(np.float64), discounts, support)
    ce = -(tp * torch.log_softmax(logits.double(), -1).numpy()).sum(1)
    metrics = learner.update_from_batch(batch, timestep=0)
    np.testing.assert_allclose(metrics["td_error"], ce, rtol=1e-4, atol=1e-5)
    assert float(metrics["total_loss"]) == pytest.approx(float((batch[Columns.WEIGHTS] * ce).mean()), rel=1e-4)


# ----------------------------------------------------------------------------- target network


def params_of(net) -> list[torch.Tensor]:
    return [p.detach().clone() for p in net.parameters()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_hard_target_update_every_target_network_update_freq_steps(built):
    algo = built(target_network_update_freq=10, tau=1.0)
    learner = algo.learner
    batch = crafted_batch()
    initial_target = params_of(learner.target)
    learner.update_from_batch(batch, timestep=5)
    assert same(params_of(learner.target), initial_target)  # 5 < 10 steps: not yet
    assert not same(params_of(learner.module), initial_target)
    learner.update_from_batch(batch, timestep=10)
    assert same(params_of(learner.target), params_of(learner.module))  # copied
    copied = params_of(learner.target)
    learner.update_from_batch(batch, timestep=15)
    assert same(params_of(learner.target), copied)  # 5 steps since the copy: kept
    assert not same(params_of(learner.target), params_of(learner.module))
    learner.update_from_batch(batch, timestep=20)
    assert same(params_of(learner.target), params_of(learner.module))


def test_soft_target_update_with_tau(built):
    tau = 0.25
    algo = built(target_network_update_freq=0, tau=tau)
    learner = algo.learner
    perturb_target(learner, scale=0.5)
    old_target = params_of(learner.target)
    learner.update_from_batch(crafted_batch(), timestep=1)
    online = params_of(learner.module)
    for t_new, t_old, o in zip(params_of(learner.target), old_target, online):
        torch.testing.assert_close(t_new, (1 - tau) * t_old + tau * o, rtol=1e-5, atol=1e-6)
    assert not same(params_of(learner.target), online)


# ----------------------------------------------------------------------------- module


OBS = np.random.default_rng(7).uniform(-0.5, 0.5, size=(20, 4)).astype(np.float32)


def test_dueling_q_is_value_plus_centered_advantage(built):
    module = built(dueling=True).learner.module
    with torch.no_grad():
        feats = module.encoder(torch.from_numpy(OBS))
        adv = module.advantage(feats)
        value = module.value(feats)
    expected = value + adv - adv.mean(1, keepdim=True)
    torch.testing.assert_close(q_of(module, OBS), expected)
    assert value.shape == (20, 1) and adv.shape == (20, 2)


def test_without_dueling_q_is_the_advantage_head(built):
    module = built(dueling=False).learner.module
    assert module.value is None
    with torch.no_grad():
        expected = module.advantage(module.encoder(torch.from_numpy(OBS)))
    torch.testing.assert_close(q_of(module, OBS), expected)


def test_noisy_layers_vary_when_exploring_and_training_but_not_in_inference(built):
    module = built(noisy=True, sigma0=0.5).learner.module
    batch = {Columns.OBS: torch.from_numpy(OBS)}
    with torch.no_grad():
        e1, e2 = (module.forward_exploration(batch)["qf_preds"] for _ in range(2))
        t1, t2 = (module.forward_train(batch)["qf_preds"] for _ in range(2))
        i1, i2 = (module.forward_inference(batch)["qf_preds"] for _ in range(2))
    assert not torch.allclose(e1, e2)
    assert not torch.allclose(t1, t2)
    torch.testing.assert_close(i1, i2, rtol=0, atol=0)


def test_noisy_dqn_greedy_actions_are_deterministic(built):
    algo = built(noisy=True)
    actions = [[int(algo.compute_single_action(o, explore=False)) for o in OBS] for _ in range(2)]
    assert actions[0] == actions[1]


def test_distributional_q_values_are_expected_values_over_the_support(built):
    module = built(num_atoms=5, v_min=-3.0, v_max=5.0).learner.module
    obs = torch.from_numpy(OBS)
    with torch.no_grad():
        logits = module.forward_train({Columns.OBS: obs})["atom_logits"]
    assert logits.shape == (20, 2, 5)
    support = torch.linspace(-3.0, 5.0, 5)
    expected = (torch.softmax(logits, -1) * support).sum(-1)
    torch.testing.assert_close(q_of(module, OBS), expected)
    assert (q_of(module, OBS) >= -3.0).all() and (q_of(module, OBS) <= 5.0).all()


def test_dqn_needs_a_discrete_action_space():
    config = DQNConfig().environment("Pendulum-v1").training(hiddens=[16], model={"fcnet_hiddens": [16]})
    with pytest.raises(ConfigError, match="Discrete"):
        config.build()


# ----------------------------------------------------------------------------- config options


def test_epsilon_schedule_option_reaches_epsilon_greedy(built):
    algo = built(epsilon=[[0, 1.0], [100, 0.1]])
    exp = algo.env_runner.exploration
    assert isinstance(exp, EpsilonGreedy)
    assert exp.epsilon(0) == pytest.approx(1.0)
    assert exp.epsilon(50) == pytest.approx(0.55)
    assert exp.epsilon(1000) == pytest.approx(0.1)


def test_epsilon_option_conflicts_with_a_non_epsilon_exploration():
    config = dqn_config(epsilon=[[0, 1.0], [100, 0.1]]).exploration(
        exploration_config={"type": "StochasticSampling"})
    with pytest.raises(ConfigError, match="epsilon"):
        config.build()


def test_exploration_config_without_type_updates_the_default():
    default = dict(DQNConfig().exploration_config)
    assert default["type"] == "EpsilonGreedy" and default["final_epsilon"] != 0.5
    config = dqn_config().exploration(exploration_config={"final_epsilon": 0.5})
    assert config.exploration_config == {**default, "final_epsilon": 0.5}
    algo = config.build()
    try:
        exp = algo.env_runner.exploration
        assert isinstance(exp, EpsilonGreedy)
        assert exp.epsilon(10**6) == pytest.approx(0.5)
        half = default["epsilon_timesteps"] // 2
        assert exp.epsilon(half) == pytest.approx((default["initial_epsilon"] + 0.5) / 2)
    finally:
        algo.stop()


def test_exploration_config_with_another_type_replaces_the_default():
    config = dqn_config().exploration(exploration_config={"type": "SoftQ", "temperature": 0.5})
    assert config.exploration_config == {"type": "SoftQ", "temperature": 0.5}
    algo = config.build()
    try:
        assert type(algo.env_runner.exploration).__name__ == "SoftQ"
    finally:
        algo.stop()


def test_greedy_action_is_the_argmax_of_q(built):
    algo = built()
    algo.train()
    q = q_of(algo.get_module(), OBS).numpy()
    actions = [int(algo.compute_single_action(o, explore=False)) for o in OBS]
    assert actions == q.argmax(1).tolist()


def test_bad_dqn_options_raise_config_errors():
    with pytest.raises(ConfigError, match="huber"):
        DQNConfig().training(td_error_loss_fn="l1")
    with pytest.raises(ConfigError, match="v_min < v_max"):
        dqn_config(num_atoms=11, v_min=5.0, v_max=5.0).build()
    with pytest.raises(ConfigError, match="v_min < v_max"):
        dqn_config(num_atoms=11, v_min=6.0, v_max=-6.0).build()
    with pytest.raises(ConfigError, match="hiddens"):
        DQNConfig().training(hiddens=[0])
    with pytest.raises(ConfigError, match="before_learn_on_batch"):
        dqn_config(before_learn_on_batch=5).build()


def test_v_min_v_max_are_checked_without_atoms_too(built):
    # An inverted range is a mistake whether or not distributional DQN reads it yet.
    with pytest.raises(ConfigError, match=r"v_min < v_max"):
        built(num_atoms=1, v_min=5.0, v_max=5.0)


def test_before_learn_on_batch_transforms_each_replayed_batch(built):
    seen = []

    def hook(batch, policies, train_batch_size):
        seen.append((sorted(policies), train_batch_size))
        return dict(batch, rewards=np.full_like(batch["rewards"], 123.0))

    algo = built(before_learn_on_batch=hook)
    received = []
    update = algo.learner.update_from_batch

    def record(batch, timestep):
        received.append(batch["rewards"].copy())
        return update(batch, timestep)

    algo.learner.update_from_batch = record
    algo.train()
    assert received and len(seen) == len(received)
    assert seen[0] == (["default_policy"], 16)
    assert all(np.all(r == 123.0) for r in received)


# ----------------------------------------------------------------------------- explore switch


def always_random(**training):
    """EpsilonGreedy with epsilon 1 throughout: exploring actions are uniformly random."""
    return dqn_config(**training).exploration(
        exploration_config={"initial_epsilon": 1.0, "final_epsilon": 1.0})


def test_config_explore_true_explores_by_default_and_explore_false_is_greedy():
    algo = always_random().build()
    try:
        obs = OBS[0]
        greedy = int(q_of(algo.get_module(), OBS[:1]).argmax())
        default = {int(algo.compute_single_action(obs)) for _ in range(40)}
        assert default == {0, 1}
        assert {int(algo.compute_single_action(obs, explore=False)) for _ in range(40)} == {greedy}
    finally:
        algo.stop()


def test_config_explore_false_is_greedy_and_per_call_explore_true_explores():
    algo = always_random().exploration(explore=False).build()
    try:
        obs = OBS[0]
        greedy = int(q_of(algo.get_module(), OBS[:1]).argmax())
        assert {int(algo.compute_single_action(obs)) for _ in range(40)} == {greedy}
        assert {int(algo.compute_single_action(obs, explore=None)) for _ in range(40)} == {greedy}
        assert {int(algo.compute_single_action(obs, explore=True)) for _ in range(40)} == {0, 1}
        # Sampling follows the config too: every sampled action is the argmax of its Q-values.
        batch = algo.env_runner.sample(num_timesteps=50)
        np.testing.assert_array_equal(batch["actions"], batch["action_dist_inputs"].argmax(-1))
    finally:
        algo.stop()


def test_sampling_with_epsilon_one_is_random():
    algo = always_random().build()
    try:
        batch = algo.env_runner.sample(num_timesteps=200)
        greedy = batch["action_dist_inputs"].argmax(-1)
        mismatch = (batch["actions"] != greedy).mean()
        assert 0.3 < mismatch < 0.7
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- checkpoints


@pytest.fixture
def trained_dqn():
    algo = dqn_config().exploration(exploration_config={"epsilon_timesteps": 400}).build()
    algo.train()
    algo.train()
    yield algo
    algo.stop()


def test_epsilon_schedule_survives_checkpoint_restore(trained_dqn, tmp_path):
    algo = trained_dqn
    runner = algo.env_runner
    assert runner.num_env_steps_sampled_lifetime == 128
    eps = runner.exploration.epsilon(runner.num_env_steps_sampled_lifetime)
    assert eps < 0.9
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    try:
        r = restored.env_runner
        assert r.num_env_steps_sampled_lifetime == runner.num_env_steps_sampled_lifetime
        assert r.exploration.epsilon(r.num_env_steps_sampled_lifetime) == pytest.approx(eps)
        assert r.exploration.get_info()["cur_epsilon"] == pytest.approx(runner.exploration.get_info()["cur_epsilon"])
        assert restored.get_state()["counters"] == algo.get_state()["counters"]
    finally:
        restored.stop()


def test_checkpoint_restores_target_network_and_optimizer_state(trained_dqn, tmp_path):
    algo = trained_dqn
    learner = algo.learner
    # target_network_update_freq is 500 > the 128 sampled steps: the target is still the initial net.
    assert not same(params_of(learner.target), params_of(learner.module))
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    try:
        assert isinstance(restored, DQN)
        rl = restored.learner
        for k, v in learner.target.state_dict().items():
            torch.testing.assert_close(rl.target.state_dict()[k], v, rtol=0, atol=0, msg=k)
        for k, v in learner.module.state_dict().items():
            torch.testing.assert_close(rl.module.state_dict()[k], v, rtol=0, atol=0, msg=k)
        sa, sb = learner.optimizer.state_dict(), rl.optimizer.state_dict()
        assert sa["state"].keys() == sb["state"].keys() and sa["state"]
        for idx in sa["state"]:
            for name, value in sa["state"][idx].items():
                other = sb["state"][idx][name]
                if isinstance(value, torch.Tensor):
                    torch.testing.assert_close(other, value, rtol=0, atol=0)
                else:
                    assert other == value
        assert rl.num_grad_updates == learner.num_grad_updates
        acts = [int(algo.compute_single_action(o, explore=False)) for o in OBS]
        assert [int(restored.compute_single_action(o, explore=False)) for o in OBS] == acts
        # The next update from the same batch is identical (target + Adam moments restored).
        batch = crafted_batch()
        ma = learner.update_from_batch(batch, timestep=200)
        mb = rl.update_from_batch(batch, timestep=200)
        np.testing.assert_allclose(mb["td_error"], ma["td_error"], rtol=1e-6)
        for k, v in learner.module.state_dict().items():
            torch.testing.assert_close(rl.module.state_dict()[k], v, msg=k)
    finally:
        restored.stop()


def test_missing_learner_tensors_give_a_checkpoint_error_naming_the_file(trained_dqn, tmp_path):
    from rlx.utils.errors import CheckpointError

    path = Path(trained_dqn.save(str(tmp_path / "ckpt")))
    (path / POLICY_DIR / "learner.safetensors").unlink()
    with pytest.raises(CheckpointError, match="learner.safetensors"):
        Algorithm.from_checkpoint(str(path))


def test_compute_single_action_timestep_drives_the_epsilon_schedule():
    """compute_single_action(timestep=t) explores with epsilon(t), not the runner's own step count."""
    algo = dqn_config().exploration(
        exploration_config={"initial_epsilon": 1.0, "final_epsilon": 0.0, "epsilon_timesteps": 1000}
    ).build()
    try:
        obs = np.zeros(4, dtype=np.float32)
        greedy = algo.compute_single_action(obs, explore=False)
        late = {int(algo.compute_single_action(obs, explore=True, timestep=10**6)) for _ in range(30)}
        early = {int(algo.compute_single_action(obs, explore=True, timestep=0)) for _ in range(60)}
        assert late == {int(greedy)}      # epsilon 0: always greedy
        assert early == {0, 1}            # epsilon 1: uniformly random
    finally:
        algo.stop()

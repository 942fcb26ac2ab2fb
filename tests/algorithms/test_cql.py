"""CQL: RLlib's options and defaults, the conservative penalty against a hand computation, what
the penalty, the behaviour-cloning warm-up and the Lagrangian weight do to an update, and
learning Pendulum from the files a trained SAC wrote (`output`), evaluated on the env.

The expert data comes from tuned_examples/cql/generate_pendulum_expert_data.py (what the tuned
example's comments tell users to run), with a smaller recording for CI.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rlx.algorithms.cql import CQL, CQLConfig
from rlx.algorithms.cql.cql_learner import CQLLearner, cql_penalty
from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config
from rlx.algorithms.sac import SACConfig
from rlx.utils.errors import ConfigError, NotSupportedYetError

ROOT = Path(__file__).resolve().parents[2]
TARGET = -400.0


def small_config(**training) -> CQLConfig:
    """CQL on Pendulum with 16-unit networks (no input: these tests feed the learner directly)."""
    opts = dict(q_model_config={"fcnet_hiddens": [16]}, policy_model_config={"fcnet_hiddens": [16]},
                num_actions=3)
    opts.update(training)
    return CQLConfig().environment("Pendulum-v1").training(**opts).debugging(seed=0)


@pytest.fixture
def built():
    algos = []

    def make(**training):
        algo = small_config(**training).build()
        algos.append(algo)
        return algo

    yield make
    for algo in algos:
        algo.stop()


def crafted_batch(n: int = 32, action: float = 0.5, seed: int = 0) -> dict[str, np.ndarray]:
    """One-step episodes (terminated, reward 0) whose data action is always `action`."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    return {"obs": obs, "new_obs": obs.copy(), "actions": np.full((n, 1), action, np.float32),
            "rewards": np.zeros(n, np.float32), "terminateds": np.ones(n, bool), "truncateds": np.zeros(n, bool)}


# ----------------------------------------------------------------------------- config


def test_cql_defaults_are_rllibs():
    config = CQLConfig()
    assert isinstance(config, SACConfig)
    assert (config.bc_iters, config.temperature, config.num_actions) == (20000, 1.0, 10)
    assert (config.lagrangian, config.lagrangian_thresh, config.min_q_weight) == (False, 5.0, 5.0)
    assert config.deterministic_backup is True
    assert (config.lr, config.actor_lr, config.critic_lr, config.alpha_lr) == (3e-4, 1e-4, 1e-3, 1e-3)
    assert (config.min_sample_timesteps_per_iteration, config.min_train_timesteps_per_iteration) == (0, 100)


def test_registry_and_old_import_paths():
    assert get_algorithm_class("CQL") is CQL and isinstance(get_algorithm_config("cql"), CQLConfig)
    from rlx.agents.cql import CQL_DEFAULT_CONFIG, CQLTrainer
    from rlx.algorithms.cql import CQLTorchLearner

    assert CQLTrainer is CQL and CQLTorchLearner is CQLLearner
    assert CQL_DEFAULT_CONFIG["min_q_weight"] == 5.0 and CQL_DEFAULT_CONFIG["bc_iters"] == 20000


def test_cql_checks_its_options():
    with pytest.raises(ConfigError, match="'num_actions' must be >= 1"):
        CQLConfig().training(num_actions=0)
    with pytest.raises(ConfigError, match="'temperature' must be > 0"):
        CQLConfig().training(temperature=0.0)
    with pytest.raises(ConfigError, match="min_q_weight"):
        CQLConfig().training(min_q_weight=-1.0)


def test_cql_refuses_discrete_actions():
    with pytest.raises(NotSupportedYetError, match="CQL with the action space Discrete"):
        CQLConfig().environment("CartPole-v1").build()


# ----------------------------------------------------------------------------- the penalty


def test_penalty_matches_a_hand_computation():
    # One critic, N = 1 sampled action of each kind, B = 2 states, 1-D actions.
    q_data = torch.tensor([[0.3, 0.2]])
    q_rand = torch.tensor([[[0.0, 1.0]]])
    q_curr = torch.tensor([[[0.5, 0.0]]])
    q_next = torch.tensor([[[1.0, -1.0]]])
    logp_curr = torch.tensor([[0.2, -0.3]])
    logp_next = torch.tensor([[0.1, 0.0]])
    # Per state: [q_rand - log(0.5), q_next - logp_next, q_curr - logp_curr]
    state0 = [0.0 - math.log(0.5), 1.0 - 0.1, 0.5 - 0.2]
    state1 = [1.0 - math.log(0.5), -1.0 - 0.0, 0.0 + 0.3]
    for temperature in (1.0, 2.0):
        lse = [temperature * math.log(sum(math.exp(v / temperature) for v in s)) for s in (state0, state1)]
        expected = 5.0 * ((lse[0] + lse[1]) / 2 - (0.3 + 0.2) / 2)
        got = cql_penalty(q_data, q_rand, q_curr, q_next, logp_curr, logp_next, action_dim=1,
                          temperature=temperature, min_q_weight=5.0)
        assert got.shape == (1,)
        assert float(got[0]) == pytest.approx(expected, rel=1e-6)
    # The uniform density is 0.5^d: with d = 3 the random actions' term is q_rand - 3 log 0.5.
    got3 = cql_penalty(q_data, q_rand, q_curr, q_next, logp_curr, logp_next, action_dim=3,
                       temperature=1.0, min_q_weight=1.0)
    state0[0], state1[0] = 0.0 - 3 * math.log(0.5), 1.0 - 3 * math.log(0.5)
    lse = [math.log(sum(math.exp(v) for v in s)) for s in (state0, state1)]
    assert float(got3[0]) == pytest.approx((lse[0] + lse[1]) / 2 - 0.25, rel=1e-6)


def test_penalty_is_computed_per_critic():
    rng = torch.Generator().manual_seed(0)
    q = [torch.randn((2, 4, 5), generator=rng) for _ in range(3)]
    logps = [torch.randn((4, 5), generator=rng) for _ in range(2)]
    q_data = torch.randn((2, 5), generator=rng)
    both = cql_penalty(q_data, *q, *logps, action_dim=1, temperature=1.0, min_q_weight=2.0)
    for i in range(2):
        one = cql_penalty(q_data[i:i + 1], *(x[i:i + 1] for x in q), *logps, action_dim=1, temperature=1.0,
                          min_q_weight=2.0)
        assert float(both[i]) == pytest.approx(float(one[0]), rel=1e-6)


def q_gap(algo, batch, updates: int) -> float:
    """Mean Q(s, data action) - mean Q(s, a) over other actions a, after `updates` updates."""
    for _ in range(updates):
        algo.learner.update_from_batch(batch, timestep=0)
    obs = torch.from_numpy(batch["obs"])
    module = algo.learner.module
    with torch.no_grad():
        data_q = module.q_values(obs, torch.from_numpy(batch["actions"])).mean()
        others = [module.q_values(obs, torch.full((len(obs), 1), a)).mean() for a in (-0.9, -0.5, 0.0, 0.9)]
    return float(data_q - torch.stack(others).mean())


def test_penalty_pushes_down_the_q_values_of_actions_the_data_does_not_take(built):
    """Every data action is 0.5 with reward 0. Without the penalty (min_q_weight=0) nothing tells
    the critics about other actions; with it, their Q-values end clearly below the data's."""
    batch = crafted_batch()
    plain = q_gap(built(min_q_weight=0.0, critic_lr=3e-3), batch, updates=150)
    conservative = q_gap(built(min_q_weight=5.0, critic_lr=3e-3), batch, updates=150)
    assert conservative > 1.0, conservative
    assert conservative > plain + 1.0, (plain, conservative)


def test_bc_iters_decides_whether_the_policy_reads_the_critics(built):
    """During the first bc_iters updates the policy loss is alpha * log pi - log pi(data action):
    the critics do not move the policy. Afterwards it is SAC's loss, which reads them."""
    batch = crafted_batch(seed=3)

    def actor_after_one_update(bc_iters: int, critic_scale: float):
        algo = built(bc_iters=bc_iters)
        with torch.no_grad():
            for p in algo.learner.module.qf.parameters():
                p.mul_(critic_scale)
        metrics = algo.learner.update_from_batch(batch, timestep=0)
        return [p.detach().clone() for p in algo.learner.module.pi.parameters()], metrics

    (bc_a, m_a), (bc_b, m_b) = actor_after_one_update(10, 1.0), actor_after_one_update(10, 3.0)
    assert m_a["bc_phase"] == 1.0
    assert all(torch.equal(x, y) for x, y in zip(bc_a, bc_b))
    (sac_a, m_c), (sac_b, _) = actor_after_one_update(0, 1.0), actor_after_one_update(0, 3.0)
    assert m_c["bc_phase"] == 0.0
    assert not all(torch.equal(x, y) for x, y in zip(sac_a, sac_b))


def test_bc_phase_ends_after_bc_iters_updates(built):
    algo = built(bc_iters=2)
    phases = [algo.learner.update_from_batch(crafted_batch(), timestep=0)["bc_phase"] for _ in range(4)]
    assert phases == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("thresh, direction", [(-100.0, 1), (100.0, -1)])
def test_lagrangian_weight_rises_above_the_threshold_and_falls_below(built, thresh, direction):
    algo = built(lagrangian=True, lagrangian_thresh=thresh)
    for _ in range(5):
        metrics = algo.learner.update_from_batch(crafted_batch(), timestep=0)
    assert "alpha_prime_value" in metrics and "alpha_prime_loss" in metrics
    assert direction * algo.learner.log_alpha_prime.item() > 0  # log alpha' starts at 0
    assert "alpha_prime" in algo.learner.optimizers


def test_lagrangian_state_survives_a_checkpoint(built, tmp_path):
    algo = built(lagrangian=True, lagrangian_thresh=-100.0)
    for _ in range(3):
        algo.learner.update_from_batch(crafted_batch(), timestep=0)
    saved = algo.learner.log_alpha_prime.item()
    path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
    restored = CQL.from_checkpoint(path)
    try:
        assert restored.learner.log_alpha_prime.item() == pytest.approx(saved) and saved > 0
        assert restored.learner.num_grad_updates == 3
    finally:
        restored.stop()


def test_update_reports_cql_metrics(built):
    metrics = built().learner.update_from_batch(crafted_batch(), timestep=0)
    for key in ("critic_loss", "cql_loss", "actor_loss", "alpha_loss", "alpha_value", "qf_mean", "entropy"):
        assert math.isfinite(float(metrics[key])), key
    # Flat critics at initialization: the penalty is about min_q_weight * log(3 * num_actions).
    assert float(metrics["cql_loss"]) > 0


# ----------------------------------------------------------------------------- learning


@pytest.fixture(scope="module")
def expert_data(expert_recordings) -> Path:
    """4000 Pendulum steps of a SAC trained to a mean return of -300
    (tuned_examples/cql/generate_pendulum_expert_data.py, recorded once per test run)."""
    return expert_recordings("pendulum")


@pytest.mark.slow
def test_tuned_example_learns_pendulum_from_expert_files(expert_data):
    """The tuned example, on the files a trained SAC wrote: evaluation return >= -400 within its
    100 iterations."""
    spec = next(iter(yaml.safe_load((ROOT / "tuned_examples" / "cql" / "pendulum-cql.yaml").read_text()).values()))
    assert spec["stop"] == {"env_runners/episode_return_mean": TARGET, "training_iteration": 100}
    settings = dict(spec["config"], input=str(expert_data))
    config = get_algorithm_config(spec["run"]).update_from_dict(settings).environment(spec["env"]).debugging(seed=0)
    assert isinstance(config, CQLConfig)
    start = time.perf_counter()
    algo = config.build()
    progress = []
    try:
        for _ in range(spec["stop"]["training_iteration"]):
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            progress.append((result["training_iteration"], round(ret, 1)))
            if ret >= TARGET:
                break
        metrics = result["learners"]["default_policy"]
    finally:
        algo.stop()
    assert ret >= TARGET, f"CQL did not reach {TARGET}: (iteration, evaluation return) {progress}"
    assert result["evaluation"]["env_runners"]["episode_return_mean"] == ret  # returns are the evaluation's
    assert math.isfinite(metrics["cql_loss"]) and metrics["qf_mean"] < 0  # Pendulum's rewards are <= 0
    assert time.perf_counter() - start < 60, progress

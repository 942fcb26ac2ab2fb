"""PG and A2C: import paths, options, losses against hand computations, microbatching, learning.

- `rlx.algorithms.pg` / `rlx.algorithms.a2c` (and the old `rlx.agents.*` with `*Trainer`) export
  RLlib's names; both are registered for the CLI and Tune.
- PG's loss is REINFORCE's -mean(log pi(a|s) * G) with G the discounted return to the episode's
  end; A2C's adds the value and entropy terms, with GAE advantages.
- A2C's microbatching accumulates the gradient of the whole train batch: the update equals the
  one without it.
- Each learns CartPole-v1 with its tuned example's settings (a CI-sized bar, fixed seed).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rlx.algorithms.a2c import A2C, A2CConfig
from rlx.algorithms.pg import PG, PGConfig
from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
GAMMA = 0.9


# ----------------------------------------------------------------------------- surface


def test_import_paths_and_old_names():
    import rlx.agents.a2c as old_a2c
    import rlx.agents.pg as old_pg
    from rlx.algorithms.a2c import A2CLearner, A2CTrainer
    from rlx.algorithms.pg import PGLearner, PGTrainer

    assert PGTrainer is PG and old_pg.PGTrainer is PG and old_pg.PGConfig is PGConfig
    assert A2CTrainer is A2C and old_a2c.A2CTrainer is A2C and old_a2c.A2CConfig is A2CConfig
    assert old_pg.DEFAULT_CONFIG["lr"] == 0.0004 and old_a2c.DEFAULT_CONFIG["microbatch_size"] is None
    assert issubclass(A2CLearner, PGLearner)
    assert get_algorithm_class("pg") is PG and get_algorithm_class("A2C") is A2C
    assert isinstance(get_algorithm_config("A2C"), A2CConfig)


def test_rllib_defaults_and_options():
    pg = PGConfig()
    assert (pg.lr, pg.train_batch_size, pg.batch_mode) == (0.0004, 200, "complete_episodes")
    a2c = A2CConfig().training(microbatch_size=40, lambda_=0.9, entropy_coeff=[[0, 0.01], [1000, 0.0]])
    assert (a2c.use_critic, a2c.use_gae, a2c.vf_loss_coeff, a2c.grad_clip) == (True, True, 0.5, 40.0)
    assert (a2c.lr, a2c.min_time_s_per_iteration, a2c.microbatch_size, a2c["lambda"]) == (0.0001, 10, 40, 0.9)
    assert A2CConfig().update_from_dict({"entropy_coeff_schedule": [[0, 0.1], [10, 0.0]]}).entropy_coeff == \
        [[0, 0.1], [10, 0.0]]


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(ConfigError, match="PG has no value function"):
        PGConfig().environment("CartPole-v1").env_runners(batch_mode="truncate_episodes").validate()
    with pytest.raises(ConfigError, match="use_gae=True needs use_critic=True"):
        A2CConfig().environment("CartPole-v1").training(use_critic=False).validate()
    with pytest.raises(ConfigError, match="microbatch_size"):
        A2CConfig().training(microbatch_size=0)
    with pytest.raises(ConfigError, match="Unknown config key .microbatch_size."):
        PGConfig().training(microbatch_size=10)


# ----------------------------------------------------------------------------- losses


def _episode_batch(obs_dim: int = 4) -> dict[str, np.ndarray]:
    """Two sub-envs, three steps: column 0 terminates at t=2, column 1 is cut at t=1 (truncated)
    and a new episode starts at t=2 (cut again by the end of the batch)."""
    rng = np.random.default_rng(0)
    T, B = 3, 2
    return {
        Columns.OBS: rng.normal(size=(T, B, obs_dim)).astype(np.float32),
        Columns.NEXT_OBS: rng.normal(size=(T, B, obs_dim)).astype(np.float32),
        Columns.ACTIONS: np.array([[0, 1], [1, 1], [0, 0]]),
        Columns.REWARDS: np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 3.0]], np.float32),
        Columns.TERMINATEDS: np.array([[False, False], [False, False], [True, False]]),
        Columns.TRUNCATEDS: np.array([[False, False], [False, True], [False, False]]),
        Columns.ACTION_LOGP: np.zeros((T, B), np.float32),
    }


def _build(config):
    return config.environment("CartPole-v1").debugging(seed=0).training(gamma=GAMMA).build()


def _logp(module, batch) -> torch.Tensor:
    obs = torch.from_numpy(batch[Columns.OBS].reshape(-1, 4))
    dist = module.get_train_action_dist_cls().from_logits(module.forward_train({Columns.OBS: obs})
                                                          [Columns.ACTION_DIST_INPUTS])
    return dist.logp(torch.from_numpy(batch[Columns.ACTIONS].reshape(-1))).reshape(3, 2)


def test_pg_loss_is_reinforce_on_returns_to_the_episode_end():
    algo = _build(PGConfig())
    try:
        learner, batch = algo.learner, _episode_batch()
        returns, _ = learner.advantages(batch)
        g = GAMMA
        # Without a value function a cut episode's return counts only what was observed.
        expected = np.array([[1.0 + g * 0.5 + g * g * 2.0, 2.0 + g * -1.0],
                             [0.5 + g * 2.0, -1.0],
                             [2.0, 3.0]], np.float32)
        np.testing.assert_allclose(returns, expected, rtol=1e-6)
        logp = _logp(learner.rl_module, batch)
        rows = {Columns.OBS: torch.from_numpy(batch[Columns.OBS].reshape(-1, 4)),
                Columns.ACTIONS: torch.from_numpy(batch[Columns.ACTIONS].reshape(-1)),
                Columns.ADVANTAGES: torch.from_numpy(expected.reshape(-1))}
        loss = learner.compute_loss_for_module(module_id="default_policy", config=algo.config, batch=rows,
                                               fwd_out=learner.rl_module.forward_train(rows))
        assert loss.item() == pytest.approx(-(logp * torch.from_numpy(expected)).mean().item(), rel=1e-6)
    finally:
        algo.stop()


def test_a2c_loss_against_a_hand_computation():
    algo = _build(A2CConfig().training(lambda_=1.0, vf_loss_coeff=0.5, entropy_coeff=0.01))
    try:
        learner, batch = algo.learner, _episode_batch()
        module = learner.rl_module
        with torch.no_grad():
            V = module.compute_values({Columns.OBS: torch.from_numpy(batch[Columns.OBS].reshape(-1, 4))})
            V = V.numpy().reshape(3, 2)
            V_next = module.compute_values({Columns.OBS: torch.from_numpy(batch[Columns.NEXT_OBS].reshape(-1, 4))})
            V_next = V_next.numpy().reshape(3, 2)
        r, g = batch[Columns.REWARDS], GAMMA
        # lambda=1: advantage = discounted return (bootstrapped where the episode was cut) - V.
        targets = np.zeros((3, 2), np.float32)
        targets[:, 0] = [r[0, 0] + g * r[1, 0] + g * g * r[2, 0], r[1, 0] + g * r[2, 0], r[2, 0]]
        targets[:, 1] = [r[0, 1] + g * (r[1, 1] + g * V_next[1, 1]), r[1, 1] + g * V_next[1, 1],
                         r[2, 1] + g * V_next[2, 1]]
        adv, got_targets = learner.advantages(batch)
        np.testing.assert_allclose(got_targets, targets, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(adv, targets - V, rtol=1e-5, atol=1e-6)
        learner._curr_entropy_coeff = 0.01
        rows = {Columns.OBS: torch.from_numpy(batch[Columns.OBS].reshape(-1, 4)),
                Columns.ACTIONS: torch.from_numpy(batch[Columns.ACTIONS].reshape(-1)),
                Columns.ADVANTAGES: torch.from_numpy(adv.reshape(-1)),
                Columns.VALUE_TARGETS: torch.from_numpy(targets.reshape(-1))}
        fwd = module.forward_train(rows)
        loss = learner.compute_loss_for_module(module_id="default_policy", config=algo.config, batch=rows,
                                               fwd_out=fwd)
        dist = module.get_train_action_dist_cls().from_logits(fwd[Columns.ACTION_DIST_INPUTS])
        logp = _logp(module, batch).reshape(-1)
        expected = (-(logp * rows[Columns.ADVANTAGES]).mean()
                    + 0.5 * 0.5 * ((torch.from_numpy(V.reshape(-1)) - rows[Columns.VALUE_TARGETS]) ** 2).mean()
                    - 0.01 * dist.entropy().mean())
        assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    finally:
        algo.stop()


def _weights_after_one_update(microbatch_size):
    config = A2CConfig().environment("CartPole-v1").debugging(seed=3).training(
        lr=0.01, train_batch_size=64, microbatch_size=microbatch_size, grad_clip=None,
        optimizer={"type": "sgd"})  # SGD: the step is the gradient itself (Adam's first step is ~sign(grad))
    algo = config.build()
    try:
        before = algo.learner.get_weights()
        batch = algo.env_runner_group.sample(num_timesteps=64)
        metrics = algo.learner.update_from_batch(batch, timestep=64)
        return before, algo.learner.get_weights(), metrics
    finally:
        algo.stop()


def test_microbatching_accumulates_the_same_update():
    before, whole, m_whole = _weights_after_one_update(None)
    _, pieces, m_pieces = _weights_after_one_update(10)
    assert any(not np.allclose(before[k], whole[k]) for k in whole)
    assert (m_whole["num_microbatches"], m_pieces["num_microbatches"]) == (1, 7)
    assert m_pieces["total_loss"] == pytest.approx(m_whole["total_loss"], rel=1e-5)
    for key in whole:
        np.testing.assert_allclose(pieces[key], whole[key], rtol=1e-4, atol=1e-6, err_msg=key)


# ----------------------------------------------------------------------------- learning


def _tuned(relpath: str) -> dict:
    data = yaml.safe_load((ROOT / "tuned_examples" / relpath).read_text())
    return next(iter(data.values()))


def _learns(relpath: str, threshold: float, budget: int) -> tuple[bool, list]:
    spec = _tuned(relpath)
    config = get_algorithm_config(spec["run"]).update_from_dict(dict(spec["config"]))
    algo = config.environment(spec["env"]).debugging(seed=0).build()
    progress = []
    try:
        while True:
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            progress.append((result["num_env_steps_sampled_lifetime"], round(ret, 1)))
            if not math.isnan(ret) and ret >= threshold:
                return True, progress
            if result["num_env_steps_sampled_lifetime"] >= budget:
                return False, progress
    finally:
        algo.stop()


@pytest.mark.parametrize("relpath, criterion", [("pg/cartpole-pg.yaml", (150, 100_000)),
                                                ("a2c/cartpole-a2c.yaml", (450, 500_000))])
def test_tuned_examples_state_their_pass_criterion(relpath, criterion):
    spec = _tuned(relpath)
    assert spec["stop"] == {"env_runners/episode_return_mean": criterion[0],
                            "num_env_steps_sampled_lifetime": criterion[1]}


@pytest.mark.slow
def test_pg_learns_cartpole():
    solved, progress = _learns("pg/cartpole-pg.yaml", 150.0, 100_000)
    assert solved, f"PG did not reach 150 within 100k env steps: {progress}"


@pytest.mark.slow
def test_a2c_learns_cartpole():
    solved, progress = _learns("a2c/cartpole-a2c.yaml", 300.0, 300_000)
    assert solved, f"A2C did not reach 300 within 300k env steps: {progress}"

"""ES and ARS: import paths, options, the update math, the shared noise table, learning.

- `rlx.algorithms.es` / `rlx.algorithms.ars` (and the old `rlx.agents.*` with `*Trainer`) export
  RLlib's names; both are registered for the CLI and Tune.
- Rank normalisation and ARS's top-direction step match hand computations; on a quadratic, the
  estimated direction points toward the optimum and a few Learner updates move theta closer.
- Every process regenerates the same noise table from the seed, so a perturbation travels as
  an index: runners in other processes read the driver's numbers.
- ES learns CartPole-v1 with 2 remote runners whose observation-filter statistics reach the
  driver (CI-sized bar, fixed seed); ES and ARS learning with their tuned examples' settings is in
  tests/algorithms/test_tuned_examples.py.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlx.algorithms.ars import ARS, ARSConfig
from rlx.algorithms.ars.ars_learner import ars_gradient
from rlx.algorithms.es import ES, ESConfig
from rlx.algorithms.es.es_learner import es_gradient
from rlx.algorithms.es.perturbations import (
    EvaluatePerturbations, centered_ranks, noise_slices, shared_noise_table,
)
from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config
from rlx.utils.errors import ConfigError, NotSupportedYetError

ROOT = Path(__file__).resolve().parents[2]
SMALL_NOISE = 200_000


# ----------------------------------------------------------------------------- surface


def test_import_paths_and_old_names():
    import rlx.agents.ars as old_ars
    import rlx.agents.es as old_es
    from rlx.algorithms.ars import ARSLearner, ARSTrainer
    from rlx.algorithms.es import ESLearner, ESTrainer

    assert ESTrainer is ES and old_es.ESTrainer is ES and old_es.ESConfig is ESConfig
    assert ARSTrainer is ARS and old_ars.ARSTrainer is ARS and old_ars.ARSConfig is ARSConfig
    assert old_es.DEFAULT_CONFIG["episodes_per_batch"] == 1000 and old_ars.DEFAULT_CONFIG["num_rollouts"] == 32
    assert issubclass(ARSLearner, ESLearner)
    assert get_algorithm_class("es") is ES and get_algorithm_class("ARS") is ARS
    assert isinstance(get_algorithm_config("ES"), ESConfig) and isinstance(get_algorithm_config("ars"), ARSConfig)


def test_rllib_options_and_defaults():
    es = ESConfig()
    assert (es.action_noise_std, es.l2_coeff, es.noise_stdev, es.episodes_per_batch, es.eval_prob) == \
        (0.01, 0.005, 0.02, 1000, 0.03)
    assert (es.return_proc_mode, es.stepsize, es.train_batch_size, es.observation_filter, es.report_length) == \
        ("centered_rank", 0.01, 10000, "MeanStdFilter", 10)
    ars = ARSConfig().training(num_rollouts=16, rollouts_used=8, offset=1.0, noise_size=1000)
    assert (ars.num_rollouts, ars.rollouts_used, ars.offset, ars.noise_size, ars.sgd_stepsize) == \
        (16, 8, 1.0, 1000, 0.01)
    assert (ARSConfig().action_noise_std, ARSConfig().policy_type, ARSConfig().model["fcnet_hiddens"]) == \
        (0.0, "LinearPolicy", [])


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(ConfigError, match="rollouts_used"):
        ARSConfig().environment("CartPole-v1").training(num_rollouts=4, rollouts_used=8).validate()
    with pytest.raises(ConfigError, match="LinearPolicy"):
        ARSConfig().environment("CartPole-v1").training(model={"fcnet_hiddens": [16]}).validate()
    ARSConfig().environment("CartPole-v1").training(policy_type="MLPPolicy", model={"fcnet_hiddens": [16]}).validate()
    with pytest.raises(ConfigError, match="return_proc_mode"):
        ESConfig().training(return_proc_mode="raw")
    with pytest.raises(ConfigError, match="noise_size"):
        algo = ESConfig().environment("CartPole-v1").training(noise_size=100, episodes_per_batch=2,
                                                              train_batch_size=1).build()
        try:
            algo.train()
        finally:
            algo.stop()


def test_learner_processes_are_refused_with_a_clear_error():
    """(Multi-agent ES and ARS are tests/algorithms/test_multi_agent_es_apex.py's.)"""
    with pytest.raises(NotSupportedYetError, match="num_learners > 0 with ARS"):
        ARSConfig().environment("CartPole-v1").learners(num_learners=1).build()


# ----------------------------------------------------------------------------- update math


def test_centered_ranks_by_hand():
    x = np.array([[3.0, 1.0], [2.0, 10.0]])
    # Ranks of 3, 1, 2, 10 are 2, 0, 1, 3; scaled by 1/(4-1) and shifted by -0.5.
    expected = np.array([[2 / 3 - 0.5, -0.5], [1 / 3 - 0.5, 0.5]])
    np.testing.assert_allclose(centered_ranks(x), expected, atol=1e-6)
    # Invariant to a monotone transform of the returns.
    np.testing.assert_allclose(centered_ranks(np.exp(x)), expected, atol=1e-6)


def test_es_gradient_by_hand():
    returns = np.array([[3.0, 1.0], [2.0, 10.0]])
    noise = np.array([[1.0, 0.0], [0.0, 2.0]], np.float32)
    # Rank differences: (2/3-0.5) - (-0.5) = 2/3 and (1/3-0.5) - 0.5 = -2/3; divided by 2N = 4.
    np.testing.assert_allclose(es_gradient(returns, noise), [2 / 3 / 4, -2 / 3 * 2 / 4], atol=1e-6)


def test_ars_gradient_keeps_the_best_directions_by_hand():
    returns = np.array([[5.0, 1.0], [0.0, 0.5], [3.0, 4.0]])
    noise = np.array([[1.0, 0.0], [7.0, 7.0], [0.0, 1.0]], np.float32)
    # Best returns 5, 0.5, 4: directions 0 and 2 are kept; std of (5, 1, 3, 4).
    expected = (4.0 * noise[0] - 1.0 * noise[2]) / 2 / np.std([5.0, 1.0, 3.0, 4.0])
    np.testing.assert_allclose(ars_gradient(returns, noise, rollouts_used=2), expected, rtol=1e-6)


def _quadratic_returns(theta, noise, sigma, optimum):
    plus = -((theta + sigma * noise - optimum) ** 2).sum(axis=1)
    minus = -((theta - sigma * noise - optimum) ** 2).sum(axis=1)
    return np.stack([plus, minus], axis=1)


@pytest.mark.parametrize("estimate", ["es", "ars"])
def test_estimated_direction_points_toward_the_optimum_of_a_quadratic(estimate):
    rng = np.random.default_rng(0)
    dim, sigma = 10, 0.1
    theta = np.zeros(dim, np.float32)
    optimum = rng.normal(size=dim).astype(np.float32)
    table = shared_noise_table(7, SMALL_NOISE)
    noise = noise_slices(table, rng.integers(0, SMALL_NOISE - dim, size=400), dim)
    returns = _quadratic_returns(theta, noise, sigma, optimum)
    g = es_gradient(returns, noise) if estimate == "es" else ars_gradient(returns, noise, rollouts_used=200)
    cosine = g @ (optimum - theta) / (np.linalg.norm(g) * np.linalg.norm(optimum - theta))
    assert cosine > 0.8, cosine


@pytest.mark.parametrize("config_cls", [ESConfig, ARSConfig])
def test_learner_updates_move_theta_toward_the_optimum_of_a_quadratic(config_cls):
    """The Learner's whole step (noise lookup, estimate, optimizer, sign conventions) on returns
    of a quadratic in the flat parameters instead of episodes."""
    config = config_cls().environment("CartPole-v1").training(noise_size=SMALL_NOISE, noise_stdev=0.05)
    config = config.training(l2_coeff=0.0, stepsize=0.05, model={"fcnet_hiddens": [4]}) if config_cls is ESConfig \
        else config.training(sgd_stepsize=0.05, num_rollouts=64, rollouts_used=32)
    algo = config.debugging(seed=3).build()
    try:
        learner = algo.learner
        rng = np.random.default_rng(1)
        theta = learner.get_flat_weights()
        optimum = theta + rng.normal(scale=0.5, size=theta.size).astype(np.float32)
        start = distance = float(np.linalg.norm(theta - optimum))
        for _ in range(5):
            theta = learner.get_flat_weights()
            indices = rng.integers(0, SMALL_NOISE - theta.size, size=64)
            returns = _quadratic_returns(theta, noise_slices(learner.noise, indices, theta.size), 0.05, optimum)
            learner.update_from_batch({"noise_indices": indices, "returns": returns}, timestep=0)
            new_distance = float(np.linalg.norm(learner.get_flat_weights() - optimum))
            assert new_distance < distance
            distance = new_distance
        assert distance < 0.8 * start, (start, distance)
        # The learner's module is the one the local runner and compute_single_action use.
        assert algo.env_runner_group.local_env_runner.module is learner.rl_module
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- shared noise


def _table_rows(indices, dim):
    def read(runner):
        return runner.worker_index, noise_slices(shared_noise_table(5, SMALL_NOISE), indices, dim)

    return read


@pytest.mark.slow
def test_runners_in_other_processes_regenerate_the_same_noise():
    config = ESConfig().environment("CartPole-v1").env_runners(num_env_runners=2, env_runner_backend="process") \
        .training(noise_size=SMALL_NOISE)
    algo = config.build()
    try:
        indices = np.array([0, 17, SMALL_NOISE - 9])
        answers = algo.env_runner_group.foreach_env_runner(_table_rows(indices, 9), local_env_runner=False)
        mine = noise_slices(shared_noise_table(5, SMALL_NOISE), indices, 9)
        assert sorted(i for i, _ in answers) == [1, 2]
        for _, rows in answers:
            np.testing.assert_array_equal(rows, mine)
        assert not np.array_equal(shared_noise_table(6, SMALL_NOISE)[:9], mine[0])
    finally:
        algo.stop()


def test_perturbed_episodes_use_theta_plus_and_minus_sigma_noise():
    """A runner's antithetic pair: theta + sigma*eps then theta - sigma*eps, theta again after."""
    algo = ESConfig().environment("CartPole-v1").training(noise_size=SMALL_NOISE).debugging(seed=0).build()
    try:
        runner = algo.env_runner_group.local_env_runner
        theta = algo.learner.get_flat_weights()
        seen = []
        original_sample = runner.sample

        def sample(**kwargs):
            seen.append(algo.learner.get_flat_weights())
            return original_sample(**kwargs)

        runner.sample = sample
        call = EvaluatePerturbations(theta=theta, num_pairs=2, noise_stdev=0.1, noise_seed=123,
                                     noise_size=SMALL_NOISE, seed=0)
        results, _ = call(runner)
        table = shared_noise_table(123, SMALL_NOISE)
        for k, index in enumerate(results.noise_indices):
            eps = table[index:index + theta.size]
            np.testing.assert_allclose(seen[2 * k], theta + 0.1 * eps, atol=1e-6)
            np.testing.assert_allclose(seen[2 * k + 1], theta - 0.1 * eps, atol=1e-6)
        np.testing.assert_array_equal(algo.learner.get_flat_weights(), theta)
        assert results.returns.shape == (2, 2) and (results.lengths >= 8).all()
        np.testing.assert_array_equal(results.returns, results.lengths)  # CartPole: +1 per step
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- learning


def _train_until(algo, threshold, budget):
    progress = []
    try:
        while True:
            result = algo.train()
            steps, ret = result["num_env_steps_sampled_lifetime"], result["env_runners"]["episode_return_mean"]
            progress.append((steps, round(ret, 1)))
            if (not math.isnan(ret) and ret >= threshold) or steps >= budget:
                return result, progress
    finally:
        algo.stop()


def _tuned(relpath: str) -> dict:
    data = yaml.safe_load((ROOT / "tuned_examples" / relpath).read_text())
    return next(iter(data.values()))


@pytest.mark.slow
def test_es_learns_cartpole_with_two_remote_runners_and_merged_filter_statistics():
    spec = _tuned("es/cartpole-es.yaml")
    config = get_algorithm_config("ES").update_from_dict(dict(spec["config"])).environment("CartPole-v1") \
        .env_runners(num_env_runners=2, env_runner_backend="process").debugging(seed=0)
    algo = config.build()
    result = algo.train()
    local_filter = algo.env_runner_group.local_env_runner.filter
    # Both remote runners' observation statistics reached the driver's filter, and its state went back out.
    assert local_filter.count >= result["num_env_steps_sampled_lifetime"]
    counts = algo.env_runner_group.foreach_env_runner(lambda r: r.filter.count, local_env_runner=False)
    assert counts == [local_filter.count] * 2
    result, progress = _train_until(algo, 150.0, 60_000)
    assert result["env_runners"]["episode_return_mean"] >= 150.0, progress


def test_ars_linear_policy_uses_its_best_directions():
    """(ARS learning CartPole-v1 is its tuned example's case in tests/algorithms/test_tuned_examples.py.)"""
    spec = _tuned("ars/cartpole-ars.yaml")
    config = get_algorithm_config("ARS").update_from_dict(dict(spec["config"])).environment("CartPole-v1") \
        .debugging(seed=0)
    algo = config.build()
    try:
        assert sum(p.numel() for p in algo.get_module().parameters()) == 4 * 2 + 2  # linear: W and b
        directions = []
        original = algo.learner.gradient

        def recording(noisy_returns, noise):
            directions.append((noisy_returns, noise))
            return original(noisy_returns, noise)

        algo.learner.gradient = recording
        theta = algo.learner.get_flat_weights()
        stats = algo.train()["learners"]["default_policy"]
        assert stats["num_perturbations"] == 8 and stats["episodes_this_iter"] >= 16
        noisy_returns, noise = directions[0]
        step = algo.learner.get_flat_weights() - theta
        np.testing.assert_allclose(step, 0.02 * ars_gradient(noisy_returns, noise, rollouts_used=4), atol=1e-6)
    finally:
        algo.stop()


def test_es_on_a_box_action_space_adds_action_noise_and_checkpoints(tmp_path):
    config = ESConfig().environment("Pendulum-v1").training(
        episodes_per_batch=4, train_batch_size=100, noise_size=SMALL_NOISE, model={"fcnet_hiddens": [8]})
    algo = config.debugging(seed=0).build()
    try:
        runner = algo.env_runner_group.local_env_runner
        original_sample, original_exploration = runner.sample, runner.exploration
        seen = []

        def sample(**kwargs):
            exploration = runner.exploration
            seen.append((kwargs["explore"], type(exploration).__name__, getattr(exploration, "stddev", None)))
            return original_sample(**kwargs)

        runner.sample = sample
        result = algo.train()
        # Perturbed episodes: deterministic action + N(0, action_noise_std); unperturbed ones: none.
        assert ("True", "GaussianNoise", 0.01) in {(str(e), n, s) for e, n, s in seen}
        assert all(explore for explore, name, _ in seen if name == "GaussianNoise")
        assert runner.exploration is original_exploration
        assert result["learners"]["default_policy"]["num_perturbations"] == 2
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
        path = algo.save(str(tmp_path / "ckpt"))
        restored = ES.from_checkpoint(path)
        try:
            np.testing.assert_array_equal(restored.learner.get_flat_weights(), algo.learner.get_flat_weights())
        finally:
            restored.stop()
    finally:
        algo.stop()


def test_es_perturbs_a_recurrent_policy():
    """The runner carries the LSTM state through each evaluated episode; ES perturbs all of the
    (inference-only) module's weights, the LSTM's included."""
    config = ESConfig().environment("CartPole-v1").training(
        episodes_per_batch=4, train_batch_size=50, noise_size=SMALL_NOISE,
        model={"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [8]})
    algo = config.debugging(seed=0).build()
    try:
        module = algo.get_module()
        assert module.is_stateful() and getattr(module, "vf", None) is None
        before = module.lstm.weight_ih_l0.detach().clone()
        result = algo.train()
        assert result["learners"]["default_policy"]["num_perturbations"] >= 2
        assert not np.allclose(before, module.lstm.weight_ih_l0.detach())
    finally:
        algo.stop()

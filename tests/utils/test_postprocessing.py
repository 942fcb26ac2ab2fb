"""GAE, discounted returns and piecewise schedules, checked against hand-written loops."""
from __future__ import annotations

import numpy as np
import pytest

from rlx.utils.postprocessing import compute_gae, discounted_returns
from rlx.utils.schedules import PiecewiseSchedule


# --------------------------------------------------------------------------- reference implementations


def _episode_segments(terminateds, truncateds):
    """[(start, end)] index ranges of one env's episodes (end inclusive), cut at every done
    step and at the end of the rollout."""
    T = len(terminateds)
    segments, start = [], 0
    for t in range(T):
        if terminateds[t] or truncateds[t] or t == T - 1:
            segments.append((start, t))
            start = t + 1
    return segments


def reference_gae(rewards, values, next_values, terminateds, truncateds, gamma, lambda_):
    """One env's GAE as the explicit sum A_t = sum_l (gamma*lambda)^l delta_{t+l} within an episode,
    delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t)."""
    T = len(rewards)
    deltas = [
        rewards[t] + gamma * next_values[t] * (0.0 if terminateds[t] else 1.0) - values[t] for t in range(T)
    ]
    adv = np.zeros(T)
    for start, end in _episode_segments(terminateds, truncateds):
        for t in range(start, end + 1):
            adv[t] = sum((gamma * lambda_) ** (k - t) * deltas[k] for k in range(t, end + 1))
    return adv


def reference_returns(rewards, next_values, terminateds, truncateds, gamma):
    """One env's discounted returns summed forward within each episode, plus the discounted
    bootstrap value where the episode was cut without terminating."""
    T = len(rewards)
    out = np.zeros(T)
    for start, end in _episode_segments(terminateds, truncateds):
        boot = 0.0 if terminateds[end] else next_values[end]
        for t in range(start, end + 1):
            out[t] = sum(gamma ** (k - t) * rewards[k] for k in range(t, end + 1))
            out[t] += gamma ** (end - t + 1) * boot
    return out


def _rollout(T=12, B=1, seed=0, term=(), trunc=()):
    """Random [T, B] arrays; next_values[t] = values[t+1] inside an episode, as a sampler makes them.

    `term`/`trunc` are lists of (t, b) positions to mark."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    values = rng.normal(size=(T, B)).astype(np.float32)
    next_values = np.zeros((T, B), dtype=np.float32)
    next_values[:-1] = values[1:]
    next_values[-1] = rng.normal(size=B)
    terminateds = np.zeros((T, B), dtype=bool)
    truncateds = np.zeros((T, B), dtype=bool)
    for t, b in term:
        terminateds[t, b] = True
    for t, b in trunc:
        truncateds[t, b] = True
        next_values[t, b] = rng.normal()  # V(final obs), not the next episode's first value
    return rewards, values, next_values, terminateds, truncateds


def _gae(rewards, values, next_values, terminateds, truncateds, gamma, lambda_):
    return compute_gae(rewards, values, next_values, terminateds, terminateds | truncateds, gamma, lambda_)


# --------------------------------------------------------------------------- compute_gae


def test_gae_hand_computed_example():
    """gamma=0.5, lambda=1, V=0 except the bootstrap values; termination at t=1,
    truncation at t=3 (V(final obs)=4) and the rollout end at t=4 (V(next obs)=8)."""
    rewards = np.ones((5, 1), np.float32)
    values = np.zeros((5, 1), np.float32)
    next_values = np.array([[0.0], [0.0], [0.0], [4.0], [8.0]], np.float32)
    terminateds = np.array([[False], [True], [False], [False], [False]])
    truncateds = np.array([[False], [False], [False], [True], [False]])
    adv, targets = _gae(rewards, values, next_values, terminateds, truncateds, gamma=0.5, lambda_=1.0)
    np.testing.assert_allclose(adv[:, 0], [1.5, 1.0, 2.5, 3.0, 5.0])
    np.testing.assert_allclose(targets, adv + values)


@pytest.mark.parametrize("lambda_", [0.0, 0.5, 0.95, 1.0])
def test_gae_without_episode_ends_matches_reference(lambda_):
    r, v, nv, term, trunc = _rollout(T=10, seed=1)
    adv, _ = _gae(r, v, nv, term, trunc, 0.9, lambda_)
    expected = reference_gae(r[:, 0], v[:, 0], nv[:, 0], term[:, 0], trunc[:, 0], 0.9, lambda_)
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_gae_termination_in_the_middle_does_not_bootstrap():
    r, v, nv, term, trunc = _rollout(T=12, seed=2, term=[(5, 0)])
    nv[5, 0] = 1000.0  # would dominate if it were (wrongly) used after the termination
    adv, _ = _gae(r, v, nv, term, trunc, 0.9, 0.95)
    expected = reference_gae(r[:, 0], v[:, 0], nv[:, 0], term[:, 0], trunc[:, 0], 0.9, 0.95)
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv[5, 0], r[5, 0] - v[5, 0], rtol=1e-6)


def test_gae_truncation_bootstraps_from_next_values():
    r, v, nv, term, trunc = _rollout(T=12, seed=3, trunc=[(6, 0)])
    adv, _ = _gae(r, v, nv, term, trunc, 0.9, 0.95)
    expected = reference_gae(r[:, 0], v[:, 0], nv[:, 0], term[:, 0], trunc[:, 0], 0.9, 0.95)
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv[6, 0], r[6, 0] + 0.9 * nv[6, 0] - v[6, 0], rtol=1e-5)


def test_gae_bootstraps_from_the_last_next_value_at_the_rollout_end():
    r, v, nv, term, trunc = _rollout(T=8, seed=4)
    adv, _ = _gae(r, v, nv, term, trunc, 0.99, 0.9)
    np.testing.assert_allclose(adv[-1, 0], r[-1, 0] + 0.99 * nv[-1, 0] - v[-1, 0], rtol=1e-5)
    shifted = nv.copy()
    shifted[-1, 0] += 1.0
    adv2, _ = _gae(r, v, shifted, term, trunc, 0.99, 0.9)
    # A change of V(s_T) reaches step t with weight gamma * (gamma*lambda)^(T-1-t).
    weights = 0.99 * (0.99 * 0.9) ** np.arange(7, -1, -1)
    np.testing.assert_allclose(adv2[:, 0] - adv[:, 0], weights, rtol=1e-4)


def test_gae_with_termination_and_truncation_matches_reference():
    r, v, nv, term, trunc = _rollout(T=20, seed=5, term=[(3, 0), (15, 0)], trunc=[(9, 0)])
    adv, targets = _gae(r, v, nv, term, trunc, 0.97, 0.9)
    expected = reference_gae(r[:, 0], v[:, 0], nv[:, 0], term[:, 0], trunc[:, 0], 0.97, 0.9)
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, adv + v, rtol=1e-6)


def test_gae_envs_in_the_batch_axis_are_independent():
    r, v, nv, term, trunc = _rollout(T=15, B=4, seed=6, term=[(4, 0), (10, 2)], trunc=[(7, 1), (2, 3)])
    adv, _ = _gae(r, v, nv, term, trunc, 0.95, 0.9)
    for b in range(4):
        col = slice(b, b + 1)
        alone, _ = _gae(r[:, col], v[:, col], nv[:, col], term[:, col], trunc[:, col], 0.95, 0.9)
        np.testing.assert_allclose(adv[:, b], alone[:, 0], rtol=1e-6, atol=1e-6)
        expected = reference_gae(r[:, b], v[:, b], nv[:, b], term[:, b], trunc[:, b], 0.95, 0.9)
        np.testing.assert_allclose(adv[:, b], expected, rtol=1e-5, atol=1e-5)


def test_gae_with_lambda_one_is_discounted_return_minus_value():
    r, v, nv, term, trunc = _rollout(T=16, B=3, seed=7, term=[(5, 0), (12, 2)], trunc=[(8, 1)])
    adv, targets = _gae(r, v, nv, term, trunc, 0.9, 1.0)
    returns = discounted_returns(r, nv, term, term | trunc, 0.9)
    np.testing.assert_allclose(adv, returns - v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, returns, rtol=1e-5, atol=1e-5)


def test_gae_with_lambda_zero_is_the_one_step_td_error():
    r, v, nv, term, trunc = _rollout(T=10, B=2, seed=8, term=[(3, 0)], trunc=[(6, 1)])
    adv, _ = _gae(r, v, nv, term, trunc, 0.9, 0.0)
    np.testing.assert_allclose(adv, r + 0.9 * nv * ~term - v, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- discounted_returns


def test_discounted_returns_hand_computed_example():
    """gamma=0.5: termination at t=1, truncation at t=3 (bootstrap 4), rollout end (bootstrap 8)."""
    rewards = np.array([[1.0], [2.0], [1.0], [1.0], [1.0]], np.float32)
    next_values = np.array([[9.0], [9.0], [9.0], [4.0], [8.0]], np.float32)
    terminateds = np.array([[False], [True], [False], [False], [False]])
    dones = terminateds | np.array([[False], [False], [False], [True], [False]])
    out = discounted_returns(rewards, next_values, terminateds, dones, 0.5)
    np.testing.assert_allclose(out[:, 0], [2.0, 2.0, 2.5, 3.0, 5.0])


def test_discounted_returns_match_reference_over_several_envs():
    r, _, nv, term, trunc = _rollout(T=18, B=3, seed=9, term=[(4, 0), (11, 1)], trunc=[(8, 0), (15, 2)])
    out = discounted_returns(r, nv, term, term | trunc, 0.95)
    for b in range(3):
        expected = reference_returns(r[:, b], nv[:, b], term[:, b], trunc[:, b], 0.95)
        np.testing.assert_allclose(out[:, b], expected, rtol=1e-5, atol=1e-5)


def test_discounted_returns_without_bootstrap_when_the_last_step_terminates():
    rewards = np.array([[1.0], [1.0], [1.0]], np.float32)
    next_values = np.full((3, 1), 100.0, np.float32)
    terminateds = np.array([[False], [False], [True]])
    out = discounted_returns(rewards, next_values, terminateds, terminateds, 0.9)
    np.testing.assert_allclose(out[:, 0], [1 + 0.9 + 0.81, 1 + 0.9, 1.0], rtol=1e-6)


# --------------------------------------------------------------------------- PiecewiseSchedule


def test_piecewise_schedule_interpolates_linearly_between_points():
    schedule = PiecewiseSchedule([[0, 1.0], [100, 0.0], [300, 0.5]])
    assert schedule.value(0) == pytest.approx(1.0)
    assert schedule.value(25) == pytest.approx(0.75)
    assert schedule.value(100) == pytest.approx(0.0)
    assert schedule.value(200) == pytest.approx(0.25)
    assert schedule(50) == pytest.approx(0.5)


def test_piecewise_schedule_is_constant_after_the_last_point():
    schedule = PiecewiseSchedule([[0, 1e-3], [1000, 1e-4]])
    for t in (1000, 1001, 10**6, 10**9):
        assert schedule.value(t) == pytest.approx(1e-4)


def test_piecewise_schedule_from_a_number_is_constant():
    schedule = PiecewiseSchedule(0.3)
    assert schedule.is_constant
    assert schedule.value(0) == pytest.approx(0.3)
    assert schedule.value(10**7) == pytest.approx(0.3)


def test_piecewise_schedule_with_changing_values_is_not_constant():
    assert not PiecewiseSchedule([[0, 1.0], [10, 0.5]]).is_constant
    assert PiecewiseSchedule([[0, 2.0], [10, 2.0]]).is_constant

"""ReturnScaler (environment(normalize_rewards=True)): rewards divided by the running standard
deviation of the discounted return, as Stable-Baselines3's VecNormalize(norm_reward=True)."""
import numpy as np
import pytest

from rlx.utils.filters import FilterWithParts, MeanStdFilter
from rlx.utils.reward_scaling import ReturnScaler, reward_scaler_of, with_reward_scaling


def reference_scaling(rewards, ends, gamma, clip=10.0):
    """VecNormalize's reward path written out step by step: G = gamma * G + r, statistics of
    every G seen so far (sample variance), r / sqrt(var + 1e-8) clipped, G = 0 after an episode end."""
    T, B = rewards.shape
    running = np.zeros(B)
    seen = []
    out = np.zeros_like(rewards, dtype=np.float64)
    for t in range(T):
        running = running * gamma + rewards[t]
        seen.extend(running.tolist())
        var = np.var(seen, ddof=1) if len(seen) >= 2 else 1.0
        out[t] = np.clip(rewards[t] / np.sqrt(var + 1e-8), -clip, clip)
        running[ends[t]] = 0.0
    return out


def test_scaled_rewards_follow_the_running_std_of_discounted_returns_across_batches():
    rng = np.random.default_rng(3)
    rewards = rng.normal(2.0, 3.0, size=(60, 3)).astype(np.float32)
    ends = rng.random((60, 3)) < 0.1
    expected = reference_scaling(rewards.astype(np.float64), ends, gamma=0.95)
    scaler = ReturnScaler(0.95)
    first, second = rewards[:25].copy(), rewards[25:].copy()  # two sample() calls: the returns carry over
    scaler.scale_rewards(first, ends[:25])
    scaler.scale_rewards(second, ends[25:])
    np.testing.assert_allclose(np.concatenate([first, second]), expected, rtol=1e-4, atol=1e-6)
    assert scaler.returns_stat.count == 60 * 3


def test_an_episode_end_restarts_the_return_and_rewards_keep_their_sign():
    scaler = ReturnScaler(1.0)
    rewards = np.array([[1.0], [1.0], [1.0], [1.0]], np.float32)
    ends = np.array([[False], [True], [False], [False]])
    scaler.scale_rewards(rewards.copy(), ends)
    # returns seen: 1, 2 (end), 1, 2: the restarted episode's returns repeat the first ones
    assert scaler.returns_stat.count == 4
    assert scaler.returns_stat.mean == pytest.approx(1.5)
    negative = np.full((3, 1), -5.0, np.float32)
    scaler.scale_rewards(negative, np.zeros((3, 1), bool))
    assert (negative < 0).all()


def test_invalid_rows_leave_returns_and_statistics_alone_and_column_ids_keep_each_columns_return():
    scaler = ReturnScaler(0.5)
    rewards = np.array([[2.0, 4.0], [2.0, 4.0]], np.float32)
    valid = np.array([[True, False], [True, True]])
    scaler.scale_rewards(rewards, np.zeros((2, 2), bool), valid, column_ids=np.array([5, 1]))
    assert scaler.returns_stat.count == 3  # the column without a step in row 0 added nothing
    np.testing.assert_allclose(scaler.running_return[[5, 1]], [2.0 * 0.5 + 2.0, 4.0])
    # A later batch holding only column 1 continues that column's return.
    scaler.scale_rewards(np.array([[4.0]], np.float32), np.zeros((1, 1), bool), column_ids=np.array([1]))
    assert scaler.running_return[1] == pytest.approx(4.0 * 0.5 + 4.0)
    assert scaler.running_return[5] == pytest.approx(3.0)


def test_big_rewards_are_clipped_to_ten_scales():
    scaler = ReturnScaler(0.0)  # returns are the rewards: 0/1 for 400 steps, then an outlier 20 stds out
    rewards = np.array([[i % 2] for i in range(400)] + [[1e4]], np.float32)
    scaler.scale_rewards(rewards, np.zeros((401, 1), bool))
    assert rewards[-1, 0] == pytest.approx(10.0)
    assert 1.5 < rewards[-2, 0] < 2.5  # a 1 among 0/1 returns: 1 / std(0.5)


def test_state_round_trip_and_delta_merge():
    a, b = ReturnScaler(0.9), ReturnScaler(0.9)
    rng = np.random.default_rng(0)
    a.scale_rewards(rng.normal(size=(20, 2)).astype(np.float32), np.zeros((20, 2), bool))
    b.merge_delta(a.pop_delta())
    assert b.returns_stat.count == a.returns_stat.count == 40
    assert b.scale == pytest.approx(a.scale)
    c = ReturnScaler(0.9)
    c.set_state(a.get_state())
    assert c.scale == pytest.approx(a.scale) and c.returns_stat.count == 40
    assert a.pop_delta()["count"] == 0  # popped once


def test_filter_wrapper_filters_observations_syncs_both_parts_and_reads_plain_filter_states():
    obs_filter = MeanStdFilter((2,))
    wrapped = with_reward_scaling(obs_filter, 0.99)
    scaler = wrapped.parts["reward_scaler"]
    assert reward_scaler_of(wrapped) is scaler
    assert reward_scaler_of(obs_filter) is None
    assert wrapped.has_state and not wrapped.is_identity
    out = wrapped.apply_batch(np.array([[1.0, 2.0], [3.0, 6.0]], np.float32))
    assert out.shape == (2, 2) and obs_filter.count == 2
    scaler.scale_rewards(np.ones((3, 1), np.float32), np.zeros((3, 1), bool))
    other = with_reward_scaling(MeanStdFilter((2,)), 0.99)
    other.merge_delta(wrapped.pop_delta())
    other_scaler = other.parts["reward_scaler"]
    assert other.obs_filter.count == 2 and other_scaler.returns_stat.count == 3
    plain = MeanStdFilter((2,))
    plain.update(np.zeros((5, 2)))
    other.set_state(plain.get_state())  # an observation-filter state from a run without normalize_rewards
    assert other.obs_filter.count == 5 and other_scaler.returns_stat.count == 3


def test_wrapping_again_adds_parts_to_the_one_filter_and_a_state_without_a_part_keeps_it():
    class Counter:  # a part with state: counts what it was told
        def __init__(self):
            self.n = 0

        def get_state(self):
            return {"n": self.n}

        def set_state(self, state):
            self.n = state["n"]

        def pop_delta(self):
            return {"n": self.n}

        def merge_delta(self, delta):
            self.n += delta["n"]

    inner = with_reward_scaling(MeanStdFilter((1,)), 0.9)
    outer = FilterWithParts(inner, env_to_module=Counter())
    assert outer.obs_filter is inner.obs_filter and set(outer.parts) == {"reward_scaler", "env_to_module"}
    assert reward_scaler_of(outer) is inner.parts["reward_scaler"]
    outer.parts["env_to_module"].n = 4
    state = outer.get_state()
    assert set(state) == {"obs_filter", "reward_scaler", "env_to_module"}
    fresh = FilterWithParts(with_reward_scaling(MeanStdFilter((1,)), 0.9), env_to_module=Counter())
    fresh.parts["reward_scaler"].scale_rewards(np.ones((2, 1), np.float32), np.zeros((2, 1), bool))
    fresh.set_state({"obs_filter": state["obs_filter"], "env_to_module": state["env_to_module"]})
    assert fresh.parts["env_to_module"].n == 4  # restored
    assert fresh.parts["reward_scaler"].returns_stat.count == 2  # not in the state: kept

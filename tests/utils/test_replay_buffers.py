"""Replay buffers: segment trees against brute force, ring storage, n-step sampling worked out by
hand and by a reference walk, prioritized sampling statistics, state round trips and the factory."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError
from rlx.utils.replay_buffers import (
    MinSegmentTree,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    StorageUnit,
    SumSegmentTree,
    make_replay_buffer,
)

OBS, NEXT_OBS, REW = Columns.OBS, Columns.NEXT_OBS, Columns.REWARDS
TERM, TRUNC = Columns.TERMINATEDS, Columns.TRUNCATEDS


# --------------------------------------------------------------------------- helpers


def flat_batch(obs, rewards=None, terminateds=None, truncateds=None, **extra):
    """A batch-major batch; obs are ids (float), new_obs = obs + 100 so sampled rows identify themselves."""
    obs = np.asarray(obs, dtype=np.float32)
    n = obs.shape[0]
    batch = {
        OBS: obs,
        NEXT_OBS: obs + 100.0,
        Columns.ACTIONS: np.arange(n, dtype=np.int64),
        REW: np.asarray(rewards if rewards is not None else np.ones(n), dtype=np.float32),
        TERM: np.asarray(terminateds if terminateds is not None else np.zeros(n), dtype=bool),
        TRUNC: np.asarray(truncateds if truncateds is not None else np.zeros(n), dtype=bool),
    }
    batch.update(extra)
    return batch


def by_obs(sample):
    """{obs id: (rewards, new_obs, terminated, truncated, n_step)} of every distinct sampled row."""
    out = {}
    for i in range(len(sample[OBS])):
        key = float(sample[OBS][i])
        row = (
            float(sample[REW][i]),
            float(sample[NEXT_OBS][i]),
            bool(sample[TERM][i]),
            bool(sample[TRUNC][i]),
            int(sample["n_step"][i]),
        )
        assert out.setdefault(key, row) == row, "the same row must give the same n-step result"
    return out


def all_rows(buf, **kwargs):
    """Sample enough items to see every stored row (checked) and index the results by obs id."""
    result = by_obs(buf.sample(400 * len(buf), **kwargs))
    assert len(result) == len(buf)
    return result


def assert_samples_equal(a, b):
    assert set(a) == set(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


# --------------------------------------------------------------------------- segment trees


def test_sum_tree_matches_brute_force_with_duplicates_and_odd_capacity():
    rng = np.random.default_rng(0)
    capacity = 37  # rounded up to 64 leaves inside
    tree = SumSegmentTree(capacity)
    ref = np.zeros(capacity)
    for _ in range(20):
        idx = rng.integers(0, capacity, size=15)  # duplicates on purpose
        # Integer values keep every partial sum exact, so the comparisons below can be exact too.
        vals = rng.integers(0, 10, size=15).astype(float)
        tree.update(idx, vals)
        for i, v in zip(idx, vals):  # sequential reference: the last write wins
            ref[i] = v
        assert tree.sum() == ref.sum()
        np.testing.assert_array_equal(tree[np.arange(capacity)], ref)
        if ref.sum() == 0:
            continue
        cumsum = np.cumsum(ref)
        prefix = np.concatenate([rng.uniform(0, ref.sum(), 200), cumsum[cumsum < ref.sum()]])
        expected = np.searchsorted(cumsum, prefix, side="right")  # first leaf whose cumsum exceeds u
        np.testing.assert_array_equal(tree.find_prefixsum_idx(prefix), expected)
        assert (ref[tree.find_prefixsum_idx(prefix)] > 0).all()


def test_sum_tree_prefix_equal_to_total_stays_in_filled_range():
    tree = SumSegmentTree(10)
    tree.update(np.arange(6), np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))
    total = tree.sum()
    assert tree.find_prefixsum_idx(np.array([total]), 6)[0] == 5
    assert tree.find_prefixsum_idx(np.array([total * (1 + 1e-12)]), 6)[0] == 5
    # A zero leaf at the end of the filled range is skipped as well.
    tree.update(np.array([5]), np.array([0.0]))
    assert tree.find_prefixsum_idx(np.array([tree.sum()]), 6)[0] == 4
    assert tree.find_prefixsum_idx(np.array([0.0]), 6)[0] == 0


def test_sum_tree_single_leaf_and_scalar_getitem():
    tree = SumSegmentTree(1)
    tree.update(np.array([0]), np.array([2.5]))
    assert tree.sum() == 2.5 and tree[0] == 2.5
    np.testing.assert_array_equal(tree.find_prefixsum_idx(np.array([0.0, 2.5])), [0, 0])


def test_min_tree_matches_brute_force():
    rng = np.random.default_rng(1)
    tree = MinSegmentTree(13)
    assert tree.min() == float("inf")
    ref = np.full(13, np.inf)
    for _ in range(30):
        idx = rng.integers(0, 13, size=5)
        vals = rng.uniform(0, 1, size=5)
        tree.update(idx, vals)
        for i, v in zip(idx, vals):
            ref[i] = v
        assert tree.min() == ref.min()
        np.testing.assert_array_equal(tree[np.arange(13)], ref)


def test_segment_tree_rejects_out_of_range_indices():
    tree = SumSegmentTree(5)
    with pytest.raises(IndexError):
        tree.update(np.array([5]), np.array([1.0]))
    with pytest.raises(IndexError):
        tree[np.array([-1])]


# --------------------------------------------------------------------------- storage


def test_ring_overwrites_oldest_rows_and_counts_lifetime_rows():
    buf = ReplayBuffer(5, seed=0)
    buf.add(flat_batch([0, 1, 2]))
    assert len(buf) == 3 and buf.num_added == 3
    buf.add(flat_batch([3, 4, 5, 6]))
    assert len(buf) == 5 and buf.num_added == 7 and buf.capacity == 5
    assert set(all_rows(buf)) == {2.0, 3.0, 4.0, 5.0, 6.0}


def test_batch_larger_than_capacity_keeps_its_newest_rows():
    buf = ReplayBuffer(4, seed=0)
    buf.add(flat_batch(np.arange(10)))
    assert len(buf) == 4 and buf.num_added == 10
    assert set(all_rows(buf)) == {6.0, 7.0, 8.0, 9.0}


def test_uniform_sampling_covers_all_rows_evenly():
    buf = ReplayBuffer(10, seed=0)
    buf.add(flat_batch(np.arange(10)))
    counts = np.bincount(buf.sample(20_000)[OBS].astype(int), minlength=10)
    assert (counts > 0).all()
    np.testing.assert_allclose(counts / 20_000, 0.1, atol=0.01)


def test_one_step_sample_returns_the_raw_rows():
    buf = ReplayBuffer(8, seed=0)
    batch = flat_batch(np.arange(6), rewards=np.arange(6) * 1.5, terminateds=[0, 0, 1, 0, 0, 0], extra=np.eye(6)[:, :3])
    buf.add(batch)
    out = buf.sample(50)
    rows = out["batch_indexes"]
    assert rows.dtype == np.int64
    for key, column in batch.items():
        np.testing.assert_array_equal(out[key], column[rows], err_msg=key)
        assert out[key].dtype == column.dtype
    np.testing.assert_array_equal(out["n_step"], np.ones(50))
    assert out[Columns.WEIGHTS].dtype == np.float32 and (out[Columns.WEIGHTS] == 1).all()


def test_valid_mask_skips_rows_and_is_not_stored():
    buf = ReplayBuffer(10, seed=0)
    obs = np.arange(6, dtype=np.float32).reshape(3, 2)  # [T=3, B=2]
    valid = np.array([[True, True], [True, False], [False, False]])
    batch = {OBS: obs, REW: np.ones((3, 2), np.float32), Columns.VALID: valid}
    buf.add(batch, time_major=True)
    assert len(buf) == 3
    out = buf.sample(100)
    assert Columns.VALID not in out
    assert set(out[OBS].tolist()) == {0.0, 1.0, 2.0}


def test_add_rejects_inconsistent_batches():
    buf = ReplayBuffer(10)
    with pytest.raises(ValueError, match="empty replay buffer"):
        buf.sample(4)
    buf.add(flat_batch([0, 1]))
    bad = flat_batch([2, 3])
    bad[OBS] = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="'obs'"):
        buf.add(bad)
    missing = flat_batch([2, 3])
    del missing[REW]
    with pytest.raises(ValueError, match="rewards"):
        buf.add(missing)
    ragged = flat_batch([2, 3])
    ragged[REW] = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="'rewards'"):
        buf.add(ragged)
    with pytest.raises(ValueError, match="reserved"):
        buf.add(flat_batch([2, 3], weights=np.ones(2)))


# --------------------------------------------------------------------------- n-step sampling


def test_n_step_in_one_episode_by_hand():
    # Rows 0-2: an episode terminated at row 2; rows 3-4: one truncated at row 4; rows 5-6: an
    # open episode whose newest row is 6. gamma = 0.5 keeps the sums exact.
    buf = ReplayBuffer(16, seed=0)
    buf.add(flat_batch(
        np.arange(7),
        rewards=[1, 2, 4, 8, 16, 32, 64],
        terminateds=[0, 0, 1, 0, 0, 0, 0],
        truncateds=[0, 0, 0, 0, 1, 0, 0],
    ))
    got = all_rows(buf, n_step=3, gamma=0.5)
    # obs: (rewards, new_obs, terminated, truncated, n_step)
    assert got[0.0] == (1 + 0.5 * 2 + 0.25 * 4, 102.0, True, False, 3)
    assert got[1.0] == (2 + 0.5 * 4, 102.0, True, False, 2)    # termination inside the window
    assert got[2.0] == (4.0, 102.0, True, False, 1)
    assert got[3.0] == (8 + 0.5 * 16, 104.0, False, True, 2)   # truncation inside the window
    assert got[4.0] == (16.0, 104.0, False, True, 1)
    assert got[5.0] == (32 + 0.5 * 64, 106.0, False, False, 2)  # window reaches the newest row
    assert got[6.0] == (64.0, 106.0, False, False, 1)


def test_n_step_keeps_first_row_columns():
    buf = ReplayBuffer(8, seed=0)
    buf.add(flat_batch(np.arange(4), rewards=[1, 1, 1, 1]))
    out = buf.sample(64, n_step=3, gamma=1.0)
    rows = out["batch_indexes"]
    np.testing.assert_array_equal(out[Columns.ACTIONS], rows)
    np.testing.assert_array_equal(out[OBS], rows)
    np.testing.assert_array_equal(out[NEXT_OBS], np.minimum(rows + 2, 3) + 100)
    np.testing.assert_array_equal(out[REW], np.minimum(rows + 3, 4) - rows)


def test_n_step_links_across_adds_of_a_lane_but_not_across_episode_ends():
    buf = ReplayBuffer(16, seed=0)
    buf.add(flat_batch([0, 1, 2], rewards=[1, 2, 4]))
    buf.add(flat_batch([3, 4], rewards=[8, 16], terminateds=[0, 1]))
    buf.add(flat_batch([5, 6], rewards=[32, 64]))  # a new episode after the termination at row 4
    got = all_rows(buf, n_step=3, gamma=0.5)
    assert got[1.0] == (2 + 0.5 * 4 + 0.25 * 8, 103.0, False, False, 3)
    assert got[2.0] == (4 + 0.5 * 8 + 0.25 * 16, 104.0, True, False, 3)
    assert got[4.0] == (16.0, 104.0, True, False, 1)
    assert got[5.0] == (32 + 0.5 * 64, 106.0, False, False, 2)


def test_time_major_lanes_stay_separate_and_continue_by_lane_offset():
    buf = ReplayBuffer(32, seed=0)
    # Two sub-envs, 3 steps: lane 0 obs 0,1,2 (rewards 1,1,1); lane 1 obs 10,11,12 (rewards 10,10,10).
    obs = np.array([[0, 10], [1, 11], [2, 12]], dtype=np.float32)
    batch = {
        OBS: obs, NEXT_OBS: obs + 100, REW: np.array([[1, 10]] * 3, np.float32),
        TERM: np.zeros((3, 2), bool), TRUNC: np.zeros((3, 2), bool),
    }
    buf.add(batch, time_major=True)
    # Another runner's sub-envs (lanes 2, 3) in between must not join lanes 0 and 1.
    buf.add({**batch, OBS: obs + 50, NEXT_OBS: obs + 150}, time_major=True, lane_offset=2)
    # Lanes 0 and 1 continue: obs 3 and 13.
    nxt = {**{k: v[:1] for k, v in batch.items()}, OBS: obs[:1] + 3, NEXT_OBS: obs[:1] + 103}
    buf.add(nxt, time_major=True)
    got = all_rows(buf, n_step=3, gamma=1.0)
    assert got[1.0] == (3.0, 103.0, False, False, 3)
    assert got[11.0] == (30.0, 113.0, False, False, 3)
    assert got[2.0] == (2.0, 103.0, False, False, 2)
    assert got[12.0] == (20.0, 113.0, False, False, 2)
    assert got[52.0] == (1.0, 152.0, False, False, 1)
    assert got[61.0] == (20.0, 162.0, False, False, 2)


def test_link_to_an_overwritten_lane_tail_is_dropped():
    buf = ReplayBuffer(4, seed=0)
    def lane(obs):  # a [T, 1] time-major batch of one sub-env
        return {k: v[:, None] for k, v in flat_batch(obs).items()}

    buf.add(lane([0, 1]), time_major=True, lane_offset=0)  # lane 0, episode still open
    buf.add(lane([10, 11, 12, 13]), time_major=True, lane_offset=1)  # fills the ring: lane 0 is gone
    buf.add(lane([20]), time_major=True, lane_offset=0)  # lane 0 continues, but its tail was overwritten
    got = all_rows(buf, n_step=2, gamma=1.0)
    assert set(got) == {11.0, 12.0, 13.0, 20.0}
    # Row of obs 13 sits where lane 0's last row was; it must not have been linked to obs 20.
    assert got[13.0][4] == 1 and got[20.0][4] == 1
    assert got[11.0][4] == 2


def reference_n_step(stream, capacity, n_step, gamma):
    """{obs: (rewards, new_obs, term, trunc, n)} by walking the stored transitions of each lane in Python."""
    num_added = len(stream)
    oldest = max(0, num_added - capacity)
    next_of = {}
    last_of_lane = {}
    for i, row in enumerate(stream):
        prev = last_of_lane.get(row["lane"])
        if prev is not None and not (stream[prev]["term"] or stream[prev]["trunc"]):
            next_of[prev] = i
        last_of_lane[row["lane"]] = i
    out = {}
    for start in range(oldest, num_added):
        cur, total, k = start, stream[start]["rew"], 1
        while k < n_step and cur in next_of and next_of[cur] >= oldest:
            cur = next_of[cur]
            total += gamma ** k * stream[cur]["rew"]
            k += 1
        out[stream[start]["obs"]] = (total, stream[cur]["obs"] + 100, stream[cur]["term"], stream[cur]["trunc"], k)
    return out


def test_n_step_matches_a_reference_walk_on_random_time_major_data():
    rng = np.random.default_rng(3)
    capacity, n_step, gamma = 60, 4, 0.5
    buf = ReplayBuffer(capacity, seed=1)
    stream = []  # stored transitions in insert order
    next_obs_id = 0
    for add in range(8):
        T, B, offset = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.choice([0, 4]))
        obs = (next_obs_id + np.arange(T * B)).reshape(T, B).astype(np.float64)
        next_obs_id += T * B
        rew = rng.integers(0, 8, (T, B)).astype(np.float64)
        term, trunc = rng.random((T, B)) < 0.15, rng.random((T, B)) < 0.1
        valid = rng.random((T, B)) < 0.85
        buf.add({OBS: obs, NEXT_OBS: obs + 100, REW: rew, TERM: term, TRUNC: trunc, Columns.VALID: valid},
                time_major=True, lane_offset=offset)
        for t in range(T):
            for b in range(B):
                if valid[t, b]:
                    stream.append(dict(obs=obs[t, b], rew=rew[t, b], term=bool(term[t, b]),
                                       trunc=bool(trunc[t, b]), lane=offset + b))
    assert buf.num_added == len(stream) and len(buf) == min(capacity, len(stream))
    assert all_rows(buf, n_step=n_step, gamma=gamma) == reference_n_step(stream, capacity, n_step, gamma)


# --------------------------------------------------------------------------- prioritized replay


def filled_prioritized(n=4, **kwargs):
    buf = PrioritizedReplayBuffer(16, seed=0, **kwargs)
    buf.add(flat_batch(np.arange(n)))
    return buf


def test_prioritized_frequencies_follow_p_to_the_alpha():
    alpha, eps = 0.7, 1e-6
    buf = filled_prioritized(alpha=alpha, eps=eps)
    td = np.array([1.0, 2.0, 3.0, 4.0])
    buf.update_priorities(np.arange(4), td)
    expected = (td + eps) ** alpha / ((td + eps) ** alpha).sum()
    counts = np.zeros(4)
    for _ in range(300):
        counts += np.bincount(buf.sample(64)["batch_indexes"], minlength=4)
    np.testing.assert_allclose(counts / counts.sum(), expected, atol=0.01)


def test_importance_weights_follow_the_formula():
    alpha, beta, eps = 0.6, 0.4, 1e-6
    buf = filled_prioritized(alpha=alpha, beta=beta, eps=eps)
    td = np.array([0.5, 1.0, 2.0, 8.0])
    buf.update_priorities(np.arange(4), td)
    p = (td + eps) ** alpha
    probs = p / p.sum()
    for b in (None, 1.0):
        out = buf.sample(32, beta=b)
        use = beta if b is None else b
        max_w = (4 * probs.min()) ** -use
        expected = (4 * probs[out["batch_indexes"]]) ** -use / max_w
        assert out[Columns.WEIGHTS].dtype == np.float32
        np.testing.assert_allclose(out[Columns.WEIGHTS], expected, rtol=1e-6)
        assert out[Columns.WEIGHTS].max() <= 1.0


def test_update_priorities_and_max_priority_for_new_rows():
    alpha, eps = 0.5, 0.01
    buf = filled_prioritized(alpha=alpha, eps=eps)
    assert buf.max_priority == 1.0
    assert buf.stats()["sum_priorities"] == pytest.approx(4.0)  # every new row got 1.0 ** alpha
    # Row 2 dominates after the update; duplicated rows keep the last priority given.
    buf.update_priorities(np.array([0, 1, 2, 3, 2]), np.array([0.0, 0.0, 1.0, 0.0, 99.0]))
    assert buf.max_priority == pytest.approx(99.01)
    rows = buf.sample(1000)["batch_indexes"]
    assert (rows == 2).mean() > 0.95
    before = buf.stats()["sum_priorities"]
    buf.add(flat_batch([4]))
    assert buf.stats()["sum_priorities"] == pytest.approx(before + 99.01 ** alpha)
    stats = buf.stats()
    assert stats["size"] == 5 and stats["num_added"] == 5 and stats["capacity"] == 16


def test_update_priorities_rejects_bad_values():
    buf = filled_prioritized()
    with pytest.raises(ValueError, match="finite"):
        buf.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match=">= 0"):
        buf.update_priorities(np.array([1]), np.array([-0.5]))
    with pytest.raises(ValueError, match="batch_indexes"):
        buf.update_priorities(np.array([0, 1]), np.array([1.0]))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        buf.update_priorities(np.array([7]), np.array([1.0]))


def test_prioritized_overwrite_gives_new_rows_max_priority():
    buf = PrioritizedReplayBuffer(3, alpha=1.0, eps=0.0, seed=0)
    buf.add(flat_batch([0, 1, 2]))
    buf.update_priorities(np.arange(3), np.array([1.0, 1.0, 5.0]))
    buf.add(flat_batch([3]))  # overwrites row 0 with priority max_priority = 5
    assert buf.stats()["sum_priorities"] == pytest.approx(11.0)
    counts = np.bincount(buf.sample(1100)[OBS].astype(int), minlength=4)
    np.testing.assert_allclose(counts[1:] / 1100, [1 / 11, 5 / 11, 5 / 11], atol=0.01)


# --------------------------------------------------------------------------- state


def filled_buffers():
    rng = np.random.default_rng(7)
    uniform = ReplayBuffer(50, seed=11)
    prioritized = PrioritizedReplayBuffer(50, alpha=0.7, beta=0.5, seed=11)
    for buf in (uniform, prioritized):
        for offset in (0, 3, 0):
            obs = rng.normal(size=(10, 3, 2)).astype(np.float32)
            buf.add({OBS: obs, NEXT_OBS: obs + 1, REW: rng.normal(size=(10, 3)).astype(np.float32),
                     Columns.ACTIONS: rng.integers(0, 4, (10, 3)), TERM: rng.random((10, 3)) < 0.1,
                     TRUNC: np.zeros((10, 3), bool)}, time_major=True, lane_offset=offset)
        buf.sample(16, n_step=3)  # advance the generator
    prioritized.update_priorities(np.arange(20), rng.random(20) * 3)
    return uniform, prioritized


def continue_and_sample(buf):
    """Samples and an add after restoring: covers the generator, the priorities and the lanes."""
    out = [buf.sample(24, n_step=3, gamma=0.9) for _ in range(2)]
    buf.add({OBS: np.ones((2, 3, 2), np.float32), NEXT_OBS: np.ones((2, 3, 2), np.float32),
             REW: np.ones((2, 3), np.float32), Columns.ACTIONS: np.ones((2, 3), np.int64),
             TERM: np.zeros((2, 3), bool), TRUNC: np.zeros((2, 3), bool)}, time_major=True)
    out.append(buf.sample(64, n_step=3, gamma=0.9))
    return out


def check_plain(value, path="state"):
    """Only plain scalars, str-keyed dicts and C-contiguous arrays."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str, path
            check_plain(item, f"{path}.{key}")
    elif isinstance(value, np.ndarray):
        assert value.flags.c_contiguous and value.dtype.kind in "biuf", path
    else:
        assert value is None or type(value) in (int, float, str, bool), f"{path}: {type(value)}"


@pytest.mark.parametrize("which", [0, 1], ids=["uniform", "prioritized"])
def test_state_round_trip_reproduces_samples(which):
    original = filled_buffers()[which]
    state = original.get_state()
    check_plain(state)
    restored = type(original)(50, seed=999)
    restored.set_state(state)
    assert len(restored) == len(original) and restored.num_added == original.num_added
    assert restored.stats() == original.stats()
    for a, b in zip(continue_and_sample(original), continue_and_sample(restored)):
        assert_samples_equal(a, b)


@pytest.mark.parametrize("which", [0, 1], ids=["uniform", "prioritized"])
def test_state_survives_ormsgpack(which):
    ormsgpack = pytest.importorskip("ormsgpack")
    original = filled_buffers()[which]
    packed = ormsgpack.packb(original.get_state(), option=ormsgpack.OPT_SERIALIZE_NUMPY)
    restored = type(original)(50)
    restored.set_state(ormsgpack.unpackb(packed))
    for a, b in zip(continue_and_sample(original), continue_and_sample(restored)):
        assert_samples_equal(a, b)


def test_state_survives_safetensors_and_json():
    from safetensors.numpy import load, save

    original = filled_buffers()[1]
    arrays = {}

    def split(value, path):
        if isinstance(value, np.ndarray):
            arrays[path] = value
            return {"__tensor__": path}
        if isinstance(value, dict):
            return {k: split(v, f"{path}/{k}") for k, v in value.items()}
        return value

    def join(value, loaded):
        if isinstance(value, dict):
            if "__tensor__" in value:
                return loaded[value["__tensor__"]]
            return {k: join(v, loaded) for k, v in value.items()}
        return value

    tree = split(original.get_state(), "state")
    text, blob = json.dumps(tree), save(arrays)
    restored = PrioritizedReplayBuffer(50)
    restored.set_state(join(json.loads(text), load(blob)))
    for a, b in zip(continue_and_sample(original), continue_and_sample(restored)):
        assert_samples_equal(a, b)


def test_state_of_an_empty_buffer_round_trips():
    empty = PrioritizedReplayBuffer(8, seed=2)
    other = PrioritizedReplayBuffer(8)
    other.set_state(empty.get_state())
    assert len(other) == 0
    for buf in (empty, other):
        buf.add(flat_batch([0, 1, 2]))
    assert_samples_equal(empty.sample(10), other.sample(10))


def test_set_state_validates():
    uniform, prioritized = filled_buffers()
    state = uniform.get_state()
    for key in ("columns", "rng_state", "num_added"):
        broken = dict(state)
        del broken[key]
        with pytest.raises(ValueError, match=repr(key)):
            ReplayBuffer(50).set_state(broken)
    with pytest.raises(ValueError, match="'capacity'"):
        ReplayBuffer(40).set_state(state)
    with pytest.raises(ValueError, match="'type'"):
        PrioritizedReplayBuffer(50).set_state(state)
    broken = prioritized.get_state()
    del broken["priorities"]
    with pytest.raises(ValueError, match="'priorities'"):
        PrioritizedReplayBuffer(50).set_state(broken)


# --------------------------------------------------------------------------- factory and options


@pytest.mark.parametrize("name", [
    "ReplayBuffer", "EpisodeReplayBuffer", "MultiAgentReplayBuffer", "MultiAgentEpisodeReplayBuffer",
])
def test_make_uniform_buffer_by_name_ignores_priority_keys(name):
    buf = make_replay_buffer({"type": name, "capacity": 123, "alpha": 0.6, "beta": 0.4,
                              "prioritized_replay_eps": 1e-6, "storage_unit": "timesteps"})
    assert type(buf) is ReplayBuffer and buf.capacity == 123


@pytest.mark.parametrize("name", [
    "PrioritizedReplayBuffer", "PrioritizedEpisodeReplayBuffer", "MultiAgentPrioritizedReplayBuffer",
    "MultiAgentPrioritizedEpisodeReplayBuffer",
])
def test_make_prioritized_buffer_by_name(name):
    buf = make_replay_buffer({"type": name, "capacity": 77, "alpha": 0.5, "beta": 0.3, "prioritized_replay_eps": 0.02})
    assert type(buf) is PrioritizedReplayBuffer and buf.capacity == 77
    assert (buf.alpha, buf.beta, buf.eps) == (0.5, 0.3, 0.02)


def test_make_buffer_by_class_path_and_seed():
    assert type(make_replay_buffer({"type": PrioritizedReplayBuffer})) is PrioritizedReplayBuffer
    for path in ("rlx.utils.replay_buffers:PrioritizedReplayBuffer",
                 "rlx.utils.replay_buffers.prioritized_replay_buffer.PrioritizedReplayBuffer",
                 "ray.rllib.utils.replay_buffers.PrioritizedEpisodeReplayBuffer"):
        assert type(make_replay_buffer({"type": path, "eps": 0.1})) is PrioritizedReplayBuffer
    a, b = (make_replay_buffer({"type": "ReplayBuffer", "capacity": 9}, seed=4) for _ in range(2))
    for buf in (a, b):
        buf.add(flat_batch(np.arange(9)))
    assert_samples_equal(a.sample(20), b.sample(20))


def test_make_buffer_errors_name_the_fix():
    with pytest.raises(ConfigError, match="Did you mean.*'PrioritizedReplayBuffer'"):
        make_replay_buffer({"type": "PrioritizedReplayBufer"})
    with pytest.raises(ConfigError, match="Did you mean 'capacity'") as err:
        make_replay_buffer({"type": "ReplayBuffer", "capacityy": 10})
    assert "storage_unit" in str(err.value)  # the accepted keys are listed
    with pytest.raises(ConfigError, match="cannot import"):
        make_replay_buffer({"type": "rlx.utils.replay_buffers:NoSuchBuffer"})
    with pytest.raises(ConfigError, match="not a subclass"):
        make_replay_buffer({"type": dict})
    with pytest.raises(ConfigError, match="capacity"):
        make_replay_buffer({"type": "ReplayBuffer", "capacity": 0})


def test_storage_units():
    assert StorageUnit.validate("timesteps") == StorageUnit.TIMESTEPS
    for unit in (StorageUnit.EPISODES, StorageUnit.SEQUENCES, StorageUnit.FRAGMENTS):
        with pytest.raises(NotSupportedYetError, match=f"storage_unit='{unit}'"):
            ReplayBuffer(10, storage_unit=unit)
    with pytest.raises(ConfigError, match="Did you mean 'timesteps'"):
        make_replay_buffer({"storage_unit": "timestep"})

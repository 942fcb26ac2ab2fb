"""RLlib 2.60's new-stack offline API: OfflineData, OfflinePreLearner and the offline_data() keys
that read `input_` through ray.data (rlx's embedded reader when Ray is not installed)."""
import json

import gymnasium as gym
import numpy as np
import pytest


def _write_step_rows(path, num_steps=60, *, obs_name="obs", seed=0):
    """CartPole steps as Parquet rows, one env step per row (RLlib's new-stack layout)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    rows = {obs_name: [], "actions": [], "rewards": [], "new_obs": [], "terminateds": [], "truncateds": [],
            "eps_id": [], "action_logp": []}
    eps = 0
    for t in range(num_steps):
        action = int(t % 2)
        new_obs, reward, terminated, truncated, _ = env.step(action)
        rows[obs_name].append(obs.tolist())
        rows["actions"].append(action)
        rows["rewards"].append(float(reward))
        rows["new_obs"].append(new_obs.tolist())
        rows["terminateds"].append(bool(terminated))
        rows["truncateds"].append(bool(truncated))
        rows["eps_id"].append(f"e{eps}")
        rows["action_logp"].append(-0.69)
        obs = new_obs
        if terminated or truncated:
            eps += 1
            obs, _ = env.reset()
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows), str(path / "steps.parquet"))
    return rows


@pytest.fixture
def no_ray(monkeypatch):
    """Read as rlx does when Ray is not installed."""
    import rlx.offline.offline_data as offline_data

    monkeypatch.setattr(offline_data, "ray_data", lambda: None)


def test_offline_data_serves_mapped_batches_of_the_requested_size(tmp_path, no_ray):
    from rlx.algorithms.bc import BCConfig
    from rlx.core.sample_batch import MultiAgentBatch
    from rlx.offline.offline_data import OfflineData

    rows = _write_step_rows(tmp_path / "data")
    config = BCConfig().environment("CartPole-v1").offline_data(input_=str(tmp_path / "data"),
                                                                 input_read_method="read_parquet")
    data = OfflineData(config)
    batch = data.sample(num_samples=25)
    assert isinstance(batch, MultiAgentBatch) and set(batch.policy_batches) == {"default_policy"}
    sb = batch.policy_batches["default_policy"]
    assert sb["obs"].shape == (25, 4) and sb["new_obs"].shape == (25, 4)
    np.testing.assert_allclose(sb["obs"], np.asarray(rows["obs"][:25], np.float32), rtol=1e-6)
    assert list(sb["actions"]) == rows["actions"][:25]
    assert sb["action_logp"].shape == (25,)  # extra columns pass through
    # Further calls continue through the data and start another pass at its end.
    sizes = [len(data.sample(num_samples=25).policy_batches["default_policy"]["obs"]) for _ in range(4)]
    assert sizes[:2] == [25, 10] and sizes[2] == 25


def test_input_read_schema_renames_columns_and_ignore_final_observation(tmp_path, no_ray):
    from rlx.algorithms.bc import BCConfig
    from rlx.offline.offline_data import OfflineData

    _write_step_rows(tmp_path / "data", obs_name="o_t")
    config = BCConfig().offline_data(input_=str(tmp_path / "data"), input_read_schema={"obs": "o_t"},
                                     ignore_final_observation=True)
    sb = OfflineData(config).sample(num_samples=10).policy_batches["default_policy"]
    assert sb["obs"].shape == (10, 4) and "o_t" not in sb
    assert not sb["new_obs"].any()


def test_prelearner_maps_old_stack_sample_batches_to_n_step_transitions(tmp_path):
    from rlx.algorithms.dqn import DQNConfig
    from rlx.offline.offline_prelearner import OfflinePreLearner

    config = DQNConfig().training(train_batch_size=16, n_step=3, gamma=0.5)
    config.offline_data(input_read_sample_batches=True)
    obs = [[float(t)] * 4 for t in range(8)]
    rows = {"obs": np.array([obs[:7]], dtype=object), "new_obs": np.array([obs[1:]], dtype=object),
            "actions": np.array([[0, 1, 0, 1, 0, 1, 0]], dtype=object),
            "rewards": np.array([[1.0] * 7], dtype=object),
            "terminateds": np.array([[False] * 6 + [True]], dtype=object), "eps_id": np.array([[7] * 7], dtype=object)}
    prelearner = OfflinePreLearner(config=config)
    out = prelearner(rows)
    assert sorted(out) == sorted(f"default_policy/{c}" for c in ("obs", "new_obs", "actions", "rewards",
                                                                 "terminateds", "truncateds", "eps_id", "n_step",
                                                                 "weights"))
    assert len(out["default_policy/obs"]) == 16
    for o, no, r, n, term in zip(out["default_policy/obs"], out["default_policy/new_obs"],
                                 out["default_policy/rewards"], out["default_policy/n_step"],
                                 out["default_policy/terminateds"]):
        t = int(o[0])
        assert n == min(3, 7 - t) and int(no[0]) == t + n
        assert r == pytest.approx(sum(0.5 ** k for k in range(n)))
        assert term == (t + n == 7)


def test_bc_trains_from_new_stack_reading_with_a_custom_prelearner(tmp_path, no_ray):
    from rlx.algorithms.bc import BCConfig
    from rlx.offline.offline_prelearner import OfflinePreLearner

    mapped_rows = []

    class CountingPreLearner(OfflinePreLearner):
        def __call__(self, batch):
            mapped_rows.append(len(batch["obs"]))
            return super().__call__(batch)

    _write_step_rows(tmp_path / "data", num_steps=200)
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_=[str(tmp_path / "data" / "steps.parquet")], prelearner_class=CountingPreLearner)
              .training(train_batch_size=64))
    algo = config.build()
    try:
        before = {k: v.clone() for k, v in algo.get_module().state_dict().items()}
        algo.train()
        after = algo.get_module().state_dict()
        assert mapped_rows and mapped_rows[0] == 64
        assert any(not (before[k] == after[k]).all() for k in before)  # the policy was trained
    finally:
        algo.stop()


def test_embedded_reader_reads_json_rows_and_explains_what_needs_ray(tmp_path, no_ray):
    from rlx.algorithms.bc import BCConfig
    from rlx.offline.offline_data import OfflineData
    from rlx.offline.spaces import OfflineDataError

    path = tmp_path / "rows.json"
    path.write_text("\n".join(json.dumps({"obs": [t, 0.0], "actions": t % 2, "rewards": 1.0, "new_obs": [t + 1, 0.0],
                                          "terminateds": t == 9, "truncateds": False}) for t in range(10)))
    config = BCConfig().offline_data(input_=str(path), input_read_method="read_json")
    sb = OfflineData(config).sample(num_samples=10).policy_batches["default_policy"]
    assert sb["obs"].shape == (10, 2) and sb["terminateds"].tolist() == [False] * 9 + [True]
    with pytest.raises(OfflineDataError, match="ray"):
        OfflineData(BCConfig().offline_data(input_=str(path), input_read_method="read_csv"))


def test_new_stack_keys_are_validated():
    from rlx.algorithms.bc import BCConfig
    from rlx.utils.errors import ConfigError

    config = BCConfig().offline_data(input_read_method="read_parquet", input_read_method_kwargs={"x": 1},
                                     map_batches_kwargs={"concurrency": 1}, materialize_data=True,
                                     prelearner_buffer_kwargs={"capacity": 100})
    assert config.input_read_method == "read_parquet" and config.map_batches_kwargs == {"concurrency": 1}
    with pytest.raises(ConfigError, match="input_read_method"):
        BCConfig().offline_data(input_read_method=5)
    with pytest.raises(ConfigError, match="input_filesystem"):
        BCConfig().offline_data(input_filesystem="ftp")


def test_offline_data_reads_through_ray_data(tmp_path, local_ray):
    pytest.importorskip("ray.data")

    from rlx.algorithms.bc import BCConfig
    from rlx.offline.offline_data import OfflineData

    _write_step_rows(tmp_path / "data")
    config = BCConfig().offline_data(input_=str(tmp_path / "data"), map_batches_kwargs={"concurrency": 1},
                                     input_read_method="read_parquet")
    # Logical CPUs of the shared instance: the read tasks and the prelearner actor each hold one.
    ray = local_ray()
    ray.data.DataContext.get_current().enable_progress_bars = False
    data = OfflineData(config)
    assert isinstance(data.data, ray.data.Dataset)
    sb = data.sample(num_samples=20).policy_batches["default_policy"]
    assert sb["obs"].shape == (20, 4) and sb["actions"].shape == (20,)
    del data  # closes the batch iterator while Ray is up


def test_prelearner_reads_msgpacked_episode_states_as_rllib_writes_them():
    import msgpack

    from rlx.algorithms.dqn import DQNConfig
    from rlx.env.single_agent_episode import SingleAgentEpisode
    from rlx.offline.offline_prelearner import OfflinePreLearner

    def encode(obj):  # msgpack-numpy's layout of arrays and NumPy scalars
        if isinstance(obj, np.ndarray):
            return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": obj.shape, b"data": obj.tobytes()}
        if isinstance(obj, np.generic):
            return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
        return obj

    items = []
    for e in range(3):
        episode = SingleAgentEpisode()
        episode.add_env_reset(np.array([100.0 * e], np.float32))
        for t in range(5):
            episode.add_env_step(np.array([100.0 * e + t + 1], np.float32), np.int64(t % 2), 1.0,
                                 terminated=t == 4)
        items.append(msgpack.packb(episode.get_state(), default=encode, use_bin_type=True))
    config = DQNConfig().training(train_batch_size=12).offline_data(input_read_episodes=True)
    out = OfflinePreLearner(config=config)({"item": np.array(items, dtype=object)})
    assert out["default_policy/obs"].shape == (12, 1)
    assert set(out["default_policy/obs"][:, 0] // 100) <= {0.0, 1.0, 2.0}
    for o, no, n in zip(out["default_policy/obs"][:, 0], out["default_policy/new_obs"][:, 0],
                        out["default_policy/n_step"]):
        assert no == o + n  # n-step transitions (DQN's n_step) within one episode

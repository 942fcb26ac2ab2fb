"""Multi-agent offline data read through RLlib 2.60's new-stack OfflineData/OfflinePreLearner:
MultiAgentBatch records a multi-agent run wrote, rows of steps naming their module or agent, and
MultiAgentEpisode states, each module getting its own rows."""
import msgpack
import numpy as np
import pytest

from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
from rlx.offline.offline_data import OfflineData
from rlx.offline.offline_prelearner import OfflinePreLearner


@pytest.fixture
def no_ray(monkeypatch):
    """Read as rlx does when Ray is not installed (no Ray cluster started by the test)."""
    import rlx.offline.offline_data as offline_data

    monkeypatch.setattr(offline_data, "ray_data", lambda: None)


def _two_policies(config):
    return (config.environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *args, **kwargs: f"p{aid}"))


def test_multi_agent_records_train_each_module_with_bc(tmp_path, no_ray):
    from rlx.algorithms.bc import BCConfig
    from rlx.algorithms.ppo import PPOConfig

    recorder = (_two_policies(PPOConfig()).env_runners(rollout_fragment_length=20)
                .training(train_batch_size=40, minibatch_size=40, num_epochs=1, model={"fcnet_hiddens": [8]})
                .offline_data(output=str(tmp_path / "data")).build())
    try:
        recorder.train()
    finally:
        recorder.stop()

    config = (_two_policies(BCConfig()).training(train_batch_size=16, model={"fcnet_hiddens": [8]})
              .offline_data(input_=str(tmp_path / "data"), input_read_sample_batches=True,
                            input_read_method="read_json"))
    batch = OfflineData(config).sample(num_samples=16)
    assert set(batch.policy_batches) == {"p0", "p1"}
    for columns in batch.policy_batches.values():
        assert len(columns["obs"]) == 16 and columns["obs"].shape[1:] == (4,)
        assert "rlx_real_row" not in columns  # the padding is gone

    algo = config.build()
    try:
        before = algo.get_weights()
        algo.train()
        after = algo.get_weights()
        for pid in ("p0", "p1"):
            assert any(not np.allclose(before[pid][k], after[pid][k]) for k in before[pid]), pid
    finally:
        algo.stop()


def test_rows_of_steps_split_by_module_or_agent_id(tmp_path, no_ray):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rlx.algorithms.bc import BCConfig

    n = 30
    agents = [i % 3 for i in range(n)]  # agents 0 and 2 -> p0, agent 1 -> p1
    rows = {"obs": [[float(i), 0.0, 0.0, 0.0] for i in range(n)], "new_obs": [[i + 1.0, 0, 0, 0] for i in range(n)],
            "actions": [i % 2 for i in range(n)], "rewards": [1.0] * n, "terminateds": [False] * n,
            "truncateds": [False] * n, "eps_id": [f"e{a}" for a in agents], "agent_id": agents}
    (tmp_path / "rows").mkdir()
    pq.write_table(pa.table(rows), str(tmp_path / "rows" / "steps.parquet"))
    config = (BCConfig().environment(MultiAgentCartPole, env_config={"num_agents": 3})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: "p1" if aid == 1 else "p0")
              .offline_data(input_=str(tmp_path / "rows"), input_read_method="read_parquet"))
    batch = OfflineData(config).sample(num_samples=n)
    p0, p1 = batch.policy_batches["p0"], batch.policy_batches["p1"]
    assert len(p0["obs"]) == 20 and len(p1["obs"]) == 10
    np.testing.assert_array_equal(p1["obs"][:, 0], [i for i in range(n) if agents[i] == 1])
    assert set(p0["eps_id"]) == {"e0", "e2"}

    # A module_id column names the module directly.
    mapped = OfflinePreLearner(config=config)({**{k: np.asarray(v) for k, v in rows.items() if k != "agent_id"},
                                               "module_id": np.asarray(["m" if a else "n" for a in agents])})
    assert mapped["n/obs"].shape == (20, 4) and mapped["m/rlx_real_row"].sum() == 20


def test_multi_agent_episode_states_give_each_module_its_agents_episodes():
    from rlx.algorithms.bc import BCConfig
    from rlx.env.multi_agent_episode import MultiAgentEpisode

    def encode(obj):  # msgpack-numpy's encoding, as RLlib writes episode states
        if isinstance(obj, np.ndarray):
            return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": list(obj.shape),
                    b"data": obj.tobytes()}
        if isinstance(obj, np.generic):
            return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
        return obj

    items = []
    for e in range(2):
        episode = MultiAgentEpisode(record=True)
        episode.agent_to_module_map.update({"a": "pa", "b": "pb"})
        episode.add_env_reset({"a": np.zeros(2, np.float32), "b": np.ones(2, np.float32)}, {})
        for t in range(4):
            done = t == 3
            episode.add_env_step({"a": np.full(2, t + 1.0, np.float32), "b": np.full(2, 10.0 + t, np.float32)},
                                 {"a": np.int64(0), "b": np.int64(1)}, {"a": 1.0, "b": 2.0},
                                 {"__all__": done}, {}, {})
        episode.finish(terminated=True, truncated=False)
        items.append(msgpack.packb(episode.get_state(), default=encode, use_bin_type=True))
    config = (BCConfig().multi_agent(policies={"pa", "pb"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
              .training(train_batch_size=6).offline_data(input_read_episodes=True))
    out = OfflinePreLearner(config=config)({"item": np.array(items, dtype=object)})
    assert out["pa/obs"].shape == (6, 2) and out["pb/obs"].shape == (6, 2)
    assert (out["pb/actions"] == 1).all() and (out["pa/actions"] == 0).all()
    assert (out["pb/obs"] >= 1.0).all() and out["pa/rewards"].tolist() == [1.0] * 6

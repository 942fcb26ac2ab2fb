"""One batch type on the core path: SampleBatch, MultiAgentBatch and a single-agent runner's plain
dict of [T, C] columns answer the same questions (step counts, the per-module view, the joins),
and an Algorithm reaches its learners through one container whatever the run."""
import numpy as np
import pytest

from rlx.core.sample_batch import (DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, as_multi_agent, concat_time,
                                   join_side_by_side, join_time_major, map_modules)


def _columns(T, C, seed=0, valid=None):
    rng = np.random.default_rng(seed)
    out = {"obs": rng.normal(size=(T, C, 3)).astype(np.float32), "actions": rng.integers(0, 2, size=(T, C)),
           "rewards": rng.normal(size=(T, C)).astype(np.float32)}
    if valid is not None:
        out["valid"] = np.asarray(valid, dtype=bool)
    return out


def test_counts_of_both_types_agree_for_the_same_columns():
    from rlx.env.env_runner_group import num_sampled_steps

    full = _columns(4, 3)
    ragged = _columns(4, 2, valid=[[True, True], [True, False], [True, False], [False, False]])
    for columns, steps in ((full, 12), (ragged, 4)):
        sample_batch = SampleBatch(columns)
        assert sample_batch.env_steps() == sample_batch.agent_steps() == steps
        assert len(sample_batch) == 4  # rows of the time-major batch: T, not T * C
        for view in (as_multi_agent(columns), sample_batch.as_multi_agent(), as_multi_agent(sample_batch)):
            assert view.env_steps() == view.agent_steps() == steps
        assert MultiAgentBatch({"p0": columns}, steps).agent_steps() == steps
        assert num_sampled_steps(columns) == num_sampled_steps(sample_batch) == steps
        assert num_sampled_steps(columns, "agent_steps") == steps
    # Several agents per env step: agent steps count every agent's action.
    two = MultiAgentBatch({"a": full, "b": ragged}, env_steps=12)
    assert (two.env_steps(), two.agent_steps()) == (12, 16)
    assert num_sampled_steps(two) == 12 and num_sampled_steps(two, "agent_steps") == 16


def test_as_multi_agent_round_trips_without_copying():
    columns = _columns(2, 2)
    batch = SampleBatch(columns)
    ma = batch.as_multi_agent()
    assert list(ma.policy_batches) == [DEFAULT_POLICY_ID] and ma[DEFAULT_POLICY_ID] is batch
    assert batch.as_multi_agent("p7").policy_batches["p7"] is batch
    assert ma.as_multi_agent() is ma and as_multi_agent(ma) is ma
    plain = as_multi_agent(columns, "learner_0")
    assert plain["learner_0"] is columns and plain.env_steps() == 4


def test_one_join_for_every_batch_type():
    a, b = _columns(3, 2, seed=1), _columns(2, 2, seed=2)
    joined = concat_time([a, b])
    assert type(joined) is dict and joined["rewards"].shape == (5, 2)
    np.testing.assert_array_equal(joined["obs"], join_time_major([a, b], axis=0)["obs"])
    as_sample_batches = concat_time([SampleBatch(a), SampleBatch(b)])
    assert isinstance(as_sample_batches, SampleBatch) and as_sample_batches.env_steps() == 10
    per_module = concat_time([as_multi_agent(a), as_multi_agent(b)])
    assert isinstance(per_module, MultiAgentBatch) and per_module.env_steps() == 10
    np.testing.assert_array_equal(per_module[DEFAULT_POLICY_ID]["obs"], joined["obs"])
    # Side by side: the shorter runner's columns are padded with rows marked invalid.
    wide = join_side_by_side([a, b])
    assert wide["rewards"].shape == (3, 4) and SampleBatch(wide).env_steps() == 10
    assert wide["valid"][:, 2:].sum() == 4 and not wide["valid"][2, 2:].any()
    wide_ma = join_side_by_side([as_multi_agent(a), as_multi_agent(b)])
    assert wide_ma.env_steps() == SampleBatch(wide).env_steps()
    np.testing.assert_array_equal(wide_ma[DEFAULT_POLICY_ID]["valid"], wide["valid"])


def test_map_modules_keeps_the_step_counts():
    columns = _columns(2, 3)
    doubled = map_modules(columns, lambda c: {**c, "rewards": c["rewards"] * 2})
    assert type(doubled) is dict and np.allclose(doubled["rewards"], columns["rewards"] * 2)
    ma = MultiAgentBatch({"a": columns, "b": _columns(1, 1)}, env_steps=6, agent_steps=7)
    mapped = map_modules(ma, lambda c: {k: v[:1] for k, v in c.items()})
    assert isinstance(mapped, MultiAgentBatch) and (mapped.env_steps(), mapped.agent_steps()) == (6, 7)
    assert mapped["a"]["rewards"].shape == (1, 3)


def test_training_data_joins_batches_of_either_type():
    from rlx.core.learner.training_data import TrainingData

    a, b = SampleBatch({"x": np.arange(3.0)}), SampleBatch({"x": np.arange(2.0)})
    joined = TrainingData(batches=[a, b]).as_batch("test")
    assert isinstance(joined, SampleBatch) and joined["x"].tolist() == [0, 1, 2, 0, 1]
    ma = TrainingData(batches=[a.as_multi_agent("m"), b.as_multi_agent("m")]).as_batch("test")
    assert isinstance(ma, MultiAgentBatch) and ma["m"]["x"].tolist() == [0, 1, 2, 0, 1] and ma.env_steps() == 5


def test_single_agent_run_trains_through_the_container_and_reports_as_before(monkeypatch):
    from rlx.algorithms.ppo import PPOConfig
    from rlx.core.learner.container import LearnerContainer

    updates = []
    original = LearnerContainer.run_update

    def recording(self, batch, timestep):
        updates.append(list(batch.policy_batches))
        return original(self, batch, timestep)

    monkeypatch.setattr(LearnerContainer, "run_update", recording)
    config = (PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2,
                                                                 rollout_fragment_length=64)
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        assert not isinstance(algo.learner, LearnerContainer)  # users keep the bare Learner
        assert algo.learners.keys() == [DEFAULT_POLICY_ID] and algo.learners.by_module()[DEFAULT_POLICY_ID] is algo.learner
        assert algo.learner_by_module() == {DEFAULT_POLICY_ID: algo.learner}
        assert algo.get_module() is algo.learners.get_module(DEFAULT_POLICY_ID)
        result = None
        while result is None or not result["env_runners"]["num_episodes_lifetime"]:
            result = algo.train()
        assert updates and all(ids == [DEFAULT_POLICY_ID] for ids in updates)
        assert set(result["learners"]) == {DEFAULT_POLICY_ID}
        assert set(result["info"]["learner"]) == {DEFAULT_POLICY_ID}
        assert set(result["policy_reward_mean"]) == {DEFAULT_POLICY_ID}
        assert not [k for k in result["hist_stats"] if k.startswith("policy_")]
        assert result["num_agent_steps_sampled_lifetime"] == result["num_env_steps_sampled_lifetime"]
        assert result["num_agent_steps_trained_lifetime"] == result["num_env_steps_trained_lifetime"]
        # learn_on_batch still reports the one module's metrics, module_results the per-module form.
        batch = algo.env_runner_group.sample(num_timesteps=64)
        metrics = algo.learn_on_batch(batch, timestep=0)
        assert DEFAULT_POLICY_ID not in metrics and metrics
        assert algo.module_results(metrics) == {DEFAULT_POLICY_ID: metrics}
    finally:
        algo.stop()


def test_counters_take_any_batch_type():
    from rlx.algorithms.ppo import PPOConfig

    algo = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=1).build()
    try:
        before = dict(algo._counters)
        ragged = _columns(3, 2, valid=[[True, True], [True, False], [False, False]])
        assert algo.count_sampled(ragged) == 3
        algo.count_trained(MultiAgentBatch({DEFAULT_POLICY_ID: ragged}, 3), 3)
        assert algo._counters["num_env_steps_sampled_lifetime"] - before["num_env_steps_sampled_lifetime"] == 3
        assert algo._counters["num_agent_steps_trained_lifetime"] - before["num_agent_steps_trained_lifetime"] == 3
    finally:
        algo.stop()


def test_learn_on_batch_takes_a_dict_of_module_batches():
    import gymnasium as gym

    from rlx.algorithms.ppo import PPOConfig
    from rlx.env.multi_agent_env import make_multi_agent

    env_cls = make_multi_agent(lambda cfg: gym.make("CartPole-v1"))
    config = (PPOConfig().environment(env_cls, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
              .env_runners(rollout_fragment_length=32).training(train_batch_size=64, minibatch_size=32, num_epochs=1))
    algo = config.build()
    try:
        assert algo.learners is algo.learner  # a multi-agent run's learner is its container
        batch = algo.env_runner.sample()
        metrics = algo.learn_on_batch({"p1": batch["p1"]}, timestep=0)
        assert set(metrics) == {"p1"}
        assert algo.module_results(metrics) == metrics
    finally:
        algo.stop()


@pytest.mark.parametrize("sample_batch", [False, True])
def test_compression_and_copies_keep_the_batch_type(sample_batch):
    from rlx.env.batch_compression import compress_observations, decompress_observations
    from rlx.env.fake_sampler import copy_batch

    columns = _columns(2, 2)
    batch = SampleBatch(columns) if sample_batch else columns
    for original in (batch, as_multi_agent(batch)):
        restored = decompress_observations(compress_observations(original))
        copied = copy_batch(original)
        for out in (restored, copied):
            assert type(out) is (MultiAgentBatch if original is not batch else dict)
            view = as_multi_agent(out)
            assert view.env_steps() == 4
            np.testing.assert_array_equal(view[DEFAULT_POLICY_ID]["obs"], columns["obs"])
        assert as_multi_agent(copied)[DEFAULT_POLICY_ID]["obs"] is not columns["obs"]


def test_single_agent_replay_trains_through_the_container(monkeypatch):
    from rlx.algorithms.dqn import DQNConfig
    from rlx.core.learner.container import LearnerContainer

    updates = []
    original = LearnerContainer.run_update

    def recording(self, batch, timestep):
        updates.append({mid: len(part["batch_indexes"]) for mid, part in batch.items()})
        return original(self, batch, timestep)

    monkeypatch.setattr(LearnerContainer, "run_update", recording)
    config = (DQNConfig().environment("CartPole-v1").env_runners(rollout_fragment_length=4)
              .training(num_steps_sampled_before_learning_starts=32, train_batch_size=16)
              .reporting(min_sample_timesteps_per_iteration=64).debugging(seed=0))
    algo = config.build()
    try:
        result = algo.train()
        assert updates and all(u == {DEFAULT_POLICY_ID: 16} for u in updates)
        assert set(result["learners"]) == {DEFAULT_POLICY_ID}
        assert result["learners"][DEFAULT_POLICY_ID]["num_updates_this_step"] >= 1
        assert result["num_agent_steps_trained_lifetime"] == result["num_env_steps_trained_lifetime"] == 16 * len(updates)
        assert algo.module_replay_buffers() == {DEFAULT_POLICY_ID: algo.local_replay_buffer}
    finally:
        algo.stop()

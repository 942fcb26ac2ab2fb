"""Old-API-stack code (seed 000, "custom training workflows") samples with
`algo.workers.local_worker().sample()` and trains with `policy.learn_on_batch(batch)`: it gets
RLlib's flat SampleBatch (a MultiAgentBatch of them for several policies), while the
Algorithm's own runner keeps its time-major array batch."""
import numpy as np

from rlx.algorithms.ppo import PPOConfig
from rlx.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples

SMALL = dict(train_batch_size=32, minibatch_size=16, num_epochs=1, model={"fcnet_hiddens": [8]})


def _weights_changed(before, after):
    return any(not np.allclose(before[k], after[k]) for k in before)


def test_local_worker_sample_is_a_flat_sample_batch_that_learn_on_batch_trains_on():
    algo = (PPOConfig().environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8)
            .training(**SMALL).debugging(seed=0).build())
    try:
        worker = algo.workers.local_worker()
        batch = worker.sample()
        assert isinstance(batch, SampleBatch)
        assert batch.count == len(batch) == 16 and batch.env_steps() == 16
        for column in (SampleBatch.OBS, SampleBatch.NEXT_OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS,
                       SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS, SampleBatch.ACTION_LOGP,
                       SampleBatch.ACTION_DIST_INPUTS, SampleBatch.EPS_ID, SampleBatch.T, "action_prob"):
            assert len(batch[column]) == 16, column
        assert batch[SampleBatch.OBS].shape == (16, 4) and batch[SampleBatch.REWARDS].shape == (16,)
        np.testing.assert_allclose(batch["action_prob"], np.exp(batch[SampleBatch.ACTION_LOGP]), rtol=1e-6)
        # Each episode's rows are together, its steps counted by t.
        for eps_id in np.unique(batch[SampleBatch.EPS_ID]):
            steps = batch[SampleBatch.T][batch[SampleBatch.EPS_ID] == eps_id]
            np.testing.assert_array_equal(steps, np.arange(steps[0], steps[0] + len(steps)))

        # The next call continues the episodes under way: same eps_id, t counting on.
        following = worker.sample()
        last_id, last_t = batch[SampleBatch.EPS_ID][7], batch[SampleBatch.T][7]
        if not (batch[SampleBatch.TERMINATEDS][7] or batch[SampleBatch.TRUNCATEDS][7]):
            assert following[SampleBatch.EPS_ID][0] == last_id and following[SampleBatch.T][0] == last_t + 1

        joined = concat_samples([batch, following])
        assert joined.count == 32 and batch.concat(following).count == 32
        policy = worker.get_policy()
        before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
        stats = policy.learn_on_batch(joined)
        assert np.isfinite(stats["learner_stats"]["total_loss"]) and stats["num_agent_steps_trained"] == 32
        assert _weights_changed(before, algo.get_weights()["default_policy"])

        # The old foreach name hands out the same view; the Algorithm's runner keeps its array batch.
        assert all(isinstance(b, SampleBatch) for b in algo.workers.foreach_worker(lambda w: w.sample()))
        assert isinstance(algo.env_runner.sample(), dict) and not isinstance(algo.env_runner.sample(), SampleBatch)
    finally:
        algo.stop()


def test_multi_agent_local_worker_sample_is_a_multi_agent_batch_of_sample_batches():
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    algo = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *args, **kwargs: f"p{aid}")
            .env_runners(rollout_fragment_length=8).training(**SMALL).debugging(seed=0).build())
    try:
        worker = algo.workers.local_worker()
        batch = worker.sample()
        assert isinstance(batch, MultiAgentBatch) and set(batch.policy_batches) == {"p0", "p1"}
        assert batch.count == 8  # env steps; each agent acted until its episode ended (at most 8 times)
        assert all(isinstance(b, SampleBatch) and 0 < b.count <= 8 for b in batch.policy_batches.values())
        assert batch.agent_steps() == sum(b.count for b in batch.policy_batches.values())
        following = worker.sample()
        both = concat_samples([batch, following])
        assert isinstance(both, MultiAgentBatch) and both.count == 16
        assert both.policy_batches["p0"].count == batch.policy_batches["p0"].count + following.policy_batches["p0"].count
        before = algo.get_weights()
        fetches = worker.learn_on_batch(both)  # RolloutWorker.learn_on_batch: every policy in the batch
        assert set(fetches) == {"p0", "p1"}
        after = algo.get_weights()
        assert _weights_changed(before["p0"], after["p0"]) and _weights_changed(before["p1"], after["p1"])
    finally:
        algo.stop()

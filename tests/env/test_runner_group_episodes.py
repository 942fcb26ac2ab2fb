"""A custom training loop samples all runners of a group as RLlib 2.60's users do:
`env_runner_group.sample()` / `synchronous_parallel_sample(...)` return the joined episodes
(SampleBatches on the old API stack), and the runners' lifetime counters aggregate under
RLlib's keys."""
from rlx.algorithms.ppo import PPOConfig
from rlx.env.env_runner_group import EnvRunnerGroup
from rlx.env.single_agent_episode import SingleAgentEpisode
from rlx.execution.rollout_ops import synchronous_parallel_sample
from rlx.policy.sample_batch import SampleBatch
from rlx.utils.metrics import (NUM_AGENT_STEPS_SAMPLED_LIFETIME, NUM_ENV_STEPS_SAMPLED_LIFETIME, NUM_EPISODES_LIFETIME,
                               NUM_MODULE_STEPS_SAMPLED_LIFETIME, MetricsLogger)


def _config():
    return (PPOConfig().environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
            .training(train_batch_size=40, minibatch_size=20, num_epochs=1, model={"fcnet_hiddens": [8]}))


def test_group_sample_and_synchronous_parallel_sample_return_the_joined_episodes():
    group = EnvRunnerGroup(config=_config())
    try:
        episodes = group.sample()
        assert episodes and all(isinstance(e, SingleAgentEpisode) for e in episodes)
        assert sum(e.env_steps() for e in episodes) == 20  # one fragment: 10 steps x 2 sub-envs
        more = group.sample(num_timesteps=50)
        assert sum(e.env_steps() for e in more) >= 50
        joined = synchronous_parallel_sample(worker_set=group, max_env_steps=30, _uses_new_env_runners=True)
        assert all(isinstance(e, SingleAgentEpisode) for e in joined) and sum(len(e) for e in joined) >= 30
        per_runner = synchronous_parallel_sample(worker_set=group, _uses_new_env_runners=True, concat=False)
        assert len(per_runner) == 1 and isinstance(per_runner[0], list)
        episodes, metrics = synchronous_parallel_sample(worker_set=group, _uses_new_env_runners=True,
                                                        _return_metrics=True)
        assert len(metrics) == 1 and episodes
    finally:
        group.stop()


def test_old_api_synchronous_parallel_sample_concatenates_sample_batches():
    algo = _config().build()
    try:
        batch = synchronous_parallel_sample(worker_set=algo.env_runner_group, max_env_steps=40)
        assert isinstance(batch, SampleBatch) and batch.count == 40
        assert "eps_id" in batch and batch[SampleBatch.REWARDS].shape == (40,)
    finally:
        algo.stop()


def test_runner_lifetime_counters_aggregate_to_rllibs_numbers():
    group = EnvRunnerGroup(config=_config())
    root = MetricsLogger(root=True)
    try:
        runner = group.local_env_runner
        steps = 0
        episodes_done = 0
        for _ in range(3):
            sampled = runner.sample(num_timesteps=30, random_actions=True)
            steps += sum(len(e) for e in sampled)
            episodes_done += sum(e.is_done for e in sampled)
            metrics = runner.get_metrics()
            # A runner's get_metrics() holds what it sampled since its last call (RLlib's lifetime_sum).
            assert metrics[NUM_ENV_STEPS_SAMPLED_LIFETIME].peek() == sum(len(e) for e in sampled)
            root.aggregate([metrics], key="env_runners")
        assert root.peek(("env_runners", NUM_ENV_STEPS_SAMPLED_LIFETIME)) == steps
        assert root.peek(("env_runners", NUM_AGENT_STEPS_SAMPLED_LIFETIME, "default_agent")) == steps
        assert root.peek(("env_runners", NUM_MODULE_STEPS_SAMPLED_LIFETIME, "default_policy")) == steps
        assert root.peek(("env_runners", NUM_EPISODES_LIFETIME)) == episodes_done
        root.reduce()  # the root keeps lifetime sums over its reduces
        assert root.peek(("env_runners", NUM_ENV_STEPS_SAMPLED_LIFETIME)) == steps
    finally:
        group.stop()


def test_group_of_remote_runners_joins_their_episodes():
    config = _config().env_runners(num_env_runners=2, env_runner_backend="thread", num_envs_per_env_runner=1)
    group = EnvRunnerGroup(config=config)
    try:
        episodes = group.sample()
        assert all(isinstance(e, SingleAgentEpisode) for e in episodes)
        assert sum(len(e) for e in episodes) == 20  # one fragment of 10 steps from each of the 2 runners
        assert {e.worker_index for e in episodes} == {1, 2}
    finally:
        group.stop()

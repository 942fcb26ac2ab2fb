"""EnvRunners built from a config alone, as RLlib 2.60's users build them, and what their
`sample()` returns: lists of episodes (RLlib's new API stack), while the runners rlx's own
algorithms sample keep returning the array batch."""
from __future__ import annotations

import numpy as np
import pytest


def _cartpole_config(num_envs: int = 2):
    from rlx.algorithms.ppo import PPOConfig

    return PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=num_envs)


def test_single_agent_env_runner_lives_at_rllibs_path_and_builds_from_a_config():
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner
    from rlx.env.single_agent_episode import SingleAgentEpisode

    runner = SingleAgentEnvRunner(config=_cartpole_config())
    try:
        episodes = runner.sample(num_timesteps=10, random_actions=True)
        assert isinstance(episodes, list) and all(isinstance(e, SingleAgentEpisode) for e in episodes)
        # num_timesteps is the minimum; the runner's 2 sub-envs step together.
        assert 10 <= sum(len(e) for e in episodes) < 12
        assert runner.returns_episodes
    finally:
        runner.stop()


def test_sample_with_num_timesteps_continues_ongoing_episodes_as_chunks():
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner

    runner = SingleAgentEnvRunner(config=_cartpole_config(num_envs=1))
    try:
        first = runner.sample(num_timesteps=5)
        assert len(first) == 1 and len(first[0]) == 5 and not first[0].is_done
        second = runner.sample(num_timesteps=5)
        chunk = second[0]
        # The same episode goes on: same id, starting where the first chunk ended, at its last observation.
        assert chunk.id_ == first[0].id_ and chunk.t_started == 5
        np.testing.assert_array_equal(chunk.get_observations(0), first[0].get_observations(-1))
        # The step before the chunk is in its lookback buffer (episode_lookback_horizon=1).
        assert chunk.get_actions(-1, neg_index_as_lookback=True) == first[0].get_actions(-1)
        # A random-ish CartPole policy can fall within 10 steps: the chunk is 5 steps unless its episode ended.
        assert len(chunk) == 5 or (len(chunk) < 5 and chunk.is_terminated)
        first[0].concat_episode(chunk)
        assert len(first[0]) == 5 + len(chunk) and first[0].get_return() == float(5 + len(chunk))
    finally:
        runner.stop()


def test_sample_num_episodes_returns_only_complete_episodes_with_the_modules_outputs():
    from rlx.core.columns import Columns
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner

    runner = SingleAgentEnvRunner(config=_cartpole_config(num_envs=2))
    try:
        runner.sample(num_timesteps=7)  # an ongoing episode is dropped: num_episodes starts afresh
        episodes = runner.sample(num_episodes=3, explore=False)
        assert 3 <= len(episodes) <= 4
        for episode in episodes:
            assert episode.is_done and episode.t_started == 0
            assert len(episode.get_observations()) == len(episode) + 1
            logp = episode.get_extra_model_outputs(Columns.ACTION_LOGP)
            dist = episode.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS)
            assert len(logp) == len(dist) == len(episode) and np.asarray(dist[0]).shape == (2,)
            assert episode.get_return() == pytest.approx(sum(episode.get_rewards()))
        metrics = runner.get_metrics()
        assert metrics["num_episodes"].peek() >= 3
    finally:
        runner.stop()


def test_random_actions_and_force_reset():
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner

    runner = SingleAgentEnvRunner(config=_cartpole_config(num_envs=1).debugging(seed=3))
    try:
        first = runner.sample(num_timesteps=20, random_actions=True)
        actions = np.concatenate([np.asarray(e.get_actions()) for e in first])
        assert set(actions.tolist()) == {0, 1}
        ongoing = [e for e in first if not e.is_done]
        again = runner.sample(num_timesteps=3, force_reset=True)
        # force_reset starts new episodes: no chunk continues one returned before.
        assert {e.id_ for e in again}.isdisjoint({e.id_ for e in ongoing})
        assert all(e.t_started == 0 for e in again)
    finally:
        runner.stop()


def test_sample_refuses_both_num_timesteps_and_num_episodes():
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner

    runner = SingleAgentEnvRunner(config=_cartpole_config(num_envs=1))
    try:
        with pytest.raises(ValueError, match="at most one"):
            runner.sample(num_timesteps=5, num_episodes=1)
    finally:
        runner.stop()


def test_multi_agent_env_runner_builds_from_a_config_and_returns_multi_agent_episodes():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.env.multi_agent_env_runner import MultiAgentEnvRunner
    from rlx.env.multi_agent_episode import MultiAgentEpisode
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .env_runners(num_envs_per_env_runner=1)
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}"))
    runner = MultiAgentEnvRunner(config=config)
    try:
        episodes = runner.sample(num_timesteps=6)
        assert len(episodes) == 1 and isinstance(episodes[0], MultiAgentEpisode)
        episode = episodes[0]
        assert len(episode) == 6 and episode.env_t_started == 0
        assert sorted(episode.agent_ids) == [0, 1] and episode.module_for(1) == "p1"
        assert len(episode.agent_episodes[0]) == 6 and episode.get_return() == 12.0
        assert len(episode.get_actions(agent_ids=0)[0]) == 6
        logp = episode.agent_episodes[1].get_extra_model_outputs("action_logp")
        assert len(logp) == 6 and all(v <= 0.0 for v in logp)
        follow = runner.sample(num_timesteps=4)[0]
        assert follow.id_ == episode.id_ and follow.env_t_started == 6 and len(follow) == 4
        done = runner.sample(num_episodes=2)
        assert len(done) >= 2 and all(e.is_done for e in done)
        # The logged episode lengths are whole episodes, not the chunks sample() returned.
        lengths = runner.get_metrics()["hist_stats"]["episode_lengths"].peek()
        assert all(n == len(e) for n, e in zip(lengths, done))
    finally:
        runner.stop()


def test_env_runner_group_builds_from_a_config_and_samples_episodes_on_its_runners():
    from rlx.env.env_runner_group import EnvRunnerGroup

    group = EnvRunnerGroup(config=_cartpole_config(num_envs=1))
    try:
        results = group.foreach_env_runner(lambda runner: (runner.sample(num_episodes=2), runner.get_metrics()))
        episodes, metrics = results[0]
        assert len(episodes) == 2 and all(e.is_done for e in episodes)
        assert metrics["num_episodes"].peek() == 2
    finally:
        group.stop()


def test_the_algorithms_runners_keep_returning_the_array_batch():
    from rlx.core.columns import Columns

    algo = _cartpole_config(num_envs=2).training(train_batch_size=64, minibatch_size=32, num_epochs=1).build()
    try:
        runner = algo.env_runner
        assert not runner.returns_episodes
        batch = runner.sample(num_timesteps=8)
        assert batch[Columns.OBS].shape == (4, 2, 4)  # [T, B, obs]
        # Old-API code reads the same batch through the worker view, and learns on it.
        sample = algo.workers.local_worker().sample()
        assert algo.get_policy().learn_on_batch(sample)["learner_stats"]
        # A caller may switch a runner to episodes, and back.
        runner.returns_episodes = True
        assert all(len(e) > 0 for e in runner.sample(num_timesteps=4))
        runner.returns_episodes = False
        assert isinstance(runner.sample(num_timesteps=4), dict)
    finally:
        algo.stop()


def test_a_custom_algorithms_training_step_samples_episodes():
    from rlx.algorithms.ppo import PPO, PPOConfig
    from rlx.env.single_agent_episode import SingleAgentEpisode

    seen = []

    class MyAlgo(PPO):  # (PPO's Learner; the training loop is the user's)
        @classmethod
        def get_default_config(cls):
            return PPOConfig(algo_class=cls)

        def training_step(self):
            sampled = self.env_runner_group.foreach_env_runner(lambda r: r.sample(num_episodes=1))
            seen.extend(e for episodes in sampled for e in episodes)
            return {}

    config = MyAlgo.get_default_config().environment("CartPole-v1").env_runners(num_envs_per_env_runner=1)
    algo = config.build()
    try:
        algo.training_step()
        assert seen and isinstance(seen[0], SingleAgentEpisode) and seen[0].is_done
    finally:
        algo.stop()


def test_on_episode_end_gets_the_chunks_sample_returned_before():
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner

    ended = []

    def on_episode_end(episode, prev_episode_chunks, **kwargs):
        ended.append((episode, list(prev_episode_chunks)))

    config = _cartpole_config(num_envs=1).debugging(seed=0).callbacks(on_episode_end=on_episode_end)
    runner = SingleAgentEnvRunner(config=config)
    try:
        returned = []
        while not ended:
            returned.extend(runner.sample(num_timesteps=4))
        last, earlier = ended[0]
        chunks = [e for e in returned if e.id_ == last.id_]
        assert earlier == [c for c in chunks if c is not last] and earlier
        assert sum(len(c) for c in earlier) + len(last) == last.t
    finally:
        runner.stop()


def test_a_subclass_extending_an_rlx_training_step_keeps_training():
    from rlx.algorithms.ppo import PPO, PPOConfig

    calls = []

    class CountingPPO(PPO):  # extends PPO's loop: PPO's own sampling must still get its batch
        @classmethod
        def get_default_config(cls):
            return PPOConfig(algo_class=cls)

        def training_step(self):
            calls.append(1)
            return super().training_step()

    config = (CountingPPO.get_default_config().environment("CartPole-v1")
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1))
    algo = config.build()
    try:
        result = algo.train()
        assert calls and result["num_env_steps_sampled_lifetime"] >= 128
        assert algo.env_runner.returns_episodes is False
    finally:
        algo.stop()

"""RLlib 2.60's new-stack episode replay buffers, used as RLlib's DQN/SAC and custom loops use them."""
import numpy as np
import pytest


def _episode(length, *, start=0.0, terminated=True, id_=None):
    """A SingleAgentEpisode whose observation at step t is start + t and whose reward is t + 1."""
    from rlx.env.single_agent_episode import SingleAgentEpisode

    eps = SingleAgentEpisode(id_)
    eps.add_env_reset(np.array([start], np.float32), {"t": 0})
    for t in range(length):
        eps.add_env_step(np.array([start + t + 1], np.float32), t % 2, float(t + 1), {"t": t + 1},
                         terminated=terminated and t == length - 1,
                         extra_model_outputs={"action_logp": -0.5 * t})
    return eps


def test_episode_buffer_stores_episodes_and_counts_timesteps():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer(capacity=100)
    buffer.add([_episode(5), _episode(7)])
    assert len(buffer) == buffer.get_num_timesteps() == 12
    assert buffer.get_num_episodes() == 2
    assert buffer.get_added_timesteps() == 12
    stored = buffer.episodes
    assert [len(e) for e in stored] == [5, 7]
    assert stored[0].get_rewards() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_chunks_of_an_ongoing_episode_are_concatenated_by_id():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer(capacity=100)
    first = _episode(3, terminated=False, id_="ep")
    buffer.add(first)
    second = first.cut()
    for t in range(3, 6):
        second.add_env_step(np.array([t + 1], np.float32), 0, float(t + 1), terminated=t == 5)
    buffer.add(second)
    assert buffer.get_num_episodes() == 1 and len(buffer) == 6
    (stored,) = buffer.episodes
    assert [float(o[0]) for o in stored.get_observations()] == [0, 1, 2, 3, 4, 5, 6]
    assert stored.is_terminated


def test_capacity_evicts_the_oldest_episodes_first():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer(capacity=10)
    buffer.add([_episode(4, start=100), _episode(4, start=200), _episode(4, start=300)])
    assert buffer.get_num_episodes() == 2 and len(buffer) == 8
    assert buffer.get_num_episodes_evicted() == 1
    firsts = {float(e.get_observations(0)[0]) for e in buffer.sample(num_items=200, n_step=1, sample_episodes=True)}
    assert firsts <= set(range(200, 204)) | set(range(300, 304)) and not any(f < 200 for f in firsts)


def test_n_step_transitions_sum_discounted_rewards():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer(capacity=100)
    buffer.add(_episode(10))
    samples = buffer.sample(num_items=64, n_step=3, gamma=0.5, sample_episodes=True)
    assert len(samples) == 64
    for s in samples:
        t = int(s.get_observations(0)[0])
        n = s.get_extra_model_outputs("n_step", 0)
        assert n == min(3, 10 - t)
        assert int(s.get_observations(-1)[0]) == t + n
        assert s.get_rewards(0) == pytest.approx(sum(0.5 ** k * (t + k + 1) for k in range(n)))
        assert s.get_extra_model_outputs("weights", 0) == 1.0
        assert s.get_actions(0) == t % 2
        assert s.is_terminated == (t + n == 10)


def test_n_step_range_is_drawn_per_transition_and_extras_are_included():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer()
    buffer.add(_episode(50))
    samples = buffer.sample(batch_size_B=200, n_step=(1, 4), sample_episodes=True, include_infos=True,
                            include_extra_model_outputs=True)
    ns = {s.get_extra_model_outputs("n_step", 0) for s in samples}
    assert ns == {1, 2, 3}
    for s in samples:
        t = int(s.get_observations(0)[0])
        assert s.get_extra_model_outputs("action_logp", 0) == pytest.approx(-0.5 * t)
        assert s.get_infos(-1) == {"t": t + s.get_extra_model_outputs("n_step", 0)}


def test_default_sample_returns_batch_by_time_rows():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer(batch_size_B=4, batch_length_T=8)
    buffer.add([_episode(5, start=0), _episode(3, start=100)])
    batch = buffer.sample()
    assert batch["obs"].shape == (4, 8, 1)
    assert batch["actions"].shape == batch["rewards"].shape == batch["is_first"].shape == (4, 8)
    # Every row starts an episode chunk and each episode's last step is flagged terminated.
    assert batch["is_first"][:, 0].all()
    obs = batch["obs"][..., 0]
    for b in range(4):
        for t in range(7):
            if not batch["is_last"][b, t]:
                assert obs[b, t + 1] == obs[b, t] + 1  # consecutive steps of one episode
        for t in np.flatnonzero(batch["is_terminated"][b]):
            assert obs[b, t] in (5.0, 103.0)


def test_sequence_sampling_with_lookback():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer()
    buffer.add(_episode(20))
    seqs = buffer.sample(batch_size_B=16, batch_length_T=4, n_step=1, sample_episodes=True, lookback=1)
    assert sum(len(s) for s in seqs) >= 16
    for s in seqs:
        assert 1 <= len(s) <= 4
        obs = [float(o[0]) for o in s.get_observations()]
        assert obs == [obs[0] + i for i in range(len(obs))]


def test_sample_rejects_conflicting_arguments_clearly():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer()
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(num_items=2, n_step=1, sample_episodes=True)
    buffer.add(_episode(5))
    with pytest.raises(ValueError, match="num_items or batch_size_B"):
        buffer.sample(num_items=2, batch_size_B=2)
    with pytest.raises(ValueError, match="n_step=1"):
        buffer.sample(batch_length_T=4, n_step=3, sample_episodes=True)


def test_state_round_trip_restores_contents():
    from rlx.utils.replay_buffers import EpisodeReplayBuffer

    buffer = EpisodeReplayBuffer(capacity=12)
    buffer.add([_episode(5), _episode(5, start=10), _episode(5, start=20)])
    restored = EpisodeReplayBuffer(capacity=12)
    restored.set_state(buffer.get_state())
    assert restored.get_num_episodes() == buffer.get_num_episodes() == 2
    assert len(restored) == 10
    assert [e.get_rewards() for e in restored.episodes] == [e.get_rewards() for e in buffer.episodes]
    assert len(restored.sample(num_items=8, n_step=2, sample_episodes=True)) == 8


def test_prioritized_buffer_samples_by_priority_with_weights():
    from rlx.utils.replay_buffers.prioritized_episode_buffer import PrioritizedEpisodeReplayBuffer

    buffer = PrioritizedEpisodeReplayBuffer(capacity=1000, alpha=1.0)
    buffer.add(_episode(10))
    first = buffer.sample(num_items=10, n_step=1, beta=0.4)
    assert all(s.get_extra_model_outputs("weights", 0) == pytest.approx(1.0) for s in first)
    # Make the first sampled step a hundred times as likely as any other.
    target = int(first[0].get_observations(0)[0])
    buffer.update_priorities([100.0 if int(s.get_observations(0)[0]) == target else 1.0 for s in first])
    samples = buffer.sample(num_items=500, n_step=1, beta=1.0)
    share = np.mean([int(s.get_observations(0)[0]) == target for s in samples])
    assert share > 0.6
    weights = {int(s.get_observations(0)[0]): s.get_extra_model_outputs("weights", 0) for s in samples}
    assert weights[target] < min(w for t, w in weights.items() if t != target)


def test_prioritized_update_priorities_changes_sampling_deterministically():
    from rlx.utils.replay_buffers import PrioritizedEpisodeReplayBuffer

    buffer = PrioritizedEpisodeReplayBuffer(capacity=1000, alpha=1.0)
    buffer.add(_episode(4))
    sampled = buffer.sample(num_items=4, n_step=2, gamma=1.0)
    assert all(s.get_rewards(0) == pytest.approx(sum(range(int(s.get_observations(0)[0]) + 1,
                                                          int(s.get_observations(-1)[0]) + 1)))
               for s in sampled)
    # The steps of the 2nd-4th sampled transitions get a ~0 priority: they are not drawn again
    # (a step sampled twice takes the priority given last).
    buffer.update_priorities([1.0] + [1e-12] * 3)
    zeroed = {int(s.get_observations(0)[0]) for s in sampled[1:]}
    again = {int(s.get_observations(0)[0]) for s in buffer.sample(num_items=50, n_step=1)}
    assert again and not again & zeroed
    with pytest.raises(ValueError, match="one per"):
        buffer.update_priorities([1.0, 2.0])


def test_prioritized_buffer_evicts_and_keeps_sampling():
    from rlx.utils.replay_buffers import PrioritizedEpisodeReplayBuffer

    buffer = PrioritizedEpisodeReplayBuffer(capacity=20)
    for i in range(10):
        buffer.add(_episode(6, start=100 * i))
        samples = buffer.sample(num_items=8, n_step=3)
        buffer.update_priorities(np.abs(np.random.default_rng(i).normal(size=8)))
    assert buffer.get_num_timesteps() <= 26 and buffer.get_num_episodes_evicted() >= 6
    assert all(float(s.get_observations(0)[0]) >= 600 for s in samples)
    state = buffer.get_state()
    restored = PrioritizedEpisodeReplayBuffer(capacity=20)
    restored.set_state(state)
    assert len(restored.sample(num_items=5, n_step=1)) == 5


def test_multi_agent_buffer_samples_each_module():
    from rlx.env.multi_agent_episode import MultiAgentEpisode
    from rlx.utils.replay_buffers import MultiAgentEpisodeReplayBuffer

    episode = MultiAgentEpisode(record=True)
    episode.agent_to_module_map = {"a0": "p0", "a1": "p1"}
    episode.add_env_reset({"a0": np.array([0.0]), "a1": np.array([100.0])}, {})
    for t in range(6):
        done = t == 5
        episode.add_env_step({"a0": np.array([t + 1.0]), "a1": np.array([101.0 + t])}, {"a0": 0, "a1": 1},
                             {"a0": 1.0, "a1": 2.0}, {"__all__": done}, {"__all__": False}, {})
    episode.finish(True, False)
    buffer = MultiAgentEpisodeReplayBuffer(capacity=100)
    buffer.add([episode])
    assert sorted(buffer.get_module_ids()) == ["p0", "p1"]
    assert buffer.get_num_timesteps() == 6 and buffer.get_num_agent_timesteps() == 12
    assert buffer.get_num_timesteps("p1") == 6
    samples = buffer.sample(batch_size_B=10, n_step=2, gamma=1.0)
    assert len(samples) == 20
    for s in samples:
        assert s.multi_agent_episode_id == episode.id_
        assert s.module_id == {"a0": "p0", "a1": "p1"}[s.agent_id]
        n = s.get_extra_model_outputs("n_step", 0)
        assert s.get_rewards(0) == pytest.approx(n * (1.0 if s.agent_id == "a0" else 2.0))
    only = buffer.sample(batch_size_B=3, modules_to_sample=["p1"])
    assert {s.module_id for s in only} == {"p1"} and len(only) == 3
    with pytest.raises(ValueError, match="replay_mode"):
        buffer.sample(batch_size_B=3, replay_mode="synchronized")
    with pytest.raises(TypeError, match="MultiAgentEpisodes"):
        buffer.add(_episode(3))


def test_buffer_takes_the_episodes_an_env_runner_samples():
    """RLlib's new-stack DQN loop: runner.sample() -> buffer.add(episodes) -> n-step sample."""
    from rlx.algorithms.dqn import DQNConfig
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner
    from rlx.utils.replay_buffers import PrioritizedEpisodeReplayBuffer

    runner = SingleAgentEnvRunner(config=DQNConfig().environment("CartPole-v1"))
    buffer = PrioritizedEpisodeReplayBuffer(capacity=10_000)
    first = runner.sample(num_timesteps=60, random_actions=True)
    second = runner.sample(num_timesteps=60, random_actions=True)
    buffer.add(first)
    buffer.add(second)
    assert len(buffer) == sum(len(e) for e in first + second)
    # A chunk continuing an episode of the first sample extends it instead of adding a row.
    assert buffer.get_num_episodes() == len({e.id_ for e in first + second})
    transitions = buffer.sample(num_items=32, n_step=3, gamma=0.9)
    assert len(transitions) == 32
    assert all(1 <= t.get_extra_model_outputs("n_step", 0) <= 3 for t in transitions)
    runner.stop()


def test_multi_agent_buffer_takes_the_episodes_a_multi_agent_runner_samples():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.env.multi_agent_env_runner import MultiAgentEnvRunner
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
    from rlx.utils.replay_buffers import MultiAgentEpisodeReplayBuffer

    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, episode, **kw: f"p{aid}"))
    runner = MultiAgentEnvRunner(config=config)
    episodes = runner.sample(num_timesteps=50, random_actions=True)
    buffer = MultiAgentEpisodeReplayBuffer()
    buffer.add(episodes)
    assert sorted(buffer.get_module_ids()) == ["p0", "p1"]
    assert buffer.get_num_agent_timesteps() == sum(len(a) for e in episodes for a in e.agent_episodes.values())
    samples = buffer.sample(batch_size_B=5, n_step=2)
    assert sorted((s.agent_id, s.module_id) for s in samples) == [(0, "p0")] * 5 + [(1, "p1")] * 5
    runner.stop()


def test_multi_agent_prioritized_buffer_keeps_priorities_per_module():
    from rlx.env.multi_agent_episode import MultiAgentEpisode
    from rlx.utils.replay_buffers import MultiAgentPrioritizedEpisodeReplayBuffer

    episode = MultiAgentEpisode(record=True)
    episode.agent_to_module_map = {"a0": "p0", "a1": "p1"}
    episode.add_env_reset({"a0": np.array([0.0]), "a1": np.array([100.0])}, {})
    for t in range(4):
        episode.add_env_step({"a0": np.array([t + 1.0]), "a1": np.array([101.0 + t])}, {"a0": 0, "a1": 1},
                             {"a0": 1.0, "a1": 1.0}, {"__all__": t == 3}, {"__all__": False}, {})
    episode.finish(True, False)
    buffer = MultiAgentPrioritizedEpisodeReplayBuffer(capacity=100, alpha=1.0)
    buffer.add([episode])
    first = buffer.sample(batch_size_B=8, n_step=1, beta=0.5)
    p0 = [s for s in first if s.module_id == "p0"]
    assert len(p0) == 8 and all(s.get_extra_model_outputs("weights", 0) == pytest.approx(1.0) for s in first)
    # Only p0's first drawn step keeps its priority; p1 is unaffected.
    target = int(p0[0].get_observations(0)[0])
    buffer.update_priorities([1.0 if int(s.get_observations(0)[0]) == target else 1e-12 for s in p0], "p0")
    untouched = set(range(4)) - {int(s.get_observations(0)[0]) for s in p0}
    again = buffer.sample(batch_size_B=50, n_step=1)
    assert {int(s.get_observations(0)[0]) for s in again if s.module_id == "p0"} <= {target} | untouched
    assert len({int(s.get_observations(0)[0]) for s in again if s.module_id == "p1"}) > 1
    with pytest.raises(ValueError, match="one per"):
        buffer.update_priorities([1.0], "p1")
    restored = MultiAgentPrioritizedEpisodeReplayBuffer(capacity=100)
    restored.set_state(buffer.get_state())
    assert len(restored.sample(batch_size_B=2, modules_to_sample=["p1"])) == 2

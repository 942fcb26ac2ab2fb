"""Connectors: ConnectorV2 pieces and pipelines, and how EnvRunners and Learners run them."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from rlx.connectors.connector_v2 import ConnectorV2
from rlx.connectors.env_to_module import (
    AddObservationsFromEpisodesToBatch, BatchIndividualItems, EnvToModulePipeline, FlattenObservations,
    FrameStackingEnvToModule, MeanStdFilter, NumpyToTensor, PrevActionsPrevRewards,
    SingleAgentObservationPreprocessor)
from rlx.connectors.learner import ComputeReturnsToGo, GeneralAdvantageEstimation
from rlx.connectors.learner.batch_episodes import batch_episodes
from rlx.core.columns import Columns
from rlx.env.single_agent_episode import SingleAgentEpisode
from rlx.utils.errors import ConfigError


def _episode(observations, actions=(), rewards=(), obs_space=None, act_space=None):
    episode = SingleAgentEpisode(observation_space=obs_space, action_space=act_space)
    episode.add_env_reset(observations[0], {})
    for obs, act, rew in zip(observations[1:], actions, rewards):
        episode.add_env_step(obs, act, rew, {})
    return episode


class _Scale(ConnectorV2):
    """Multiplies the latest observation by `factor` (a test piece)."""

    def __init__(self, *args, factor=2.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.factor = factor

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for episode in self.single_agent_episode_iterator(episodes):
            episode.set_observations(at_indices=-1, new_data=episode.get_observations(-1) * self.factor)
        return batch


# ---------------------------------------------------------------------- pieces and pipelines


def test_pipeline_chains_output_spaces_and_edits_keep_them_consistent():
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(-1, 1, (2,), np.float32)})
    pipeline = EnvToModulePipeline(space, gym.spaces.Discrete(2), connectors=[FlattenObservations()])
    assert pipeline.observation_space.shape == (5,)
    pipeline.append(MeanStdFilter(clip_by_value=3.0))
    assert pipeline.observation_space == gym.spaces.Box(-3.0, 3.0, (5,), np.float32)
    pipeline.insert_before(MeanStdFilter, _Scale())
    assert [p.name for p in pipeline.connectors] == ["FlattenObservations", "_Scale", "MeanStdFilter"]
    assert pipeline["MeanStdFilter"][0] is pipeline[2]
    with pytest.raises(ValueError, match="Box observations"):  # the filter cannot read Dict observations
        pipeline.remove("FlattenObservations")
    with pytest.raises(ValueError, match="No connector piece 'Nope'"):
        pipeline.remove("Nope")
    with pytest.raises(TypeError, match="ConnectorV2 pieces"):
        pipeline.append(lambda **kw: kw)


def test_default_pieces_build_a_batch_of_tensors_from_episodes():
    episodes = [_episode([np.array([1.0, 2.0], np.float32)]), _episode([np.array([3.0, 4.0], np.float32)])]
    pipeline = ConnectorPipelineV2(connectors=[AddObservationsFromEpisodesToBatch(), BatchIndividualItems(),
                                               NumpyToTensor()])
    batch = pipeline(rl_module=None, batch={}, episodes=episodes)
    assert batch[Columns.OBS].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert type(batch[Columns.OBS]).__module__.startswith("torch")


def test_prev_actions_prev_rewards_pads_the_episode_start_and_one_hots_actions():
    act_space, obs_space = gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (1,), np.float32)
    piece = PrevActionsPrevRewards(obs_space, act_space, n_prev_actions=2, n_prev_rewards=2)
    episode = _episode([np.zeros(1, np.float32), np.ones(1, np.float32)], actions=[2], rewards=[5.0],
                       obs_space=obs_space, act_space=act_space)
    piece(rl_module=None, batch={}, episodes=[episode])
    obs = episode.get_observations(-1)
    assert obs["prev_n_actions"].tolist() == [0, 0, 0, 0, 0, 1]  # nothing before the first action
    assert obs["prev_n_rewards"].tolist() == [0.0, 5.0]
    assert piece.observation_space["prev_n_actions"].shape == (6,)


def test_frame_stacking_fills_zeros_before_the_start():
    space = gym.spaces.Box(0, 1, (2, 1), np.float32)
    piece = FrameStackingEnvToModule(space, gym.spaces.Discrete(2), num_frames=3)
    assert piece.observation_space.shape == (2, 3)
    episode = _episode([np.full((2, 1), 1.0, np.float32), np.full((2, 1), 2.0, np.float32)], actions=[0],
                       rewards=[0.0])
    batch = piece(rl_module=None, batch={}, episodes=[episode])
    (stacked,) = batch[Columns.OBS][(episode.id_,)]
    assert stacked.tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]


def test_mean_std_filter_states_merge_as_if_one_filter_saw_everything():
    space = gym.spaces.Box(-10, 10, (1,), np.float32)
    a, b, whole = (MeanStdFilter(space, gym.spaces.Discrete(2)) for _ in range(3))
    for piece, values in ((a, [1.0, 2.0]), (b, [3.0, 10.0]), (whole, [1.0, 2.0, 3.0, 10.0])):
        for v in values:
            piece(rl_module=None, batch={}, episodes=[_episode([np.array([v], np.float32)])])
    merged = a.merge_states([a.get_state(), b.get_state()])
    c = MeanStdFilter(space, gym.spaces.Discrete(2))
    c.set_state(merged)
    episode = _episode([np.array([4.0], np.float32)])
    c._update_stats = False
    whole._update_stats = False
    c(rl_module=None, batch={}, episodes=[episode])
    expected = _episode([np.array([4.0], np.float32)])
    whole(rl_module=None, batch={}, episodes=[expected])
    assert episode.get_observations(-1) == pytest.approx(expected.get_observations(-1))


# ---------------------------------------------------------------------- in the EnvRunner


def test_env_to_module_pieces_shape_what_the_module_sees_and_trains_on():
    seen = []

    class Record(ConnectorV2):
        def __call__(self, *, rl_module, batch, episodes, explore=None, **kwargs):
            seen.append((len(episodes), explore, rl_module is not None))
            return batch

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_envs_per_env_runner=2,
                           env_to_module_connector=lambda env, spaces, device: [_Scale(factor=0.0), Record()])
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1).debugging(seed=1))
    algo = config.build()
    try:
        batch = algo.env_runner.sample(num_timesteps=20)
        assert not np.any(batch[Columns.OBS]) and not np.any(batch[Columns.NEXT_OBS])
        assert seen and all(n == 1 and explore is True and has_module for n, explore, has_module in seen)
        algo.train()
    finally:
        algo.stop()


def test_a_bad_env_to_module_builder_gets_a_clear_error():
    config = PPOConfig().environment("CartPole-v1").env_runners(env_to_module_connector=lambda env: "nope")
    with pytest.raises(ConfigError, match="env_to_module_connector must return a ConnectorV2"):
        config.build()


@pytest.mark.slow
def test_mean_std_filter_connector_state_reaches_remote_runners_and_checkpoints(tmp_path):
    config = (PPOConfig().environment("Pendulum-v1")
              .env_runners(num_env_runners=1, num_envs_per_env_runner=1,
                           env_to_module_connector=lambda env, spaces, device: MeanStdFilter())
              .training(train_batch_size=200, minibatch_size=100, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        algo.train()
        state = algo.env_runner.filter.get_state()["env_to_module"]["MeanStdFilter"]["None"]
        assert state["count"] >= 200  # the remote runner's observations were merged in
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        restored = config.copy().build()
        try:
            restored.restore(path)
            again = restored.env_runner.filter.get_state()["env_to_module"]["MeanStdFilter"]["None"]
            assert again["count"] == state["count"] and again["mean"] == pytest.approx(state["mean"])
        finally:
            restored.stop()
    finally:
        algo.stop()


def test_single_agent_observation_preprocessor_sees_each_episode():
    class Negate(SingleAgentObservationPreprocessor):
        def preprocess(self, observation, episode):
            assert isinstance(episode, SingleAgentEpisode)
            return -observation

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(env_to_module_connector=lambda env, spaces, device: Negate()).debugging(seed=3))
    algo = config.build()
    try:
        runner = algo.env_runner
        batch = runner.sample(num_timesteps=8)
        raw = runner.env.envs[0].episode.get_observations()  # the connector episode holds what it wrote
        assert np.allclose(batch[Columns.OBS][-1, 0], raw[-2]) or runner.env.envs[0].episode.t < 2
        first = batch[Columns.OBS][0, 0]
        assert abs(first[0]) <= 0.05  # CartPole's reset position, negated, is still near zero
    finally:
        algo.stop()


def test_multi_agent_flatten_observations_only_for_the_listed_agents():
    from rlx.examples.envs.classes.multi_agent.rock_paper_scissors import RockPaperScissors

    config = (PPOConfig().environment(RockPaperScissors)
              .env_runners(env_to_module_connector=lambda env, spaces, device:
                           FlattenObservations(multi_agent=True, agent_ids={"player1"}))
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: "p0" if aid == "player1"
                           else "p1")
              .training(train_batch_size=100, minibatch_size=50, num_epochs=1))
    algo = config.build()
    try:
        env = algo.env_runner.envs[0]
        assert isinstance(env.get_observation_space("player1"), gym.spaces.Box)
        assert env.get_observation_space("player2") == env.unwrapped.get_observation_space("player2")
        result = algo.train()
        assert result["env_runners"]["num_episodes"] > 0
    finally:
        algo.stop()


# ---------------------------------------------------------------------- in the Learner


def _time_major_batch():
    # Two sub-envs, 4 steps; column 0's episode ends (terminated) after row 1.
    rewards = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0]], np.float32)
    term = np.zeros((4, 2), bool)
    term[1, 0] = True
    obs = np.arange(8, dtype=np.float32).reshape(4, 2, 1)
    return {Columns.OBS: obs, Columns.NEXT_OBS: obs + 100, Columns.ACTIONS: np.zeros((4, 2), np.int64),
            Columns.REWARDS: rewards, Columns.TERMINATEDS: term, Columns.TRUNCATEDS: np.zeros((4, 2), bool)}


def test_batch_episodes_split_at_episode_ends_and_write_through():
    batch = _time_major_batch()
    episodes = batch_episodes(batch)
    assert [len(e) for e in episodes] == [2, 2, 4]
    first = episodes[0]
    assert first.is_terminated and first.get_rewards() == [1.0, 2.0]
    assert [o.item() for o in first.get_observations()] == [0.0, 2.0, 102.0]  # + the final next obs
    first.set_rewards(new_data=[10.0], at_indices=[1])
    assert batch[Columns.REWARDS][1, 0] == 10.0


def test_returns_to_go_are_discounted_within_each_episode():
    batch = _time_major_batch()
    out = ComputeReturnsToGo(gamma=0.5)(rl_module=None, batch=batch, episodes=batch_episodes(batch))
    assert out[Columns.RETURNS_TO_GO][:, 0].tolist() == [2.0, 2.0, 5.0, 4.0]


def test_gae_connector_adds_advantages_the_module_values_imply():
    class ZeroValues:
        def compute_values(self, batch):
            import torch

            return torch.zeros(batch[Columns.OBS].shape[0])

    batch = _time_major_batch()
    out = GeneralAdvantageEstimation(gamma=1.0, lambda_=1.0)(rl_module=ZeroValues(), batch=batch, episodes=[])
    # With zero values, advantages are the undiscounted rewards-to-go within each episode.
    assert out[Columns.ADVANTAGES][:, 0].tolist() == [3.0, 2.0, 7.0, 4.0]


def test_learner_connector_changes_what_ppo_trains_on():
    from rlx.examples.connectors.classes.count_based_curiosity import CountBasedCuriosity

    pieces = []

    def make(obs_space, act_space):
        pieces.append(CountBasedCuriosity(intrinsic_reward_coeff=0.5))
        return pieces[-1]

    config = (PPOConfig().environment("CartPole-v1").training(learner_connector=make, train_batch_size=64,
                                                                minibatch_size=32, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        seen = {}
        original = algo.learner.update_from_batch

        def spy(batch, timestep):
            seen["rewards"] = np.array(batch[Columns.REWARDS])
            return original(batch, timestep)

        algo.learner.update_from_batch = spy
        algo.train()
        # CartPole pays 1 per step; the curiosity bonus (0.5 / count, each observation new) makes 1.5.
        assert pieces and sum(pieces[0].counts.values()) >= 64
        assert np.allclose(seen["rewards"], 1.5)
    finally:
        algo.stop()


# ---------------------------------------------------------------------- example pieces


def test_protobuf_observations_reach_the_module_decoded():
    pytest.importorskip("google.protobuf")
    from rlx.examples.connectors.classes.protobuf_cartpole_observation_decoder import (
        ProtobufCartPoleObservationDecoder)
    from rlx.examples.envs.classes.cartpole_with_protobuf_observation_space import (
        CartPoleWithProtobufObservationSpace)

    config = (PPOConfig().environment(CartPoleWithProtobufObservationSpace)
              .env_runners(env_to_module_connector=lambda env, spaces, device: ProtobufCartPoleObservationDecoder())
              .debugging(seed=0))
    algo = config.build()
    try:
        runner = algo.env_runner
        assert runner.module_observation_space.shape == (4,)
        batch = runner.sample(num_timesteps=5)
        state = runner.env.envs[0].unwrapped.state
        assert np.allclose(batch[Columns.NEXT_OBS][-1, 0], state, atol=1e-6)
    finally:
        algo.stop()


def test_heuristic_rock_paper_scissors_modules_follow_their_rules():
    from rlx.examples.rl_modules.classes import AlwaysSameHeuristicRLM, BeatLastHeuristicRLM

    spaces = dict(observation_space=gym.spaces.Discrete(4), action_space=gym.spaces.Discrete(3))
    beat = BeatLastHeuristicRLM(**spaces)
    out = beat.forward_inference({Columns.OBS: np.eye(4, dtype=np.float32)[[0, 1, 2]]})
    assert out[Columns.ACTIONS].tolist() == [1, 2, 0]  # paper beats rock, scissors paper, rock scissors
    same = AlwaysSameHeuristicRLM(**spaces)
    first = same.forward_inference({Columns.OBS: np.array([3, 3])})[Columns.ACTIONS]
    later = same.forward_inference({Columns.OBS: np.array([0, 2])})[Columns.ACTIONS]
    assert later.tolist() == first.tolist()

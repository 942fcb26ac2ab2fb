"""Rendering/recording callbacks, vectorized multi-agent envs and old-API custom models.

- rlx.examples.envs.env_rendering_and_recording: frames of the right shape, the best and
  worst episode compiled into (1, T, 3, 64, 96) videos, logged unreduced, and (end to end)
  reaching the results of a PPO iteration.
- rlx.env.vector: SyncVectorMultiAgentEnv's reset/step/autoreset and make_vec.
- rlx.models (ModelCatalog, ModelV2, TorchModelV2, FullyConnectedNetwork, ModelV2RLModule)
  and rlx.examples._old_api_stack's parametric-actions models: masked actions get logits of
  FLOAT_MIN (probability 0) and are never picked, before and after PPO trains the model.
"""
from __future__ import annotations

import types

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.env.vector import SyncVectorMultiAgentEnv, VectorMultiAgentEnv, make_vec
from rlx.env.vector_env import VectorEnv
from rlx.examples._old_api_stack.models.parametric_actions_model import (
    ParametricActionsModel, TorchParametricActionsModel, TorchParametricActionsModelThatLearnsEmbeddings,
    mask_logits)
from rlx.examples.envs.classes.multi_agent.rock_paper_scissors import RockPaperScissors
from rlx.examples.envs.classes.parametric_actions_cartpole import (ParametricActionsCartPole,
                                                                   ParametricActionsCartPoleNoEmbeddings)
from rlx.examples.envs.env_rendering_and_recording import (VIDEO_HEIGHT, VIDEO_WIDTH, EnvRenderCallback,
                                                           render_frame, resize_frame)
from rlx.models import ModelCatalog, ModelV2
from rlx.models.modelv2 import restore_original_dimensions
from rlx.models.preprocessors import get_preprocessor
from rlx.models.torch import FullyConnectedNetwork, TorchModelV2
from rlx.utils.errors import ConfigError
from rlx.utils.metrics.metrics_logger import MetricsLogger
from rlx.utils.torch_utils import FLOAT_MIN


# ---------------------------------------------------------------------------- helpers


class RenderedCorridor(gym.Env):
    """A corridor (as in RLlib's custom_env_render_method.py) whose render() draws it."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, config: dict | None = None):
        config = config or {}
        self.end_pos = int(config.get("corridor_length", 5))
        self.max_steps = int(config.get("max_steps", 20))
        self.render_mode = "rgb_array"
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 999.0, (1,), np.float32)
        self.pos = 0
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.steps = 0, 0
        return np.array([self.pos], np.float32), {}

    def step(self, action):
        self.steps += 1
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        terminated = self.pos >= self.end_pos
        truncated = self.steps >= self.max_steps
        return np.array([self.pos], np.float32), 10.0 if terminated else -0.1, terminated, truncated, {}

    def render(self) -> np.ndarray:
        image = np.full((100, (self.end_pos + 2) * 50, 3), 255, np.uint8)
        x = (self.pos + 1) * 50
        image[40:60, x + 10:x + 40] = (0, 0, 255)
        return image


class RecordingLogger:
    """Stands in for a MetricsLogger: records log_value calls."""

    def __init__(self):
        self.calls: list[tuple[str, object, dict]] = []

    def log_value(self, key, value, **kwargs):
        self.calls.append((key, value, kwargs))


def _episode(ret: float) -> types.SimpleNamespace:
    return types.SimpleNamespace(custom_data={}, user_data={}, get_return=lambda: ret)


def _logger_keeps_arrays() -> bool:
    try:
        MetricsLogger().log_value("video", np.zeros((1, 2, 3, 4, 5), np.uint8), reduce=None)
    except ValueError:
        return False
    return True


def _tbx_logger_takes_videos() -> bool:
    from rlx.loggers.tbx_logger import _summary_values

    videos = [np.zeros((1, 2, 3, 4, 4), np.uint8), np.zeros((1, 3, 3, 4, 4), np.uint8)]
    try:
        _summary_values({"env_runners": {"episode_videos_best": videos}})
    except ValueError:
        return False
    return True


needs_array_metrics = pytest.mark.xfail(
    not _logger_keeps_arrays(), strict=True,
    reason="MetricsLogger.log_value turns every value with .item() into a number, so it cannot keep a video; "
           "it must keep arrays of more than one element")
needs_tbx_videos = pytest.mark.xfail(
    not _tbx_logger_takes_videos(), strict=True,
    reason="rlx.loggers.tbx_logger makes a histogram of every list, and np.asarray fails on videos of "
           "different lengths")


@pytest.fixture
def pa_model():
    ModelCatalog.register_custom_model("pa_model", TorchParametricActionsModel)
    yield "pa_model"
    ModelCatalog._custom_models.pop("pa_model", None)


# ---------------------------------------------------------------------------- rendering


def test_render_frame_and_resize_give_small_rgb_frames():
    env = RenderedCorridor({"corridor_length": 10})
    env.reset()
    frame = render_frame(env)
    assert frame.shape == (100, 600, 3) and frame.dtype == np.uint8
    small = resize_frame(frame, VIDEO_HEIGHT, VIDEO_WIDTH)
    assert small.shape == (64, 96, 3) and small.dtype == np.uint8
    # The blue agent survives the downscaling.
    assert (small[..., 2] > 200).any() and (small[..., 0] < 100).any()
    gray = resize_frame(np.zeros((30, 40), np.float32), 8, 12)
    assert gray.shape == (8, 12) and gray.dtype == np.uint8


def test_render_frame_renders_the_episodes_sub_env_of_a_vector():
    envs = [RenderedCorridor({"corridor_length": 3}) for _ in range(3)]
    for e in envs:
        e.reset()
    envs[2].step(1)
    envs[2].step(1)
    vec = VectorEnv(envs)
    np.testing.assert_array_equal(render_frame(vec, 2), envs[2].render())
    np.testing.assert_array_equal(render_frame(vec, 0), envs[0].render())
    assert not np.array_equal(render_frame(vec, 2), render_frame(vec, 0))


def test_callback_compiles_best_and_worst_videos_and_logs_them_unreduced():
    cb = EnvRenderCallback()
    env = VectorEnv([RenderedCorridor()])
    env.envs[0].reset()
    runner = types.SimpleNamespace(worker_index=0)
    good, bad = _episode(9.0), _episode(-2.0)
    for episode, steps in ((good, 4), (bad, 7)):
        for _ in range(steps):
            env.envs[0].step(1)
            cb.on_episode_step(episode=episode, env_runner=runner, metrics_logger=None, env=env, env_index=0,
                               rl_module=None)
        assert len(episode.custom_data["render_images"]) == steps
        assert episode.custom_data["render_images"][0].shape == (3, 64, 96)
        cb.on_episode_end(episode=episode, env_runner=runner, metrics_logger=None, env=env, env_index=0,
                          rl_module=None)
    logger = RecordingLogger()
    cb.on_sample_end(env_runner=runner, metrics_logger=logger, samples=None)
    logged = {key: (value, kwargs) for key, value, kwargs in logger.calls}
    best, best_kwargs = logged["episode_videos_best"]
    worst, _ = logged["episode_videos_worst"]
    assert best.shape == (1, 4, 3, 64, 96) and best.dtype == np.uint8
    assert worst.shape == (1, 7, 3, 64, 96)
    assert best_kwargs == {"reduce": None}
    # A new sampling round starts empty.
    logger2 = RecordingLogger()
    cb.on_sample_end(env_runner=runner, metrics_logger=logger2, samples=None)
    assert logger2.calls == []


def test_callback_records_only_on_the_chosen_env_runners():
    cb = EnvRenderCallback(env_runner_indices=[1])
    env = RenderedCorridor()
    env.reset()
    episode = _episode(1.0)
    cb.on_episode_step(episode=episode, env_runner=types.SimpleNamespace(worker_index=0), metrics_logger=None,
                       env=env, env_index=0, rl_module=None)
    assert "render_images" not in episode.custom_data
    cb.on_episode_step(episode=episode, env_runner=types.SimpleNamespace(worker_index=1), metrics_logger=None,
                       env=env, env_index=0, rl_module=None)
    assert len(episode.custom_data["render_images"]) == 1


@needs_array_metrics
def test_ppo_iteration_reports_episode_videos():
    from rlx.algorithms.ppo import PPOConfig

    config = (PPOConfig().environment(RenderedCorridor, env_config={"corridor_length": 4, "max_steps": 15})
              .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
              .training(train_batch_size=200, minibatch_size=50, num_epochs=1)
              .callbacks(EnvRenderCallback))
    algo = config.build()
    try:
        results = algo.train()
    finally:
        algo.stop()
    videos = results["env_runners"]["episode_videos_best"]
    assert isinstance(videos, list) and videos
    for video in videos + results["env_runners"]["episode_videos_worst"]:
        assert video.ndim == 5 and video.shape[0] == 1 and video.shape[2:] == (3, 64, 96)
        assert video.dtype == np.uint8 and 1 <= video.shape[1] <= 15


@needs_tbx_videos
def test_tensorboard_logger_takes_a_list_of_videos_of_different_lengths():
    from rlx.loggers.tbx_logger import _summary_values

    videos = [np.zeros((1, 2, 3, 8, 8), np.uint8), np.full((1, 5, 3, 8, 8), 200, np.uint8)]
    values = _summary_values({"env_runners": {"episode_videos_best": videos, "episode_return_mean": 1.5,
                                              "hist": [1.0, 2.0, 3.0]}})
    tags = [v.tag for v in values]
    assert any(t.endswith("episode_return_mean") for t in tags) and any(t.endswith("hist") for t in tags)
    # Videos are drawn (tensorboardX encodes them with moviepy) or left out, never made histograms.
    video_values = [v for v in values if "episode_videos_best" in v.tag]
    assert all(v.HasField("image") for v in video_values)


# ---------------------------------------------------------------------------- vector multi-agent envs


def _rps_vector(n: int = 2) -> SyncVectorMultiAgentEnv:
    return SyncVectorMultiAgentEnv([lambda: RockPaperScissors({})] * n)


def test_sync_vector_multi_agent_env_steps_and_autoresets():
    vec = _rps_vector(3)
    assert isinstance(vec, VectorMultiAgentEnv) and vec.unwrapped is vec and vec.num_envs == 3
    assert set(vec.single_action_spaces) == {"player1", "player2"}
    assert isinstance(vec.single_observation_space, gym.spaces.Dict)
    obs, infos = vec.reset(seed=3)
    assert len(obs) == 3 and set(obs[0]) == {"player1", "player2"} and len(infos) == 3
    # Paper (1) beats rock (0).
    actions = [{"player1": 1, "player2": 0}] * 3
    steps = 0
    while True:
        obs, rewards, terminateds, truncateds, infos = vec.step(actions)
        steps += 1
        assert rewards[0]["player1"] == 1.0 and rewards[0]["player2"] == -1.0
        if any(t["__all__"] or tr.get("__all__", False) for t, tr in zip(terminateds, truncateds)):
            break
        assert steps < 100
    # The next step resets the finished sub-envs instead of stepping them: zero rewards.
    obs, rewards, terminateds, truncateds, _ = vec.step(actions)
    assert all(r == {"player1": 0.0, "player2": 0.0} for r in rewards)
    assert all(t["__all__"] is False for t in terminateds)
    vec.close()
    assert vec.closed
    with pytest.raises(ValueError, match="3 sub-envs"):
        _rps_vector(3).step([{}])


def test_make_vec_builds_a_sync_vector_of_a_registered_multi_agent_env():
    gym.register(id="rlx-test/RockPaperScissors-v0", entry_point=RockPaperScissors, disable_env_checker=True)
    try:
        vec = make_vec("rlx-test/RockPaperScissors-v0", num_envs=2, config={})
        assert isinstance(vec, SyncVectorMultiAgentEnv) and vec.num_envs == 2
        assert vec.spec.kwargs["num_envs"] == 2 and vec.spec.kwargs["vectorization_mode"] == "sync"
        obs, _ = vec.reset(seed=0)
        assert len(obs) == 2
        with pytest.raises(ValueError, match="synchronously"):
            make_vec("rlx-test/RockPaperScissors-v0", num_envs=2, vectorization_mode="async", config={})
    finally:
        gym.registry.pop("rlx-test/RockPaperScissors-v0", None)


# ---------------------------------------------------------------------------- ModelV2 / ModelCatalog


def test_preprocessed_space_restores_the_original_structure():
    space = gym.spaces.Dict({
        "a": gym.spaces.Box(-1, 1, (2, 3), np.float32),
        "b": gym.spaces.Discrete(4),
        "c": gym.spaces.Tuple((gym.spaces.Box(0, 1, (2,), np.float32), gym.spaces.Discrete(2))),
    })
    prep = get_preprocessor(space)(space)
    flat_space = prep.observation_space
    assert flat_space.original_space is space
    samples = [space.sample() for _ in range(5)]
    flat = torch.as_tensor(np.stack([prep.transform(s) for s in samples]))
    restored = restore_original_dimensions(flat, flat_space)
    assert restored["a"].shape == (5, 2, 3) and restored["b"].shape == (5, 4)
    for i, s in enumerate(samples):
        np.testing.assert_allclose(restored["a"][i].numpy(), s["a"], rtol=1e-6)
        assert int(restored["b"][i].argmax()) == s["b"] and float(restored["b"][i].sum()) == 1.0
        np.testing.assert_allclose(restored["c"][0][i].numpy(), s["c"][0], rtol=1e-6)
        assert int(restored["c"][1][i].argmax()) == s["c"][1]
    # A space without original_space passes observations through.
    assert restore_original_dimensions(flat, gym.spaces.Box(-1, 1, (flat.shape[1],))) is flat


def _pa_obs_space(n: int = 6, env_cls=ParametricActionsCartPole):
    env = env_cls(n)
    prep = get_preprocessor(env.observation_space)(env.observation_space)
    return env, prep


def test_parametric_actions_model_gives_masked_actions_float_min_logits():
    env, prep = _pa_obs_space(6)
    model = ModelCatalog.get_model_v2(prep.observation_space, env.action_space, 6,
                                      {"custom_model": TorchParametricActionsModel, "fcnet_hiddens": [16]})
    assert isinstance(model, TorchModelV2) and isinstance(model, torch.nn.Module)
    obs_batch, masks = [], []
    obs, _ = env.reset(seed=0)
    for _ in range(8):
        obs_batch.append(prep.transform(obs))
        masks.append(obs["action_mask"].copy())
        obs, *_ = env.step(env.left_idx)
    logits, state = model({"obs": torch.as_tensor(np.stack(obs_batch))})
    assert logits.shape == (8, 6) and state == []
    masks = np.stack(masks).astype(bool)
    assert (logits[torch.as_tensor(~masks)] == FLOAT_MIN).all()
    assert torch.isfinite(logits[torch.as_tensor(masks)]).all()
    assert (logits[torch.as_tensor(masks)] > -1e3).all()
    probs = torch.softmax(logits, -1)
    assert (probs[torch.as_tensor(~masks)] == 0).all()
    assert model.value_function().shape == (8,)


def test_mask_logits_and_the_learned_embeddings_model():
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    out = mask_logits(logits, torch.tensor([[1, 0, 1]], dtype=torch.int8))
    assert out[0, 1] == FLOAT_MIN and out[0, 0] == 1.0 and out[0, 2] == 3.0
    env, prep = _pa_obs_space(5, ParametricActionsCartPoleNoEmbeddings)
    model = ModelCatalog.get_model_v2(prep.observation_space, env.action_space, 5,
                                      {"custom_model": TorchParametricActionsModelThatLearnsEmbeddings})
    obs, _ = env.reset(seed=1)
    out, _ = model({"obs": torch.as_tensor(prep.transform(obs))[None]})
    mask = torch.as_tensor(obs["valid_avail_actions_mask"] > 0)[None]
    assert (out[~mask] == FLOAT_MIN).all() and torch.isfinite(out[mask]).all() and (out[mask] > -1e3).all()


def test_model_catalog_registry_kwargs_and_errors(pa_model):
    assert ModelCatalog.get_custom_model_class("pa_model") is TorchParametricActionsModel
    path = "rlx.examples._old_api_stack.models.parametric_actions_model:TorchParametricActionsModel"
    assert ModelCatalog.get_custom_model_class(path) is TorchParametricActionsModel
    with pytest.raises(ConfigError, match="Did you mean"):
        ModelCatalog.get_custom_model_class("pa_modle")
    env, prep = _pa_obs_space(4)
    model = ModelCatalog.get_model_v2(prep.observation_space, env.action_space, 4,
                                      {"custom_model": "pa_model", "custom_model_config": {"action_embed_size": 2}})
    assert isinstance(model, TorchParametricActionsModel)
    with pytest.raises(ConfigError, match="custom_model_config"):
        ModelCatalog.get_model_v2(prep.observation_space, env.action_space, 4,
                                  {"custom_model": FullyConnectedNetwork, "custom_model_config": {"bogus": 1}})
    with pytest.raises(ConfigError, match="PyTorch-only"):
        ParametricActionsModel(prep.observation_space, env.action_space, 4, {}, "m")
    with pytest.raises(ConfigError, match="PyTorch-only"):
        ModelCatalog.get_model_v2(prep.observation_space, env.action_space, 4, {}, framework="tf2")
    dist, width = ModelCatalog.get_action_dist(gym.spaces.Box(-1, 1, (3,)), {})
    assert width == 6 and dist.__name__ == "DiagGaussian"


def test_default_fully_connected_network():
    space = gym.spaces.Box(-1, 1, (5,), np.float32)
    for share in (False, True):
        model = ModelCatalog.get_model_v2(space, gym.spaces.Discrete(3), 3,
                                          {"fcnet_hiddens": [8, 8], "vf_share_layers": share})
        assert isinstance(model, FullyConnectedNetwork) and isinstance(model, ModelV2)
        out, _ = model({"obs": torch.zeros(4, 5)})
        assert out.shape == (4, 3) and model.value_function().shape == (4,)
    free = ModelCatalog.get_model_v2(space, gym.spaces.Box(-1, 1, (2,)), 4, {"fcnet_hiddens": [8], "free_log_std": True})
    out, _ = free({"obs": torch.zeros(3, 5)})
    assert out.shape == (3, 4)
    features = FullyConnectedNetwork(space, gym.spaces.Discrete(2), None, {"fcnet_hiddens": [7]}, "f")
    out, _ = features({"obs": torch.zeros(2, 5)})
    assert out.shape == (2, 7) and features.num_outputs == 7


def test_model_config_accepts_custom_model_and_refuses_other_values():
    from rlx.algorithms.ppo import PPOConfig

    config = PPOConfig().training(model={"custom_model": "pa_model", "custom_model_config": {"x": 1}})
    assert config.model["custom_model"] == "pa_model"
    with pytest.raises(ConfigError, match="custom_model"):
        PPOConfig().training(model={"custom_model": 3})


# ---------------------------------------------------------------------------- training with a custom model


def _pa_config(**env_kwargs):
    from rlx.algorithms.ppo import PPOConfig

    return (PPOConfig()
            .environment(ParametricActionsCartPole, env_config={"max_avail_actions": 8}, **env_kwargs)
            .env_runners(num_env_runners=0, num_envs_per_env_runner=4)
            .training(model={"custom_model": "pa_model", "fcnet_hiddens": [32]}, train_batch_size=400,
                      minibatch_size=100, num_epochs=3, lr=1e-3)
            .debugging(seed=0))


def test_ppo_trains_the_parametric_actions_model_and_never_picks_a_masked_action(pa_model):
    from rlx.models.modelv2_rl_module import ModelV2RLModule

    algo = _pa_config(disable_env_checking=True).build()
    try:
        module = algo.env_runner.module
        assert isinstance(module, ModelV2RLModule)
        assert isinstance(module.model, TorchParametricActionsModel)
        before = {k: v.clone() for k, v in module.state_dict().items()}
        # The env raises ValueError on a masked action: three iterations of sampling prove
        # no masked action was ever picked, and the losses stay finite despite FLOAT_MIN logits.
        for _ in range(3):
            results = algo.train()
        learner = results["learners"]["default_policy"]
        for key in ("policy_loss", "vf_loss", "entropy", "mean_kl_loss"):
            assert np.isfinite(learner[key]), (key, learner[key])
        assert any(not torch.equal(before[k], v) for k, v in module.state_dict().items())
        env = ParametricActionsCartPole(8)
        prep = get_preprocessor(env.observation_space)(env.observation_space)
        obs, _ = env.reset(seed=5)
        for _ in range(50):
            batch = {"obs": torch.as_tensor(prep.transform(obs))[None]}
            with torch.no_grad():
                logits = module.forward_exploration(batch)["action_dist_inputs"]
            mask = torch.as_tensor(obs["action_mask"] > 0)[None]
            assert (logits[~mask] == FLOAT_MIN).all()
            action = int(module.get_exploration_action_dist_cls()(logits).sample()[0])
            assert obs["action_mask"][action] == 1
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        algo.stop()


def test_custom_model_on_an_algorithm_without_modelv2_support_is_refused(pa_model):
    from rlx.algorithms.dqn import DQNConfig
    from rlx.utils.errors import NotSupportedYetError

    config = (DQNConfig().environment(ParametricActionsCartPole, env_config={"max_avail_actions": 4},
                                      disable_env_checking=True)
              .env_runners(num_env_runners=0).training(model={"custom_model": "pa_model"}))
    with pytest.raises(NotSupportedYetError, match="custom_model"):
        config.build()

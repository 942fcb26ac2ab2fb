"""Image observations: the default CNN (conv_filters, RLlib's default filters, errors), the old
API's VisionNetwork, and a small image task that a CNN learns and a flattened MLP does not."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.core.cnn import CNN, ImageEncoder, default_conv_filters
from rlx.core.models import ActorCriticModule
from rlx.models.catalog import ModelCatalog
from rlx.models.model_defaults import merge_model_config
from rlx.models.torch.misc import same_padding, valid_padding
from rlx.utils.errors import ConfigError


class BarOrientation(gym.Env):
    """10x10 uint8 frames with one 3-pixel bar and 4 noise pixels at random places: action 0 is
    right for a horizontal bar, 1 for a vertical one. 20 frames per episode, +1 per right answer.
    Translation invariance is what a CNN brings and an MLP on the flattened frame lacks."""

    def __init__(self, config: dict | None = None):
        self.observation_space = gym.spaces.Box(0, 255, (10, 10, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def _draw(self) -> np.ndarray:
        img = np.zeros((10, 10, 1), np.uint8)
        self.label = int(self.np_random.integers(2))
        row, col = self.np_random.integers(0, 8, size=2)
        for _ in range(4):
            img[tuple(self.np_random.integers(0, 10, size=2))] = 255
        if self.label == 0:
            img[row, col:col + 3] = 255
        else:
            img[row:row + 3, col] = 255
        return img

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        reward = float(action == self.label)
        self.t += 1
        return self._draw(), reward, False, self.t >= 20, {}


def _module(shape, model_config=None, dtype=np.float32, actions=4):
    return ActorCriticModule(observation_space=gym.spaces.Box(0, 255, shape, dtype),
                             action_space=gym.spaces.Discrete(actions),
                             model_config=merge_model_config(None, model_config or {}))


# ----------------------------------------------------------------------------- architecture


@pytest.mark.parametrize("shape,features", [((84, 84, 4), 256), ((42, 42, 1), 256), ((10, 10, 3), 32),
                                             ((96, 96, 3), 256), ((64, 64, 3), 128 * 3 * 3)])
def test_default_filters_per_image_size(shape, features):
    module = _module(shape)
    encoder = module.pi[0]
    assert isinstance(encoder, ImageEncoder)
    assert encoder.cnn.out_dim == features
    out = module.forward_train({"obs": torch.zeros((3,) + shape)})
    assert out["action_dist_inputs"].shape == (3, 4)
    assert out["vf_preds"].shape == (3,)


def test_shared_layers_use_one_cnn_and_post_fcnet_hiddens():
    module = _module((42, 42, 2), {"vf_share_layers": True, "post_fcnet_hiddens": [32]})
    assert isinstance(module.encoder, ImageEncoder)
    assert module.encoder.out_dim == 32
    convs = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 3  # one stack, not one per head


def test_explicit_conv_filters_and_padding():
    # Two "same" layers on 12x12 -> 6x6 -> 3x3; an explicit "same" last layer keeps 3x3.
    cnn = CNN((12, 12, 1), [[4, 3, 2], [8, [3, 3], 2, "same"]])
    assert cnn.out_dim == 8 * 3 * 3
    valid = CNN((12, 12, 1), [[4, 3, 2], [8, [3, 3], 2]])  # last layer "valid" by default: 6 -> 2
    assert valid.out_dim == 8 * 2 * 2
    assert cnn(torch.zeros(5, 12, 12, 1)).shape == (5, 72)


def test_two_dimensional_observations_use_a_cnn_only_with_conv_filters():
    flat = _module((6, 6))
    assert not any(isinstance(m, torch.nn.Conv2d) for m in flat.modules())
    conv = _module((6, 6), {"conv_filters": [[4, 3, 1], [8, 6, 1]]})
    assert conv.pi[0].cnn.out_dim == 8
    assert conv.forward_inference({"obs": torch.zeros(2, 6, 6)})["action_dist_inputs"].shape == (2, 4)


def test_uint8_frames_are_scaled_to_unit_range():
    encoder = CNN((10, 10, 1), default_conv_filters((10, 10)), scale_uint8=True)
    unscaled = CNN((10, 10, 1), default_conv_filters((10, 10)))
    unscaled.load_state_dict(encoder.state_dict())
    frame = torch.full((1, 10, 10, 1), 255.0)
    assert torch.allclose(encoder(frame), unscaled(frame / 255.0))


def test_shape_without_default_filters_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"No default CNN for image observations of shape \(5, 7, 2\).*conv_filters"):
        _module((5, 7, 2))
    with pytest.raises(ConfigError, match="raw Atari frame"):
        default_conv_filters((210, 160, 3))


def test_filters_that_do_not_fit_are_a_clear_error():
    with pytest.raises(ConfigError, match="leaves no pixels"):
        _module((10, 10, 1), {"conv_filters": [[8, 5, 2], [8, 5, 2], [8, 5, 2]]})


@pytest.mark.parametrize("bad", [[[16, 8]], [], [[16, [8, 8], 0]], [[16, 8, 4, "full"]], "default"])
def test_malformed_conv_filters_are_refused_at_config_time(bad):
    with pytest.raises(ConfigError, match="conv_filters"):
        PPOConfig().environment("CartPole-v1").rl_module(model_config={"conv_filters": bad}).validate()


def test_padding_helpers():
    pad, out = same_padding((84, 84), 8, 4)
    assert out == (21, 21)
    assert pad == (2, 2, 2, 2)  # (20 * 4 + 8 - 84) = 4 pixels, split evenly
    assert valid_padding((11, 11), 11, 1) == (1, 1)


def test_vision_network_modelv2():
    space = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
    model = ModelCatalog.get_model_v2(space, gym.spaces.Discrete(3), 3, {"post_fcnet_hiddens": [16]},
                                      framework="torch")
    assert type(model).__name__ == "VisionNetwork"
    logits, _ = model({"obs": torch.zeros(4, 42, 42, 3)}, [], None)
    assert logits.shape == (4, 3)
    assert model.value_function().shape == (4,)


# ----------------------------------------------------------------------------- algorithms


def test_dqn_and_recurrent_ppo_read_images_with_a_cnn():
    dqn = DQNConfig().environment(BarOrientation).debugging(seed=0).build()
    assert isinstance(dqn.get_module().encoder, ImageEncoder)
    assert dqn.train()["num_env_steps_sampled_lifetime"] > 0
    dqn.stop()
    lstm = (PPOConfig().environment(BarOrientation).debugging(seed=0).training(train_batch_size=200)
            .rl_module(model_config={"use_lstm": True, "lstm_cell_size": 16}).build())
    assert isinstance(lstm.get_module().encoder, CNN)
    assert lstm.train()["num_env_steps_sampled_lifetime"] >= 200
    lstm.stop()


def _greedy_accuracy(algo, flatten: bool, steps: int = 1000) -> float:
    env = BarOrientation()
    obs, _ = env.reset(seed=123)
    correct = 0.0
    for _ in range(steps):
        action = algo.compute_single_action(obs.reshape(-1) if flatten else obs, explore=False)
        obs, reward, *_ = env.step(action)
        correct += reward
    return correct / steps


def _train(env, iterations: int = 25):
    algo = PPOConfig().environment(env).debugging(seed=0).training(train_batch_size=1000).build()
    for _ in range(iterations):
        algo.train()
    return algo


@pytest.mark.slow
def test_cnn_learns_an_image_task_that_a_flattened_mlp_does_not():
    cnn = _train(BarOrientation)
    assert isinstance(cnn.get_module().pi[0], ImageEncoder)
    cnn_accuracy = _greedy_accuracy(cnn, flatten=False)
    cnn.stop()
    mlp = _train(lambda cfg: gym.wrappers.FlattenObservation(BarOrientation()))
    mlp_accuracy = _greedy_accuracy(mlp, flatten=True)
    mlp.stop()
    # 25k steps: the CNN classifies ~93% right, the MLP on flattened frames ~64% (chance: 50%).
    assert cnn_accuracy >= 0.85, cnn_accuracy
    assert mlp_accuracy < 0.8, mlp_accuracy

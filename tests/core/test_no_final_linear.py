"""model['no_final_linear'] (RLlib's meaning): the last hidden layer has the policy's output size
and is the output; no extra linear layer follows it."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.core.models import ActorCriticModule
from rlx.models.model_defaults import merge_model_config
from rlx.utils.errors import ConfigError, NotSupportedYetError

OBS = gym.spaces.Box(-1, 1, (5,), np.float32)


def _module(action_space=gym.spaces.Discrete(3), obs_space=OBS, **model):
    return ActorCriticModule(observation_space=obs_space, action_space=action_space,
                             model_config=merge_model_config(None, model))


def _params(net: torch.nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def _sizes(mlp) -> list[tuple[int, int]]:
    return [(lin.in_features, lin.out_features) for lin in mlp.linears]


def test_policy_network_ends_in_the_resized_last_hidden_layer():
    plain = _module(fcnet_hiddens=[32, 16])
    module = _module(fcnet_hiddens=[32, 16], no_final_linear=True)
    assert _sizes(plain.pi) == [(5, 32), (32, 16), (16, 3)]
    assert _sizes(module.pi) == [(5, 32), (32, 3)]
    assert _params(module.pi) == 5 * 32 + 32 + 32 * 3 + 3
    # The output layer keeps the hidden activation (tanh): logits within (-1, 1).
    logits = module.forward_inference({"obs": torch.randn(64, 5) * 100})["action_dist_inputs"]
    assert logits.shape == (64, 3) and logits.abs().max() <= 1.0
    # The value function keeps its full network and final linear layer.
    assert _sizes(module.vf) == _sizes(plain.vf) == [(5, 32), (32, 16), (16, 1)]


def test_post_fcnet_hiddens_last_layer_is_the_one_resized():
    module = _module(fcnet_hiddens=[32], post_fcnet_hiddens=[16, 8], no_final_linear=True)
    assert _sizes(module.pi) == [(5, 32), (32, 16), (16, 3)]


def test_shared_layers_end_in_the_output_and_the_value_head_reads_it():
    module = _module(fcnet_hiddens=[32, 16], vf_share_layers=True, no_final_linear=True)
    assert _sizes(module.encoder) == [(5, 32), (32, 3)]
    assert isinstance(module.pi, torch.nn.Identity)
    assert _sizes(module.vf) == [(3, 1)]
    out = module.forward_train({"obs": torch.randn(4, 5)})
    assert out["action_dist_inputs"].shape == (4, 3) and out["vf_preds"].shape == (4,)


def test_box_actions_with_free_log_std_output_only_the_means():
    module = _module(gym.spaces.Box(-1, 1, (2,), np.float32), fcnet_hiddens=[16, 16], no_final_linear=True,
                     free_log_std=True)
    assert _sizes(module.pi) == [(5, 16), (16, 2)]
    assert module.forward_inference({"obs": torch.zeros(1, 5)})["action_dist_inputs"].shape == (1, 4)


def test_ppo_trains_with_no_final_linear():
    config = (PPOConfig().environment("CartPole-v1")
              .training(model={"fcnet_hiddens": [16, 16], "no_final_linear": True}, train_batch_size=200,
                        minibatch_size=100, num_epochs=1)
              .debugging(seed=0))
    algo = config.build()
    try:
        assert _sizes(algo.get_module().pi)[-1] == (16, 2)
        assert np.isfinite(algo.train()["learners"]["default_policy"]["total_loss"])
    finally:
        algo.stop()


def test_no_final_linear_is_checked_and_refused_where_it_does_not_apply():
    with pytest.raises(ConfigError, match="True or False"):
        merge_model_config(None, {"no_final_linear": "yes"})
    with pytest.raises(NotSupportedYetError, match="image observations"):
        _module(obs_space=gym.spaces.Box(0, 255, (16, 16, 3), np.uint8), no_final_linear=True)
    from rlx.algorithms.dqn.dqn_rl_module import DQNRLModule

    with pytest.raises(NotSupportedYetError, match="no_final_linear.*DQN"):
        DQNRLModule(observation_space=OBS, action_space=gym.spaces.Discrete(3), model_config={"no_final_linear": True})

"""Recurrent old-API models: RecurrentNetwork subclasses, use_lstm around a ModelV2 (LSTMWrapper),
and ModelV2.custom_loss / metrics, trained by PPO as RLlib's old stack trained them."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from envs_for_tests import CueEnv
from rlx.algorithms.ppo import PPOConfig
from rlx.models import ModelCatalog
from rlx.models.modelv2 import ModelV2
from rlx.models.modelv2_rl_module import ModelV2RLModule
from rlx.models.preprocessors import get_preprocessor
from rlx.models.torch.fcnet import FullyConnectedNetwork
from rlx.models.torch.recurrent_net import LSTMWrapper, RecurrentNetwork
from rlx.models.torch.torch_modelv2 import TorchModelV2
from rlx.policy.rnn_sequencing import add_time_dimension


class TorchRNNModel(RecurrentNetwork, nn.Module):
    """A custom RNN model written the way RLlib's old examples write one."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, fc_size=32, lstm_state_size=32):
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.obs_size = get_preprocessor(obs_space)(obs_space).size
        self.lstm_state_size = lstm_state_size
        self.fc1 = nn.Linear(self.obs_size, fc_size)
        self.lstm = nn.LSTM(fc_size, lstm_state_size, batch_first=True)
        self.action_branch = nn.Linear(lstm_state_size, num_outputs)
        self.value_branch = nn.Linear(lstm_state_size, 1)
        self._features = None

    def get_initial_state(self):
        return [self.fc1.weight.new(1, self.lstm_state_size).zero_().squeeze(0),
                self.fc1.weight.new(1, self.lstm_state_size).zero_().squeeze(0)]

    def value_function(self):
        return torch.reshape(self.value_branch(self._features), [-1])

    def forward_rnn(self, inputs, state, seq_lens):
        x = nn.functional.relu(self.fc1(inputs))
        self._features, (h, c) = self.lstm(x, (torch.unsqueeze(state[0], 0), torch.unsqueeze(state[1], 0)))
        return self.action_branch(self._features), [torch.squeeze(h, 0), torch.squeeze(c, 0)]


class PreferActionZeroModel(TorchModelV2, nn.Module):
    """A feed-forward model whose custom loss pulls the policy towards action 0 on the batch's observations."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, weight=1.0):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.fc = FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config, name + "_fc")
        self.weight = weight
        self.calls = 0

    def forward(self, input_dict, state, seq_lens):
        return self.fc(input_dict, state, seq_lens)

    def value_function(self):
        return self.fc.value_function()

    def custom_loss(self, policy_loss, loss_inputs):
        self.calls += 1
        obs = torch.as_tensor(np.asarray(loss_inputs["obs"], np.float32)).reshape(-1, 4)
        logits, _ = self.forward({"obs": obs, "obs_flat": obs}, [], None)
        self.imitation_loss = -torch.log_softmax(logits, -1)[:, 0].mean()
        return [loss + self.weight * self.imitation_loss for loss in policy_loss]

    def metrics(self):
        return {"imitation_loss": self.imitation_loss}


def _best_return(algo, iterations: int, target: float) -> float:
    best = -np.inf
    for _ in range(iterations):
        best = max(best, algo.train()["env_runners"]["episode_return_mean"])
        if best >= target:
            break
    return best


def test_add_time_dimension_cuts_padded_rows_into_sequences():
    flat = torch.arange(12.0).reshape(6, 2)
    out = add_time_dimension(flat, seq_lens=torch.tensor([3, 1]), framework="torch")
    assert out.shape == (2, 3, 2) and torch.equal(out[1, 0], flat[3])
    assert add_time_dimension(flat, seq_lens=[3, 3], time_major=True).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="sequences"):
        add_time_dimension(flat[:5], seq_lens=[3, 3])


def test_recurrent_network_forward_matches_step_by_step_with_carried_state():
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    model = TorchRNNModel(space, gym.spaces.Discrete(2), 2, {}, "rnn")
    obs = torch.randn(2 * 5, 2)
    state = [torch.zeros(2, 32), torch.zeros(2, 32)]
    whole, whole_state = model({"obs": obs}, state, torch.tensor([5, 5]))
    assert whole.shape == (10, 2)
    steps = obs.reshape(2, 5, 2)
    for t in range(5):
        out, state = model({"obs": steps[:, t]}, state, torch.tensor([1, 1]))
        assert torch.allclose(out, whole.reshape(2, 5, 2)[:, t], atol=1e-6)
    assert torch.allclose(state[0], whole_state[0], atol=1e-6)


def test_a_custom_rnn_model_learns_what_a_feed_forward_model_cannot():
    ModelCatalog.register_custom_model("cue_rnn", TorchRNNModel)
    config = (PPOConfig().environment(CueEnv).env_runners(num_envs_per_env_runner=8)
              # The value branch shares the LSTM: a small vf_loss_coeff keeps returns of up to 10 from
              # swamping the policy's features (as RLlib's recurrent examples set it).
              .training(model={"custom_model": "cue_rnn", "max_seq_len": 10}, train_batch_size=800,
                        minibatch_size=200, num_epochs=6, lr=3e-3, vf_loss_coeff=0.01)
              .debugging(seed=0))
    algo = config.build()
    try:
        module = algo.get_module()
        assert isinstance(module, ModelV2RLModule) and isinstance(module.model, TorchRNNModel)
        assert module.is_stateful() and sorted(module.get_initial_state()) == ["state_in_0", "state_in_1"]
        assert _best_return(algo, 30, 9.3) >= 9.3
        # compute_single_action carries the model's state list as RLlib's old loop does.
        policy = algo.get_policy()
        state = policy.get_initial_state()
        assert [np.shape(s) for s in state] == [(32,), (32,)]
        env = CueEnv()
        obs, _ = env.reset(seed=3)
        total = 0.0
        for _ in range(10):
            action, state, _ = algo.compute_single_action(obs, state=state, explore=False)
            obs, reward, _, truncated, _ = env.step(action)
            total += reward
        assert total == 10.0
    finally:
        algo.stop()
    feed_forward = (PPOConfig().environment(CueEnv).env_runners(num_envs_per_env_runner=8)
                    .training(train_batch_size=800, minibatch_size=200, num_epochs=6, lr=3e-3, vf_loss_coeff=0.01)
                    .debugging(seed=0).build())
    try:
        assert _best_return(feed_forward, 30, 9.3) < 7.0
    finally:
        feed_forward.stop()


def test_use_lstm_wraps_the_model_in_an_lstm_and_learns_the_cue():
    ModelCatalog.register_custom_model("cue_fc", FullyConnectedNetwork)
    algo = (PPOConfig().environment(CueEnv).env_runners(num_envs_per_env_runner=8)
            .training(model={"custom_model": "cue_fc", "use_lstm": True, "lstm_cell_size": 32, "fcnet_hiddens": [32],
                             "max_seq_len": 10},
                      train_batch_size=800, minibatch_size=200, num_epochs=6, lr=3e-3, vf_loss_coeff=0.01)
            .debugging(seed=0).build())
    try:
        model = algo.get_module().model
        assert isinstance(model, LSTMWrapper) and isinstance(model.wrapped, FullyConnectedNetwork)
        assert model.wrapped.num_outputs == 32 and model.lstm.hidden_size == 32
        assert _best_return(algo, 30, 9.3) >= 9.3
    finally:
        algo.stop()


def test_catalog_wraps_default_models_too_and_refuses_attention_around_modelv2s():
    from rlx.utils.errors import NotSupportedYetError

    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    model = ModelCatalog.get_model_v2(space, gym.spaces.Discrete(4), 4, {"use_lstm": True, "lstm_cell_size": 16,
                                                                        "fcnet_hiddens": [8]})
    assert isinstance(model, LSTMWrapper) and [s.shape for s in model.get_initial_state()] == [(16,), (16,)]
    out, state = model({"obs": torch.zeros(6, 3)}, [torch.zeros(2, 16), torch.zeros(2, 16)], torch.tensor([3, 3]))
    assert out.shape == (6, 4) and model.value_function().shape == (6,) and state[0].shape == (2, 16)
    with pytest.raises(NotSupportedYetError, match="use_attention"):
        ModelCatalog.get_model_v2(space, gym.spaces.Discrete(4), 4, {"use_attention": True})


def test_custom_loss_changes_training_and_its_metrics_are_reported():
    ModelCatalog.register_custom_model("prefer_zero", PreferActionZeroModel)

    def prob_of_action_zero(algo) -> float:
        obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32) * 0.05
        logits = algo.get_module().forward_inference({"obs": torch.as_tensor(obs)})["action_dist_inputs"]
        return float(torch.softmax(logits.detach(), -1)[:, 0].mean())

    def build(weight: float):
        return (PPOConfig().environment("CartPole-v1")
                .training(model={"custom_model": "prefer_zero", "custom_model_config": {"weight": weight},
                                 "fcnet_hiddens": [16]}, train_batch_size=256, minibatch_size=128, num_epochs=8,
                          lr=1e-2, vf_loss_coeff=0.01)
                .debugging(seed=0).build())

    algo = build(5.0)
    try:
        result = algo.train()
        learner = result["learners"]["default_policy"]
        assert np.isfinite(learner["imitation_loss"])
        model = algo.get_module().model
        assert model.calls == learner["num_minibatch_updates"]
        for _ in range(2):
            algo.train()
        with_loss = prob_of_action_zero(algo)
    finally:
        algo.stop()
    plain = build(0.0)
    try:
        for _ in range(3):
            plain.train()
        without = prob_of_action_zero(plain)
    finally:
        plain.stop()
    assert with_loss > 0.9 > without


def test_custom_loss_with_its_own_optimizer_is_refused():
    from rlx.utils.errors import NotSupportedYetError

    class TwoLosses(PreferActionZeroModel):
        def custom_loss(self, policy_loss, loss_inputs):
            return list(policy_loss) + [policy_loss[0] * 0.0]

    ModelCatalog.register_custom_model("two_losses", TwoLosses)
    algo = (PPOConfig().environment("CartPole-v1")
            .training(model={"custom_model": "two_losses"}, train_batch_size=128, minibatch_size=64, num_epochs=1)
            .build())
    try:
        with pytest.raises(NotSupportedYetError, match="own"):
            algo.train()
    finally:
        algo.stop()


def test_modelv2_default_custom_loss_leaves_the_loss_alone():
    assert ModelV2.custom_loss(object.__new__(ModelV2), [torch.tensor(1.0)], {}) == [torch.tensor(1.0)]

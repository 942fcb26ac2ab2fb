"""Recurrent (stateful) RLModules: the default LSTM module (model use_lstm), how EnvRunners carry
each sub-env's state, and PPO training on sequences."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.ppo.recurrent import cut_sequences
from rlx.core.columns import Columns
from rlx.core.lstm_models import LSTMActorCriticModule
from rlx.examples.envs.classes.stateless_cartpole import StatelessCartPole
from rlx.utils.errors import NotSupportedYetError


def _lstm_config(**model):
    return (PPOConfig().environment(StatelessCartPole).env_runners(num_envs_per_env_runner=8)
            .training(model={"use_lstm": True, "lstm_cell_size": 64, "fcnet_hiddens": [64], "max_seq_len": 20,
                             **model},
                      train_batch_size=2000, minibatch_size=400, num_epochs=6, lr=1e-3)
            .debugging(seed=0))


@pytest.mark.slow
def test_use_lstm_learns_stateless_cartpole():
    # Without memory the pole's velocities are unobservable: a feed-forward policy stays far lower.
    algo = _lstm_config().build()
    try:
        assert isinstance(algo.get_module(), LSTMActorCriticModule)
        best = 0.0
        for _ in range(30):
            best = max(best, algo.train()["env_runners"]["episode_return_mean"])
            if best >= 150.0:
                break
        assert best >= 150.0
    finally:
        algo.stop()


def test_runner_carries_state_per_sub_env_and_resets_it_at_episode_starts():
    algo = _lstm_config(lstm_cell_size=8, fcnet_hiddens=[8]).build()
    try:
        batch = algo.env_runner.sample(num_timesteps=400)
        h = batch["state_in/h"]
        ends = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
        assert ends.any()
        t, b = np.argwhere(ends[:-1])[0]
        assert not np.any(h[t + 1, b])  # a new episode starts from the initial (zero) state
        assert np.any(h[t, b]) or t == 0
        # The stored state is the module's: replaying one column's first steps reproduces it.
        module = algo.env_runner.module
        state = {k: torch.zeros(1, 8) for k in module.get_initial_state()}
        with torch.no_grad():
            for step in range(3):
                out = module.forward_inference({Columns.OBS: torch.from_numpy(batch[Columns.OBS][step, 0])[None, None],
                                                Columns.STATE_IN: state})
                state = out[Columns.STATE_OUT]
                assert np.allclose(state["h"][0].numpy(), h[step + 1, 0], atol=1e-5) or ends[step, 0]
    finally:
        algo.stop()


def test_sequences_cut_at_episode_ends_padding_and_max_seq_len():
    T, B = 7, 2
    term = np.zeros((T, B), bool)
    term[2, 0] = True
    valid = np.ones((T, B), bool)
    valid[5:, 1] = False
    batch = {Columns.REWARDS: np.zeros((T, B), np.float32), Columns.TERMINATEDS: term,
             Columns.TRUNCATEDS: np.zeros((T, B), bool), Columns.VALID: valid}
    seqs = cut_sequences(batch, max_seq_len=3)
    spans = sorted((int(seqs.b_idx[i, 0]), int(seqs.t_idx[i, 0]), int(seqs.lengths[i])) for i in range(len(seqs.lengths)))
    assert spans == [(0, 0, 3), (0, 3, 3), (0, 6, 1), (1, 0, 3), (1, 3, 2)]
    assert seqs.mask.sum() == valid.sum()


def test_recurrent_checkpoints_restore_the_module(tmp_path):
    algo = _lstm_config(lstm_cell_size=8, fcnet_hiddens=[8]).training(train_batch_size=400, minibatch_size=200,
                                                                       num_epochs=1).build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        weights = algo.get_module().get_state()
        restored = _lstm_config(lstm_cell_size=8, fcnet_hiddens=[8]).build()
        try:
            restored.restore(path)
            again = restored.get_module().get_state()
            assert all(np.array_equal(weights[k], again[k]) for k in weights)
        finally:
            restored.stop()
    finally:
        algo.stop()


def test_use_lstm_with_an_algorithm_that_cannot_train_it_is_refused():
    from rlx.algorithms.cql import CQLConfig

    # SAC trains use_lstm (tests/algorithms/test_recurrent_sac.py); CQL, built on SAC, does not.
    with pytest.raises(NotSupportedYetError, match=r"use_lstm'\] with CQL"):
        CQLConfig().environment("Pendulum-v1").training(model={"use_lstm": True}).build()


class HiddenBit(gym.Env):
    """Blank observations; reward 1 when the action equals the episode's hidden bit (10 steps).
    Only the previous action and reward tell the bit: 9.5 with them, 5 without."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.bit = int(self.np_random.integers(2))
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), float(action == self.bit), False, self.t >= 10, {}


@pytest.mark.slow
def test_lstm_use_prev_action_and_reward_feed_the_previous_step_in():
    model = {"use_lstm": True, "lstm_cell_size": 32, "fcnet_hiddens": [32], "max_seq_len": 10,
             "lstm_use_prev_action": True, "lstm_use_prev_reward": True}
    algo = PPOConfig().environment(HiddenBit).training(model=model, train_batch_size=1000, lr=1e-3).debugging(
        seed=0).build()
    try:
        # The observation, a one-hot of the previous action, and the previous reward.
        assert algo.env_runner.module_observation_space.shape == (4,)
        best = 0.0
        for _ in range(20):
            best = max(best, algo.train()["env_runners"]["episode_return_mean"])
            if best >= 8.5:
                break
        assert best >= 8.5
    finally:
        algo.stop()


@pytest.mark.slow
def test_a_recurrent_module_written_rllibs_way_trains_with_ppo():
    # RLlib's example module: `_forward`, state {"h", "c"}, values from the train pass's embeddings.
    from rlx.core.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.lstm_containing_rlm import LSTMContainingRLModule

    config = (PPOConfig().environment(StatelessCartPole).env_runners(num_envs_per_env_runner=8)
              .training(train_batch_size=1024, minibatch_size=256, num_epochs=6, lr=0.0009, vf_loss_coeff=0.001)
              .rl_module(rl_module_spec=RLModuleSpec(module_class=LSTMContainingRLModule, model_config={
                  "lstm_cell_size": 64, "max_seq_len": 20, "dense_layers": [64]}))
              .debugging(seed=0))
    algo = config.build()
    try:
        first = algo.train()["env_runners"]["episode_return_mean"]
        best = first
        for _ in range(39):
            best = max(best, algo.train()["env_runners"]["episode_return_mean"])
            if best >= 45.0:
                break
        assert best >= 45.0 > first
    finally:
        algo.stop()


def test_compute_single_action_carries_a_recurrent_state_like_rllibs_loop():
    algo = _lstm_config(lstm_cell_size=8, fcnet_hiddens=[8]).build()
    try:
        policy = algo.get_policy()
        assert policy.is_recurrent() and policy.num_state_tensors() == 4
        state = policy.get_initial_state()
        assert [s.shape for s in state] == [(8,)] * 4 and not any(np.any(s) for s in state)
        env = StatelessCartPole()
        obs, _ = env.reset(seed=0)
        for _ in range(3):
            action, state, _ = algo.compute_single_action(obs, state=state, explore=False)
            obs, *_ = env.step(action)
        assert len(state) == 4 and np.any(state[0])
        # The state changes what the policy sees: the same observation from another state gives other logits.
        _, _, fresh = algo.compute_single_action(obs, state=policy.get_initial_state(), full_fetch=True)
        _, _, carried = algo.compute_single_action(obs, state=state, full_fetch=True)
        assert not np.allclose(fresh["action_dist_inputs"], carried["action_dist_inputs"])
    finally:
        algo.stop()

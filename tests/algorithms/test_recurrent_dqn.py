"""Recurrent DQN (R2D2-style): sequence replay with stored state, burn-in, the recurrent Q-network
and its learner, config validation, checkpoints, and a memory task only a recurrent DQN solves."""
from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs_for_tests import CueEnv
from rlx.algorithms.dqn import DQN, DQNConfig
from rlx.algorithms.dqn.recurrent_dqn_learner import RecurrentDQNLearner, nstep_targets
from rlx.algorithms.dqn.recurrent_dqn_rl_module import RecurrentDQNRLModule
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError
from rlx.utils.replay_buffers import PrioritizedReplayBuffer, ReplayBuffer
from rlx.utils.replay_buffers.sequence_replay_buffer import BURN_IN, SEQ_LENS, SequenceReplayBuffer


class Cue(CueEnv):
    """The cue task (tests/envs_for_tests.py) with the bit shown one-hot."""

    def __init__(self, config=None):
        super().__init__({"one_hot": True})


def _config(max_seq_len=10, burn_in_len=0, **training):
    model = {"use_lstm": True, "lstm_cell_size": 32, "fcnet_hiddens": [32], "max_seq_len": max_seq_len}
    return (DQNConfig().environment(Cue)
            .training(**{"model": model, "burn_in_len": burn_in_len, "lr": 1e-3, "train_batch_size": 64,
                         "hiddens": [32], "num_steps_sampled_before_learning_starts": 500,
                         "target_network_update_freq": 200, **training})
            .exploration(exploration_config={"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.02,
                                             "epsilon_timesteps": 2500})
            .reporting(min_sample_timesteps_per_iteration=500)
            .debugging(seed=0))


# ----------------------------------------------------------------------------- sequence replay


def _time_major_batch(T, B, ends=(), terminated=()):
    """A runner-like batch whose values name their step: obs = 100 * t + b, state = -(100 * t + b)."""
    ids = (100 * np.arange(T)[:, None] + np.arange(B)[None, :]).astype(np.float32)
    ends_arr = np.zeros((T, B), bool)
    term = np.zeros((T, B), bool)
    for t, b in ends:
        ends_arr[t, b] = True
    for t, b in terminated:
        term[t, b] = True
    return {
        Columns.OBS: np.stack([ids, ids], axis=-1),
        Columns.NEXT_OBS: np.stack([ids + 0.5, ids + 0.5], axis=-1),
        Columns.ACTIONS: (ids % 2).astype(np.int64),
        Columns.REWARDS: ids + 0.25,
        Columns.TERMINATEDS: term,
        Columns.TRUNCATEDS: ends_arr & ~term,
        Columns.VALID: np.ones((T, B), bool),
        "state_in/h": np.repeat(-ids[..., None], 3, axis=-1),
        "state_in/c": np.repeat(-ids[..., None], 3, axis=-1) - 0.5,
    }


def _stored(buffer):
    state = buffer.get_state()
    return state["columns"]


def test_sequences_are_cut_at_episode_ends_zero_padded_with_mask_and_start_state():
    buf = SequenceReplayBuffer(ReplayBuffer(100), max_seq_len=3)
    batch = _time_major_batch(7, 2, terminated=[(1, 0)])
    buf.add(batch)
    # Lane 0: steps 0-1 (terminated), 2-4 (full); lane 1: 0-2, 3-5; steps 5-6 / 6 still open.
    assert len(buf) == 4
    buf.end_open_episodes()
    assert len(buf) == 6
    cols = _stored(buf)
    starts = [(0, 0), (2, 0), (0, 1), (3, 1), (5, 0), (6, 1)]  # (t, b) of each sequence's first step
    lens = [2, 3, 3, 3, 2, 1]
    for i, ((t0, b), n) in enumerate(zip(starts, lens)):
        steps = 100 * (t0 + np.arange(n)) + b
        assert cols[SEQ_LENS][i] == n
        np.testing.assert_array_equal(cols[Columns.OBS][i, :n, 0], steps)
        assert cols[Columns.OBS][i, n, 0] == steps[-1] + 0.5  # the observation after the last step
        assert not cols[Columns.OBS][i, n + 1:].any()  # zero padding
        np.testing.assert_array_equal(cols[Columns.REWARDS][i, :n], steps + 0.25)
        assert not cols[Columns.REWARDS][i, n:].any()
        np.testing.assert_array_equal(cols[Columns.LOSS_MASK][i], np.arange(3) < n)
        np.testing.assert_array_equal(cols["state_in/h"][i], [-(100 * t0 + b)] * 3)  # state before its first step
        np.testing.assert_array_equal(cols["state_in/c"][i], [-(100 * t0 + b) - 0.5] * 3)
        assert cols[BURN_IN][i] == 0
    np.testing.assert_array_equal(cols[Columns.TERMINATEDS], [True, False, False, False, False, False])


def test_burn_in_overlaps_sequences_and_every_step_is_trained_once_across_adds():
    batch = _time_major_batch(9, 1)
    whole = SequenceReplayBuffer(ReplayBuffer(100), max_seq_len=4, burn_in_len=2)
    whole.add(batch)
    whole.end_open_episodes()
    split = SequenceReplayBuffer(ReplayBuffer(100), max_seq_len=4, burn_in_len=2)
    split.add({k: v[:4] for k, v in batch.items()})
    split.add({k: v[4:] for k, v in batch.items()})
    split.end_open_episodes()
    a, b = _stored(whole), _stored(split)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # Sequences 0-3, then 2-5, 4-7, 6-8: each after the first starts with the 2 steps before.
    np.testing.assert_array_equal(a[Columns.OBS][:, 0, 0], [0, 200, 400, 600])
    np.testing.assert_array_equal(a[BURN_IN], [0, 2, 2, 2])
    np.testing.assert_array_equal(a["state_in/h"][:, 0], [0, -200, -400, -600])
    trained = np.concatenate([a[Columns.OBS][i, :4, 0][a[Columns.LOSS_MASK][i]] for i in range(4)])
    np.testing.assert_array_equal(trained, 100 * np.arange(9))


def test_sample_draws_sequences_for_the_step_count_and_priorities_update():
    buf = SequenceReplayBuffer(PrioritizedReplayBuffer(100, seed=0), max_seq_len=4)
    buf.add(_time_major_batch(16, 2))
    out = buf.sample(10, n_step=3)
    assert out[Columns.OBS].shape == (3, 5, 2)  # ceil(10 / 4) sequences of 4 steps + the next observation
    np.testing.assert_array_equal(out["n_step"], [3, 3, 3])
    buf.update_priorities(np.arange(len(buf)), np.r_[100.0, np.zeros(len(buf) - 1)])
    assert (buf.sample(40)["batch_indexes"] == 0).mean() > 0.8
    with pytest.raises(TypeError, match="no priorities"):
        SequenceReplayBuffer(ReplayBuffer(10), 4).update_priorities(np.arange(1), np.ones(1))


def test_nstep_targets_stop_at_the_sequence_end_and_terminal_steps_do_not_bootstrap():
    rewards = torch.tensor([[1.0, 2.0, 3.0, 0.0]])
    sums, boot, discount = nstep_targets(rewards, torch.tensor([3]), torch.tensor([True]), n_step=2, gamma=0.5)
    np.testing.assert_allclose(sums[0, :3], [1 + 0.5 * 2, 2 + 0.5 * 3, 3])
    np.testing.assert_array_equal(boot[0, :3], [2, 3, 3])
    np.testing.assert_allclose(discount[0, :3], [0.25, 0.0, 0.0])  # steps 1 and 2 reach the terminal step
    _, _, open_end = nstep_targets(rewards, torch.tensor([3]), torch.tensor([False]), n_step=2, gamma=0.5)
    np.testing.assert_allclose(open_end[0, :3], [0.25, 0.25, 0.5])


# ----------------------------------------------------------------------------- learner


def _sequence_batch(rng, N=6, L=6, burn_in=2, cell=32):
    seq_lens = np.array([6, 6, 5, 6, 4, 6])[:N]
    mask = np.arange(L)[None] < seq_lens[:, None]
    burn = np.array([burn_in, 0] * (N // 2))
    loss_mask = mask & (np.arange(L)[None] >= burn[:, None])
    return {
        Columns.OBS: rng.normal(size=(N, L + 1, 2)).astype(np.float32),
        Columns.ACTIONS: rng.integers(0, 2, size=(N, L)),
        Columns.REWARDS: (rng.normal(size=(N, L)) * mask).astype(np.float32),
        Columns.TERMINATEDS: np.array([True, False] * (N // 2)),
        SEQ_LENS: seq_lens, BURN_IN: burn, Columns.LOSS_MASK: loss_mask,
        "state_in/h": rng.normal(size=(N, cell)).astype(np.float32),
        "state_in/c": rng.normal(size=(N, cell)).astype(np.float32),
        Columns.WEIGHTS: np.ones(N, np.float32), "n_step": np.full(N, 3),
    }


def test_burn_in_steps_get_no_loss():
    algo = _config(max_seq_len=6, burn_in_len=2).build()
    try:
        learner = algo.learner
        assert isinstance(learner, RecurrentDQNLearner) and isinstance(algo.get_module(), RecurrentDQNRLModule)
        batch = _sequence_batch(np.random.default_rng(0))

        def update(b):
            out = copy.deepcopy(learner).update_from_batch(b, timestep=0)
            return float(out["qf_loss"]), out["td_error"]

        loss, prios = update(batch)
        burned = copy.deepcopy(batch)
        burned[Columns.REWARDS][0::2, :2] += 50.0  # rewards of the burn-in steps only
        loss_b, prios_b = update(burned)
        assert loss_b == pytest.approx(loss, rel=1e-6)
        np.testing.assert_allclose(prios_b, prios, rtol=1e-6)
        trained = copy.deepcopy(batch)
        trained[Columns.REWARDS][0, 3] += 50.0  # a step after the burn-in
        loss_t, prios_t = update(trained)
        assert loss_t != pytest.approx(loss, rel=1e-3)
        assert prios_t[0] > prios[0] + 1.0 and np.allclose(prios_t[1:], prios[1:])
        # Without burn-in the same steps are trained on: their rewards change the loss.
        unburned = copy.deepcopy(burned)
        unburned[BURN_IN][:] = 0
        unburned[Columns.LOSS_MASK] = np.arange(6)[None] < unburned[SEQ_LENS][:, None]
        assert update(unburned)[0] > loss + 1.0
    finally:
        algo.stop()


def test_burn_in_steps_pass_no_gradient():
    algo = _config(max_seq_len=6, burn_in_len=2).build()
    try:
        module = algo.learner.rl_module
        batch = _sequence_batch(np.random.default_rng(1))
        obs = torch.tensor(batch[Columns.OBS], requires_grad=True)
        state = {"h": torch.tensor(batch["state_in/h"]), "c": torch.tensor(batch["state_in/c"])}
        q = algo.learner._unroll(module, obs, state, burn_in=2, noisy=False)
        q[:, 2:].sum().backward()
        assert not obs.grad[:, :2].any() and obs.grad[:, 2:].abs().sum() > 0
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- training


@pytest.mark.slow
def test_recurrent_dqn_solves_the_cue_task_a_feed_forward_dqn_cannot():
    # A feed-forward Q-network averages 5.5 at best here (the bit is visible only at the first step).
    algo = _config(max_seq_len=6, burn_in_len=2).build()
    try:
        best = 0.0
        while algo._counters["num_env_steps_sampled_lifetime"] < 6000 and best < 9.0:
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"])
        assert best >= 9.0, best
        assert result["learners"]["default_policy"]["qf_loss"] >= 0.0
        # Greedy play with the carried state repeats the bit.
        env, total = Cue(), 0.0
        for episode in range(10):
            obs, _ = env.reset(seed=episode)
            state = algo.get_policy().get_initial_state()
            for _ in range(10):
                action, state, _ = algo.compute_single_action(obs, state=state, explore=False)
                obs, reward, *_ = env.step(action)
                total += reward
        assert total >= 90.0
    finally:
        algo.stop()
    # The same DQN without the LSTM stays near 5.5 over the budget the recurrent one needed.
    feed_forward = _config().training(model={"use_lstm": False}).build()
    try:
        best_ff = 0.0
        while feed_forward._counters["num_env_steps_sampled_lifetime"] < 3000:
            best_ff = max(best_ff, feed_forward.train()["env_runners"]["episode_return_mean"])
        assert best_ff < 7.5, best_ff
    finally:
        feed_forward.stop()


def test_checkpoint_round_trip_restores_module_target_and_sequences(tmp_path):
    config = _config(max_seq_len=5, burn_in_len=1, num_steps_sampled_before_learning_starts=100,
                     store_buffer_in_checkpoints=True).reporting(min_sample_timesteps_per_iteration=200)
    algo = config.build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        weights = algo.get_module().get_state()
        target = algo.learner.get_extra_tensors()
        restored = DQN.from_checkpoint(path)
        try:
            assert restored.config.burn_in_len == 1 and restored.config.model["max_seq_len"] == 5
            again = restored.get_module().get_state()
            assert all(np.array_equal(weights[k], again[k]) for k in weights)
            target_again = restored.learner.get_extra_tensors()
            assert all(torch.equal(target[k], target_again[k]) for k in target)
            assert len(restored.local_replay_buffer) == len(algo.local_replay_buffer) > 0
            assert restored.train()["num_env_steps_sampled_lifetime"] > 200
        finally:
            restored.stop()
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- config


def test_burn_in_comes_before_max_seq_len_trained_steps_as_in_rllibs_r2d2():
    """RLlib's R2D2 replays burn_in + max_seq_len steps: its replay-buffer example sets both to 20."""
    algo = _config(max_seq_len=10, burn_in_len=10).build()
    try:
        buffer = algo.local_replay_buffer
        assert (buffer.max_seq_len, buffer.burn_in_len) == (20, 10)
    finally:
        algo.stop()
    with pytest.raises(ConfigError, match="burn_in_len=2 applies to recurrent models"):
        DQNConfig().environment("CartPole-v1").training(burn_in_len=2).validate()


def test_old_sequence_replay_keys_set_max_seq_len_burn_in_and_zero_states():
    config = _config(replay_buffer_config={"replay_sequence_length": 8, "replay_burn_in": 3,
                                           "replay_zero_init_states": True})
    config.validate()
    assert config.model["max_seq_len"] == 8 and config.burn_in_len == 3 and config.zero_init_states
    assert "replay_sequence_length" not in config.replay_buffer_config
    # Without use_lstm they still mean what rlx does not do for feed-forward models.
    plain = DQNConfig().environment("CartPole-v1").training(replay_buffer_config={"replay_sequence_length": 8})
    with pytest.raises(NotSupportedYetError, match="replay_sequence_length"):
        plain.build()


def test_zero_init_states_ignores_the_stored_state():
    algo = _config(max_seq_len=6, zero_init_states=True).build()
    try:
        batch = _sequence_batch(np.random.default_rng(2))
        batch[BURN_IN][:] = 0
        other = copy.deepcopy(batch)
        other["state_in/h"] += 3.0
        a = copy.deepcopy(algo.learner).update_from_batch(batch, timestep=0)["qf_loss"]
        b = copy.deepcopy(algo.learner).update_from_batch(other, timestep=0)["qf_loss"]
        assert float(a) == pytest.approx(float(b), rel=1e-6)
    finally:
        algo.stop()


def test_distributional_recurrent_dqn_is_refused():
    with pytest.raises(NotSupportedYetError, match="num_atoms"):
        _config(num_atoms=51).validate()


@pytest.mark.parametrize("algo_name", ["SAC", "DDPG", "TD3"])
def test_use_attention_with_sac_ddpg_td3_is_refused_naming_them(algo_name):
    # use_lstm builds their recurrent modules (tests/algorithms/test_recurrent_sac.py); attention nets are PPO's.
    module = __import__(f"rlx.algorithms.{algo_name.lower()}", fromlist=[f"{algo_name}Config"])
    config = getattr(module, f"{algo_name}Config")().environment("Pendulum-v1").training(model={"use_attention": True})
    with pytest.raises(NotSupportedYetError, match=rf"use_attention'\] with {algo_name}"):
        config.build()


def test_recurrent_dqn_in_a_multi_agent_run_is_refused():
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    config = (DQNConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
              .training(model={"use_lstm": True}))
    with pytest.raises(NotSupportedYetError, match="use_lstm with multi-agent DQN"):
        config.build()

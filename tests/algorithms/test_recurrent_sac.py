"""Recurrent SAC, DDPG and TD3 (model use_lstm, R2D2-style sequence replay with stored state):
a continuous memory task only a recurrent policy solves, the unrolled losses against the
feed-forward formula, masking of padded and burn-in steps, checkpoints, and config errors."""
from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs_for_tests import CueEnv
from rlx.algorithms.ddpg.recurrent_ddpg_learner import RecurrentDDPGLearner
from rlx.algorithms.ddpg.recurrent_ddpg_rl_module import RecurrentDDPGRLModule
from rlx.algorithms.recurrent_replay import burn_in_groups, unroll
from rlx.algorithms.sac import SAC, SACConfig
from rlx.algorithms.sac.recurrent_sac_learner import RecurrentSACLearner
from rlx.algorithms.sac.recurrent_sac_rl_module import RecurrentSACRLModule
from rlx.algorithms.sac.sac_learner import squashed_gaussian_rsample
from rlx.algorithms.td3 import TD3Config
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError
from rlx.utils.replay_buffers.sequence_replay_buffer import BURN_IN, SEQ_LENS

CUE = 0.5
EPISODE_LEN = 5


class ContinuousCueEnv(gym.Env):
    """A continuous memory task: the first observation shows a cue of +-0.5 (and a start flag),
    then only zeros follow; every step pays -4 * (action - cue)**2, over 5 steps.

    A policy with memory earns about 0. A feed-forward one sees the same zeros at steps 1-4, so
    it plays one action c there: averaged over both cues its return is at most
    -4 * 4 * (c**2 + 0.25) <= -4. `reset(options={"cue": x})` fixes the cue.
    """

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.cue = float((options or {}).get("cue", CUE if self.np_random.integers(2) else -CUE))
        return np.array([self.cue, 1.0], np.float32), {}

    def step(self, action):
        self.t += 1
        reward = -4.0 * (float(np.asarray(action).reshape(-1)[0]) - self.cue) ** 2
        return np.zeros(2, np.float32), reward, False, self.t >= EPISODE_LEN, {}


def greedy_return(algo, recurrent: bool) -> float:
    """Mean return of the greedy policy over the two cues (the state carried step to step)."""
    env, total = ContinuousCueEnv(), 0.0
    for cue in (-CUE, CUE):
        obs, _ = env.reset(options={"cue": cue})
        state = algo.get_policy().get_initial_state() if recurrent else None
        for _ in range(EPISODE_LEN):
            if recurrent:
                action, state, _ = algo.compute_single_action(obs, state=state, explore=False)
            else:
                action = algo.compute_single_action(obs, explore=False)
            obs, reward, *_ = env.step(action)
            total += reward
    return total / 2


def _model(max_seq_len=EPISODE_LEN, use_lstm=True):
    return {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": max_seq_len} if use_lstm else {}


def _sac_config(max_seq_len=EPISODE_LEN, burn_in_len=0, use_lstm=True, env=ContinuousCueEnv, **training):
    return (SACConfig().environment(env)
            .training(**{"model": _model(max_seq_len, use_lstm), "burn_in_len": burn_in_len,
                         "policy_model_config": {"fcnet_hiddens": [32]}, "q_model_config": {"fcnet_hiddens": [32]},
                         "train_batch_size": 128, "training_intensity": 64.0, "gamma": 0.9,
                         "actor_lr": 3e-3, "critic_lr": 3e-3, "alpha_lr": 3e-3,
                         "num_steps_sampled_before_learning_starts": 300, **training})
            .reporting(min_sample_timesteps_per_iteration=250)
            .debugging(seed=0))


def _td3_config(max_seq_len=EPISODE_LEN, burn_in_len=0, **training):
    return (TD3Config().environment(ContinuousCueEnv)
            .training(**{"model": _model(max_seq_len), "burn_in_len": burn_in_len, "actor_hiddens": [32],
                         "critic_hiddens": [32], "train_batch_size": 128, "training_intensity": 64.0, "gamma": 0.9,
                         "actor_lr": 3e-3, "critic_lr": 3e-3, "num_steps_sampled_before_learning_starts": 300,
                         **training})
            .reporting(min_sample_timesteps_per_iteration=250)
            .debugging(seed=0))


def _train_until(algo, steps: int) -> None:
    while algo._counters["num_env_steps_sampled_lifetime"] < steps:
        algo.train()


# ----------------------------------------------------------------------------- learning


@pytest.mark.slow
def test_recurrent_sac_solves_the_continuous_cue_task_a_feed_forward_sac_cannot():
    algo = _sac_config().build()
    try:
        assert isinstance(algo.learner, RecurrentSACLearner) and isinstance(algo.get_module(), RecurrentSACRLModule)
        _train_until(algo, 1250)
        assert greedy_return(algo, recurrent=True) > -1.0
    finally:
        algo.stop()
    # Feed-forward SAC stays at or below -4 on this task, whatever it learns.
    feed_forward = _sac_config(use_lstm=False).build()
    try:
        _train_until(feed_forward, 1000)
        assert greedy_return(feed_forward, recurrent=False) < -3.0
    finally:
        feed_forward.stop()


@pytest.mark.slow
def test_recurrent_td3_solves_the_continuous_cue_task():
    algo = _td3_config().build()
    try:
        assert isinstance(algo.learner, RecurrentDDPGLearner) and isinstance(algo.get_module(), RecurrentDDPGRLModule)
        assert algo.get_module().twin_q
        _train_until(algo, 1250)
        assert greedy_return(algo, recurrent=True) > -1.0
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- loss mechanics


def _sequence_batch(rng, module, N=6, L=4, seq_lens=None, burn_in=None):
    seq_lens = np.array([4, 4, 3, 4, 2, 1])[:N] if seq_lens is None else np.asarray(seq_lens)
    burn = np.zeros(N, np.int64) if burn_in is None else np.asarray(burn_in)
    steps = np.arange(L)[None]
    state = {k: rng.normal(size=(N,) + np.shape(v)).astype(np.float32)
             for k, v in module.get_initial_state().items()}
    return {
        Columns.OBS: rng.normal(size=(N, L + 1, 2)).astype(np.float32),
        Columns.ACTIONS: rng.uniform(-1, 1, size=(N, L, 1)).astype(np.float32),
        Columns.REWARDS: (rng.normal(size=(N, L)) * (steps < seq_lens[:, None])).astype(np.float32),
        Columns.TERMINATEDS: np.arange(N) % 2 == 0,
        SEQ_LENS: seq_lens, BURN_IN: burn,
        Columns.LOSS_MASK: (steps < seq_lens[:, None]) & (steps >= burn[:, None]),
        **{f"state_in/{k}": v for k, v in state.items()},
        "n_step": np.ones(N, np.int64),
    }


def test_sequences_of_one_step_give_the_feed_forward_critic_loss():
    algo = _sac_config(max_seq_len=1).build()
    try:
        learner, module = algo.learner, algo.learner.module
        batch = _sequence_batch(np.random.default_rng(0), module, L=1, seq_lens=np.ones(6, np.int64))
        # The feed-forward formula on the same data: Q(o, a) against r + gamma * (1 - terminated) *
        # (min target Q(o', a') - alpha * log pi(a'|o')), o' read after o from the stored states.
        gen = torch.Generator()
        gen.set_state(learner._generator.get_state())
        noise = torch.randn((2, 6, 2, 1), generator=gen)
        obs = torch.tensor(batch[Columns.OBS])
        state = {k[len("state_in/"):]: torch.tensor(v) for k, v in batch.items() if k.startswith("state_in/")}
        alpha = float(learner.log_alpha.detach().exp())
        with torch.no_grad():
            pi_out, _ = module.policy_unroll(obs, state)
            next_a, next_logp = squashed_gaussian_rsample(pi_out[:, 1], noise[1, :, 1])
            target_feats, _ = module.critic_features(obs, state, qf=learner.target_qf)
            next_q = module.q_values(target_feats[:, 1:], next_a[:, None], qf=learner.target_qf)[:, :, 0].min(0).values
            not_done = 1.0 - torch.tensor(batch[Columns.TERMINATEDS]).float()
            y = torch.tensor(batch[Columns.REWARDS][:, 0]) + 0.9 * not_done * (next_q - alpha * next_logp)
            feats, _ = module.critic_features(obs[:, :1], state)
            q = module.q_values(feats, torch.tensor(batch[Columns.ACTIONS]))[:, :, 0]  # [E, N]
            expected = 0.5 * (q - y).pow(2).mean(dim=1).sum()
        out = copy.deepcopy(learner).update_from_batch(batch, timestep=0)
        assert float(out["critic_loss"]) == pytest.approx(float(expected), rel=1e-5)
    finally:
        algo.stop()


def _updated(learner, batch):
    """(metrics, parameters after the update) of one update on a copy of `learner`."""
    twin = copy.deepcopy(learner)
    out = twin.update_from_batch(batch, timestep=0)
    return out, [p.detach().clone() for p in twin.module.parameters()]


@pytest.mark.parametrize("algo_name", ["SAC", "TD3"])
def test_padded_and_burn_in_steps_change_neither_losses_nor_gradients(algo_name):
    config = _sac_config(max_seq_len=4, burn_in_len=2) if algo_name == "SAC" else \
        _td3_config(max_seq_len=4, burn_in_len=2, policy_delay=1, smooth_target_policy=False)
    algo = config.build()
    try:
        learner = algo.learner
        batch = _sequence_batch(np.random.default_rng(1), learner.module, burn_in=[2, 0, 2, 0, 0, 0])
        out, params = _updated(learner, batch)
        changed = copy.deepcopy(batch)
        for i, n in enumerate(batch[SEQ_LENS]):  # padding: steps at and after seq_lens (bar the next observation)
            changed[Columns.ACTIONS][i, n:] = 0.9
            changed[Columns.OBS][i, n + 1:] = 7.0
        changed[Columns.ACTIONS][[0, 2], :2] = -0.9  # the burn-in steps' actions and rewards
        changed[Columns.REWARDS][[0, 2], :2] += 50.0
        out_c, params_c = _updated(learner, changed)
        for key in ("critic_loss", "actor_loss"):
            assert float(out_c[key]) == pytest.approx(float(out[key]), rel=1e-5)
        np.testing.assert_allclose(out_c["td_error"], out["td_error"], rtol=1e-5)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(params, params_c))
        # A trained step's reward does count, only for its own sequence's priority.
        trained = copy.deepcopy(batch)
        trained[Columns.REWARDS][0, 3] += 50.0
        out_t, _ = _updated(learner, trained)
        assert float(out_t["critic_loss"]) > float(out["critic_loss"]) + 1.0
        assert out_t["td_error"][0] > out["td_error"][0] + 1.0
        np.testing.assert_allclose(out_t["td_error"][1:], out["td_error"][1:], rtol=1e-5)
    finally:
        algo.stop()


def test_burn_in_steps_pass_no_gradient_and_warm_the_state():
    algo = _sac_config(max_seq_len=4, burn_in_len=2).build()
    try:
        module = algo.learner.module
        batch = _sequence_batch(np.random.default_rng(2), module, burn_in=[2, 0, 2, 0, 0, 0])
        order, groups = burn_in_groups(batch[BURN_IN])
        obs = torch.tensor(batch[Columns.OBS][order], requires_grad=True)
        state = {k: torch.tensor(batch[f"state_in/{k}"][order]) for k in ("h", "c")}
        out = unroll(module.policy_unroll, obs, state, groups)
        out.sum().backward()
        burned = [i for i, b in enumerate(batch[BURN_IN][order]) if b]
        assert not obs.grad[burned, :2].any() and obs.grad[burned, 2:].abs().sum() > 0
        # The outputs equal one unroll of the whole sequence: burn-in only drops gradients.
        with torch.no_grad():
            whole, _ = module.policy_unroll(obs, state)
        torch.testing.assert_close(out.detach(), whole)
    finally:
        algo.stop()


def test_zero_init_states_ignores_the_stored_state():
    algo = _sac_config(max_seq_len=4, zero_init_states=True).build()
    try:
        batch = _sequence_batch(np.random.default_rng(3), algo.learner.module)
        other = copy.deepcopy(batch)
        other["state_in/h"] += 3.0
        other["state_in/q_c"] -= 2.0
        a = _updated(algo.learner, batch)[0]["critic_loss"]
        b = _updated(algo.learner, other)[0]["critic_loss"]
        assert float(a) == pytest.approx(float(b), rel=1e-6)
    finally:
        algo.stop()


def test_discrete_recurrent_sac_trains_on_prioritized_sequences_with_state_per_sub_env():
    config = _sac_config(env=lambda cfg: CueEnv(), num_steps_sampled_before_learning_starts=100,
                         train_batch_size=32,
                         replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 5000}
                         ).env_runners(num_envs_per_env_runner=2)
    algo = config.build()
    try:
        buffer = algo.local_replay_buffer
        assert algo.get_module().discrete and buffer.prioritized
        calls, update = [], buffer.update_priorities
        buffer.update_priorities = lambda rows, priorities: (calls.append((rows, priorities)), update(rows, priorities))
        result = algo.train()
        # One priority per replayed sequence (32 steps: 7 sequences of 5), positive and finite.
        assert calls and all(len(r) == len(p) == 7 and np.isfinite(p).all() and (p > 0).all() for r, p in calls)
        learner_results = result["learners"]["default_policy"]
        assert np.isfinite(learner_results["critic_loss"]) and learner_results["num_grad_updates"] > 0
        cols = algo.local_replay_buffer.get_state()["columns"]
        assert cols["state_in/q_h"].shape[1:] == (2, 16)  # twin critics' states stored with each sequence
        # Each sub-env's state restarts at its episode's start (the cue step, flag 1) and carries on after.
        starts = cols[Columns.OBS][:, 0, 1] == 1.0
        assert starts.any() and (~starts).any()
        assert not cols["state_in/h"][starts].any() and not cols["state_in/q_c"][starts].any()
        assert (np.abs(cols["state_in/h"][~starts]).sum(axis=1) > 0).all()
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_restores_networks_targets_alpha_and_sequences(tmp_path):
    config = _sac_config(max_seq_len=4, burn_in_len=1, num_steps_sampled_before_learning_starts=100,
                         store_buffer_in_checkpoints=True).reporting(min_sample_timesteps_per_iteration=150)
    algo = config.build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        weights = algo.get_module().get_state()
        extra = algo.learner.get_extra_tensors()
        restored = SAC.from_checkpoint(path)
        try:
            assert isinstance(restored.learner, RecurrentSACLearner)
            assert restored.config.burn_in_len == 1 and restored.config.model["max_seq_len"] == 4
            again = restored.get_module().get_state()
            assert weights.keys() == again.keys() and all(np.array_equal(weights[k], again[k]) for k in weights)
            extra_again = restored.learner.get_extra_tensors()
            assert extra.keys() == extra_again.keys()
            assert all(torch.equal(torch.as_tensor(extra[k]), torch.as_tensor(extra_again[k])) for k in extra)
            assert len(restored.local_replay_buffer) == len(algo.local_replay_buffer) > 0
            assert restored.train()["num_env_steps_sampled_lifetime"] > 150
        finally:
            restored.stop()
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("make", [_sac_config, _td3_config])
def test_burn_in_comes_before_max_seq_len_trained_steps(make):
    algo = make(max_seq_len=4, burn_in_len=4).build()
    try:
        assert (algo.local_replay_buffer.max_seq_len, algo.local_replay_buffer.burn_in_len) == (8, 4)
    finally:
        algo.stop()


def test_burn_in_without_use_lstm_is_refused():
    with pytest.raises(ConfigError, match=r"burn_in_len=2 applies to recurrent models.*recurrent SAC"):
        SACConfig().environment("Pendulum-v1").training(burn_in_len=2).validate()
    with pytest.raises(ConfigError, match=r"zero_init_states=True applies to recurrent models.*DDPG/TD3"):
        TD3Config().environment("Pendulum-v1").training(zero_init_states=True).validate()


def test_old_sequence_replay_keys_set_max_seq_len_and_burn_in():
    config = _sac_config(replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 1000,
                                               "replay_sequence_length": 6, "replay_burn_in": 2})
    config.validate()
    assert config.model["max_seq_len"] == 6 and config.burn_in_len == 2
    assert "replay_sequence_length" not in config.replay_buffer_config


def test_use_lstm_in_the_policy_or_q_model_config_points_to_the_model_dict():
    with pytest.raises(ConfigError, match=r"'policy_model_config' has the key 'use_lstm'.*model=\{'use_lstm'"):
        SACConfig().training(policy_model_config={"use_lstm": True})


def test_recurrent_sac_in_a_multi_agent_run_is_refused():
    from rlx.examples.envs.classes.multi_agent import MultiAgentPendulum

    config = (SACConfig().environment(MultiAgentPendulum, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
              .training(model={"use_lstm": True}))
    with pytest.raises(NotSupportedYetError, match="use_lstm with multi-agent SAC"):
        config.build()


def test_recurrent_apex_ddpg_is_refused():
    from rlx.algorithms.apex_ddpg import ApexDDPGConfig

    config = ApexDDPGConfig().environment(ContinuousCueEnv).training(model={"use_lstm": True})
    with pytest.raises(NotSupportedYetError, match="use_lstm with ApexDDPG"):
        config.build()


def test_image_observations_with_recurrent_sac_are_refused():
    class ImageEnv(ContinuousCueEnv):
        def __init__(self, config=None):
            super().__init__(config)
            self.observation_space = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

    with pytest.raises(NotSupportedYetError, match="image observations with model use_lstm in SAC"):
        _sac_config(env=ImageEnv).build()

"""The default attention module (model use_attention, GTrXL): masking, memory carry, runner state,
compute_single_action, checkpoints, config checks, and PPO learning a memory task."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.core.attention_models import AttentionActorCriticModule
from rlx.core.columns import Columns
from rlx.examples.envs.classes.repeat_after_me_env import RepeatAfterMeEnv
from rlx.utils.errors import ConfigError, NotSupportedYetError

SMALL = {"use_attention": True, "attention_dim": 16, "attention_num_transformer_units": 2, "attention_num_heads": 2,
         "attention_head_dim": 8, "attention_position_wise_mlp_dim": 16, "attention_memory_inference": 5,
         "attention_memory_training": 5, "fcnet_hiddens": [16]}


def _module(obs_space=None, act_space=None, **model):
    torch.manual_seed(0)
    return AttentionActorCriticModule(obs_space or gym.spaces.Box(-1, 1, (4,), np.float32),
                                      act_space or gym.spaces.Discrete(3), {**SMALL, **model})


def _state(module, B, seen, seed=0):
    """Random memories (non-zero, so masking them out is visible) and `seen` per row."""
    g = torch.Generator().manual_seed(seed)
    state = {k: torch.randn((B,) + v.shape, generator=g) for k, v in module.get_initial_state().items()}
    state["seen"] = torch.as_tensor(seen, dtype=torch.float32).reshape(B, 1)
    return state


def _obs(B, T, seed=1):
    return torch.randn(B, T, 4, generator=torch.Generator().manual_seed(seed))


def test_outputs_and_state_have_the_documented_shapes():
    module = _module()
    init = module.get_initial_state()
    assert sorted(init) == ["memory_0", "memory_1", "seen", "vf_memory_0", "vf_memory_1"]
    assert init["memory_0"].shape == (5, 16) and init["seen"].shape == (1,) and not any(v.any() for v in init.values())
    with torch.no_grad():
        out = module.forward_train({Columns.OBS: _obs(3, 7), Columns.STATE_IN: _state(module, 3, [0, 2, 5])})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (3, 7, 3) and out[Columns.VF_PREDS].shape == (3, 7)
    state_out = out[Columns.STATE_OUT]
    assert state_out["memory_1"].shape == (3, 5, 16)
    assert state_out["seen"].flatten().tolist() == [5.0, 5.0, 5.0]  # capped at the memory size
    shared = _module(vf_share_layers=True)
    assert sorted(shared.get_initial_state()) == ["memory_0", "memory_1", "seen"]


def test_a_step_does_not_depend_on_later_steps():
    module = _module()
    obs = _obs(2, 8)
    later = obs.clone()
    later[:, 4:] += 3.0
    state = _state(module, 2, [5, 5])
    with torch.no_grad():
        a = module.forward_train({Columns.OBS: obs, Columns.STATE_IN: state})
        b = module.forward_train({Columns.OBS: later, Columns.STATE_IN: state})
    for key in (Columns.ACTION_DIST_INPUTS, Columns.EMBEDDINGS, Columns.VF_PREDS):
        assert torch.allclose(a[key][:, :4], b[key][:, :4], atol=1e-6)
        tol = 1e-4 if key == Columns.ACTION_DIST_INPUTS else 1e-3  # logits start small (gain 0.01)
        assert not torch.allclose(a[key][:, 4:], b[key][:, 4:], atol=tol)


def test_one_call_over_a_sequence_equals_stepping_with_the_carried_memory():
    # 12 steps through a memory of 5: the one-call pass must slide the same 5-step window.
    module = _module()
    obs = _obs(3, 12)
    state = _state(module, 3, [0, 3, 5])
    with torch.no_grad():
        whole = module.forward_inference({Columns.OBS: obs, Columns.STATE_IN: state})
        values = module.compute_values({Columns.OBS: obs, Columns.STATE_IN: state})
        step_state, logits, step_values = state, [], []
        for t in range(12):
            batch = {Columns.OBS: obs[:, t:t + 1], Columns.STATE_IN: step_state}
            step_values.append(module.compute_values(batch))
            out = module.forward_inference(batch)
            logits.append(out[Columns.ACTION_DIST_INPUTS])
            step_state = out[Columns.STATE_OUT]
    assert torch.allclose(whole[Columns.ACTION_DIST_INPUTS], torch.cat(logits, 1), atol=1e-5)
    assert torch.allclose(values, torch.cat(step_values, 1), atol=1e-5)
    for key, value in whole[Columns.STATE_OUT].items():
        assert torch.allclose(value, step_state[key], atol=1e-5), key


def test_memory_from_before_the_episode_start_is_masked_out():
    module = _module()
    obs = _obs(1, 3)
    zeros = {k: torch.zeros((1,) + v.shape) for k, v in module.get_initial_state().items()}
    with torch.no_grad():
        fresh = module.forward_train({Columns.OBS: obs, Columns.STATE_IN: zeros})
        stale = module.forward_train({Columns.OBS: obs, Columns.STATE_IN: _state(module, 1, [0])})
        full = module.forward_train({Columns.OBS: obs, Columns.STATE_IN: _state(module, 1, [5])})
    for key in (Columns.EMBEDDINGS, Columns.VF_PREDS):
        assert torch.allclose(fresh[key], stale[key], atol=1e-6)
        assert not torch.allclose(fresh[key], full[key], atol=1e-3)


def test_training_attends_to_the_last_attention_memory_training_steps():
    short = _module(attention_memory_training=3)
    three = _module(attention_memory_inference=3, attention_memory_training=3)
    three.load_state_dict(short.state_dict())
    obs = _obs(2, 4)
    state = _state(short, 2, [5, 2])
    last3 = {k: (v[:, -3:] if k != "seen" else v.clamp(max=3)) for k, v in state.items()}
    with torch.no_grad():
        trained = short.forward_train({Columns.OBS: obs, Columns.STATE_IN: state})
        expected = three.forward_train({Columns.OBS: obs, Columns.STATE_IN: last3})
        acting, _ = short._embeddings({Columns.OBS: obs, Columns.STATE_IN: state}, short.memory_inference)
    for key in (Columns.ACTION_DIST_INPUTS, Columns.EMBEDDINGS, Columns.VF_PREDS):
        assert torch.allclose(trained[key], expected[key], atol=1e-5), key
    assert not torch.allclose(trained[Columns.EMBEDDINGS][0], acting[0], atol=1e-3)


def test_image_observations_and_box_actions():
    image = gym.spaces.Box(0, 255, (10, 10, 1), np.uint8)
    module = _module(image, gym.spaces.Box(-1, 1, (2,), np.float32), conv_filters=[[4, 3, 2], [8, 5, 1]],
                     vf_share_layers=True, free_log_std=True)
    obs = torch.randint(0, 256, (2, 3, 10, 10, 1)).float()
    state = {k: torch.zeros((2,) + v.shape) for k, v in module.get_initial_state().items()}
    with torch.no_grad():
        out = module.forward_train({Columns.OBS: obs, Columns.STATE_IN: state})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 3, 4) and out[Columns.VF_PREDS].shape == (2, 3)


def _config(**model):
    return (PPOConfig().environment(RepeatAfterMeEnv, env_config={"episode_len": 20})
            .env_runners(num_envs_per_env_runner=8)
            .training(model={"use_attention": True, "attention_dim": 32, "attention_memory_inference": 10,
                             "attention_memory_training": 10, "fcnet_hiddens": [32], "max_seq_len": 20, **model},
                      train_batch_size=1000, minibatch_size=250, num_epochs=6, lr=1e-3)
            .debugging(seed=0))


def _best_return(algo, iterations, target):
    best = -np.inf
    for _ in range(iterations):
        best = max(best, algo.train()["env_runners"]["episode_return_mean"])
        if best >= target:
            break
    return best


def test_use_attention_learns_to_repeat_the_previous_observation():
    # +1 for repeating the token seen one step earlier, -1 otherwise: about 0 without memory.
    algo = _config().build()
    try:
        assert isinstance(algo.get_module(), AttentionActorCriticModule)
        assert _best_return(algo, 15, 15.0) >= 15.0
    finally:
        algo.stop()


def test_a_feedforward_policy_cannot_learn_the_same_task():
    algo = _config(use_attention=False).build()
    try:
        assert _best_return(algo, 15, 15.0) < 5.0
    finally:
        algo.stop()


def test_runner_carries_memory_per_sub_env_and_resets_it_at_episode_starts():
    algo = _config(attention_dim=8, fcnet_hiddens=[8], attention_memory_inference=4,
                   attention_memory_training=4).build()
    try:
        batch = algo.env_runner.sample(num_timesteps=200)
        memory, seen = batch["state_in/memory_0"], batch["state_in/seen"][..., 0]
        ends = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
        t, b = np.argwhere(ends[:-1])[0]
        assert seen[t + 1, b] == 0 and not np.any(memory[t + 1, b])  # a new episode starts from zeros
        assert seen[t, b] == min(t, 4) and np.any(memory[t, b])
        # The memory holds the first unit's inputs of the last steps: step 1's last row is step 0's input.
        module = algo.env_runner.module
        with torch.no_grad():
            x0 = module.gtrxl.input(module.encoder(torch.from_numpy(batch[Columns.OBS][0, :1])))
        assert np.allclose(memory[1, 0, -1], x0[0].numpy(), atol=1e-5)
    finally:
        algo.stop()


def test_compute_single_action_carries_the_attention_state():
    algo = _config(attention_dim=8, fcnet_hiddens=[8], attention_memory_inference=4,
                   attention_memory_training=4).build()
    try:
        policy = algo.get_policy()
        assert policy.is_recurrent() and policy.num_state_tensors() == 3
        state = policy.get_initial_state()
        assert [s.shape for s in state] == [(4, 8), (4, 8), (1,)] and not any(np.any(s) for s in state)
        env = RepeatAfterMeEnv({"episode_len": 20})
        obs, _ = env.reset(seed=0)
        for _ in range(3):
            action, state, _ = algo.compute_single_action(obs, state=state, explore=False)
            obs, *_ = env.step(action)
        assert [s.shape for s in state] == [(4, 8), (4, 8), (1,)] and state[2][0] == 3 and np.any(state[0])
        _, _, fresh = algo.compute_single_action(obs, state=policy.get_initial_state(), full_fetch=True)
        _, _, carried = algo.compute_single_action(obs, state=state, full_fetch=True)
        assert not np.allclose(fresh["action_dist_inputs"], carried["action_dist_inputs"])
    finally:
        algo.stop()


def test_attention_checkpoints_restore_the_module(tmp_path):
    small = {"attention_dim": 8, "fcnet_hiddens": [8], "attention_memory_inference": 4,
             "attention_memory_training": 4}
    algo = _config(**small).training(train_batch_size=400, minibatch_size=200, num_epochs=1).build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        weights = algo.get_module().get_state()
        restored = _config(**small).build()
        try:
            restored.restore(path)
            again = restored.get_module().get_state()
            assert weights.keys() == again.keys() and all(np.array_equal(weights[k], again[k]) for k in weights)
            state = algo.get_policy().get_initial_state()
            a = algo.compute_single_action(1, state=state, full_fetch=True)[2]["action_dist_inputs"]
            b = restored.compute_single_action(1, state=state, full_fetch=True)[2]["action_dist_inputs"]
            assert np.allclose(a, b)
        finally:
            restored.stop()
    finally:
        algo.stop()


def test_bad_attention_configs_are_refused_with_the_fix():
    from rlx.algorithms.dqn import DQNConfig

    with pytest.raises(ConfigError, match="use_lstm.*use_attention.*only one"):
        _config(use_lstm=True).build()
    with pytest.raises(NotSupportedYetError, match="use_attention"):
        DQNConfig().environment("CartPole-v1").training(model={"use_attention": True}).build()
    with pytest.raises(ConfigError, match="attention_use_n_prev_actions.*non-negative"):
        PPOConfig().training(model={"use_attention": True, "attention_use_n_prev_actions": -1})
    with pytest.raises(ConfigError, match="attention_dim.*positive integer"):
        PPOConfig().training(model={"attention_dim": 0})
    with pytest.raises(ConfigError, match="attention_memory_training <= attention_memory_inference"):
        _module(attention_memory_training=8)


def test_attention_use_n_prev_actions_and_rewards_feed_the_last_steps_in():
    from test_recurrent import HiddenBit

    model = {"use_attention": True, "attention_dim": 32, "attention_memory_inference": 10,
             "attention_memory_training": 10, "max_seq_len": 10, "fcnet_hiddens": [32],
             "attention_use_n_prev_actions": 2, "attention_use_n_prev_rewards": 3}
    algo = PPOConfig().environment(HiddenBit).training(model=model, train_batch_size=1000, lr=1e-3).debugging(
        seed=0).build()
    try:
        # The observation, one-hots of the last 2 actions (2 x 2) and the last 3 rewards.
        assert algo.env_runner.module_observation_space.shape == (1 + 4 + 3,)
        best = 0.0
        for _ in range(20):
            best = max(best, algo.train()["env_runners"]["episode_return_mean"])
            if best >= 8.5:
                break
        assert best >= 8.5  # only the previous actions and rewards tell the hidden bit (5 without them)
    finally:
        algo.stop()

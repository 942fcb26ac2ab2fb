"""Action masking: Dict observations with an "action_mask" next to the real observation; the
default modules of PPO and DQN never choose a masked action (explore on and off), masked logits
have probability 0 with finite log-probs, and PPO learns a masked task."""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.core.action_masking import FLOAT_MIN, find_action_mask
from rlx.core.columns import Columns
from rlx.core.distributions import Categorical, MultiCategorical
from rlx.core.models import ActorCriticModule
from rlx.models.preprocessors import get_preprocessor
from rlx.utils.errors import ConfigError, NotSupportedYetError

N_ACTIONS = 6


class MaskedChoice(gym.Env):
    """Pick one of 6 actions; a fresh random mask every step (each action valid with p=0.4, the
    target always valid). The observation one-hot encodes the target: reward 1 for it, else 0,
    10 steps per episode (a uniformly random valid action scores about 3.5, the target 10).
    Invalid actions are counted in `invalid` (not raised), so tests can read the count.

    env_config: `mask_key` (default "action_mask"), `mask_dtype` (default float32).
    """

    def __init__(self, config=None):
        config = config or {}
        self.mask_key = config.get("mask_key", "action_mask")
        dtype = config.get("mask_dtype", np.float32)
        self.observation_space = gym.spaces.Dict({
            self.mask_key: gym.spaces.Box(0, 1, (N_ACTIONS,), dtype),
            "observations": gym.spaces.Box(0.0, 1.0, (N_ACTIONS,), np.float32),
        })
        self.action_space = gym.spaces.Discrete(N_ACTIONS)
        self._dtype = dtype
        self.invalid = 0
        self.steps = 0

    def _obs(self):
        self.target = int(self.np_random.integers(N_ACTIONS))
        self.mask = (self.np_random.random(N_ACTIONS) < 0.4).astype(self._dtype)
        self.mask[self.target] = 1
        onehot = np.zeros(N_ACTIONS, np.float32)
        onehot[self.target] = 1.0
        return {self.mask_key: self.mask.copy(), "observations": onehot}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        self.steps += 1
        self.invalid += int(not self.mask[action])
        reward = float(action == self.target)
        self.t += 1
        return self._obs(), reward, False, self.t >= 10, {}


def _env_counts(algo):
    counts = algo.env_runner.foreach_env(lambda env: (env.unwrapped.invalid, env.unwrapped.steps))
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def _invalid_over(algo, steps: int, explore: bool) -> int:
    before_invalid, before_steps = _env_counts(algo)
    algo.env_runner.sample(num_timesteps=steps, explore=explore)
    invalid, total = _env_counts(algo)
    assert total - before_steps >= steps
    return invalid - before_invalid


def _ppo(env_config=None, **env_kwargs):
    return (PPOConfig().environment(MaskedChoice, env_config=env_config or {}, **env_kwargs)
            .env_runners(num_envs_per_env_runner=8)
            .training(model={"fcnet_hiddens": [32]}, train_batch_size=400, minibatch_size=100, num_epochs=2)
            .debugging(seed=0))


def _dqn(exploration=None):
    config = (DQNConfig().environment(MaskedChoice).env_runners(num_envs_per_env_runner=8)
              .training(model={"fcnet_hiddens": [32]}, hiddens=[32], num_steps_sampled_before_learning_starts=100,
                        train_batch_size=32)
              .debugging(seed=0))
    if exploration is not None:
        config = config.exploration(exploration_config=exploration)
    return config


@pytest.mark.parametrize("explore", [True, False])
def test_ppo_never_chooses_a_masked_action_over_10k_steps(explore):
    # Untrained: the greedy action per target is arbitrary, so unmasked it would often be invalid.
    algo = _ppo().build()
    try:
        assert _invalid_over(algo, 10_000, explore) == 0
    finally:
        algo.stop()


@pytest.mark.parametrize("explore", [True, False])
def test_dqn_never_chooses_a_masked_action_over_10k_steps(explore):
    # epsilon 1.0: every exploring step is a random action, which must come from the valid ones.
    algo = _dqn({"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 1.0}).build()
    try:
        algo.train()
        assert _invalid_over(algo, 10_000, explore) == 0
    finally:
        algo.stop()


def test_random_exploration_draws_only_valid_actions():
    algo = _dqn({"type": "Random"}).build()
    try:
        assert _invalid_over(algo, 5_000, explore=True) == 0
    finally:
        algo.stop()


def test_an_unmasked_module_does_choose_invalid_actions_so_the_count_can_fail():
    # The env names its mask "legal": with the default action_mask_key, the module sees no mask.
    algo = _ppo({"mask_key": "legal"}).build()
    try:
        assert _invalid_over(algo, 2_000, explore=True) > 100
    finally:
        algo.stop()


def test_action_mask_key_names_a_mask_under_another_key():
    algo = _ppo({"mask_key": "legal", "mask_dtype": np.int8}, action_mask_key="legal").build()
    try:
        assert algo.get_module().action_mask.key == "legal"
        assert _invalid_over(algo, 5_000, explore=True) == 0
    finally:
        algo.stop()


def test_ppo_learns_a_masked_task():
    algo = _ppo().training(lr=3e-3).build()
    start = time.perf_counter()
    try:
        best = 0.0
        for _ in range(40):
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"])
            if best >= 9.0:
                break
        assert best >= 9.0, best
        assert time.perf_counter() - start < 20
    finally:
        algo.stop()


def _dict_space(mask_width=N_ACTIONS, mask_key="action_mask"):
    return gym.spaces.Dict({mask_key: gym.spaces.Box(0, 1, (mask_width,), np.float32),
                            "observations": gym.spaces.Box(-1, 1, (3,), np.float32)})


def _module(obs_space, action_space=gym.spaces.Discrete(N_ACTIONS), **model):
    flat = get_preprocessor(obs_space)(obs_space, {}).observation_space
    return ActorCriticModule(observation_space=flat, action_space=action_space,
                             model_config={"fcnet_hiddens": [16], **model})


def _flat_batch(space, values):
    prep = get_preprocessor(space)(space, {})
    return torch.from_numpy(np.stack([prep.transform(v) for v in values]))


def test_masked_logits_have_zero_probability_and_finite_logp_entropy_and_gradients():
    space = _dict_space()
    module = _module(space)
    rng = np.random.default_rng(0)
    masks = (rng.random((64, N_ACTIONS)) < 0.5).astype(np.float32)
    masks[:, 0] = 1.0
    obs = _flat_batch(space, [{"action_mask": m, "observations": rng.uniform(-1, 1, 3).astype(np.float32)}
                              for m in masks])
    out = module.forward_train({Columns.OBS: obs})
    logits = out[Columns.ACTION_DIST_INPUTS]
    dist = Categorical(logits)
    probs = dist.log_probs.exp()
    assert torch.all(probs[torch.from_numpy(masks) == 0] == 0)
    assert torch.allclose(probs.sum(-1), torch.ones(64))
    every_action = torch.arange(N_ACTIONS).repeat(64, 1)
    assert torch.isfinite(torch.stack([dist.logp(every_action[:, a]) for a in range(N_ACTIONS)])).all()
    assert torch.isfinite(dist.entropy()).all() and torch.isfinite(dist.kl(Categorical(logits.detach()))).all()
    actions = dist.sample()
    loss = (-(dist.logp(actions) * torch.randn(64)).mean() - 0.01 * dist.entropy().mean()
            + out[Columns.VF_PREDS].pow(2).mean())
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters() if p.grad is not None)
    # The masked entries are exactly FLOAT_MIN (what EpsilonGreedy reads as "unavailable").
    assert torch.all(logits[torch.from_numpy(masks) == 0] == FLOAT_MIN)
    # Inference masks too; the value head reads only the "observations" part.
    inference = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    assert torch.equal(inference.argmax(-1), logits.argmax(-1))
    assert masks[np.arange(64), inference.argmax(-1).numpy()].all()
    assert module.pi.linears[0].in_features == 3


def test_dict_observation_without_the_mask_key_is_the_whole_model_input():
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Discrete(3)})
    module = _module(space)
    assert module.action_mask is None
    assert module.pi.linears[0].in_features == 5
    algo = (PPOConfig().environment(MaskedChoice, env_config={"mask_key": "legal"})
            .training(model={"fcnet_hiddens": [8]}, train_batch_size=100, minibatch_size=50, num_epochs=1)
            .debugging(seed=0).build())
    try:
        assert algo.get_module().action_mask is None
        assert algo.get_module().pi.linears[0].in_features == 2 * N_ACTIONS
        assert algo.train()["num_env_steps_sampled_lifetime"] >= 100
    finally:
        algo.stop()


def test_mask_of_the_wrong_shape_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"'action_mask'.*needs a mask of shape \(6,\)"):
        _module(_dict_space(mask_width=4))

    class WrongMask(MaskedChoice):
        def __init__(self, config=None):
            super().__init__(config)
            self.action_space = gym.spaces.Discrete(N_ACTIONS + 1)

    with pytest.raises(ConfigError, match=r"needs a mask of shape \(7,\)"):
        PPOConfig().environment(WrongMask).build()


def test_dict_observation_batches_are_split_too():
    space = _dict_space()
    module = _module(space)
    mask = np.zeros((2, N_ACTIONS), np.float32)
    mask[0, 4] = mask[1, 2] = 1.0
    out = module.forward_inference({Columns.OBS: {"action_mask": mask, "observations": np.zeros((2, 3), np.float32)}})
    assert out[Columns.ACTION_DIST_INPUTS].argmax(-1).tolist() == [4, 2]
    with pytest.raises(ValueError, match="has 5 entries per row; the action space needs 6"):
        module.forward_inference({Columns.OBS: {"action_mask": mask[:, :5], "observations": np.zeros((2, 3))}})


def test_multi_discrete_masks_are_per_component_masks_concatenated():
    action_space = gym.spaces.MultiDiscrete([3, 4])
    space = _dict_space(mask_width=7)
    module = _module(space, action_space)
    mask = np.array([[0, 1, 0, 1, 0, 0, 1]] * 500, np.float32)  # component 0 -> 1, component 1 -> 0 or 3
    obs = _flat_batch(space, [{"action_mask": m, "observations": np.zeros(3, np.float32)} for m in mask])
    logits = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    actions = MultiCategorical(logits, input_lens=[3, 4]).sample()
    assert set(actions[:, 0].tolist()) == {1}
    assert set(actions[:, 1].tolist()) == {0, 3}


def test_image_observations_beside_a_mask_keep_their_shape_for_the_cnn():
    space = gym.spaces.Dict({"action_mask": gym.spaces.Box(0, 1, (N_ACTIONS,), np.float32),
                             "observations": gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)})
    module = _module(space, conv_filters=[[4, [4, 4], 2], [8, [4, 4], 2]])
    assert any(isinstance(m, torch.nn.Conv2d) for m in module.modules())
    mask = np.zeros(N_ACTIONS, np.float32)
    mask[5] = 1.0
    obs = _flat_batch(space, [{"action_mask": mask, "observations": np.full((16, 16, 3), 9, np.uint8)}])
    assert module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS].argmax(-1).item() == 5


def test_dqn_q_values_of_masked_actions_are_float_min_in_training_too():
    from rlx.algorithms.dqn.dqn_rl_module import DQNRLModule

    space = _dict_space()
    flat = get_preprocessor(space)(space, {}).observation_space
    module = DQNRLModule(observation_space=flat, action_space=gym.spaces.Discrete(N_ACTIONS),
                         model_config={"fcnet_hiddens": [16], "hiddens": [16]})
    mask = np.ones((4, N_ACTIONS), np.float32)
    mask[:, 1] = 0.0
    obs = _flat_batch(space, [{"action_mask": m, "observations": np.zeros(3, np.float32)} for m in mask])
    q = module.q_outputs(obs)
    assert torch.all(q[:, 1] == FLOAT_MIN) and torch.isfinite(q).all()
    assert torch.all(module.forward_train({Columns.OBS: obs})["qf_preds"][:, 1] == FLOAT_MIN)
    with pytest.raises(NotSupportedYetError, match="num_atoms"):
        DQNRLModule(observation_space=flat, action_space=gym.spaces.Discrete(N_ACTIONS), model_config={"num_atoms": 5})


def test_dqn_learns_with_masks_and_its_targets_ignore_masked_actions():
    algo = _dqn().training(lr=1e-3, target_network_update_freq=200).build()
    try:
        for _ in range(3):
            result = algo.train()
        loss = result["learners"]["default_policy"]["qf_loss"]
        assert np.isfinite(loss) and loss < 10.0
        assert _invalid_over(algo, 1_000, explore=False) == 0
    finally:
        algo.stop()


def test_sac_and_box_actions_refuse_a_mask_clearly():
    from rlx.algorithms.sac.sac_rl_module import SACRLModule

    space = _dict_space()
    flat = get_preprocessor(space)(space, {}).observation_space
    with pytest.raises(NotSupportedYetError, match="action masking with SAC"):
        SACRLModule(observation_space=flat, action_space=gym.spaces.Discrete(N_ACTIONS), model_config={})
    with pytest.raises(NotSupportedYetError, match="action masking with action space Box"):
        find_action_mask(flat, gym.spaces.Box(-1, 1, (2,)))


def test_lstm_module_masks_actions_while_acting_and_training():
    config = _ppo().training(model={"use_lstm": True, "lstm_cell_size": 16, "fcnet_hiddens": [16], "max_seq_len": 5})
    algo = config.build()
    try:
        assert algo.get_module().action_mask is not None
        assert _invalid_over(algo, 3_000, explore=True) == 0
        assert _invalid_over(algo, 3_000, explore=False) == 0
        result = algo.train()
        assert np.isfinite(result["learners"]["default_policy"]["total_loss"])
        assert _invalid_over(algo, 1_000, explore=True) == 0
    finally:
        algo.stop()

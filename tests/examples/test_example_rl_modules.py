"""RLlib 2.60's example RLModules (`examples/rl_modules/classes`) as RLlib's tests and examples use them."""
import gymnasium as gym
import numpy as np
import pytest
import torch


def test_vpg_torch_rl_module_builds_from_spec_and_returns_logits():
    from rlx.core.columns import Columns
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.vpg_torch_rlm import VPGTorchRLModule

    env = gym.make("CartPole-v1")
    module = RLModuleSpec(module_class=VPGTorchRLModule, observation_space=env.observation_space,
                          action_space=env.action_space, model_config={"hidden_dim": 32}).build()
    obs = torch.from_numpy(np.stack([env.observation_space.sample() for _ in range(5)]))
    logits = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    assert logits.shape == (5, 2) and not logits.requires_grad
    train_logits = module.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    train_logits.sum().backward()
    assert all(p.grad is not None for p in module.parameters())
    # Weights round-trip through get_state / set_state.
    other = VPGTorchRLModule(observation_space=env.observation_space, action_space=env.action_space,
                             model_config={"hidden_dim": 32})
    other.set_state(module.get_state())
    assert torch.allclose(other.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS], logits)


def test_vpg_torch_rl_module_says_what_is_missing():
    from rlx.examples.rl_modules.classes.vpg_torch_rlm import VPGTorchRLModule

    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="hidden_dim"):
        VPGTorchRLModule(observation_space=env.observation_space, action_space=env.action_space, model_config={})


def test_shared_encoder_multi_rl_module_trains_the_encoder_through_every_policy():
    from rlx.core.columns import Columns
    from rlx.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.vpg_using_shared_encoder_rlm import (
        SHARED_ENCODER_ID, SharedEncoder, VPGMultiRLModuleWithSharedEncoder, VPGPolicyAfterSharedEncoder)

    env = gym.make("CartPole-v1")
    spaces = dict(observation_space=env.observation_space, action_space=env.action_space)
    spec = MultiRLModuleSpec(
        multi_rl_module_class=VPGMultiRLModuleWithSharedEncoder,
        rl_module_specs={
            SHARED_ENCODER_ID: RLModuleSpec(module_class=SharedEncoder, model_config={"embedding_dim": 8}, **spaces),
            "p0": RLModuleSpec(module_class=VPGPolicyAfterSharedEncoder,
                               model_config={"embedding_dim": 8, "hidden_dim": 16}, **spaces),
            "p1": RLModuleSpec(module_class=VPGPolicyAfterSharedEncoder,
                               model_config={"embedding_dim": 8, "hidden_dim": 4}, **spaces),
        },
    )
    multi = spec.build()
    obs = torch.from_numpy(np.stack([env.observation_space.sample() for _ in range(3)]))
    out = multi.forward_train({"p0": {Columns.OBS: obs}, "p1": {Columns.OBS: obs}})
    assert set(out) == {"p0", "p1"} and out["p0"][Columns.ACTION_DIST_INPUTS].shape == (3, 2)
    out["p1"][Columns.ACTION_DIST_INPUTS].sum().backward()
    assert all(p.grad is not None for p in multi[SHARED_ENCODER_ID].parameters())
    assert all(p.grad is None for p in multi["p0"].parameters())
    inference = multi.forward_inference({"p0": {Columns.OBS: obs}})
    assert not inference["p0"][Columns.ACTION_DIST_INPUTS].requires_grad
    with pytest.raises(ValueError, match="shared_encoder"):
        VPGMultiRLModuleWithSharedEncoder({"p0": multi["p0"]})


def test_policy_without_shared_encoder_matches_the_shared_architecture():
    from rlx.core.columns import Columns
    from rlx.examples.rl_modules.classes.vpg_using_shared_encoder_rlm import (
        VPGPolicyAfterSharedEncoder, VPGPolicyNoSharedEncoder)

    env = gym.make("CartPole-v1")
    config = {"embedding_dim": 8, "hidden_dim": 16}
    module = VPGPolicyNoSharedEncoder(observation_space=env.observation_space, action_space=env.action_space,
                                      model_config=config)
    obs = torch.zeros((2, 4))
    assert module.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS].shape == (2, 2)
    head_only = VPGPolicyAfterSharedEncoder(observation_space=env.observation_space, action_space=env.action_space,
                                            model_config=config)
    with pytest.raises(KeyError, match="encoder_out"):
        head_only.forward_train({Columns.OBS: obs})


def test_custom_action_distribution_temperature_shapes_the_action_probabilities():
    from rlx.core.columns import Columns
    from rlx.examples.rl_modules.classes.custom_action_distribution_rlm import CustomActionDistributionRLModule

    spaces = dict(observation_space=gym.spaces.Box(-1.0, 1.0, (4,), np.float32), action_space=gym.spaces.Discrete(4))
    obs = torch.rand((10, 4))
    entropies = {}
    for temp in (0.01, 100.0):
        torch.manual_seed(0)
        module = CustomActionDistributionRLModule(model_config={"action_dist_temperature": temp}, **spaces)
        out = module.forward_exploration({Columns.OBS: obs})
        dist = module.get_exploration_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
        entropies[temp] = float(dist.entropy().mean())
        train_out = module.forward_train({Columns.OBS: obs})
        values = module.compute_values({Columns.OBS: obs}, embeddings=train_out[Columns.EMBEDDINGS])
        assert values.shape == (10,)
    assert entropies[0.01] < 0.1 and entropies[100.0] > np.log(4) - 0.01
    with pytest.raises(ValueError, match="action_dist_temperature"):
        CustomActionDistributionRLModule(model_config={"action_dist_temperature": 0.0}, **spaces)


def test_ppo_trains_with_the_custom_action_distribution_module():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.custom_action_distribution_rlm import CustomActionDistributionRLModule

    config = (PPOConfig().environment("CartPole-v1")
              .rl_module(rl_module_spec=RLModuleSpec(module_class=CustomActionDistributionRLModule,
                                                     model_config={"action_dist_temperature": 2.0, "hidden_dim": 16}))
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1))
    algo = config.build()
    try:
        assert isinstance(algo.get_module(), CustomActionDistributionRLModule)
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled"] >= 128
    finally:
        algo.stop()


def test_autoregressive_module_conditions_the_box_part_on_the_discrete_part():
    from rlx.core.columns import Columns
    from rlx.examples.envs.classes.correlated_actions_env import CorrelatedActionsEnv
    from rlx.examples.rl_modules.classes.autoregressive_actions_rlm import AutoregressiveActionsRLM

    env = CorrelatedActionsEnv({})
    module = AutoregressiveActionsRLM(observation_space=env.observation_space, action_space=env.action_space)
    obs = torch.rand((6, 1))
    out = module.forward_exploration({Columns.OBS: obs})
    actions = out[Columns.ACTIONS]
    assert actions.shape == (6, 2) and set(actions[:, 0].tolist()) <= {0.0, 1.0, 2.0}
    # The returned logp is what the loss's Tuple distribution gives the same actions.
    dist = module.get_train_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    assert torch.allclose(dist.logp(actions), out[Columns.ACTION_LOGP], atol=1e-5)
    # Training scores the actions taken: the posterior inputs follow the batch's prior actions.
    train = module.forward_train({Columns.OBS: obs, Columns.ACTIONS: actions})
    assert torch.allclose(train[Columns.ACTION_DIST_INPUTS], out[Columns.ACTION_DIST_INPUTS], atol=1e-5)
    assert module.compute_values({Columns.OBS: obs}).shape == (6,)
    with pytest.raises(ValueError, match="Tuple"):
        AutoregressiveActionsRLM(observation_space=env.observation_space, action_space=gym.spaces.Discrete(3))


def test_ppo_trains_with_the_autoregressive_module():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.examples.envs.classes.correlated_actions_env import CorrelatedActionsEnv
    from rlx.examples.rl_modules.classes.autoregressive_actions_rlm import AutoregressiveActionsRLM

    config = (PPOConfig().environment(CorrelatedActionsEnv)
              .rl_module(rl_module_spec=RLModuleSpec(module_class=AutoregressiveActionsRLM))
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1))
    algo = config.build()
    try:
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled"] >= 128
    finally:
        algo.stop()


def test_intrinsic_curiosity_model_rewards_surprise_and_learns_to_predict():
    from rlx.core.columns import Columns
    from rlx.examples.rl_modules.classes.intrinsic_curiosity_model_rlm import IntrinsicCuriosityModel

    torch.manual_seed(0)
    icm = IntrinsicCuriosityModel(observation_space=gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                                  action_space=gym.spaces.Discrete(2),
                                  model_config={"feature_dim": 8, "feature_net_hiddens": (16,),
                                                "feature_net_activation": "relu"})
    obs = torch.rand((32, 3))
    actions = torch.randint(0, 2, (32,))
    next_obs = obs + (actions.float() * 2 - 1).unsqueeze(-1) * 0.1  # the action decides the next obs
    batch = {Columns.OBS: obs, Columns.NEXT_OBS: next_obs, Columns.ACTIONS: actions}

    class Config:
        learner_config_dict = {"forward_loss_weight": 0.5}

    optimizer = torch.optim.Adam(icm.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        fwd_out = icm.forward_train(batch)
        assert fwd_out[Columns.INTRINSIC_REWARDS].shape == (32,)
        loss = icm.compute_self_supervised_loss(config=Config(), batch=batch, fwd_out=fwd_out)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(TypeError, match="only trained"):
        icm.forward_inference(batch)

"""RLlib's Learner-level API as RLlib users call it: `TorchLearner.build()` and
`Learner.update(batch=...)` through the loss API, MultiRLModule's constructor and `setup()`,
and `Algorithm.restore_from_path(path, component=...)`."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch


def _cartpole_spaces():
    return gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)


def test_torch_learner_build_and_update_through_compute_loss_for_module():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.connectors.learner import ComputeReturnsToGo
    from rlx.core.columns import Columns
    from rlx.core.learner.torch.torch_learner import TorchLearner
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.vpg_torch_rlm import VPGTorchRLModule

    built = []

    class MyLearner(TorchLearner):
        def build(self):
            super().build()
            self._learner_connector.prepend(ComputeReturnsToGo(gamma=0.5))
            built.append(True)

        def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
            logits = fwd_out[Columns.ACTION_DIST_INPUTS]
            return torch.nn.functional.cross_entropy(logits, batch[Columns.ACTIONS].long())

    obs_space, act_space = _cartpole_spaces()
    module = RLModuleSpec(module_class=VPGTorchRLModule, observation_space=obs_space, action_space=act_space,
                          model_config={"hidden_dim": 8}).build()
    learner = MyLearner(PPOConfig().training(lr=0.1), module)
    learner.build()
    assert built == [True] and isinstance(learner._learner_connector.connectors[0], ComputeReturnsToGo)

    batch = {Columns.OBS: np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32),
             Columns.ACTIONS: np.ones(32, dtype=np.int64)}
    before = [p.detach().clone() for p in module.parameters()]
    results = learner.update(batch=batch, num_epochs=2, minibatch_size=16)
    assert np.isfinite(results["default_policy"]["total_loss"])
    assert built == [True]  # update() builds a Learner only when it was not built yet
    assert any(not torch.equal(b, p) for b, p in zip(before, module.parameters()))


def test_multi_rl_module_constructor_builds_specs_and_runs_setup():
    from rlx.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.vpg_torch_rlm import VPGTorchRLModule

    class WithShared(MultiRLModule):
        def setup(self):
            super().setup()
            assert "p0" in self._rl_modules and "p1" in self._rl_modules
            self.first = self._rl_modules["p0"]

    obs_space, act_space = _cartpole_spaces()
    specs = {mid: RLModuleSpec(module_class=VPGTorchRLModule, observation_space=obs_space, action_space=act_space,
                               model_config={"hidden_dim": 8}) for mid in ("p0", "p1")}
    direct = WithShared(observation_space=obs_space, action_space=act_space, model_config={"k": 1},
                        rl_module_specs=specs)
    assert direct.first is direct["p0"] and set(direct.keys()) == {"p0", "p1"}
    assert direct.model_config == {"k": 1} and direct.observation_space is obs_space
    from_spec = MultiRLModuleSpec(multi_rl_module_class=WithShared, rl_module_specs=specs).build()
    assert isinstance(from_spec, WithShared) and from_spec.first is from_spec["p0"]

    class OnlyP0(MultiRLModule):  # RLlib's hook: forward_train goes through _forward_train
        def _forward_train(self, batch, **kwargs):
            return {"p0": self["p0"].forward_train(batch["p0"])}

    out = OnlyP0(rl_module_specs=specs).forward_train({mid: {"obs": torch.zeros(2, 4)} for mid in ("p0", "p1")})
    assert list(out) == ["p0"]


def test_restore_from_path_loads_only_the_rl_module_component(tmp_path):
    from rlx.algorithms.ppo import PPOConfig
    from rlx.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE
    from rlx.utils.errors import NotSupportedYetError

    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1))
    trained = config.build()
    trained.train()
    checkpoint = str(trained.save(str(tmp_path / "checkpoint")))
    weights = trained.get_weights()["default_policy"]
    trained.stop()

    component = f"{COMPONENT_LEARNER_GROUP}/{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}"
    fresh = config.build()
    try:
        assert not all(np.allclose(weights[k], fresh.get_weights()["default_policy"][k]) for k in weights)
        fresh.restore_from_path(os.path.join(checkpoint, component), component=component)
        restored = fresh.get_weights()["default_policy"]
        assert all(np.allclose(weights[k], restored[k]) for k in weights)
        assert all(np.allclose(weights[k], v) for k, v in fresh.env_runner.module.get_state().items() if k in weights)
        fresh.restore_from_path(os.path.join(checkpoint, component, "default_policy"),
                                component=component + "/default_policy")
        with pytest.raises(NotSupportedYetError, match="component='env_runner'"):
            fresh.restore_from_path(checkpoint, component="env_runner")
    finally:
        fresh.stop()


def test_policy_spec_with_random_policy_class_acts_with_its_rl_module():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.core.rl_module.agent_mapping import PolicySpec
    from rlx.examples._old_api_stack.policy.random_policy import RandomPolicy
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
    from rlx.examples.rl_modules.classes.random_rlm import RandomRLModule

    policy = RandomPolicy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), {})
    actions, state_out, extra = policy.compute_actions(np.zeros((5, 4)))
    assert len(actions) == 5 and all(a in (0, 1) for a in actions) and state_out == [] and extra == {}

    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .env_runners(num_env_runners=0).training(train_batch_size=64, minibatch_size=64, num_epochs=1)
              .multi_agent(policies={"main": PolicySpec(), "random": PolicySpec(policy_class=RandomPolicy)},
                           policy_mapping_fn=lambda aid, *a, **kw: "main" if aid == 0 else "random",
                           policies_to_train=["main"]))
    algo = config.build()
    try:
        assert isinstance(algo.env_runner.module["random"], RandomRLModule)
        assert sorted(algo.train()["learners"]) == ["main"]
    finally:
        algo.stop()


def test_bc_catalog_and_mlp_configs_build_torch_networks():
    from rlx.algorithms.bc.bc_catalog import BCCatalog
    from rlx.core.models.base import ENCODER_OUT
    from rlx.core.models.configs import MLPEncoderConfig, MLPHeadConfig
    from rlx.utils.errors import NotSupportedYetError

    catalog = BCCatalog(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3),
                        {"fcnet_hiddens": [16], "head_fcnet_hiddens": [8]})
    logits = catalog.build_pi_head()(catalog.build_encoder()(torch.zeros(5, 4)))
    assert logits.shape == (5, 3)
    from rlx.algorithms.bc.torch.default_bc_torch_rl_module import DefaultBCTorchRLModule
    from rlx.core.rl_module.rl_module import RLModuleSpec

    module = RLModuleSpec(module_class=DefaultBCTorchRLModule, catalog_class=BCCatalog,
                          observation_space=gym.spaces.Box(0, 255, (32, 32, 3), np.float32),
                          action_space=gym.spaces.Discrete(2),
                          model_config={"conv_filters": [[16, 4, 2], [32, 4, 2], [64, 4, 2], [128, 4, 2]]}).build()
    assert module.forward_train({"obs": torch.zeros(2, 32, 32, 3)})["action_dist_inputs"].shape == (2, 2)

    encoder = MLPEncoderConfig(input_dims=[4], hidden_layer_dims=[32, 16], output_layer_dim=None).build("torch")
    head = MLPHeadConfig(input_dims=[16], hidden_layer_dims=[8], output_layer_dim=1,
                         output_layer_weights_initializer=torch.nn.init.zeros_,
                         output_layer_bias_initializer="zeros_").build(framework="torch")
    features = encoder({"obs": torch.ones(3, 4)})[ENCODER_OUT]
    assert features.shape == (3, 16) and torch.equal(head(features), torch.zeros(3, 1))
    with pytest.raises(NotSupportedYetError, match="hidden_layer_use_layernorm"):
        MLPHeadConfig(input_dims=[4], hidden_layer_use_layernorm=True).build()
    with pytest.raises(NotSupportedYetError, match="Encoder"):
        from rlx.core.models.base import Encoder  # noqa: F401


def test_a_self_supervised_loss_module_computes_its_own_loss():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.core.columns import Columns
    from rlx.core.learner.torch.torch_learner import TorchLearner
    from rlx.core.rl_module.apis import SelfSupervisedLossAPI
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.core.rl_module.torch import TorchRLModule

    calls = []

    class Predictor(TorchRLModule, SelfSupervisedLossAPI):
        def setup(self):
            self.net = torch.nn.Linear(4, 1)

        def _forward(self, batch, **kwargs):
            return {"pred": self.net(batch[Columns.OBS]).squeeze(-1)}

        def compute_self_supervised_loss(self, *, learner, module_id, config, batch, fwd_out):
            calls.append(module_id)
            return torch.mean((fwd_out["pred"] - batch[Columns.REWARDS]) ** 2)

    obs_space, act_space = _cartpole_spaces()
    module = RLModuleSpec(module_class=Predictor, observation_space=obs_space, action_space=act_space).build()
    learner = TorchLearner(PPOConfig().training(lr=0.05), module)
    batch = {Columns.OBS: np.ones((16, 4), np.float32), Columns.REWARDS: np.full(16, 3.0, np.float32)}
    first = learner.update(batch=batch)["default_policy"]["total_loss"]
    for _ in range(20):
        last = learner.update(batch=batch)["default_policy"]["total_loss"]
    assert calls and set(calls) == {"default_policy"} and last < first

"""Catalogs (RLlib's `core.models.catalog.Catalog`, `algorithms.ppo.ppo_catalog.PPOCatalog`) and the
RLModuleSpec fields that go with them: `catalog_class`, `load_state_path`, `learner_only`."""
from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlx.algorithms.ppo.ppo_catalog import PPOCatalog
from rlx.algorithms.ppo.torch.ppo_torch_rl_module import PPOTorchRLModule
from rlx.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from rlx.core.columns import Columns
from rlx.core.models import make_mlp
from rlx.core.models.catalog import Catalog
from rlx.core.rl_module import MultiRLModuleSpec, RLModule, RLModuleSpec
from rlx.core.rl_module.default_model_config import DefaultModelConfig
from rlx.utils.errors import CheckpointError, ConfigError, NotSupportedYetError

from conftest import small_config

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)


class DeepPiCatalog(PPOCatalog):
    """A pi head with one hidden layer of 16 units on the shared trunk."""

    def build_pi_head(self, framework: str = "torch") -> nn.Module:
        return make_mlp(self.latent_dims[0], [16], "tanh", self.pi_head_output_dim, out_gain=0.01)


def linear_shapes(module: nn.Module) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in module.modules() if isinstance(m, nn.Linear)]


# ------------------------------------------------------------------ the Catalog API


def test_base_catalog_builds_the_encoder_and_distribution():
    catalog = Catalog(OBS, ACT, {"fcnet_hiddens": [32, 8], "fcnet_activation": "relu"})
    assert catalog.latent_dims == (8,)
    encoder = catalog.build_encoder(framework="torch")
    assert linear_shapes(encoder) == [(4, 32), (32, 8)]
    assert encoder(torch.zeros(3, 4)).shape == (3, 8)
    dist = catalog.get_action_dist_cls(framework="torch").from_logits(torch.zeros(5, 2))
    assert dist.sample().shape == (5,)
    with pytest.raises(NotSupportedYetError, match="torch"):
        catalog.build_encoder(framework="tf2")


def test_determine_components_hook_is_the_override_point():
    class WideLatent(Catalog):
        def _determine_components_hook(self) -> None:
            super()._determine_components_hook()
            self._encoder_config.hiddens = [7]

    assert WideLatent(OBS, ACT, {"fcnet_hiddens": [32]}).latent_dims == (7,)
    assert linear_shapes(WideLatent(OBS, ACT, {}).build_encoder("torch")) == [(4, 7)]


def test_catalog_takes_a_default_model_config():
    catalog = PPOCatalog(OBS, ACT, DefaultModelConfig(fcnet_hiddens=[12]))
    # DefaultModelConfig shares the trunk (vf_share_layers=True): heads read the trunk's 12 features.
    assert catalog.vf_share_layers and catalog.latent_dims == (12,)
    assert linear_shapes(catalog.build_pi_head("torch")) == [(12, 2)]
    assert linear_shapes(catalog.build_vf_head("torch")) == [(12, 1)]


def test_default_module_layers_are_unchanged_by_the_catalog():
    """The module built through PPOCatalog is layer for layer the one built without naming it."""
    for model in ({"fcnet_hiddens": [32, 32]}, {"fcnet_hiddens": [32], "vf_share_layers": True}):
        plain = RLModuleSpec(PPOTorchRLModule, OBS, ACT, model).build()
        named = RLModuleSpec(PPOTorchRLModule, OBS, ACT, model, catalog_class=PPOCatalog).build()
        assert list(plain.state_dict()) == list(named.state_dict())
        assert [v.shape for v in plain.state_dict().values()] == [v.shape for v in named.state_dict().values()]
        assert isinstance(named.catalog, PPOCatalog)


# ------------------------------------------------------------------ catalog_class


def test_custom_pi_head_changes_the_module():
    model = {"fcnet_hiddens": [32], "vf_share_layers": True}
    module = RLModuleSpec(PPOTorchRLModule, OBS, ACT, model, catalog_class=DeepPiCatalog).build()
    assert linear_shapes(module.pi) == [(32, 16), (16, 2)]
    assert linear_shapes(module.vf) == [(32, 1)]
    out = module.forward_train({Columns.OBS: torch.zeros(3, 4)})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (3, 2)
    assert RLModuleSpec.from_module(module).catalog_class is DeepPiCatalog


def test_custom_catalog_module_trains_in_ppo():
    spec = RLModuleSpec(catalog_class=DeepPiCatalog, model_config={"fcnet_hiddens": [32], "vf_share_layers": True})
    algo = small_config().rl_module(rl_module_spec=spec).build()
    try:
        module = algo.get_module()
        assert linear_shapes(module.pi) == [(32, 16), (16, 2)]
        before = {k: v.clone() for k, v in module.state_dict().items()}
        for _ in range(3):
            result = algo.train()
        assert math.isfinite(result["learners"]["default_policy"]["total_loss"])
        after = module.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("pi."))
        # The EnvRunner samples with the same custom layers.
        runner_module = algo.env_runner.module
        runner_module = getattr(runner_module, "get", lambda _m, d=None: runner_module)(DEFAULT_MODULE_ID)
        assert linear_shapes(runner_module.pi) == [(32, 16), (16, 2)]
    finally:
        algo.stop()


def test_catalog_class_must_be_a_catalog():
    with pytest.raises(ConfigError, match="Catalog"):
        RLModuleSpec(PPOTorchRLModule, OBS, ACT, {}, catalog_class=dict).build()


def test_catalog_with_a_module_that_builds_its_own_networks_is_refused():
    from rlx.algorithms.dqn import DQNConfig

    config = DQNConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(catalog_class=PPOCatalog))
    with pytest.raises(NotSupportedYetError, match="catalog_class"):
        config.build()


def test_user_module_gets_a_catalog_instance():
    class UsesCatalog(RLModule):
        def setup(self) -> None:
            self.encoder = self.catalog.build_encoder("torch")
            self.pi = nn.Linear(self.catalog.latent_dims[0], 2)

        def _forward(self, batch, **kwargs):
            return {Columns.ACTION_DIST_INPUTS: self.pi(self.encoder(batch[Columns.OBS]))}

    module = RLModuleSpec(UsesCatalog, OBS, ACT, {"fcnet_hiddens": [8]}, catalog_class=Catalog).build()
    assert linear_shapes(module) == [(4, 8), (8, 2)]


# ------------------------------------------------------------------ load_state_path


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A PPO checkpoint (fcnet_hiddens [64]) after two iterations: (its path, the module's weights)."""
    path = tmp_path_factory.mktemp("catalog") / "checkpoint"
    algo = small_config().rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64])).build()
    try:
        algo.train()
        algo.train()
        algo.save_to_path(path)
        return path, {k: v.detach().clone() for k, v in algo.get_module().state_dict().items()}
    finally:
        algo.stop()


def module_dir(checkpoint: Path, module_id: str = DEFAULT_MODULE_ID) -> Path:
    return checkpoint / COMPONENT_LEARNER_GROUP / COMPONENT_LEARNER / COMPONENT_RL_MODULE / module_id


def assert_weights_equal(module: nn.Module, weights: dict) -> None:
    state = module.state_dict()
    assert state.keys() == weights.keys()
    for key, value in weights.items():
        assert torch.equal(state[key], value), key


def test_checkpoint_has_rllibs_module_directory(trained_checkpoint):
    path, weights = trained_checkpoint
    assert module_dir(path).is_dir()
    module = RLModule.from_checkpoint(module_dir(path))
    assert type(module) is PPOTorchRLModule
    assert_weights_equal(module, weights)


def test_load_state_path_loads_the_trained_weights(trained_checkpoint):
    path, weights = trained_checkpoint
    spec = RLModuleSpec(PPOTorchRLModule, OBS, ACT, DefaultModelConfig(fcnet_hiddens=[64]), catalog_class=PPOCatalog,
                        load_state_path=module_dir(path))
    assert isinstance(spec.load_state_path, str)
    assert_weights_equal(spec.build(), weights)


def test_load_state_path_in_a_multi_agent_run(trained_checkpoint):
    """The pretrained module sits next to a fresh one of another size, and both train."""
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    path, weights = trained_checkpoint
    env = gym.make("CartPole-v1")
    specs = {
        "p0": RLModuleSpec(PPOTorchRLModule, env.observation_space, env.action_space,
                           DefaultModelConfig(fcnet_hiddens=[64]), catalog_class=PPOCatalog,
                           load_state_path=module_dir(path)),
        "p1": RLModuleSpec(PPOTorchRLModule, env.observation_space, env.action_space,
                           DefaultModelConfig(fcnet_hiddens=[32]), catalog_class=PPOCatalog),
    }
    config = (small_config(env=MultiAgentCartPole).environment(env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **kw: f"p{aid}")
              .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs)))
    algo = config.build()
    try:
        assert_weights_equal(algo.get_module("p0"), weights)
        assert linear_shapes(algo.get_module("p1").encoder) == [(4, 32)]
        runner_p0 = algo.env_runner.module["p0"]
        for key, value in weights.items():
            if key in runner_p0.state_dict():
                assert torch.equal(runner_p0.state_dict()[key], value)
        result = algo.train()
        assert math.isfinite(result["learners"]["p0"]["total_loss"])
        assert math.isfinite(result["learners"]["p1"]["total_loss"])
        saved = Path(algo.save_to_path(path.parent / "multi"))
        for pid in ("p0", "p1"):
            assert_weights_equal(RLModule.from_checkpoint(module_dir(saved, pid)), algo.get_module(pid).state_dict())
    finally:
        algo.stop()


def test_algorithm_checkpoint_keeps_the_catalog_class(tmp_path):
    from rlx.algorithms.algorithm import Algorithm

    spec = RLModuleSpec(catalog_class=DeepPiCatalog, model_config={"fcnet_hiddens": [32], "vf_share_layers": True})
    algo = small_config().rl_module(rl_module_spec=spec).build()
    try:
        algo.train()
        path = algo.save_to_path(tmp_path / "ckpt")
        weights = {k: v.detach().clone() for k, v in algo.get_module().state_dict().items()}
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(path)
    try:
        assert linear_shapes(restored.get_module().pi) == [(32, 16), (16, 2)]
        assert_weights_equal(restored.get_module(), weights)
    finally:
        restored.stop()


def test_load_state_path_with_another_size_names_the_mismatch(trained_checkpoint):
    path, _ = trained_checkpoint
    spec = RLModuleSpec(PPOTorchRLModule, OBS, ACT, DefaultModelConfig(fcnet_hiddens=[32]),
                        load_state_path=module_dir(path))
    with pytest.raises(CheckpointError, match="shape"):
        spec.build()


def test_load_state_path_of_a_non_module_directory(trained_checkpoint, tmp_path):
    path, _ = trained_checkpoint
    with pytest.raises(CheckpointError, match="learner_group/learner/rl_module"):
        RLModuleSpec(PPOTorchRLModule, OBS, ACT, {}, load_state_path=path).build()
    with pytest.raises(CheckpointError, match="no rlx_module.json"):
        RLModule.from_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        RLModule.from_checkpoint(tmp_path / "missing")


def test_module_save_to_path_round_trip(tmp_path):
    module = RLModuleSpec(PPOTorchRLModule, OBS, ACT, {"fcnet_hiddens": [8], "vf_share_layers": True},
                          catalog_class=DeepPiCatalog).build()
    saved = module.save_to_path(tmp_path / "m")
    restored = PPOTorchRLModule.from_checkpoint(saved)
    assert restored.catalog_class is DeepPiCatalog
    assert_weights_equal(restored, module.state_dict())
    fresh = RLModuleSpec(PPOTorchRLModule, OBS, ACT, {"fcnet_hiddens": [8], "vf_share_layers": True},
                         catalog_class=DeepPiCatalog).build()
    fresh.restore_from_path(saved)
    assert_weights_equal(fresh, module.state_dict())


def test_damaged_weights_are_reported(tmp_path):
    module = RLModuleSpec(PPOTorchRLModule, OBS, ACT, {"fcnet_hiddens": [8]}).build()
    saved = Path(module.save_to_path(tmp_path / "m"))
    weights = saved / "module.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum"):
        RLModule.from_checkpoint(saved)


# ------------------------------------------------------------------ learner_only


def test_learner_only_flag():
    module = RLModuleSpec(PPOTorchRLModule, OBS, ACT, {}, learner_only=True).build()
    assert module.learner_only is True
    assert RLModuleSpec.from_module(module).learner_only is True
    with pytest.raises(ConfigError, match="inference_only=True and learner_only=True"):
        RLModuleSpec(PPOTorchRLModule, OBS, ACT, {}, inference_only=True, learner_only=True).build()
    config = small_config().rl_module(rl_module_spec=RLModuleSpec(learner_only=True))
    with pytest.raises(NotSupportedYetError, match="learner_only"):
        config.build()

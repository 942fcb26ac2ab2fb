"""RLlib's module surface that user code imports: rlx.core constants, the rl_module package's
submodules (DefaultModelConfig, TorchRLModule, the API mix-ins), utils.framework,
utils.annotations and the metrics-key constants."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import ConfigError, NotSupportedYetError


def test_core_constants_and_columns():
    from rlx.core import (ALL_MODULES, COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE,
                          DEFAULT_AGENT_ID, DEFAULT_MODULE_ID, DEFAULT_POLICY_ID, Columns)

    assert DEFAULT_MODULE_ID == DEFAULT_POLICY_ID == "default_policy"
    assert DEFAULT_AGENT_ID == "default_agent" and ALL_MODULES == "__all_modules__"
    assert (COMPONENT_LEARNER_GROUP, COMPONENT_LEARNER, COMPONENT_RL_MODULE) == ("learner_group", "learner", "rl_module")
    assert Columns.OBS == "obs" and Columns.ACTIONS == "actions"


def test_component_names_address_module_weights_in_set_state():
    from rlx.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=64).build()
    try:
        weights = algo.get_module().get_state()
        zeroed = {k: v * 0.0 for k, v in weights.items()}
        algo.set_state({COMPONENT_LEARNER_GROUP: {COMPONENT_LEARNER: {COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: zeroed}}}})
        assert all((v == 0).all() for v in algo.get_policy().get_weights().values())
    finally:
        algo.stop()


def test_importing_rlx_core_imports_neither_torch_nor_gymnasium():
    code = "import sys, rlx.core, rlx.utils.metrics; print('torch' in sys.modules, 'gymnasium' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_default_model_config_sets_the_network():
    from rlx.core.rl_module.default_model_config import DefaultModelConfig

    config = PPOConfig().environment("CartPole-v1").rl_module(
        model_config=DefaultModelConfig(fcnet_hiddens=[32], fcnet_activation="relu", vf_share_layers=False))
    assert config.model["fcnet_hiddens"] == [32] and config.model["fcnet_activation"] == "relu"
    algo = config.build()
    try:
        weights = algo.get_weights()["default_policy"]
        assert weights["pi.linears.0.weight"].shape == (32, 4)
        assert weights["vf.linears.0.weight"].shape == (32, 4)  # a separate value network
    finally:
        algo.stop()


def test_default_model_config_defaults_are_rllibs_and_share_the_trunk():
    from rlx.core.rl_module.default_model_config import DefaultModelConfig, model_dict

    model = model_dict(DefaultModelConfig())
    assert model["fcnet_hiddens"] == [256, 256] and model["vf_share_layers"] is True
    assert model["post_fcnet_hiddens"] == [] and "conv_filters" not in model
    assert model_dict(DefaultModelConfig(head_fcnet_hiddens=[8]))["post_fcnet_hiddens"] == [8]


@pytest.mark.parametrize("field, value", [("fcnet_use_layernorm", True), ("conv_kernel_initializer", "xavier_uniform"),
                                          ("fusionnet_hiddens", [8])])
def test_default_model_config_fields_rlx_does_not_build_are_refused_by_name(field, value):
    from rlx.core.rl_module.default_model_config import DefaultModelConfig

    with pytest.raises(NotSupportedYetError, match=f"DefaultModelConfig.{field}"):
        PPOConfig().rl_module(model_config=DefaultModelConfig(**{field: value}))


def test_rl_module_spec_takes_a_default_model_config_and_from_module_rebuilds_a_module():
    from rlx.core.rl_module import RLModuleSpec
    from rlx.core.rl_module.default_model_config import DefaultModelConfig

    algo = PPOConfig().environment("CartPole-v1").rl_module(
        rl_module_spec=RLModuleSpec(model_config=DefaultModelConfig(fcnet_hiddens=[16], vf_share_layers=False))).build()
    try:
        module = algo.get_module()
        assert module.get_state()["pi.linears.0.weight"].shape == (16, 4)
        copy = RLModuleSpec.from_module(module).build()
        assert type(copy) is type(module)
        assert {k: v.shape for k, v in copy.get_state().items()} == {k: v.shape for k, v in module.get_state().items()}
    finally:
        algo.stop()
    with pytest.raises(ConfigError, match="DefaultModelConfig"):
        PPOConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(model_config=[16])).build()


def test_torch_rl_module_and_api_mixins():
    from rlx.core.rl_module import RLModule
    from rlx.core.rl_module.apis import InferenceOnlyAPI, TargetNetworkAPI, ValueFunctionAPI
    from rlx.core.rl_module.torch.torch_rl_module import TorchRLModule

    assert issubclass(TorchRLModule, RLModule)

    class NoValues(TorchRLModule, ValueFunctionAPI):
        pass

    with pytest.raises(TypeError, match="compute_values"):
        NoValues()
    for api in (TargetNetworkAPI, InferenceOnlyAPI):
        with pytest.raises(TypeError):
            type("Incomplete", (TorchRLModule, api), {})()


def test_framework_helpers():
    from rlx.utils.framework import try_import_jax, try_import_tf, try_import_torch

    torch, nn = try_import_torch()
    assert torch.__name__ == "torch" and nn is torch.nn
    assert try_import_tf() == (None, None, None) and try_import_jax() == (None, None)
    with pytest.raises(ImportError, match="PyTorch-only"):
        try_import_tf(error=True)


def test_override_checks_the_parent_has_the_method():
    from rlx.utils.annotations import DeveloperAPI, PublicAPI, override

    class Base:
        def act(self):
            return 1

    class Child(Base):
        @override(Base)
        def act(self):
            return 2

    assert Child().act() == 2
    with pytest.raises(NameError, match="does not override"):
        class Wrong(Base):
            @override(Base)
            def jump(self):
                return 3

    @PublicAPI
    class A:
        pass

    @DeveloperAPI(stability="beta")
    def f():
        return 5

    assert A.__name__ == "A" and f() == 5


def test_metrics_constants_name_keys_the_results_hold():
    from rlx.utils import metrics as m

    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=64).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    runners = result[m.ENV_RUNNER_RESULTS]
    for key in (m.EPISODE_RETURN_MEAN, m.EPISODE_LEN_MEAN, m.NUM_EPISODES, m.AGENT_EPISODE_RETURNS_MEAN,
                m.MODULE_EPISODE_RETURNS_MEAN, m.NUM_ENV_STEPS_SAMPLED):
        assert key in runners, key
    for key in (m.NUM_ENV_STEPS_SAMPLED_LIFETIME, m.NUM_AGENT_STEPS_SAMPLED_LIFETIME, m.NUM_ENV_STEPS_TRAINED_LIFETIME,
                m.LEARNER_RESULTS, m.FAULT_TOLERANCE_STATS):
        assert key in result, key


def test_numpy_and_torch_helpers():
    import gymnasium as gym
    import numpy as np
    import torch

    from rlx.utils.numpy import FLOAT_MIN, convert_to_numpy, one_hot, softmax
    from rlx.utils.torch_utils import FLOAT_MIN as TORCH_FLOAT_MIN
    from rlx.utils.torch_utils import convert_to_torch_tensor
    from rlx.utils.torch_utils import one_hot as torch_one_hot

    probs = softmax(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))
    assert np.allclose(probs.sum(axis=-1), 1.0) and np.allclose(probs[1], 1 / 3) and probs[0].argmax() == 2
    assert one_hot(np.array([0, 2]), depth=3).tolist() == [[1, 0, 0], [0, 0, 1]]
    converted = convert_to_numpy({"a": torch.ones(2, dtype=torch.float64), "b": [torch.zeros(1)]})
    assert converted["a"].dtype == np.float32 and isinstance(converted["b"][0], np.ndarray)
    assert FLOAT_MIN == TORCH_FLOAT_MIN < -1e38
    assert torch_one_hot(torch.tensor([1, 0]), gym.spaces.Discrete(3)).tolist() == [[0, 1, 0], [1, 0, 0]]
    multi = torch_one_hot(torch.tensor([[1, 2]]), gym.spaces.MultiDiscrete([2, 3]))
    assert multi.tolist() == [[0, 1, 0, 0, 1]]
    tensors = convert_to_torch_tensor({"x": np.zeros(3)})
    assert tensors["x"].dtype == torch.float32


def test_gym_env_vectorize_mode_async_steps_each_sub_env_in_its_own_process():
    import gymnasium as gym

    from rlx.env.remote_sub_env import RemoteSubEnv

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(gym_env_vectorize_mode=gym.VectorizeMode.ASYNC, num_envs_per_env_runner=2)
              .training(train_batch_size=200, minibatch_size=50, num_epochs=1))
    assert config.gym_env_vectorize_mode == "async"
    algo = config.build()
    try:
        assert all(isinstance(env, RemoteSubEnv) for env in algo.env_runner.env.envs)
        assert algo.train()["num_env_steps_sampled_lifetime"] >= 200
    finally:
        algo.stop()
    assert PPOConfig().env_runners(gym_env_vectorize_mode="SYNC").gym_env_vectorize_mode == "sync"
    with pytest.raises(NotSupportedYetError, match="vector_entry_point"):
        PPOConfig().env_runners(gym_env_vectorize_mode="vector_entry_point")
    with pytest.raises(ConfigError, match="gym_env_vectorize_mode"):
        PPOConfig().env_runners(gym_env_vectorize_mode="parallel")


def test_algorithm_default_resource_request_for_tune_with_resources():
    from rlx.algorithms.ppo import PPO

    config = PPOConfig().environment("CartPole-v1")
    assert PPO.default_resource_request(config).bundles == [{"CPU": 1.0}]
    bundles = PPO.default_resource_request(config.env_runners(num_env_runners=2, num_cpus_per_env_runner=2)).bundles
    assert bundles == [{"CPU": 1.0}, {"CPU": 2.0}, {"CPU": 2.0}]


def test_env_runner_env_unwrapped_gives_the_sub_envs_as_gymnasium_vector_envs_do():
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2).build()
    try:
        env = algo.env_runner.env
        assert env.unwrapped is env and env.unwrapped.envs[0] is env.envs[0]
        obs, _ = env.unwrapped.envs[0].reset(seed=0)
        assert obs.shape == (4,)
    finally:
        algo.stop()


def test_space_utils_batch_unbatch_and_action_scaling():
    import gymnasium as gym
    import numpy as np

    from rlx.utils.spaces.space_utils import (batch, clip_action, flatten_space, flatten_to_single_ndarray,
                                              get_base_struct_from_space, normalize_action, unbatch, unsquash_action)

    space = gym.spaces.Dict({"a": gym.spaces.Box(-2.0, 2.0, (2,)), "b": gym.spaces.Tuple([gym.spaces.Discrete(3)])})
    assert [type(s).__name__ for s in flatten_space(space)] == ["Box", "Discrete"]
    struct = get_base_struct_from_space(space)
    assert isinstance(struct["b"], tuple) and isinstance(struct["a"], gym.spaces.Box)
    samples = [{"a": np.array([i, -i], np.float32), "b": (i,)} for i in range(3)]
    batched = batch(samples)
    assert batched["a"].shape == (3, 2) and batched["b"][0].tolist() == [0, 1, 2]
    assert [s["b"][0] for s in unbatch(batched)] == [0, 1, 2]
    action = {"a": np.array([1.0, -1.0]), "b": (2,)}
    scaled = unsquash_action(action, space)
    assert scaled["a"].tolist() == [2.0, -2.0] and scaled["b"] == (2,)
    assert np.allclose(normalize_action(scaled, space)["a"], action["a"])
    assert clip_action({"a": np.array([5.0, -5.0]), "b": (1,)}, space)["a"].tolist() == [2.0, -2.0]
    assert flatten_to_single_ndarray({"x": np.ones(2), "y": (np.zeros(1),)}).tolist() == [1.0, 1.0, 0.0]


def test_serialization_round_trips_spaces_and_types():
    import gymnasium as gym
    import numpy as np

    from rlx.utils.serialization import (convert_numpy_to_python_primitives, deserialize_type, gym_space_from_dict,
                                         gym_space_to_dict, serialize_type)

    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1.0, 1.0, (3,)), "n": gym.spaces.Discrete(4)})
    assert gym_space_from_dict(gym_space_to_dict(space)) == space
    assert convert_numpy_to_python_primitives({"x": np.float32(1.5), "y": [np.arange(2)]}) == {"x": 1.5, "y": [[0, 1]]}
    assert deserialize_type(serialize_type(PPOConfig)) is PPOConfig
    assert deserialize_type("no.such.module.Thing") is None
    with pytest.raises(Exception):
        deserialize_type("no.such.module.Thing", error=True)


def test_action_masking_module_never_samples_a_masked_action():
    from gymnasium.spaces import Box, Discrete

    from rlx.algorithms.ppo import PPOConfig
    from rlx.core.rl_module import RLModuleSpec
    from rlx.examples.envs.classes.action_mask_env import ActionMaskEnv
    from rlx.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

    config = (PPOConfig()
              .environment(ActionMaskEnv, env_config={"action_space": Discrete(20),
                                                      "observation_space": Box(-1.0, 1.0, (3,))})
              .rl_module(rl_module_spec=RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                                                     model_config={"head_fcnet_hiddens": [16]}))
              .training(train_batch_size=200, minibatch_size=100, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        # ActionMaskEnv raises on a masked action: a train() that samples 200 steps proves none was taken.
        result = algo.train()
        assert result["num_env_steps_sampled_lifetime"] >= 200
        module = algo.get_module()
        obs = {"action_mask": np.zeros((1, 20), np.float32), "observations": np.zeros((1, 3), np.float32)}
        obs["action_mask"][0, 7] = 1.0
        out = module.forward_inference({"obs": obs})
        assert int(torch.as_tensor(out["action_dist_inputs"]).argmax()) == 7
    finally:
        algo.stop()


def test_fcnet_initializers_of_default_model_config_initialize_the_hidden_layers():
    from rlx.core.rl_module.default_model_config import DefaultModelConfig

    config = PPOConfig().environment("CartPole-v1").rl_module(model_config=DefaultModelConfig(
        fcnet_hiddens=[8], fcnet_kernel_initializer=torch.nn.init.constant_,
        fcnet_kernel_initializer_kwargs={"val": 0.5}, fcnet_bias_initializer="constant",
        fcnet_bias_initializer_kwargs={"val": -1.0}))
    algo = config.build()
    try:
        hidden = [m for m in algo.get_module().modules() if isinstance(m, torch.nn.Linear)][0]
        assert torch.all(hidden.weight == 0.5) and torch.all(hidden.bias == -1.0)
    finally:
        algo.stop()


def test_custom_module_classes_read_model_config_keys_of_their_own():
    from rlx.core.rl_module import RLModuleSpec
    from rlx.core.models import ActorCriticModule

    class WithOwnKeys(ActorCriticModule):
        def setup(self):
            self.embedding_dim = self.model_config["embedding_dim"]
            super().setup()

    algo = (PPOConfig().environment("CartPole-v1")
            .rl_module(rl_module_spec=RLModuleSpec(module_class=WithOwnKeys, model_config={"embedding_dim": 7}))
            .build())
    try:
        assert algo.get_module().embedding_dim == 7
    finally:
        algo.stop()
    # rlx's own modules still refuse a misspelt key.
    with pytest.raises(ConfigError, match="fcnet_hiddens"):
        PPOConfig().environment("CartPole-v1").rl_module(
            rl_module_spec=RLModuleSpec(model_config={"fcnet_hidens": [8]})).build()


def test_old_api_stack_switch_is_accepted_and_modelv2_to_rl_module_starts_from_a_policy(tmp_path):
    from rlx.core.rl_module import RLModuleSpec
    from rlx.examples.rl_modules.classes.modelv2_to_rlm import ModelV2ToRLModule

    config = (PPOConfig().api_stack(enable_env_runner_and_connector_v2=False, enable_rl_module_and_learner=False)
              .environment("CartPole-v1").training(train_batch_size=200, minibatch_size=100, num_epochs=1))
    old = config.build()
    try:
        old.train()
        path = old.save(str(tmp_path / "old")).checkpoint.path
        trained = old.get_module().get_state()
    finally:
        old.stop()
    new = config.copy(copy_frozen=False).rl_module(rl_module_spec=RLModuleSpec(
        module_class=ModelV2ToRLModule, model_config={"policy_checkpoint_dir": f"{path}/policies/default_policy"}))
    algo = new.build()
    try:
        network = algo.get_module().get_state()
        assert all(np.array_equal(network["network." + k], v) for k, v in trained.items())
        assert algo.train()["num_env_steps_sampled_lifetime"] >= 200
    finally:
        algo.stop()

"""AlgorithmConfig attributes and helpers RLlib 2.60 code reads: learner_class, rl_module_spec,
is_atari, get_rollout_fragment_length(worker_index), get_default_rl_module_spec,
get_multi_rl_module_spec, validate_train_batch_size_vs_rollout_fragment_length, and the configs
exported from rlx.algorithms."""
import gymnasium as gym
import pytest

from rlx.core.rl_module.multi_rl_module import MultiRLModuleSpec
from rlx.core.rl_module.rl_module import RLModuleSpec


def test_configs_are_exported_from_rlx_algorithms():
    from rlx.algorithms import (APPOConfig, BCConfig, CQLConfig, DQNConfig, IMPALAConfig, MARWILConfig, PPO,
                                PPOConfig, SACConfig)

    assert PPOConfig().algo_class is PPO
    for config_class in (APPOConfig, BCConfig, CQLConfig, DQNConfig, IMPALAConfig, MARWILConfig, SACConfig):
        assert config_class.__name__.endswith("Config")


def test_rollout_fragment_length_adds_up_to_the_train_batch():
    from rlx.algorithms import AlgorithmConfig

    config = (AlgorithmConfig().env_runners(num_env_runners=4, num_envs_per_env_runner=3,
                                            rollout_fragment_length="auto")
              .training(train_batch_size=2456))
    # 2456 / (4 x 3) = 204.67, 8 steps short at 204: runners take one step more per sub-env
    # until those 8 steps are covered (runners 1-3 with 3 sub-envs each), the last one 204.
    lengths = [config.get_rollout_fragment_length(worker_index=i) for i in range(1, 5)]
    assert lengths == [205, 205, 205, 204]
    assert sum(length * 3 for length in lengths) >= 2456
    assert config.get_rollout_fragment_length(0) == 205
    fixed = AlgorithmConfig().env_runners(rollout_fragment_length=50)
    assert fixed.get_rollout_fragment_length(3) == 50


def test_validate_train_batch_size_vs_rollout_fragment_length():
    from rlx.algorithms import PPOConfig

    fits = (PPOConfig().env_runners(num_env_runners=2, num_envs_per_env_runner=2, rollout_fragment_length=100)
            .training(train_batch_size=400))
    fits.validate_train_batch_size_vs_rollout_fragment_length()
    too_long = (PPOConfig().env_runners(num_env_runners=2, num_envs_per_env_runner=2, rollout_fragment_length=1000)
                .training(train_batch_size=400))
    with pytest.raises(ValueError, match="rollout_fragment_length='auto' or 100"):
        too_long.validate_train_batch_size_vs_rollout_fragment_length()


def test_learner_class_defaults_to_the_algorithms_and_can_be_overridden():
    from rlx.algorithms import DQNConfig, PPOConfig
    from rlx.algorithms.dqn.dqn_learner import DQNLearner
    from rlx.algorithms.ppo.ppo_learner import PPOLearner

    assert PPOConfig().learner_class is PPOLearner
    assert DQNConfig().learner_class is DQNLearner

    class MyLearner(PPOLearner):
        pass

    assert PPOConfig().training(learner_class=MyLearner).learner_class is MyLearner

    class MyConfig(PPOConfig):
        def get_default_learner_class(self):
            return MyLearner

    assert MyConfig().learner_class is MyLearner
    algo = MyConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=32).build()
    try:
        assert algo._resolved_learner_class() is MyLearner
    finally:
        algo.stop()


def test_rl_module_spec_and_default_spec():
    from rlx.algorithms import DQNConfig, PPOConfig
    from rlx.core.rl_module.rl_module import RLModule

    config = PPOConfig().environment("CartPole-v1")
    default = config.get_default_rl_module_spec()
    assert isinstance(default, RLModuleSpec) and issubclass(default.module_class, RLModule)
    spec = config.rl_module_spec
    assert spec.module_class is default.module_class
    assert spec.model_config["fcnet_hiddens"] == config.model["fcnet_hiddens"]
    assert DQNConfig().rl_module_spec.module_class is not default.module_class

    class Custom(default.module_class):
        pass

    assert config.rl_module(rl_module_spec=RLModuleSpec(module_class=Custom)).rl_module_spec.module_class is Custom


def test_get_multi_rl_module_spec():
    from rlx.algorithms import PPOConfig

    env = gym.make("CartPole-v1")
    single = PPOConfig().environment("CartPole-v1").get_multi_rl_module_spec(env=env)
    assert isinstance(single, MultiRLModuleSpec)
    assert list(single.rl_module_specs) == ["default_policy"]
    assert single.rl_module_specs["default_policy"].action_space == env.action_space
    multi = (PPOConfig().environment("CartPole-v1")
             .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *a, **k: "p0"))
    spaces = {"p0": (env.observation_space, env.action_space), "p1": (env.observation_space, env.action_space)}
    spec = multi.get_multi_rl_module_spec(spaces=spaces)
    assert sorted(spec.rl_module_specs) == ["p0", "p1"]
    assert spec.rl_module_specs["p1"].observation_space == env.observation_space
    with pytest.raises(ValueError, match="policy_dict"):
        multi.get_multi_rl_module_spec(spaces=spaces, policy_dict={})


def test_is_atari():
    from rlx.algorithms import PPOConfig

    assert PPOConfig().environment("CartPole-v1").is_atari is False
    assert PPOConfig().environment("ale_py:ALE/Pong-v5").is_atari is True
    assert PPOConfig().environment("CartPole-v1", is_atari=True).is_atari is True


def test_config_subclass_declares_settings_in_init_as_in_rllib():
    from rlx.algorithms import AlgorithmConfig, PPOConfig
    from rlx.algorithms.algorithm_config import NotProvided

    class MyConfig(PPOConfig):
        def __init__(self, algo_class=None):
            super().__init__(algo_class=algo_class)
            self.num_episodes_per_train_batch = 10  # a setting of this class
            self.num_env_runners = 1  # this class's default of a known setting

        def training(self, *, num_episodes_per_train_batch=NotProvided, **kwargs):
            super().training(**kwargs)
            if num_episodes_per_train_batch is not NotProvided:
                self.num_episodes_per_train_batch = num_episodes_per_train_batch
            return self

    config = MyConfig()
    assert config.num_episodes_per_train_batch == 10 and config.num_env_runners == 1
    assert not config.is_user_set("num_env_runners")
    config.training(num_episodes_per_train_batch=4, lr=0.01)
    assert config.num_episodes_per_train_batch == 4 and config.lr == 0.01
    assert config.copy().num_episodes_per_train_batch == 4
    assert config.to_dict()["num_episodes_per_train_batch"] == 4
    assert MyConfig.from_dict(config.to_dict()).num_episodes_per_train_batch == 4
    # Outside __init__, and on rlx's own configs, an unknown name is still a typo.
    with pytest.raises(ValueError, match="Unknown config key 'num_episodes_per_trian_batch'"):
        config.num_episodes_per_trian_batch = 3
    with pytest.raises(ValueError, match="Unknown config key"):
        PPOConfig().num_episodes_per_train_batch = 3
    assert "num_episodes_per_train_batch" not in AlgorithmConfig().to_dict()


def test_config_subclass_names_its_default_module_with_its_own_model_keys():
    from rlx.algorithms import PPOConfig
    from rlx.core.models import ActorCriticModule

    class MyModule(ActorCriticModule):
        pass

    class MyConfig(PPOConfig):
        def get_default_rl_module_spec(self):
            return RLModuleSpec(module_class=MyModule, model_config={"hidden_dim": 8})

    config = MyConfig().environment("CartPole-v1")
    assert config.get_default_rl_module_spec().module_class is MyModule
    assert config.rl_module_spec.module_class is MyModule
    config.rl_module(rl_module_spec=RLModuleSpec(module_class=MyModule, model_config={"hidden_dim": 16}))
    spec = config.rl_module_spec
    assert spec.module_class is MyModule and spec.model_config["hidden_dim"] == 16


def test_declared_settings_read_and_set_where_the_class_table_lacks_them():
    from rlx.algorithms import PPOConfig

    class Declaring(PPOConfig):
        def __init__(self, algo_class=None):
            super().__init__(algo_class=algo_class)
            self.my_setting = 1

    config = Declaring()
    # What an unpickled copy sees in a process that never ran Declaring.__init__: the
    # class's option table without the declared setting, the value in the config.
    del Declaring._table.options["my_setting"]
    assert config.my_setting == 1
    config.my_setting = 2
    assert config.my_setting == 2 and config.copy().my_setting == 2

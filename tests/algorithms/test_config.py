"""AlgorithmConfig / PPOConfig: section methods, validation, legacy names, dict conversion.

The behaviour follows RLlib's "Configuring RLlib Algorithms" (seed 003): chained section
methods, old flat-dict keys accepted under their new names, and errors that name the
offending option.
"""
from __future__ import annotations

import math

import pytest

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.models.model_defaults import MODEL_DEFAULTS
from rlx.utils.errors import ConfigError, NotSupportedYetError


# --------------------------------------------------------------------------- chaining


def test_section_methods_chain_and_store_values():
    config = PPOConfig().training(lr=0.01, gamma=0.9).environment("CartPole-v1")
    assert config.lr == 0.01
    assert config.gamma == 0.9
    assert config.env == "CartPole-v1"


def test_section_methods_return_the_same_config_object():
    config = PPOConfig()
    assert config.training(lr=0.01) is config
    assert config.environment("CartPole-v1") is config
    assert config.env_runners(num_envs_per_env_runner=2) is config
    assert config.debugging(seed=3) is config
    assert (config.num_envs_per_env_runner, config.seed) == (2, 3)


def test_later_section_calls_keep_earlier_values():
    config = PPOConfig().training(lr=0.01).training(gamma=0.5)
    assert config.lr == 0.01
    assert config.gamma == 0.5


def test_ppo_specific_options_are_settable_through_training():
    config = PPOConfig().training(clip_param=0.3, num_epochs=4, minibatch_size=32, lambda_=0.9)
    assert (config.clip_param, config.num_epochs, config.minibatch_size, config.lambda_) == (0.3, 4, 32, 0.9)


def test_base_config_does_not_know_ppo_options():
    with pytest.raises(ConfigError, match="clip_param"):
        AlgorithmConfig().training(clip_param=0.3)


def test_environment_accepts_env_config_and_stores_a_copy():
    env_config = {"length": 3}
    config = PPOConfig().environment("CartPole-v1", env_config=env_config)
    env_config["length"] = 99
    assert config.env_config == {"length": 3}


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("training", "gamma", 1.5),
        ("training", "gamma", -0.1),
        ("training", "lr", -1),
        ("training", "lr", "fast"),
        ("training", "train_batch_size", "x"),
        ("training", "train_batch_size", 0),
        ("training", "train_batch_size", True),
        ("training", "grad_clip_by", "foo"),
        ("training", "grad_clip", 0.0),
        ("training", "clip_param", 0.0),
        ("training", "lambda_", 1.5),
        ("training", "num_epochs", 0),
        ("env_runners", "batch_mode", "bogus"),
        ("env_runners", "num_envs_per_env_runner", 0),
        ("env_runners", "rollout_fragment_length", "bogus"),
        ("env_runners", "observation_filter", "MeanFilter"),
        ("environment", "disable_env_checking", "yes"),
        ("environment", "clip_rewards", -1.0),
        ("environment", "env_config", [1, 2]),
        ("debugging", "seed", -1),
        ("debugging", "log_level", "LOUD"),
    ],
)
def test_invalid_values_raise_config_error_naming_the_option(section, key, value):
    config = PPOConfig()
    with pytest.raises(ConfigError) as info:
        getattr(config, section)(**{key: value})
    assert not isinstance(info.value, NotSupportedYetError)
    assert key in str(info.value)


def test_rejected_value_leaves_the_previous_value_in_place():
    config = PPOConfig().training(gamma=0.8)
    with pytest.raises(ConfigError):
        config.training(gamma=1.5)
    assert config.gamma == 0.8


def test_boundary_values_are_accepted():
    config = PPOConfig().training(gamma=1.0, lr=0.0).env_runners(rollout_fragment_length=1)
    assert (config.gamma, config.lr, config.rollout_fragment_length) == (1.0, 0.0, 1)


# --------------------------------------------------------------------------- unknown keys


def test_unknown_training_key_suggests_the_closest_name():
    with pytest.raises(ConfigError, match=r"Did you mean 'lr'"):
        PPOConfig().training(lrr=0.1)


def test_unknown_key_in_from_dict_suggests_the_closest_name():
    with pytest.raises(ConfigError) as info:
        PPOConfig.from_dict({"num_worker": 2})
    msg = str(info.value)
    assert "num_worker" in msg
    assert "Did you mean" in msg
    assert "'num_workers'" in msg


def test_unknown_attribute_read_suggests_the_closest_name():
    with pytest.raises(AttributeError, match=r"Did you mean 'gamma'"):
        PPOConfig().gamme  # noqa: B018


def test_unknown_item_read_raises_key_error():
    with pytest.raises(KeyError, match="bogus_key"):
        PPOConfig()["bogus_key"]


@pytest.mark.parametrize(
    "section, key, value, home",
    [
        ("training", "num_envs_per_env_runner", 2, "env_runners()"),
        ("environment", "gamma", 0.5, "training()"),
        ("env_runners", "lr", 0.1, "training()"),
        ("training", "seed", 1, "debugging()"),
    ],
)
def test_option_in_the_wrong_section_names_its_section(section, key, value, home):
    with pytest.raises(ConfigError) as info:
        getattr(PPOConfig(), section)(**{key: value})
    msg = str(info.value)
    assert key in msg
    assert home in msg


# --------------------------------------------------------------------------- legacy names


@pytest.mark.parametrize(
    "legacy_key, value, attr",
    [
        ("num_envs_per_worker", 3, "num_envs_per_env_runner"),
        ("sgd_minibatch_size", 64, "minibatch_size"),
        ("num_sgd_iter", 3, "num_epochs"),
        ("lambda", 0.7, "lambda_"),
        ("lr_schedule", [[0, 0.1], [100, 0.01]], "lr"),
        ("metrics_smoothing_episodes", 7, "metrics_num_episodes_for_smoothing"),
        ("timesteps_per_iteration", 11, "min_sample_timesteps_per_iteration"),
    ],
)
def test_legacy_flat_keys_map_to_current_names(legacy_key, value, attr):
    config = PPOConfig.from_dict({legacy_key: value})
    assert getattr(config, attr) == value
    assert config[legacy_key] == value
    # to_dict() uses the current name (RLlib writes lambda_ as "lambda").
    dict_name = {"lambda_": "lambda"}.get(attr, attr)
    assert config.to_dict()[dict_name] == value
    if legacy_key != dict_name:
        assert legacy_key not in config.to_dict()


def test_legacy_num_workers_maps_to_num_env_runners():
    config = PPOConfig.from_dict({"num_workers": 0})
    assert config.num_env_runners == 0
    assert config["num_workers"] == 0
    assert "num_workers" not in config.to_dict()


def test_legacy_num_workers_above_zero_sets_remote_runners():
    config = PPOConfig.from_dict({"num_workers": 2, "num_rollout_workers": 3})
    assert config.num_env_runners == 3  # the later name wins, as in a dict update
    assert PPOConfig().env_runners(backend="ray").env_runner_backend == "ray"
    with pytest.raises(ConfigError, match="env_runner_backend"):
        PPOConfig().env_runners(env_runner_backend="threads")


def test_legacy_names_work_as_section_keywords():
    config = PPOConfig().rollouts(num_envs_per_worker=3, num_rollout_workers=0).training(sgd_minibatch_size=16)
    assert config.num_envs_per_env_runner == 3
    assert config.num_env_runners == 0
    assert config.minibatch_size == 16


def test_legacy_lr_schedule_none_keeps_lr():
    """Old config dicts (e.g. RLlib's old DEFAULT_CONFIG) carry 'lr_schedule': None,
    meaning "no schedule"; it must not replace or reject the plain lr."""
    config = PPOConfig.from_dict({"lr": 0.01, "lr_schedule": None})
    assert config.lr == 0.01


@pytest.mark.parametrize(
    "value_key, schedule_key",
    [("lr", "lr_schedule"), ("entropy_coeff", "entropy_coeff_schedule")],
)
@pytest.mark.parametrize("schedule_first", [False, True])
def test_legacy_schedule_wins_over_the_plain_value_in_any_key_order(value_key, schedule_key, schedule_first):
    """In old configs a set `*_schedule` replaced the plain value; the order of the dict's
    keys must not decide which one survives the mapping onto the same option."""
    schedule = [[0, 0.1], [100, 0.01]]
    items = [(value_key, 0.0), (schedule_key, schedule)]
    if schedule_first:
        items.reverse()
    config = PPOConfig.from_dict(dict(items))
    assert getattr(config, value_key) == schedule


# --------------------------------------------------------------------------- dict conversion


def test_to_dict_from_dict_round_trip_gives_an_equal_config():
    config = (
        PPOConfig()
        .training(lr=0.01, gamma=0.9, lambda_=0.8, model={"fcnet_hiddens": [32]})
        .environment("CartPole-v1", env_config={"a": 1})
        .env_runners(num_envs_per_env_runner=2, batch_mode="complete_episodes")
    )
    restored = PPOConfig.from_dict(config.to_dict())
    assert restored == config
    assert restored.to_dict() == config.to_dict()
    assert restored.lambda_ == 0.8
    assert restored.model["fcnet_hiddens"] == [32]


def test_equality_detects_a_different_value():
    assert PPOConfig().training(lr=0.01) != PPOConfig().training(lr=0.02)


def test_to_dict_uses_rllib_dict_names():
    d = PPOConfig().training(lambda_=0.8).to_dict()
    assert d["lambda"] == 0.8
    assert "lambda_" not in d


def test_to_dict_returns_a_copy():
    config = PPOConfig().environment("CartPole-v1", env_config={"a": 1})
    d = config.to_dict()
    d["env_config"]["a"] = 2
    d["model"]["fcnet_hiddens"].append(7)
    assert config.env_config == {"a": 1}
    assert config.model["fcnet_hiddens"] == MODEL_DEFAULTS["fcnet_hiddens"]


def test_update_from_dict_sets_values_and_returns_self():
    config = PPOConfig()
    out = config.update_from_dict({"lr": 0.2, "gamma": 0.5, "num_sgd_iter": 2})
    assert out is config
    assert (config.lr, config.gamma, config.num_epochs) == (0.2, 0.5, 2)


def test_update_from_dict_validates_values():
    with pytest.raises(ConfigError, match="gamma"):
        PPOConfig().update_from_dict({"gamma": 2.0})


def test_from_dict_builds_the_calling_class():
    assert type(PPOConfig.from_dict({"lr": 0.1})) is PPOConfig


def test_copy_is_independent_of_the_original():
    original = PPOConfig().training(lr=0.01).environment("CartPole-v1", env_config={"a": 1})
    copied = original.copy()
    assert copied == original
    copied.training(lr=0.5, model={"fcnet_hiddens": [8]})
    copied.env_config["b"] = 2
    assert original.lr == 0.01
    assert original.env_config == {"a": 1}
    assert original.model["fcnet_hiddens"] == MODEL_DEFAULTS["fcnet_hiddens"]
    assert copied.lr == 0.5


def test_overrides_returns_the_given_settings():
    assert PPOConfig.overrides(lr=0.1, explore=False) == {"lr": 0.1, "explore": False}


def test_overrides_rejects_unknown_names_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"Did you mean 'lr'"):
        PPOConfig.overrides(lrr=0.1)


# --------------------------------------------------------------------------- dict-style access


def test_dict_style_read_access():
    config = PPOConfig().training(lr=0.02, lambda_=0.5).rollouts(num_envs_per_worker=4)
    assert config["lr"] == 0.02
    assert config["lambda"] == 0.5
    assert config["num_workers"] == config.num_env_runners
    assert config["num_envs_per_worker"] == 4
    assert config.get("gamma") == config.gamma
    assert config.get("no_such_key", "fallback") == "fallback"


def test_membership_over_current_and_legacy_names():
    config = PPOConfig()
    assert "lr" in config
    assert "num_workers" in config
    assert "lambda" in config
    assert "not_an_option" not in config
    assert 3 not in config


def test_dict_style_write_is_validated():
    config = PPOConfig()
    config["lr"] = 0.05
    assert config.lr == 0.05
    with pytest.raises(ConfigError, match="gamma"):
        config["gamma"] = 2.0


# --------------------------------------------------------------------------- not supported yet


@pytest.mark.parametrize(
    "section, key, value, default",
    [
        ("multi_agent", "policy_map_cache", "/tmp/policies", None),
    ],
)
def test_unbuilt_features_raise_not_supported_yet_but_accept_their_default(section, key, value, default):
    config = PPOConfig()
    with pytest.raises(NotSupportedYetError, match=f"not supported yet: {key}"):
        getattr(config, section)(**{key: value})
    getattr(config, section)(**{key: default})
    assert getattr(config, key) == default


def test_model_keys_of_unbuilt_features_refuse_other_values_but_accept_their_default():
    with pytest.raises(NotSupportedYetError, match="not supported yet: .*custom_preprocessor"):
        PPOConfig().training(model={"custom_preprocessor": "my_preprocessor"})
    config = PPOConfig().training(model={"custom_preprocessor": None, "use_attention": True})
    assert config.model["custom_preprocessor"] is None and config.model["use_attention"] is True


def test_unknown_callback_event_is_an_error_with_a_suggestion():
    with pytest.raises(ConfigError, match="Did you mean 'on_train_result'"):
        PPOConfig().callbacks(on_train_results=lambda **kw: None)


def test_not_supported_yet_is_a_config_error():
    """Callers catching ConfigError also catch the not-yet-built errors."""
    assert issubclass(NotSupportedYetError, ConfigError)


# --------------------------------------------------------------------------- framework


@pytest.mark.parametrize("framework", ["tf2", "tf", "jax"])
def test_non_torch_framework_raises_mentioning_pytorch(framework):
    with pytest.raises(ConfigError, match="PyTorch"):
        PPOConfig().framework(framework)


def test_torch_framework_is_accepted():
    config = PPOConfig().framework("torch")
    assert config.framework_str == "torch"
    assert config["framework"] == "torch"


@pytest.mark.parametrize(
    "key, value, default",
    [("eager_tracing", True, False), ("tf_session_args", {"intra_op_parallelism_threads": 2}, {})],
)
def test_tf_only_options_raise_unless_default(key, value, default):
    with pytest.raises(ConfigError) as info:
        PPOConfig().framework(**{key: value})
    assert key in str(info.value)
    assert "TensorFlow" in str(info.value)
    assert PPOConfig().framework(**{key: default})[key] == default


# --------------------------------------------------------------------------- cross-checks


def _cartpole() -> PPOConfig:
    return PPOConfig().environment("CartPole-v1")


def test_ignore_and_restart_failed_env_runners_are_mutually_exclusive_at_validate():
    config = _cartpole().fault_tolerance(ignore_env_runner_failures=True, restart_failed_env_runners=True)
    with pytest.raises(ConfigError) as info:
        config.validate()
    assert "ignore_env_runner_failures" in str(info.value)
    assert "restart_failed_env_runners" in str(info.value)


@pytest.mark.parametrize("flag", ["ignore_env_runner_failures", "restart_failed_env_runners"])
def test_either_fault_tolerance_flag_alone_validates(flag):
    _cartpole().fault_tolerance(**{flag: True}).validate()


def test_minibatch_larger_than_train_batch_is_rejected_at_validate():
    config = _cartpole().training(train_batch_size=100, minibatch_size=200)
    with pytest.raises(ConfigError, match="minibatch_size"):
        config.validate()


def test_minibatch_equal_to_train_batch_validates():
    _cartpole().training(train_batch_size=100, minibatch_size=100).validate()


def test_use_gae_without_use_critic_is_rejected_at_validate():
    config = _cartpole().training(use_gae=True, use_critic=False)
    with pytest.raises(ConfigError, match="use_critic"):
        config.validate()


def test_no_gae_and_no_critic_validates_with_complete_episodes():
    _cartpole().training(use_gae=False, use_critic=False).env_runners(batch_mode="complete_episodes").validate()


# --------------------------------------------------------------------------- schedules


def test_lr_schedule_is_stored():
    config = PPOConfig().training(lr=[[0, 0.1], [1000, 0.01]])
    assert config.lr == [[0, 0.1], [1000, 0.01]]


@pytest.mark.parametrize(
    "schedule, fragment",
    [
        ([[10, 0.1], [100, 0.01]], "timestep 0"),
        ([[0, 0.1], [100, 0.05], [50, 0.01]], "increase"),
        ([[0, 0.1], [0, 0.05]], "increase"),
        ([], "empty"),
        ([[0, 0.1, 5]], "pair"),
    ],
)
def test_invalid_lr_schedules_are_rejected(schedule, fragment):
    with pytest.raises(ConfigError) as info:
        PPOConfig().training(lr=schedule)
    assert "lr" in str(info.value)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- model config


def test_model_settings_merge_into_the_defaults():
    config = PPOConfig().training(model={"fcnet_hiddens": [32]})
    assert config.model["fcnet_hiddens"] == [32]
    assert config.model["fcnet_activation"] == MODEL_DEFAULTS["fcnet_activation"]
    config.training(model={"fcnet_activation": "relu"})
    assert config.model["fcnet_hiddens"] == [32]
    assert config.model["fcnet_activation"] == "relu"


def test_unknown_model_key_suggests_the_closest_key():
    with pytest.raises(ConfigError, match=r"Did you mean.*'fcnet_hiddens'"):
        PPOConfig().training(model={"fcnet_hidens": [32]})


@pytest.mark.parametrize("hiddens", [[0], [64, -1], "64", [64.0], [True]])
def test_invalid_fcnet_hiddens_are_rejected(hiddens):
    with pytest.raises(ConfigError, match="fcnet_hiddens"):
        PPOConfig().training(model={"fcnet_hiddens": hiddens})


def test_model_defaults_are_not_shared_between_configs():
    a = PPOConfig()
    a.model["fcnet_hiddens"].append(5)
    assert PPOConfig().model["fcnet_hiddens"] == MODEL_DEFAULTS["fcnet_hiddens"]


# --------------------------------------------------------------------------- build / freeze


def test_config_is_frozen_after_build():
    config = _cartpole().training(train_batch_size=64, minibatch_size=32)
    algo = config.build()
    try:
        assert algo.config.is_frozen
        with pytest.raises(ConfigError, match="frozen"):
            algo.config.training(lr=0.1)
        with pytest.raises(ConfigError, match="frozen"):
            algo.config["lr"] = 0.1
        # build() works on a copy: the caller's config stays editable.
        assert not config.is_frozen
        config.training(lr=0.1)
        unfrozen = algo.config.copy(copy_frozen=False)
        unfrozen.training(lr=0.2)
        assert unfrozen.lr == 0.2
        assert algo.config.lr != 0.2
    finally:
        algo.stop()


def test_build_without_env_names_environment():
    with pytest.raises(ConfigError, match=r"environment\("):
        PPOConfig().build()


# --------------------------------------------------------------------------- derived values


@pytest.mark.parametrize("train_batch_size, num_envs", [(2000, 8), (1000, 3), (7, 2), (5, 5), (1, 4)])
def test_auto_rollout_fragment_length_splits_the_batch_over_sub_envs(train_batch_size, num_envs):
    config = PPOConfig().training(train_batch_size=train_batch_size, minibatch_size=1)
    config.env_runners(num_envs_per_env_runner=num_envs, rollout_fragment_length="auto")
    assert config.get_rollout_fragment_length() == math.ceil(train_batch_size / num_envs)


def test_explicit_rollout_fragment_length_is_returned_as_is():
    config = PPOConfig().env_runners(rollout_fragment_length=17, num_envs_per_env_runner=3)
    assert config.get_rollout_fragment_length() == 17


def test_tune_search_spaces_are_stored_and_refused_at_build():
    """Seed 003: PPOConfig().training(lr=tune.grid_search([...])) for Tune sweeps."""
    grid = {"grid_search": [0.01, 0.001, 0.0001]}
    config = PPOConfig().environment("CartPole-v1").training(lr=grid)
    assert config.lr == grid
    assert config.to_dict()["lr"] == grid
    assert PPOConfig.from_dict(config.to_dict()).lr == grid
    with pytest.raises(ConfigError, match="lr .*Tune search space"):
        config.build()

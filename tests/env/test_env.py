"""Env creation (registry, Gymnasium ids, import paths, classes), the env checker,
observation preprocessors and the MeanStdFilter."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import envs_for_tests
import rlx
from envs_for_tests import CountingEnv, Float64ObsEnv, OldApiEnv
from rlx.algorithms.ppo import PPOConfig
from rlx.env.env_checker import OldGymEnvCompatibility, check_env
from rlx.env.env_context import EnvContext
from rlx.env.registry import make_env_creator
from rlx.models.preprocessors import (
    DictFlatteningPreprocessor,
    GenericPixelPreprocessor,
    NoPreprocessor,
    OneHotPreprocessor,
    TupleFlatteningPreprocessor,
    get_preprocessor,
)
from rlx.utils.errors import EnvError
from rlx.utils.filters import MeanStdFilter


def _small_ppo(env, num_envs=1, **env_kwargs) -> PPOConfig:
    """A PPO config small enough to build quickly."""
    return (
        PPOConfig()
        .environment(env, **env_kwargs)
        .env_runners(num_envs_per_env_runner=num_envs)
        .training(train_batch_size=32, minibatch_size=16, model={"fcnet_hiddens": [8]})
    )


def _sub_envs(algo) -> list:
    return algo.env_runner_group.local_env_runner.env.envs


# =========================================================================== registry


def test_registered_creator_receives_env_context_per_sub_env():
    contexts = []

    def creator(ctx):
        contexts.append(ctx)
        return CountingEnv(ctx)

    rlx.register_env("rlx_test_recording_env", creator)
    algo = _small_ppo("rlx_test_recording_env", num_envs=3, env_config={"length": 7, "tag": "x"}).build()
    try:
        assert [c.vector_index for c in contexts] == [0, 1, 2]
        for ctx in contexts:
            assert isinstance(ctx, EnvContext)
            assert dict(ctx) == {"length": 7, "tag": "x"}
            assert ctx["tag"] == "x"
            assert ctx.worker_index == 0
            assert ctx.num_workers == 0
            assert ctx.remote is False
        assert [e.length for e in _sub_envs(algo)] == [7, 7, 7]
    finally:
        algo.stop()


def test_env_context_is_a_dict_with_worker_properties():
    ctx = EnvContext({"a": 1}, worker_index=2, vector_index=1, remote=True, num_workers=4)
    assert ctx == {"a": 1}
    assert (ctx.worker_index, ctx.vector_index, ctx.remote, ctx.num_workers) == (2, 1, True, 4)
    assert ctx.num_rollout_workers == 4
    other = ctx.copy_with_overrides(vector_index=3)
    assert (other.vector_index, other.worker_index, dict(other)) == (3, 2, {"a": 1})


def test_register_env_rejects_a_non_callable_creator():
    with pytest.raises(EnvError, match="callable"):
        rlx.register_env("rlx_test_bad_creator", "not callable")


def test_registered_name_takes_precedence_over_gymnasium_id():
    rlx.register_env("rlx_test_shadow", lambda ctx: CountingEnv(ctx))
    creator, _ = make_env_creator("rlx_test_shadow")
    assert isinstance(creator(EnvContext()), CountingEnv)


def test_gymnasium_id_creates_that_env():
    creator, _ = make_env_creator("CartPole-v1")
    env = creator(EnvContext())
    assert env.spec.id == "CartPole-v1"


def test_gymnasium_env_config_is_passed_to_gym_make():
    creator, _ = make_env_creator("CartPole-v1")
    env = creator(EnvContext({"max_episode_steps": 3}))
    assert env.spec.max_episode_steps == 3


def test_gymnasium_env_config_with_an_unknown_kwarg_raises_env_error():
    creator, _ = make_env_creator("CartPole-v1")
    with pytest.raises(EnvError, match="env_config"):
        creator(EnvContext({"no_such_kwarg": 1}))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cartpole_v0_is_available():
    creator, _ = make_env_creator("CartPole-v0")
    assert creator(EnvContext()).spec.id == "CartPole-v0"


def test_old_version_id_maps_to_the_registered_version():
    assert "Pendulum-v0" not in gym.registry
    creator, name = make_env_creator("Pendulum-v0")
    env = creator(EnvContext())
    assert env.spec.id == "Pendulum-v1"
    assert name == "Pendulum-v1"


@pytest.mark.parametrize("sep", [":", "."])
def test_import_path_string_creates_the_class_with_the_context(sep):
    creator, _ = make_env_creator(f"{envs_for_tests.__name__}{sep}CountingEnv")
    env = creator(EnvContext({"length": 9}))
    assert isinstance(env, CountingEnv)
    assert env.length == 9


def test_import_path_with_a_missing_attribute_raises_env_error():
    with pytest.raises(EnvError, match="NoSuchEnv"):
        make_env_creator(f"{envs_for_tests.__name__}:NoSuchEnv")


def test_env_class_passed_directly_gets_the_env_config():
    algo = _small_ppo(CountingEnv, num_envs=2, env_config={"length": 4}).build()
    try:
        envs = _sub_envs(algo)
        assert len(envs) == 2
        assert all(isinstance(e, CountingEnv) and e.length == 4 for e in envs)
    finally:
        algo.stop()


def test_import_path_string_builds_an_algorithm():
    algo = _small_ppo(f"{envs_for_tests.__name__}:CountingEnv", env_config={"length": 6}).build()
    try:
        assert _sub_envs(algo)[0].length == 6
    finally:
        algo.stop()


def test_unknown_env_id_raises_env_error_with_suggestion():
    with pytest.raises(EnvError) as info:
        make_env_creator("CartPol-v1")
    msg = str(info.value)
    assert "CartPol-v1" in msg
    assert "Did you mean" in msg
    assert "'CartPole-v1'" in msg


def test_unknown_env_fails_when_building():
    with pytest.raises(EnvError, match="no_such_env_anywhere"):
        _small_ppo("no_such_env_anywhere").build()


# =========================================================================== env checker


class _BaseEnv(gym.Env):
    """A valid env; subclasses break one thing each."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def _obs(self):
        return np.zeros(4, dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 1.0, False, False, {}


class _WrongShapeObsEnv(_BaseEnv):
    def _obs(self):
        return np.zeros(3, dtype=np.float32)


class _WrongDtypeObsEnv(_BaseEnv):
    def _obs(self):
        return np.zeros(4, dtype=np.float64)


class _OutOfBoundsStepObsEnv(_BaseEnv):
    def step(self, action):
        return np.full(4, 5.0, dtype=np.float32), 1.0, False, False, {}


class _FourTupleStepEnv(_BaseEnv):
    def step(self, action):
        return self._obs(), 1.0, False, {}


class _IntTerminatedEnv(_BaseEnv):
    def step(self, action):
        return self._obs(), 1.0, 0, False, {}


class _StringRewardEnv(_BaseEnv):
    def step(self, action):
        return self._obs(), "1.0", False, False, {}


class _NoSpacesEnv:
    def reset(self, *, seed=None, options=None):
        return np.zeros(4, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(4, dtype=np.float32), 1.0, False, False, {}


def test_check_env_accepts_a_valid_env_and_returns_it():
    env = _BaseEnv()
    assert check_env(env) is env


def test_check_env_names_differing_shapes():
    with pytest.raises(EnvError) as info:
        check_env(_WrongShapeObsEnv())
    msg = str(info.value)
    assert "observation_space" in msg
    assert "(3,)" in msg and "(4,)" in msg


def test_check_env_names_differing_dtypes():
    with pytest.raises(EnvError) as info:
        check_env(_WrongDtypeObsEnv())
    msg = str(info.value)
    assert "float64" in msg and "float32" in msg


class _WrongShapeStepObsEnv(_BaseEnv):
    def step(self, action):
        return np.zeros(3, dtype=np.float32), 1.0, False, False, {}


def test_check_env_checks_step_observations_too():
    with pytest.raises(EnvError, match=r"step\(\).*shapes differ"):
        check_env(_WrongShapeStepObsEnv())


def test_check_env_warns_but_accepts_observations_outside_the_bounds(caplog):
    # RLlib's single-agent EnvRunner samples such envs; rlx must not refuse them.
    with caplog.at_level("WARNING"):
        assert check_env(_OutOfBoundsStepObsEnv()) is not None
    assert "step()" in caplog.text and "outside the env's observation_space bounds" in caplog.text


def test_check_env_rejects_four_value_step_with_gymnasium_reset():
    with pytest.raises(EnvError, match="4 values"):
        check_env(_FourTupleStepEnv())


def test_check_env_warns_about_non_bool_terminated(caplog):
    # RLlib (through Gymnasium's passive checker) warns and reads the flag's truth value.
    with caplog.at_level("WARNING"):
        assert check_env(_IntTerminatedEnv()) is not None
    assert "terminated" in caplog.text and "are bools" in caplog.text


def test_check_env_rejects_non_numeric_reward():
    with pytest.raises(EnvError, match="reward"):
        check_env(_StringRewardEnv())


def test_check_env_rejects_an_env_without_spaces():
    with pytest.raises(EnvError, match="observation_space"):
        check_env(_NoSpacesEnv())


def test_old_gym_api_env_is_wrapped_when_auto_wrap_is_on():
    env = check_env(OldApiEnv({"length": 3}), auto_wrap_old_gym_envs=True)
    assert isinstance(env, OldGymEnvCompatibility)
    obs, info = env.reset()
    assert info == {}
    np.testing.assert_array_equal(obs, [0.0])
    result = env.step(0)
    assert len(result) == 5
    obs, reward, terminated, truncated, info = env.step(0)
    assert (terminated, truncated) == (False, False)
    _, _, terminated, truncated, _ = env.step(0)  # third step: done without a time limit
    assert (terminated, truncated) == (True, False)


def test_old_gym_api_time_limit_becomes_truncated():
    env = OldGymEnvCompatibility(OldApiEnv({"length": 10, "truncate_at": 1}))
    env.reset()
    _, _, terminated, truncated, info = env.step(0)
    assert (terminated, truncated) == (False, True)
    assert "TimeLimit.truncated" not in info


def test_old_gym_api_env_is_rejected_when_auto_wrap_is_off():
    with pytest.raises(EnvError) as info:
        check_env(OldApiEnv(), auto_wrap_old_gym_envs=False)
    msg = str(info.value)
    assert "(obs, info)" in msg
    assert "auto_wrap_old_gym_envs" in msg


def test_old_gym_api_env_builds_and_samples_with_auto_wrap():
    algo = _small_ppo(OldApiEnv, num_envs=2, env_config={"length": 3}).build()
    try:
        assert all(isinstance(e, OldGymEnvCompatibility) for e in _sub_envs(algo))
        batch = algo.env_runner_group.local_env_runner.sample(num_timesteps=8)
        assert batch["obs"].shape == (4, 2, 1)
        assert batch["terminateds"].any()
    finally:
        algo.stop()


def test_old_gym_api_env_is_wrapped_even_with_env_checking_disabled():
    """auto_wrap_old_gym_envs and disable_env_checking are independent settings (seed 003)."""
    algo = _small_ppo(OldApiEnv, num_envs=2, env_config={"length": 3}, disable_env_checking=True).build()
    try:
        assert all(isinstance(e, OldGymEnvCompatibility) for e in _sub_envs(algo))
        batch = algo.env_runner_group.local_env_runner.sample(num_timesteps=8)
        assert batch["terminateds"].any()
    finally:
        algo.stop()


def test_atari_is_detected_from_the_env_id_for_reward_clipping():
    from rlx.env.env_runner import is_atari_env

    class FakeSpec:
        id = "ALE/Pong-v5"

    class FakeAtari(CountingEnv):
        spec = FakeSpec()

    assert is_atari_env(FakeAtari())
    assert not is_atari_env(gym.make("CartPole-v1"))


def test_old_gym_api_env_fails_to_build_without_auto_wrap():
    config = _small_ppo(OldApiEnv, auto_wrap_old_gym_envs=False)
    with pytest.raises(EnvError, match="auto_wrap_old_gym_envs"):
        config.build()


def test_env_checking_runs_at_build_time():
    with pytest.raises(EnvError, match="float64"):
        _small_ppo(Float64ObsEnv).build()


def test_disable_env_checking_skips_the_checks():
    algo = _small_ppo(Float64ObsEnv, num_envs=2, disable_env_checking=True).build()
    try:
        batch = algo.env_runner_group.local_env_runner.sample(num_timesteps=4)
        assert batch["obs"].shape == (2, 2, 1)
        np.testing.assert_array_equal(batch["new_obs"][:, 0, 0], [1.0, 2.0])
    finally:
        algo.stop()


# =========================================================================== preprocessors


def test_discrete_gets_one_hot():
    space = gym.spaces.Discrete(4)
    prep = get_preprocessor(space)(space)
    assert isinstance(prep, OneHotPreprocessor)
    assert prep.shape == (4,)
    np.testing.assert_array_equal(prep.transform(2), [0, 0, 1, 0])


def test_discrete_with_start_offset_one_hot():
    space = gym.spaces.Discrete(3, start=5)
    prep = get_preprocessor(space)(space)
    np.testing.assert_array_equal(prep.transform(6), [0, 1, 0])


def test_multi_discrete_gets_concatenated_one_hots():
    space = gym.spaces.MultiDiscrete([2, 3])
    prep = get_preprocessor(space)(space)
    assert isinstance(prep, OneHotPreprocessor)
    assert prep.shape == (5,)
    np.testing.assert_array_equal(prep.transform(np.array([1, 2])), [0, 1, 0, 0, 1])


def test_box_gets_no_preprocessor():
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    prep = get_preprocessor(space)(space)
    assert isinstance(prep, NoPreprocessor)
    obs = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    np.testing.assert_array_equal(prep.transform(obs), obs)
    assert prep.shape == (3,)


def test_tuple_is_flattened_in_order():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-5.0, 5.0, (2,), np.float32)))
    prep = get_preprocessor(space)(space)
    assert isinstance(prep, TupleFlatteningPreprocessor)
    assert prep.shape == (5,)
    out = prep.transform((1, np.array([2.5, -3.0], dtype=np.float32)))
    np.testing.assert_array_equal(out, [0, 1, 0, 2.5, -3.0])


def test_dict_is_flattened_in_the_space_key_order():
    """Values are written in the order of the space's keys, not the observation dict's."""
    space = gym.spaces.Dict(
        {"a": gym.spaces.Box(-5.0, 5.0, (2,), np.float32), "b": gym.spaces.Discrete(3)}
    )
    assert list(space.spaces) == ["a", "b"]
    prep = get_preprocessor(space)(space)
    assert isinstance(prep, DictFlatteningPreprocessor)
    assert prep.shape == (5,)
    obs = {"b": 2, "a": np.array([1.5, -2.0], dtype=np.float32)}
    np.testing.assert_array_equal(prep.transform(obs), [1.5, -2.0, 0, 0, 1])


def test_nested_dict_inside_tuple_is_flattened():
    inner = gym.spaces.Dict({"x": gym.spaces.Discrete(2), "y": gym.spaces.Box(0.0, 1.0, (1,), np.float32)})
    space = gym.spaces.Tuple((inner, gym.spaces.MultiDiscrete([2, 2])))
    prep = get_preprocessor(space)(space)
    assert prep.size == 3 + 4
    out = prep.transform(({"x": 1, "y": np.array([0.25], np.float32)}, np.array([0, 1])))
    np.testing.assert_array_equal(out, [0, 1, 0.25, 1, 0, 0, 1])


def test_atari_sized_frames_get_the_pixel_preprocessor():
    space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    prep = get_preprocessor(space)(space)
    assert isinstance(prep, GenericPixelPreprocessor)
    assert prep.shape == (84, 84, 3)
    frame = np.random.default_rng(0).integers(0, 256, (210, 160, 3), dtype=np.uint8)
    out = prep.transform(frame)
    assert out.shape == (84, 84, 3)
    assert out.dtype == np.float32
    assert out.min() >= -1.0 and out.max() <= 1.0


def test_pixel_preprocessor_honours_dim_and_grayscale():
    space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    prep = GenericPixelPreprocessor(space, {"dim": 42, "grayscale": True})
    assert prep.shape == (42, 42, 1)
    assert prep.transform(np.zeros((210, 160, 3), np.uint8)).shape == (42, 42, 1)


# =========================================================================== MeanStdFilter


def _data(n=200, shape=(3,), seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n,) + shape) * [1.0, 5.0, 0.1] + [2.0, -3.0, 10.0]).astype(np.float32)


def test_mean_std_filter_statistics_match_numpy():
    data = _data()
    f = MeanStdFilter((3,))
    f.apply_batch(data[:50])
    f.apply_batch(data[50:])
    assert f.count == len(data)
    np.testing.assert_allclose(f.mean, data.astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f.std, data.astype(np.float64).std(axis=0, ddof=1), rtol=1e-5)


def test_mean_std_filter_batch_and_single_updates_agree():
    data = _data(n=60)
    batched, single = MeanStdFilter((3,)), MeanStdFilter((3,))
    batched.apply_batch(data[:25])
    batched.apply_batch(data[25:])
    for row in data:
        single(row)
    assert single.count == batched.count
    np.testing.assert_allclose(single.mean, batched.mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(single.std, batched.std, rtol=1e-6)


def test_mean_std_filter_normalizes_with_current_statistics():
    data = _data()
    f = MeanStdFilter((3,), clip=None)
    out = f.apply_batch(data)
    expected = (data - data.mean(axis=0)) / data.std(axis=0, ddof=1)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_mean_std_filter_without_update_keeps_statistics():
    data = _data()
    f = MeanStdFilter((3,))
    f.apply_batch(data)
    mean, count = f.mean.copy(), f.count
    f(data[0] + 100.0, update=False)
    assert f.count == count
    np.testing.assert_array_equal(f.mean, mean)


def test_mean_std_filter_clips_outputs():
    data = _data()
    f = MeanStdFilter((3,), clip=2.0)
    f.apply_batch(data)
    out = f(data.mean(axis=0) + 1000.0 * data.std(axis=0), update=False)
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    out = f(data.mean(axis=0) - 1000.0 * data.std(axis=0), update=False)
    np.testing.assert_array_equal(out, [-2.0, -2.0, -2.0])


def test_mean_std_filter_state_round_trip():
    data = _data()
    f = MeanStdFilter((3,))
    f.apply_batch(data)
    state = json.loads(json.dumps(f.get_state()))  # state is plain, serializable data
    g = MeanStdFilter((3,))
    g.set_state(state)
    assert g.count == f.count
    np.testing.assert_allclose(g.mean, f.mean)
    np.testing.assert_allclose(g.std, f.std)
    probe = data[:5] * 2.0
    np.testing.assert_allclose(g.apply_batch(probe, update=False), f.apply_batch(probe, update=False))


def test_mean_std_filter_set_state_rejects_a_different_shape():
    f = MeanStdFilter((3,))
    f.apply_batch(_data())
    with pytest.raises(ValueError, match="shape"):
        MeanStdFilter((4,)).set_state(f.get_state())

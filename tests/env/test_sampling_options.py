"""Sampling-side options of seed 003 that rlx used to refuse as "not supported yet":
remote_env_batch_wait_ms (partial steps of remote sub-envs), compress_observations,
log_sys_usage (result["perf"]), torch_compile_worker (+ backend, mode) and fake_sampler."""
from __future__ import annotations

import logging
import pickle
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError

# --------------------------------------------------------------------------- helpers


def _counter_env_class(slow_index: int, slow_s: float, slow_probability: float, episode_len: int):
    """An env whose observation is [step within the episode, vector_index]; sub-env `slow_index`
    sleeps `slow_s` on a share `slow_probability` of its steps."""

    class CounterEnv(gym.Env):
        def __init__(self, config=None):
            self.index = config.vector_index
            self.observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.rng = np.random.default_rng(100 + self.index)
            self.t = 0

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.array([0, self.index], np.float32), {}

        def step(self, action):
            if self.index == slow_index and self.rng.random() < slow_probability:
                time.sleep(slow_s)
            self.t += 1
            obs = np.array([self.t, self.index], np.float32)
            return obs, 1.0, False, self.t >= episode_len, {}

    return CounterEnv


def _remote_env_config(env, wait_ms: float, num_envs: int = 3, **env_runners):
    return (PPOConfig().environment(env)
            .env_runners(num_envs_per_env_runner=num_envs, remote_worker_envs=True,
                         remote_env_batch_wait_ms=wait_ms, **env_runners)
            .training(train_batch_size=120, minibatch_size=60, num_epochs=1)
            .debugging(seed=0))


def _column_steps(batch: dict, column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(obs, next_obs, done) of one column's valid rows."""
    valid = batch.get(Columns.VALID)
    n = int(valid[:, column].sum()) if valid is not None else batch[Columns.REWARDS].shape[0]
    if valid is not None:
        assert valid[:n, column].all() and not valid[n:, column].any(), "valid rows come first in every column"
    done = batch[Columns.TERMINATEDS][:n, column] | batch[Columns.TRUNCATEDS][:n, column]
    return batch[Columns.OBS][:n, column], batch[Columns.NEXT_OBS][:n, column], done


def _assert_columns_are_consecutive_steps(batch: dict, num_envs: int) -> list[int]:
    """Every column holds one sub-env's steps in order; returns the steps per column."""
    counts = []
    for c in range(num_envs):
        obs, next_obs, done = _column_steps(batch, c)
        assert (obs[:, 1] == c).all() and (next_obs[:, 1] == c).all(), "a column mixes sub-envs"
        np.testing.assert_array_equal(next_obs[:, 0], obs[:, 0] + 1)  # each row is one step
        for t in range(len(obs) - 1):
            expected_next = 0 if done[t] else next_obs[t, 0]  # a done step is followed by a reset
            assert obs[t + 1, 0] == expected_next, f"column {c}: row {t + 1} does not follow row {t}"
        counts.append(len(obs))
    return counts


# --------------------------------------------------------------------------- remote_env_batch_wait_ms


@pytest.mark.slow
def test_partial_steps_let_fast_sub_envs_run_ahead_of_one_slow_at_random():
    env = _counter_env_class(slow_index=0, slow_s=0.03, slow_probability=0.5, episode_len=25)
    lockstep = _remote_env_config(env, wait_ms=0.0).build()  # the default: every row waits for every sub-env
    try:
        batch = lockstep.env_runner.sample(num_timesteps=30)
        assert Columns.VALID not in batch and batch[Columns.REWARDS].shape == (10, 3)
        assert _assert_columns_are_consecutive_steps(batch, 3) == [10, 10, 10]
    finally:
        lockstep.stop()
    algo = _remote_env_config(env, wait_ms=5.0).build()
    try:
        batch = algo.env_runner.sample(num_timesteps=120)
        assert int(batch[Columns.VALID].sum()) == 120  # as many steps as asked for
        counts = _assert_columns_are_consecutive_steps(batch, 3)
        assert sum(counts) == 120
        assert counts[0] < min(counts[1:]), f"the slow sub-env should step less often: {counts}"
        result = algo.train()  # PPO learns on the padded batch
        assert result["num_env_steps_sampled_this_iter"] == 120
        assert result["env_runners"]["episode_len_mean"] == 25
    finally:
        algo.stop()


def test_a_slow_sub_env_no_longer_sets_the_pace():
    # Sub-env 2 takes 0.6 s per step. In lockstep, 12 rows of 3 sub-envs take at least 7.2 s; with
    # partial steps the fast sub-envs collect the batch while sub-env 2 takes a step or two.
    env = _counter_env_class(slow_index=2, slow_s=0.6, slow_probability=1.0, episode_len=1000)
    algo = _remote_env_config(env, wait_ms=5.0).build()
    try:
        start = time.perf_counter()
        batch = algo.env_runner.sample(num_timesteps=36)
        elapsed = time.perf_counter() - start
        counts = _assert_columns_are_consecutive_steps(batch, 3)
        assert sum(counts) == 36 and counts[2] <= 2, counts
        assert elapsed < 3.6, f"sampling took {elapsed:.2f} s; lockstep would take at least 7.2 s"
    finally:
        algo.stop()


def test_partial_steps_in_complete_episodes_mode_end_every_column_with_an_episode():
    env = _counter_env_class(slow_index=0, slow_s=0.03, slow_probability=0.5, episode_len=6)
    algo = _remote_env_config(env, wait_ms=5.0, num_envs=3, batch_mode="complete_episodes").build()
    try:
        batch = algo.env_runner.sample(num_timesteps=30)
        counts = _assert_columns_are_consecutive_steps(batch, 3)
        assert sum(counts) >= 30
        for c, n in enumerate(counts):
            assert n % 6 == 0, f"column {c} holds {n} steps, not whole 6-step episodes"
    finally:
        algo.stop()


def test_partial_steps_carry_each_sub_envs_recurrent_state():
    env = _counter_env_class(slow_index=1, slow_s=0.03, slow_probability=0.5, episode_len=8)
    algo = (_remote_env_config(env, wait_ms=5.0, num_envs=3)
            .rl_module(model_config={"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 8}).build())
    try:
        runner = algo.env_runner
        batch = runner.sample(num_timesteps=45)
        counts = _assert_columns_are_consecutive_steps(batch, 3)
        keys = [k for k in batch if k.startswith(Columns.STATE_IN + "/")]
        assert keys
        module = runner.module
        with torch.no_grad():
            for c, n in enumerate(counts):
                _, _, done = _column_steps(batch, c)
                for t in range(n - 1):
                    if done[t]:
                        continue
                    # The state before row t+1 is what the module returned for row t of this column.
                    state = {k.split("/", 1)[1]: torch.from_numpy(batch[k][t:t + 1, c]) for k in keys}
                    obs = torch.from_numpy(batch[Columns.OBS][t:t + 1, c])[:, None]
                    out = module.forward_exploration({Columns.OBS: obs, Columns.STATE_IN: state})
                    for k in keys:
                        np.testing.assert_allclose(out[Columns.STATE_OUT][k.split("/", 1)[1]].numpy(),
                                                   batch[k][t + 1:t + 2, c], rtol=1e-5, atol=1e-6)
    finally:
        algo.stop()


def test_remote_env_batch_wait_ms_must_be_a_non_negative_number():
    with pytest.raises(ConfigError, match="remote_env_batch_wait_ms"):
        PPOConfig().env_runners(remote_worker_envs=True, remote_env_batch_wait_ms=-1)
    assert PPOConfig().env_runners(remote_env_batch_wait_ms=10).remote_env_batch_wait_ms == 10.0


# --------------------------------------------------------------------------- compress_observations


def _frames_env_class():
    class FramesEnv(gym.Env):
        """Image-like observations that compress well."""

        observation_space = gym.spaces.Box(0, 255, (42, 42, 1), np.uint8)
        action_space = gym.spaces.Discrete(3)

        def __init__(self, config=None):
            self.rng = np.random.default_rng()

        def reset(self, *, seed=None, options=None):
            if seed is not None:
                self.rng = np.random.default_rng(seed)
            self.t = 0
            return self._frame(), {}

        def _frame(self):
            frame = np.zeros((42, 42, 1), np.uint8)
            frame[self.rng.integers(42), :, :] = 200
            return frame

        def step(self, action):
            self.t += 1
            return self._frame(), float(action), False, self.t >= 20, {}

    return FramesEnv


def _frames_config(compress):
    return (PPOConfig().environment(_frames_env_class())
            .env_runners(num_env_runners=1, env_runner_backend="process", num_envs_per_env_runner=2,
                         compress_observations=compress)
            .training(train_batch_size=80, minibatch_size=40, num_epochs=1)
            .debugging(seed=3))


def test_compressed_observations_reach_the_learner_unchanged():
    batches, weights = [], []
    for compress in (False, True):
        algo = _frames_config(compress).build()
        try:
            batches.append(algo.env_runner_group.sample())
            algo.train()
            weights.append(algo.get_policy().get_weights())
        finally:
            algo.stop()
    plain, compressed = batches
    assert set(plain) == set(compressed)
    for key in plain:
        assert compressed[key].dtype == plain[key].dtype
        np.testing.assert_array_equal(compressed[key], plain[key], err_msg=key)
    for key in weights[0]:
        np.testing.assert_array_equal(np.asarray(weights[1][key]), np.asarray(weights[0][key]), err_msg=key)


def test_a_remote_runner_sends_smaller_observations_when_compressing():
    from rlx.env.env_runner_group import _SampleCall

    algo = _frames_config(True).env_runners(num_env_runners=0).build()
    try:
        plain = _SampleCall(40, None, compress=False)(algo.env_runner)[0]
        packed = _SampleCall(40, None, compress=True)(algo.env_runner)[0]
    finally:
        algo.stop()
    assert isinstance(packed[Columns.OBS], bytes) and isinstance(packed[Columns.NEXT_OBS], bytes)
    assert isinstance(packed[Columns.ACTIONS], np.ndarray)  # only observations are compressed
    assert len(pickle.dumps(packed, protocol=5)) * 5 < len(pickle.dumps(plain, protocol=5))


def test_compress_observations_accepts_rllibs_bulk_and_refuses_other_values():
    assert PPOConfig().env_runners(compress_observations="bulk").compress_observations == "bulk"
    with pytest.raises(ConfigError, match="compress_observations"):
        PPOConfig().env_runners(compress_observations="lz4")


def test_pack_and_unpack_round_trip_any_numeric_array():
    from rlx.utils.compression import CompressionError, is_compressed, pack, pack_if_needed, unpack, unpack_if_needed

    for array in (np.zeros((64, 84, 84), np.uint8), np.arange(12, dtype=np.float32).reshape(3, 4),
                  np.array([True, False]), np.array(7, np.int64)):
        packed = pack(array)
        assert is_compressed(packed)
        out = unpack(packed)
        assert out.dtype == array.dtype and out.shape == array.shape
        np.testing.assert_array_equal(out, array)
    assert len(pack(np.zeros((64, 84, 84), np.uint8))) < 64 * 84 * 84 // 100
    assert unpack_if_needed(pack_if_needed(np.ones(3))).tolist() == [1.0, 1.0, 1.0]
    assert pack_if_needed("text") == "text" and unpack_if_needed(5) == 5
    with pytest.raises(CompressionError, match="numeric"):
        pack(np.array(["a", "b"], dtype=object))
    with pytest.raises(CompressionError, match="rlx"):
        unpack(b"something else")
    with pytest.raises(CompressionError, match="corrupt"):
        unpack(pack(np.ones(100))[:-10])


def test_multi_agent_batches_travel_compressed_too():
    from rlx.env.batch_compression import compress_observations, decompress_observations
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    algo = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
            .training(train_batch_size=40, minibatch_size=20, num_epochs=1).build())
    try:
        batch = algo.env_runner.sample(num_timesteps=20)
    finally:
        algo.stop()
    packed = compress_observations(batch)
    assert all(isinstance(b[Columns.OBS], bytes) for b in packed.policy_batches.values())
    restored = decompress_observations(packed)
    assert restored.env_steps() == batch.env_steps() and restored.agent_steps() == batch.agent_steps()
    for pid, columns in batch.policy_batches.items():
        for key, value in columns.items():
            np.testing.assert_array_equal(restored[pid][key], value)


# --------------------------------------------------------------------------- log_sys_usage


def _small_ppo():
    return PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=32, num_epochs=1)


def test_results_carry_system_usage_unless_log_sys_usage_is_off():
    algo = _small_ppo().build()
    try:
        perf = algo.train()["perf"]
    finally:
        algo.stop()
    assert 0.0 <= perf["cpu_util_percent"] <= 100.0
    assert 0.0 < perf["ram_util_percent"] <= 100.0
    algo = _small_ppo().debugging(log_sys_usage=False).build()
    try:
        assert "perf" not in algo.train()
    finally:
        algo.stop()


def test_without_psutil_an_explicit_log_sys_usage_is_an_error_and_the_default_is_skipped(monkeypatch):
    import rlx.utils.sys_usage as sys_usage

    monkeypatch.setattr(sys_usage, "import_psutil", lambda: None)
    with pytest.raises(ConfigError, match="log_sys_usage.*psutil"):
        _small_ppo().debugging(log_sys_usage=True).build()
    algo = _small_ppo().build()
    try:
        assert "perf" not in algo.train()
    finally:
        algo.stop()


# --------------------------------------------------------------------------- torch_compile_worker


def _recording_backend(calls: list):
    def backend(graph_module, example_inputs):
        calls.append(len(graph_module.graph.nodes))
        return graph_module.forward

    return backend


def test_env_runners_act_through_the_compiled_module():
    calls: list = []
    algo = (_small_ppo().framework(torch_compile_worker=True,
                                   torch_compile_worker_dynamo_backend=_recording_backend(calls))
            .debugging(seed=0).build())
    try:
        runner = algo.env_runner
        batch = runner.sample(num_timesteps=32)
        assert calls, "torch.compile's backend never saw the forward pass"
        with torch.no_grad():
            eager = runner.module.forward_exploration({Columns.OBS: torch.from_numpy(
                batch[Columns.OBS].reshape(-1, 4))})[Columns.ACTION_DIST_INPUTS].numpy()
        np.testing.assert_allclose(batch[Columns.ACTION_DIST_INPUTS].reshape(eager.shape), eager, rtol=1e-5,
                                   atol=1e-6)
        compiled_exploration = len(calls)
        runner.sample(num_timesteps=8, explore=False)  # forward_inference is compiled too
        assert len(calls) > compiled_exploration
        algo.train()
    finally:
        algo.stop()


def test_multi_agent_runners_compile_each_policys_module():
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    calls: list = []
    algo = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
            .framework(torch_compile_worker=True, torch_compile_worker_dynamo_backend=_recording_backend(calls))
            .training(train_batch_size=40, minibatch_size=20, num_epochs=1).build())
    try:
        batch = algo.env_runner.sample(num_timesteps=20)
        assert calls, "torch.compile's backend never saw a forward pass"
        assert set(batch.policy_batches) == {"p0", "p1"}
        for pid, columns in batch.policy_batches.items():
            # Each policy acted with its own weights (the modules may share one compiled graph).
            valid = columns[Columns.VALID] if Columns.VALID in columns else np.ones(columns[Columns.REWARDS].shape, bool)
            obs = torch.from_numpy(columns[Columns.OBS][valid])
            with torch.no_grad():
                eager = algo.env_runner.module[pid].forward_exploration({Columns.OBS: obs})
            np.testing.assert_allclose(columns[Columns.ACTION_DIST_INPUTS][valid],
                                       eager[Columns.ACTION_DIST_INPUTS].numpy(), rtol=1e-5, atol=1e-6)
    finally:
        algo.stop()


def test_unknown_worker_backends_and_modes_are_config_errors():
    with pytest.raises(ConfigError, match="torch_compile_worker_dynamo_backend"):
        PPOConfig().framework(torch_compile_worker_dynamo_backend="no-such-backend")
    with pytest.raises(ConfigError, match="torch_compile_worker_dynamo_mode"):
        PPOConfig().framework(torch_compile_worker_dynamo_mode="fastest")
    config = PPOConfig().framework(torch_compile_worker=True, torch_compile_worker_dynamo_backend="aot_eager",
                                   torch_compile_worker_dynamo_mode="reduce-overhead")
    assert config.torch_compile_worker_dynamo_backend == "aot_eager"


def test_rllibs_default_backend_falls_back_to_inductor_with_one_warning(caplog):
    import torch._dynamo

    import rlx.core.rl_module.compiled_acting as compiled_acting

    if "onnxrt" in torch._dynamo.list_backends(exclude_tags=()):
        assert compiled_acting.resolve_worker_backend("onnxrt") == "onnxrt"
        return
    compiled_acting._warned_fallback = False
    with caplog.at_level(logging.WARNING, logger="rlx"):
        assert compiled_acting.resolve_worker_backend("onnxrt") == "inductor"
        assert compiled_acting.resolve_worker_backend("onnxrt") == "inductor"
    warnings = [r for r in caplog.records if "onnxrt" in r.getMessage()]
    assert len(warnings) == 1 and "torch_compile_worker_dynamo_backend" in warnings[0].getMessage()


def test_a_backend_that_fails_to_compile_names_the_settings():
    def broken(graph_module, example_inputs):
        raise RuntimeError("this backend cannot compile")

    algo = _small_ppo().framework(torch_compile_worker=True, torch_compile_worker_dynamo_backend=broken).build()
    try:
        with pytest.raises(Exception, match="torch_compile_worker_dynamo_backend"):
            algo.env_runner.sample(num_timesteps=4)
    finally:
        algo.stop()


# --------------------------------------------------------------------------- fake_sampler


def test_fake_sampler_repeats_the_first_batch_without_stepping():
    algo = _small_ppo().debugging(fake_sampler=True, seed=0).build()
    try:
        runner = algo.env_runner
        first = runner.sample(num_timesteps=32)
        steps = runner.num_env_steps_sampled_lifetime
        first[Columns.REWARDS][:] = -5.0  # what a caller does to a batch does not reach the next ones
        again = runner.sample(num_timesteps=32)
        assert runner.num_env_steps_sampled_lifetime == steps  # no env stepped
        assert again is not first and (again[Columns.REWARDS] != -5.0).all()
        third = runner.sample(num_timesteps=32)
        for key in again:
            np.testing.assert_array_equal(third[key], again[key])
    finally:
        algo.stop()


def test_fake_sampler_trains_on_the_same_batch_and_evaluation_still_samples():
    algo = (_small_ppo().debugging(fake_sampler=True, seed=0)
            .evaluation(evaluation_interval=1, evaluation_duration=2).build())
    try:
        first = algo.train()
        weights = {k: np.array(v) for k, v in algo.get_policy().get_weights().items()}
        second = algo.train()
        assert first["env_runners"]["num_episodes"] > 0 and second["env_runners"]["num_episodes"] == 0
        assert second["num_env_steps_sampled_lifetime"] == 2 * first["num_env_steps_sampled_lifetime"]
        assert any(not np.array_equal(weights[k], np.asarray(v)) for k, v in algo.get_policy().get_weights().items())
        assert second["evaluation"]["env_runners"]["num_episodes"] >= 2
    finally:
        algo.stop()


def test_fake_sampler_repeats_multi_agent_batches():
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    algo = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
            .debugging(fake_sampler=True)
            .training(train_batch_size=40, minibatch_size=20, num_epochs=1).build())
    try:
        first = algo.env_runner.sample(num_timesteps=20)
        again = algo.env_runner.sample(num_timesteps=20)
        assert again is not first and again.env_steps() == first.env_steps()
        for pid in first.policy_batches:
            for key, value in first[pid].items():
                np.testing.assert_array_equal(again[pid][key], value)
    finally:
        algo.stop()

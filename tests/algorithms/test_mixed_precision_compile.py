"""Mixed precision (`mixed_precision`, `_torch_grad_scaler_class`) and `torch_compile_learner`,
on the CPU: the same code paths a GPU Learner takes, with the device a config value."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.core.learner.precision import Precision
from rlx.utils.errors import ConfigError, NonFiniteUpdateError


def _ppo(**learners):
    return (PPOConfig().environment("CartPole-v1").debugging(seed=0).learners(**learners)
            .training(train_batch_size=1000, minibatch_size=250, num_epochs=2))


def _weights(algo) -> dict[str, np.ndarray]:
    return algo.learner.get_weights()


def _train_to(config, threshold: float, iterations: int) -> float:
    algo = config.build()
    try:
        best = -np.inf
        for _ in range(iterations):
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"])
            if best >= threshold:
                break
        return best
    finally:
        algo.stop()


def test_bf16_ppo_learns_cartpole():
    config = PPOConfig().environment("CartPole-v1").debugging(seed=0).learners(mixed_precision="bf16")
    assert _train_to(config, 400.0, 30) >= 400.0


def test_networks_autocast_only_inside_updates_and_return_float32():
    net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 3))
    x = torch.randn(16, 8)
    exact = net(x)
    precision = Precision(type("C", (), {"mixed_precision": "bf16"})(), torch.device("cpu"))
    precision.attach(net)
    assert torch.equal(net(x), exact)  # outside an update: plain float32
    with precision.autocast():
        mixed = net(x)
        inner = net[0](x)  # an inner layer called alone opens its own region
    assert mixed.dtype == torch.float32 and inner.dtype == torch.float32
    assert not torch.equal(mixed, exact)  # computed in bfloat16...
    assert torch.allclose(mixed, exact, atol=0.05)  # ...to bfloat16's precision
    assert torch.equal(net(x), exact)  # and plain again afterwards


def test_grad_scaler_in_float32_gives_the_unscaled_weights():
    plain = _ppo().build()
    scaled = _ppo().experimental(_torch_grad_scaler_class=torch.amp.GradScaler).build()
    try:
        for algo in (plain, scaled):
            algo.train()
            algo.train()
        result = scaled.train()["learners"]["default_policy"]
        plain.train()
        assert result["_torch_grad_scaler_current_scale"] > 1.0
        for name, value in _weights(plain).items():
            np.testing.assert_allclose(_weights(scaled)[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    finally:
        plain.stop()
        scaled.stop()


def test_overflowing_loss_scale_skips_steps_lowers_the_scale_and_survives_checkpoints(tmp_path):
    huge = functools.partial(torch.amp.GradScaler, "cpu", init_scale=2.0 ** 125, growth_interval=10_000)
    algo = _ppo().experimental(_torch_grad_scaler_class=huge).build()
    try:
        metrics = algo.train()["learners"]["default_policy"]
        assert metrics["num_loss_scale_overflow_skips"] > 0
        assert metrics["_torch_grad_scaler_current_scale"] < 2.0 ** 125
        assert np.isfinite(metrics["total_loss"])
        for value in _weights(algo).values():
            assert np.isfinite(value).all()
        scale = algo.learner.precision.scaler.get_scale()
        algo.save(str(tmp_path / "ckpt"))
    finally:
        algo.stop()
    restored = _ppo().experimental(_torch_grad_scaler_class=huge).build()
    try:
        restored.restore(str(tmp_path / "ckpt"))
        assert restored.learner.precision.scaler.get_scale() == scale
    finally:
        restored.stop()


def test_nonfinite_loss_still_raises_with_a_loss_scaler():
    algo = _ppo(mixed_precision="fp16").build()
    try:
        learner = algo.learner
        loss = torch.tensor(float("nan"), requires_grad=True) * learner.params[0].sum()
        with pytest.raises(NonFiniteUpdateError):
            learner.apply_loss(loss)
    finally:
        algo.stop()


def test_fp16_ppo_reports_the_loss_scale_and_learns():
    config = (PPOConfig().environment("CartPole-v1").debugging(seed=0).learners(mixed_precision="fp16"))
    algo = config.build()
    try:
        best = -np.inf
        for _ in range(25):
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"])
            if best >= 300:
                break
        assert "_torch_grad_scaler_current_scale" in result["learners"]["default_policy"]
        assert best >= 300
    finally:
        algo.stop()


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda: DQNConfig().environment("CartPole-v1").training(num_steps_sampled_before_learning_starts=200),
    # 32-unit networks and batches of 64: bf16 matmuls are emulated on CPUs without bf16 units, where
    # SAC's default 256-unit networks took 0.25 s an update (two iterations: 2.5 minutes).
    lambda: SACConfig().environment("Pendulum-v1").training(
        num_steps_sampled_before_learning_starts=200, train_batch_size=64,
        q_model_config={"fcnet_hiddens": [32, 32]}, policy_model_config={"fcnet_hiddens": [32, 32]}),
], ids=["dqn", "sac"])
def test_bf16_off_policy_updates_are_finite(make):
    algo = make().debugging(seed=0).learners(mixed_precision="bf16").reporting(
        min_sample_timesteps_per_iteration=400).build()
    try:
        for _ in range(2):
            metrics = algo.train()["learners"]["default_policy"]
        numbers = [v for v in metrics.values() if isinstance(v, float)]
        assert numbers and all(np.isfinite(numbers))
        for value in _weights(algo).values():
            assert value.dtype == np.float32 and np.isfinite(value).all()
    finally:
        algo.stop()


def test_compiled_learner_trains_like_the_eager_one():
    eager = _ppo().build()
    compiled = _ppo().framework(torch_compile_learner=True, torch_compile_learner_dynamo_backend="aot_eager").build()
    try:
        eager.train()
        compiled.train()
        from rlx.core.learner.compile import compiled_networks

        assert compiled_networks(compiled.learner.rl_module)  # the Learner's networks run compiled
        assert not compiled_networks(compiled.env_runner.module)  # the EnvRunner's stay eager
        assert compiled.learner.rl_module is not compiled.env_runner.module
        for name, value in _weights(eager).items():
            np.testing.assert_allclose(_weights(compiled)[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
        runner_state = compiled.env_runner.module.get_state()
        for name, value in _weights(compiled).items():
            np.testing.assert_array_equal(runner_state[name], value, err_msg=name)  # weights reach the runner
    finally:
        eager.stop()
        compiled.stop()


def test_compile_options_are_checked():
    with pytest.raises(ConfigError, match="forward_train"):
        PPOConfig().framework(torch_compile_learner_what_to_compile="forward")
    with pytest.raises(ConfigError, match="inductor"):
        PPOConfig().framework(torch_compile_learner_dynamo_backend="inductr")
    with pytest.raises(ConfigError, match="torch_compile_learner_dynamo_backend"):
        PPOConfig().framework(torch_compile_learner_dynamo_backend=3.5)
    # 'complete_update' is decided at build: refused there where it cannot run (see
    # tests/core/test_learner_multiagent_options.py), else it compiles the whole update.
    with pytest.raises(ConfigError, match="complete_update"):
        _ppo(num_learners=1).framework(torch_compile_learner=True,
                                       torch_compile_learner_what_to_compile="complete_update").validate()


def test_mixed_precision_values_are_checked():
    with pytest.raises(ConfigError, match="bf16"):
        PPOConfig().learners(mixed_precision="float16")


@pytest.mark.parametrize("native", [False, True])
def test_bf16_on_a_cpu_without_bfloat16_units_warns_once_that_it_is_slow(monkeypatch, caplog, native):
    from rlx.core.learner import precision as precision_module

    monkeypatch.setattr(precision_module, "_warned_bf16", False)
    monkeypatch.setattr(precision_module, "cpu_has_native_bf16", lambda: native)
    config = type("C", (), {"mixed_precision": "bf16"})()
    with caplog.at_level("WARNING", logger="rlx"):
        Precision(config, torch.device("cpu"))
        Precision(config, torch.device("cpu"))
        Precision(type("C", (), {"mixed_precision": None})(), torch.device("cpu"))
    warnings = [r.getMessage() for r in caplog.records if "bfloat16" in r.getMessage()]
    if native:
        assert warnings == []
    else:
        assert len(warnings) == 1 and "many times slower" in warnings[0] and "mixed_precision" in warnings[0]

"""A3C: the remote EnvRunners compute the gradients; the driver's Learner only applies them."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.algorithms.a3c import A3CConfig
from rlx.core.remote_fragment import RemoteFragment
from rlx.utils.errors import ConfigError


def _config(backend: str, num_env_runners: int = 2) -> A3CConfig:
    return (A3CConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=num_env_runners, rollout_fragment_length=20, env_runner_backend=backend)
            .training(grads_per_step=20, lr=0.001)
            .reporting(min_time_s_per_iteration=0).debugging(seed=0))


def _forbid_driver_gradients(algo) -> list:
    """Make the driver's Learner fail on any forward/backward pass; returns the list of the
    RemoteFragments the driver applied."""
    learner = algo.learner

    def no_forward(*args, **kwargs):
        raise AssertionError("the driver's Learner ran a forward pass")

    learner.rl_module.forward_train = no_forward
    learner.update_from_batch = lambda *a, **k: no_forward()
    applied: list = []
    original = algo._apply
    algo._apply = lambda fragment, timestep: (applied.append(fragment), original(fragment, timestep))[1]
    return applied


def test_process_runners_compute_the_gradients_and_a3c_learns_cartpole():
    algo = _config("process").build()
    try:
        assert algo.driver_gradients_reason is None
        applied = _forbid_driver_gradients(algo)
        before = algo.get_module().pi.linears[0].weight.detach().clone()
        ret, progress = -math.inf, []
        for _ in range(60):
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            progress.append((result["num_env_steps_sampled_lifetime"], round(ret, 1)))
            if ret >= 80:
                break
        assert ret >= 80, progress
        assert applied and all(isinstance(f, RemoteFragment) and f.payload["gradients"] for f in applied)
        assert algo.learner.num_grad_updates == len(applied) == algo.weights_version
        assert result["num_env_steps_trained_lifetime"] == sum(f.env_steps() for f in applied)
        assert "policy_loss" in result["learners"]["default_policy"]  # the runners' loss metrics
        assert not np.allclose(before, algo.get_module().pi.linears[0].weight.detach())
    finally:
        algo.stop()


def test_ray_runners_compute_the_gradients(local_ray):
    local_ray()
    # One runner: every gradient comes from a remote runner whether one or two send them.
    algo = _config("ray", num_env_runners=1).build()
    try:
        applied = _forbid_driver_gradients(algo)
        result = algo.train()
        assert result["async_sampling"]["num_gradients_applied"] >= 20
        assert applied and all(isinstance(f, RemoteFragment) for f in applied)
        assert algo.learner.num_grad_updates == len(applied)
    finally:
        algo.stop()


def test_an_on_learn_on_batch_callback_keeps_the_gradients_in_the_driver():
    from rlx.callbacks.callbacks import DefaultCallbacks

    class SeeBatches(DefaultCallbacks):
        def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
            result["seen_in_driver"] = 1.0

    algo = _config("thread", num_env_runners=1).callbacks(SeeBatches).training(grads_per_step=3).build()
    try:
        assert "on_learn_on_batch" in algo.driver_gradients_reason
        result = algo.train()
        assert result["learners"]["default_policy"]["seen_in_driver"] == 1.0
    finally:
        algo.stop()


def test_data_parallel_learners_are_refused_with_remote_runners():
    with pytest.raises(ConfigError, match="num_learners=0"):
        _config("process").learners(num_learners=2).validate()

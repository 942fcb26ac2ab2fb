"""LearnerGroup: `learners(num_learners=N)` trains with N Learner processes (torch.distributed, gloo).

One update of 2 CPU learners must equal one Learner on the same batch: each learner gets
half of the batch and half of the minibatch, gradients are averaged across learners before
clipping and stepping, so with shuffling off the minibatches line up exactly.
"""
from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.ppo.ppo_learner import PPOLearner
from rlx.core.learner import Learner
from rlx.core.learner_group import (
    LearnerDiedError,
    LearnerGroup,
    LearnerGroupError,
    merge_metrics,
    shard_batch,
)
from rlx.core.models import ActorCriticModule
from rlx.core.rl_module import RLModuleSpec

from conftest import small_config
from process_helpers import process_gone

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)


class TwoHeadRegressionLearner(Learner):
    """A plain loss on both heads: the policy head through `apply_loss` (with clipping),
    the value head through `step_on`, in unshuffled minibatches of `minibatch_size` rows."""

    def configure_optimizers(self) -> None:
        self.pi_params = list(self.module.pi.parameters())
        self.vf_params = list(self.module.vf.parameters())
        self.add_optimizer("default", self.pi_params, self.config.lr)
        self.add_optimizer("vf", self.vf_params, self.config.lr)

    def update_from_batch(self, batch, timestep):
        lead = batch["rewards"].shape
        obs = torch.from_numpy(batch["obs"].reshape(-1, 4))
        logit_targets = torch.from_numpy(batch["logit_targets"].reshape(-1, 2))
        value_targets = torch.from_numpy(batch["rewards"].reshape(-1))
        n = obs.shape[0]
        mb = min(self.config.minibatch_size, n)
        with torch.no_grad():
            out = self.module.forward_train({"obs": obs})
            initial = (out["vf_preds"] - value_targets).pow(2)
        pi_losses, vf_losses = [], []
        for _ in range(self.config.num_epochs):
            for start in range(0, n, mb):
                rows = slice(start, start + mb)
                out = self.module.forward_train({"obs": obs[rows]})
                pi_loss = (out["action_dist_inputs"] - logit_targets[rows]).pow(2).mean()
                self.apply_loss(pi_loss, "default", params=self.pi_params)
                vf_loss = (self.module.compute_values({"obs": obs[rows]}) - value_targets[rows]).pow(2).mean()
                self.step_on("vf", vf_loss, self.vf_params)
                pi_losses.append(float(pi_loss.detach()))
                vf_losses.append(float(vf_loss.detach()))
        return {"pi_loss": float(np.mean(pi_losses)), "vf_loss": torch.tensor(np.mean(vf_losses)),
                "num_minibatches": len(pi_losses), "initial_sq_error": initial.numpy().reshape(lead)}


def make_module(seed: int = 0) -> ActorCriticModule:
    torch.manual_seed(seed)
    return RLModuleSpec(ActorCriticModule, OBS_SPACE, ACT_SPACE, {"fcnet_hiddens": [16, 16]}).build()


def regression_config(**training) -> PPOConfig:
    opts = dict(lr=0.02, minibatch_size=16, num_epochs=2, grad_clip=0.5, grad_clip_by="global_norm")
    opts.update(training)
    return PPOConfig().training(**opts).debugging(seed=0)


def regression_batch(lead: tuple[int, ...], seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=lead + (4,)).astype(np.float32),
        "logit_targets": rng.normal(size=lead + (2,)).astype(np.float32),
        "rewards": rng.normal(size=lead).astype(np.float32),
        "n_step": np.int64(1),  # a column without the batch axis goes whole to every learner
    }


def local_update(learner_cls, config, batch, module_seed=0):
    module = make_module(module_seed)
    learner = learner_cls(config, module)
    metrics = learner.update_from_batch(batch, timestep=100)
    return learner, metrics


def assert_weights_close(a: dict, b: dict, **tol) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], err_msg=key, **tol)


def assert_weights_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture(scope="module")
def regression_group():
    group = LearnerGroup(regression_config(), TwoHeadRegressionLearner, make_module(0), num_learners=2)
    yield group
    group.stop()


# ---------------------------------------------------------------------- sharding helpers


def test_shard_batch_splits_the_env_axis_of_time_major_and_axis_0_of_flat_batches():
    tm = {"rewards": np.arange(12.0).reshape(3, 4), "obs": np.zeros((3, 4, 5)), "n_step": 3}
    shards, axis = shard_batch(tm, 2)
    assert axis == 1
    np.testing.assert_array_equal(shards[1]["rewards"], [[1, 3], [5, 7], [9, 11]])
    assert shards[0]["obs"].shape == (3, 2, 5) and shards[1]["n_step"] == 3
    flat = {"rewards": np.arange(5.0), "obs": np.zeros((5, 2))}
    shards, axis = shard_batch(flat, 3)
    assert axis == 0 and [s["rewards"].tolist() for s in shards] == [[0, 3], [1, 4], [2]]
    assert shard_batch({"rewards": np.arange(1.0)}, 2)[0][1] is None  # fewer rows than learners
    merged = merge_metrics([{"loss": 1.0, "n": 4, "td": np.array([0.0, 3.0])},
                            {"loss": 2.0, "n": 4, "td": np.array([1.0, 4.0])},
                            {"loss": 3.0, "n": 4, "td": np.array([2.0])}], axis=0, num_shards=3)
    assert merged["loss"] == 2.0 and merged["n"] == 4 and isinstance(merged["n"], int)
    np.testing.assert_array_equal(merged["td"], np.arange(5.0))


# ---------------------------------------------------------------------- 2 learners == 1 learner


@pytest.mark.parametrize("lead", [(64,), (16, 4)], ids=["flat", "time_major"])
def test_two_cpu_learners_match_one_learner_on_the_same_batch(regression_group, lead):
    group = regression_group
    fresh = TwoHeadRegressionLearner(regression_config(), make_module(0))  # the same start for every case
    group.set_weights(fresh.get_weights())
    group.set_extra_state(fresh.get_extra_state())
    for name, optimizer in fresh.optimizers.items():
        group.optimizers[name].load_state_dict(optimizer.state_dict())
    batch = regression_batch(lead)
    single, single_metrics = local_update(TwoHeadRegressionLearner, regression_config(), batch)
    metrics = group.update_from_batch(batch, timestep=100)
    # 4 minibatches of 16 rows x 2 epochs on one learner; 8 rows each, as many steps, on two.
    assert metrics["num_minibatches"] == single_metrics["num_minibatches"] == 8
    assert metrics["pi_loss"] == pytest.approx(single_metrics["pi_loss"], rel=1e-5)
    assert metrics["vf_loss"] == pytest.approx(float(single_metrics["vf_loss"]), rel=1e-5)
    np.testing.assert_allclose(metrics["initial_sq_error"], single_metrics["initial_sq_error"], rtol=1e-6)
    assert_weights_close(group.get_weights(), single.get_weights(), rtol=1e-5, atol=1e-6)
    # Both optimizers (the apply_loss and the step_on path) moved the same way.
    for name in ("default", "vf"):
        ours = group.optimizers[name].state_dict()["state"]
        theirs = single.optimizers[name].state_dict()["state"]
        for i in theirs:
            np.testing.assert_allclose(ours[i]["exp_avg"], theirs[i]["exp_avg"], rtol=1e-4, atol=1e-7)
    ranks = group.foreach_learner(lambda learner: learner.get_weights())
    assert_weights_equal(ranks[0], ranks[1])
    assert_weights_equal(ranks[0], group.module.get_state())
    assert group.get_extra_state()["num_grad_updates"] == single.num_grad_updates


def ppo_batch(T: int, B: int, seed: int = 3) -> dict[str, np.ndarray]:
    """A time-major PPO batch whose env columns come in identical pairs (0, 1), (2, 3), ...:
    learner 0 (columns 0, 2, ...) and learner 1 (1, 3, ...) then see the same data, so the
    advantage mean/std each normalizes with is the whole batch's."""
    rng = np.random.default_rng(seed)
    half = B // 2
    logits = rng.normal(size=(T, half, 2)).astype(np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    actions = (rng.random((T, half)) < probs[..., 1]).astype(np.int64)
    cols = {
        "obs": rng.normal(size=(T, half, 4)).astype(np.float32),
        "new_obs": rng.normal(size=(T, half, 4)).astype(np.float32),
        "actions": actions,
        "rewards": rng.normal(size=(T, half)).astype(np.float32),
        "terminateds": rng.random((T, half)) < 0.1,
        "truncateds": np.zeros((T, half), bool),
        "action_dist_inputs": logits,
        "action_logp": np.log(np.take_along_axis(probs, actions[..., None], -1)[..., 0]).astype(np.float32),
    }
    return {k: np.repeat(v, 2, axis=1) for k, v in cols.items()}


def ppo_config(**training) -> PPOConfig:
    opts = dict(num_epochs=2, minibatch_size=32, shuffle_batch_per_epoch=False, lr=3e-3, grad_clip=1.0,
                train_batch_size=64, model={"fcnet_hiddens": [16, 16]})
    opts.update(training)
    return PPOConfig().training(**opts).debugging(seed=0)


def test_ppo_update_with_two_learners_matches_one_learner():
    batch = ppo_batch(T=16, B=4)
    single, single_metrics = local_update(PPOLearner, ppo_config(), batch)
    group = LearnerGroup(ppo_config(), PPOLearner, make_module(0), num_learners=2)
    try:
        metrics = group.update_from_batch(batch, timestep=64)
        assert metrics["num_minibatch_updates"] == single_metrics["num_minibatch_updates"] == 4
        for key in ("policy_loss", "vf_loss", "total_loss", "mean_kl_loss", "entropy"):
            assert metrics[key] == pytest.approx(single_metrics[key], rel=1e-4, abs=1e-7), key
        assert_weights_close(group.get_weights(), single.get_weights(), rtol=1e-4, atol=1e-6)
        assert group.get_extra_state()["kl_coeff"] == single.kl_coeff

        # Shards of unequal size (3 env columns on 2 learners): the learner with fewer
        # minibatches answers the other's gradient averaging until both are done.
        uneven = {k: v[:, :3] for k, v in ppo_batch(T=16, B=4, seed=5).items()}
        metrics = group.update_from_batch(uneven, timestep=112)
        assert np.isfinite(metrics["total_loss"])
        ranks = group.foreach_learner(lambda learner: (learner.get_weights(), learner.kl_coeff))
        assert_weights_equal(ranks[0][0], ranks[1][0])
        assert ranks[0][1] == ranks[1][1]
        assert_weights_equal(ranks[0][0], group.get_weights())
    finally:
        group.stop()


# ---------------------------------------------------------------------- inside an Algorithm


@pytest.mark.slow
def test_ppo_trains_with_two_learners_checkpoints_and_stops(tmp_path):
    config = small_config(train_batch_size=256, minibatch_size=64, num_epochs=2).learners(num_learners=2)
    algo = config.build()
    restored = None
    try:
        assert isinstance(algo.learner, LearnerGroup)
        assert algo.env_runner.module is algo.learner.module  # the local runner acts with fresh weights
        for _ in range(3):
            result = algo.train()
        stats = result["learners"]["default_policy"]
        assert np.isfinite(stats["total_loss"]) and stats["num_minibatch_updates"] == 8
        driver = algo.get_weights()["default_policy"]
        for weights in algo.learner.foreach_learner(lambda learner: learner.get_weights()):
            assert_weights_equal(weights, driver)

        path = algo.save(str(tmp_path / "ckpt"))
        restored = Algorithm.from_checkpoint(path)
        assert isinstance(restored.learner, LearnerGroup) and restored.iteration == 3
        for weights in restored.learner.foreach_learner(lambda learner: learner.get_weights()):
            assert_weights_equal(weights, driver)
        assert restored.learner.get_extra_state()["kl_coeff"] == algo.learner.get_extra_state()["kl_coeff"]
        ours, theirs = algo.learner.optimizer.state_dict(), restored.learner.optimizer.state_dict()
        for i in ours["state"]:
            np.testing.assert_array_equal(ours["state"][i]["exp_avg_sq"], theirs["state"][i]["exp_avg_sq"])
        assert restored.train()["training_iteration"] == 4
    finally:
        pids = list(algo.learner.pids) + (list(restored.learner.pids) if restored is not None else [])
        algo.stop()
        if restored is not None:
            restored.stop()
    assert all(process_gone(pid) for pid in pids)
    with pytest.raises(LearnerGroupError, match="stopped"):
        algo.learner.update_from_batch({"rewards": np.zeros((2, 2))}, timestep=0)


def test_num_learners_zero_keeps_the_learner_in_the_driver():
    config = small_config().learners(num_learner_workers=0, num_cpus_per_learner_worker=2)
    assert config.num_learners == 0 and config.num_cpus_per_learner == 2
    algo = config.build()
    try:
        assert isinstance(algo.learner, PPOLearner)
    finally:
        algo.stop()


# ---------------------------------------------------------------------- failures


def test_a_learner_process_that_dies_raises_a_clear_error():
    group = LearnerGroup(regression_config(), TwoHeadRegressionLearner, make_module(0), num_learners=2)
    try:
        os.kill(group.pids[1], signal.SIGKILL)
        with pytest.raises(LearnerDiedError, match=r"Learner 1 \(process \d+\) was killed by SIGKILL"):
            group.update_from_batch(regression_batch((64,)), timestep=1)
        assert not group.is_healthy
        deadline = time.monotonic() + 10
        while not process_gone(group.pids[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_gone(group.pids[0])  # the survivor cannot go on alone: it is stopped too
        # The next call restarts the learners from the driver's state (tests/core/test_learner_restart.py).
        assert group.get_extra_state()["num_grad_updates"] == 0
        assert group.is_healthy
    finally:
        group.stop()


def test_a_failing_plain_call_leaves_the_group_usable(regression_group):
    with pytest.raises(ValueError, match="keeps no extra tensors"):
        regression_group.set_extra_tensors({"x": torch.zeros(1)})
    assert regression_group.is_healthy
    assert regression_group.foreach_learner(lambda learner: type(learner).__name__) == ["TwoHeadRegressionLearner"] * 2

"""RLlib's Learner API on rlx: custom losses, several optimizers, torch lr schedulers.

Behaviour, not imports: a PPO subclass that adds a loss term or registers two optimizers
trains differently (and exactly as expected), and torch lr schedulers drive the lr.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from rlx.core import DEFAULT_MODULE_ID
from rlx.core.learner import Learner
from rlx.core.learner.learner import DEFAULT_OPTIMIZER, building_learner_for
from rlx.core.learner.torch.torch_learner import TorchLearner
from rlx.core.rl_module.default_model_config import DefaultModelConfig
from rlx.core.rl_module.rl_module import RLModule
from rlx.examples.learners.classes.custom_ppo_loss_fn_learner import PPOTorchLearnerWithWeightRegularizerLoss
from rlx.examples.learners.classes.separate_vf_lr_and_optimizer_learner import (
    PPOTorchLearnerWithSeparateVfOptimizer,
)


def small_config(vf_share_layers: bool = False, **training) -> PPOConfig:
    training = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 2, **training}
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=4)
        .training(**training)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[32], vf_share_layers=vf_share_layers))
        .debugging(seed=0)
    )


def train_weights(config: PPOConfig, iterations: int = 1) -> tuple[dict, dict, dict]:
    """(initial weights, weights after training, last learner results)."""
    algo = config.build()
    try:
        before = algo.learner.get_weights()
        for _ in range(iterations):
            result = algo.train()
        return before, algo.learner.get_weights(), result["learners"][DEFAULT_MODULE_ID]
    finally:
        algo.stop()


def max_change(a: dict, b: dict, prefix: str = "") -> float:
    return max(float(np.abs(a[k] - b[k]).max()) for k in a if k.startswith(prefix))


# ---------------------------------------------------------------------- custom loss


def test_custom_loss_term_changes_training_and_zero_coeff_matches_plain_ppo():
    _, plain, _ = train_weights(small_config(vf_share_layers=True))
    _, zero, zero_res = train_weights(small_config(
        vf_share_layers=True, learner_class=PPOTorchLearnerWithWeightRegularizerLoss,
        learner_config_dict={"regularizer_coeff": 0.0}))
    _, reg, reg_res = train_weights(small_config(
        vf_share_layers=True, learner_class=PPOTorchLearnerWithWeightRegularizerLoss,
        learner_config_dict={"regularizer_coeff": 5.0}))
    # The override's loss goes into the update: with coefficient 0 it is PPO's own loss ...
    assert max_change(plain, zero) == 0.0
    # ... and with a large one the weights go elsewhere, their mean pushed down.
    assert max_change(plain, reg) > 1e-3
    mean_of_means = lambda w: np.mean([v.mean() for v in w.values()])  # noqa: E731
    assert mean_of_means(reg) < mean_of_means(plain)
    # What the learner logged to self.metrics shows in its results.
    assert "mean_weight" in reg_res and "mean_weight" in zero_res
    assert np.isfinite(reg_res["total_loss"])


def test_compute_losses_override_is_used():
    class FrozenLearner(PPOTorchLearner):
        def compute_losses(self, *, fwd_out, batch):
            losses = super().compute_losses(fwd_out=fwd_out, batch=batch)
            return {mid: 0.0 * loss for mid, loss in losses.items()}

    before, after, res = train_weights(small_config(learner_class=FrozenLearner))
    assert max_change(before, after) == 0.0  # zero loss -> zero gradients -> Adam leaves weights alone
    assert res["total_loss"] == 0.0 and np.isfinite(res["policy_loss"])


# ---------------------------------------------------------------------- several optimizers


def test_separate_vf_optimizer_with_zero_lr_leaves_value_net_unchanged():
    config = small_config(learner_class=PPOTorchLearnerWithSeparateVfOptimizer, lr=0.003,
                          learner_config_dict={"lr_vf": 0.0})
    algo = config.build()
    try:
        learner = algo.learner
        assert set(learner.optimizers) == {"optim_for_pi", "optim_for_vf"}
        assert learner.get_optimizer(DEFAULT_MODULE_ID, "optim_for_vf").param_groups[0]["lr"] == 0.0
        before = learner.get_weights()
        algo.train()
        after = learner.get_weights()
    finally:
        algo.stop()
    assert max_change(before, after, "vf.") == 0.0
    assert max_change(before, after, "pi.") > 1e-4


def test_separate_vf_optimizer_steps_both_networks_with_their_own_lr():
    _, plain, _ = train_weights(small_config(lr=0.003))
    before, after, _ = train_weights(small_config(learner_class=PPOTorchLearnerWithSeparateVfOptimizer, lr=0.003,
                                                  learner_config_dict={"lr_vf": 0.01}))
    assert max_change(before, after, "vf.") > 1e-4 and max_change(before, after, "pi.") > 1e-4
    assert max_change(plain, after, "vf.") > 1e-4  # the vf took other (larger) steps than plain PPO's


def test_separate_vf_optimizer_refuses_shared_layers():
    with pytest.raises(Exception, match="vf_share_layers"):
        small_config(vf_share_layers=True, learner_class=PPOTorchLearnerWithSeparateVfOptimizer).build()


def test_register_optimizer_checks_its_arguments():
    class Wrong(PPOTorchLearner):
        def configure_optimizers_for_module(self, module_id, config=None):
            pi = self.get_parameters(self.module[module_id].pi)
            vf = self.get_parameters(self.module[module_id].vf)
            self.register_optimizer(module_id=module_id, optimizer=torch.optim.Adam(pi), params=pi + vf)

    with pytest.raises(ValueError, match="not parameters of the optimizer"):
        small_config(learner_class=Wrong).build()


# ---------------------------------------------------------------------- torch lr schedulers


def test_torch_lr_schedulers_drive_the_learning_rate():
    factor, gamma, lr = 0.5, 0.8, 0.01
    config = small_config(lr=lr, num_epochs=1).experimental(_torch_lr_scheduler_classes=[
        functools.partial(torch.optim.lr_scheduler.ConstantLR, factor=factor, total_iters=2),
        functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=gamma),
    ])
    algo = config.build()
    try:
        optimizer = algo.learner.get_optimizer(DEFAULT_MODULE_ID, DEFAULT_OPTIMIZER)
        assert isinstance(optimizer, torch.optim.Optimizer)  # what torch's schedulers need
        used, after = [], []
        for _ in range(4):
            used.append(algo.train()["learners"][DEFAULT_MODULE_ID]["curr_lr"])
            after.append(optimizer.param_groups[0]["lr"])
    finally:
        algo.stop()
    # After i updates: lr * (factor while i < total_iters) * gamma**i, stepped once per iteration.
    expected_after = [lr * (factor if i < 2 else 1.0) * gamma**i for i in range(1, 5)]
    np.testing.assert_allclose(after, expected_after, rtol=1e-9)
    np.testing.assert_allclose(used, [lr * factor] + expected_after[:-1], rtol=1e-9)


# ---------------------------------------------------------------------- module access


def test_learner_module_is_the_module_and_a_mapping_by_module_id():
    algo = small_config().build()
    try:
        learner = algo.learner
        raw = algo.env_runner.module
        assert isinstance(learner, TorchLearner) and isinstance(learner, Learner)
        assert learner.module_id == DEFAULT_MODULE_ID
        assert learner.module[DEFAULT_MODULE_ID] is raw and learner.rl_module is raw
        assert list(learner.module.keys()) == [DEFAULT_MODULE_ID] and DEFAULT_MODULE_ID in learner.module
        assert isinstance(learner.module, RLModule) and learner.module.pi is raw.pi
        with pytest.raises(KeyError, match="other"):
            learner.module["other"]
        with pytest.raises(KeyError, match="optim_for_pi"):
            learner.get_optimizer(DEFAULT_MODULE_ID, "optim_for_pi")
        # A learner built for another module id (as MultiAgentLearner builds them) keys by that id.
        with building_learner_for("p0"):
            other = type(learner)(learner.config, raw)
        assert other.module_id == "p0" and other.module["p0"] is raw
    finally:
        algo.stop()

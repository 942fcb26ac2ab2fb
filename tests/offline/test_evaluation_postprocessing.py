"""rlx.evaluation.postprocessing (old-API trajectory postprocessing) and advantages written by
on_postprocess_trajectory callbacks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.callbacks.callbacks import RLlibCallback
from rlx.evaluation.postprocessing import Postprocessing, compute_advantages, discount_cumsum
from rlx.policy.sample_batch import SampleBatch


def test_discount_cumsum_and_gae_of_one_trajectory():
    assert discount_cumsum(np.array([1.0, 1.0, 1.0]), 0.5).tolist() == [1.75, 1.5, 1.0]
    rollout = SampleBatch({"rewards": np.array([1.0, 1.0], np.float32), "vf_preds": np.array([0.5, 0.5], np.float32)})
    out = compute_advantages(rollout, last_r=0.0, gamma=1.0, lambda_=1.0)
    # lambda=1: advantages are returns-to-go minus the value predictions.
    assert out[Postprocessing.ADVANTAGES].tolist() == pytest.approx([1.5, 0.5])
    assert out[Postprocessing.VALUE_TARGETS].tolist() == pytest.approx([2.0, 1.0])


class ZeroAdvantages(RLlibCallback):
    """Writes zero advantages into every trajectory: the policy then has nothing to follow."""

    def on_postprocess_trajectory(self, *, postprocessed_batch, **kwargs):
        n = len(postprocessed_batch["rewards"])
        postprocessed_batch[Postprocessing.ADVANTAGES] = np.zeros(n, np.float32)
        postprocessed_batch[Postprocessing.VALUE_TARGETS] = np.ones(n, np.float32)


def _policy_weights(module):
    return {k: v.clone() for k, v in module.state_dict().items() if k.startswith("pi.")}


@pytest.mark.parametrize("multi_agent", [False, True])
def test_callback_written_advantages_are_what_ppo_trains_on(multi_agent):
    config = (PPOConfig().environment("CartPole-v1").callbacks(ZeroAdvantages)
              .training(train_batch_size=200, minibatch_size=100, num_epochs=10, lr=0.01, entropy_coeff=0.0,
                        use_kl_loss=False)
              .debugging(seed=0))
    if multi_agent:
        config = config.multi_agent(policies={"p0"}, policy_mapping_fn=lambda aid, *a, **k: "p0")
    algo = config.build()
    try:
        module = algo.get_module("p0" if multi_agent else "default_policy")
        before = _policy_weights(module)
        algo.train()
        after = _policy_weights(module)
        # Zero advantages everywhere: no policy gradient, so the policy network stays as it was ...
        assert all(torch.equal(before[k], after[k]) for k in before)
        # ... while the value network learned the written targets (all 1).
        obs = torch.zeros(1, 4)
        with torch.no_grad():
            assert float(module.compute_values({"obs": obs})) == pytest.approx(1.0, abs=0.5)
    finally:
        algo.stop()

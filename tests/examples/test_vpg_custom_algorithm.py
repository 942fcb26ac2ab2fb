"""RLlib's custom-algorithm example (examples/algorithms/classes/vpg.py) as an RLlib user runs it:
an Algorithm subclass whose training_step samples episodes and calls
`learner_group.update(episodes=...)`, with its custom TorchLearner."""
from __future__ import annotations

import math

import numpy as np
import torch


def test_vpg_trains_cartpole_with_finite_loss_and_rising_return():
    from rlx.examples.algorithms.classes.vpg import VPGConfig

    config = (VPGConfig().environment("CartPole-v1").debugging(seed=0)
              .training(num_episodes_per_train_batch=20, lr=0.03).env_runners(num_env_runners=0))
    algo = config.build()
    try:
        returns, losses = [], []
        for _ in range(5):
            result = algo.train()
            returns.append(result["env_runners"]["episode_return_mean"])
            learner = result["learners"]["default_policy"]
            losses.append(learner["total_loss"])
            assert "mean_weight" in learner  # VPGTorchLearner.after_gradient_based_update
    finally:
        algo.stop()
    assert all(math.isfinite(loss) for loss in losses)
    # The episodes sampled in the user's training_step count as the Algorithm's env steps.
    assert result["num_env_steps_sampled_lifetime"] >= 5 * 20 * 9
    assert np.mean(returns[-2:]) > returns[0] + 5, returns


def test_learner_group_update_on_episodes_changes_the_weights():
    from rlx.examples.algorithms.classes.vpg import VPGConfig
    from rlx.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    algo = VPGConfig().environment("CartPole-v1").env_runners(num_env_runners=0).training(lr=0.01).build()
    try:
        episodes = algo.env_runner.sample(num_episodes=3)
        assert len(episodes) == 3 and all(e.is_done for e in episodes)
        before = {k: torch.as_tensor(v).clone() for k, v in algo.learner_group.get_weights().items()}
        results = algo.learner_group.update(episodes=episodes,
                                            timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: sum(map(len, episodes))})
        after = algo.learner_group.get_weights()
    finally:
        algo.stop()
    assert isinstance(results, list) and len(results) == 1
    module_results = results[0]["default_policy"]
    assert math.isfinite(module_results["total_loss"])
    assert any(not torch.equal(before[k], torch.as_tensor(after[k])) for k in before)

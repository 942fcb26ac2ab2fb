"""`update(episodes=...)` for Learners that read trajectories: PPO (like PG, A2C, IMPALA and
APPO) estimates advantages along each trajectory of a time-major batch, so the episodes reach it
one per column with VALID marking the real rows, and a custom training loop on episodes learns,
with the Learner in the driver and with two learner processes."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.core.columns import Columns


def ppo(num_learners: int = 0, learner_class=None):
    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .learners(num_learners=num_learners).training(lr=3e-4).debugging(seed=0))
    if learner_class is not None:
        config = config.training(learner_class=learner_class)
    algo = config.build()
    algo.env_runner.returns_episodes = True
    return algo


def test_ppo_learner_gets_the_episodes_one_per_column():
    from rlx.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

    seen = []

    class RecordingLearner(PPOTorchLearner):
        def update_from_batch(self, batch, timestep):
            seen.append({key: np.asarray(value).shape for key, value in batch.items() if key != "infos"})
            seen[-1]["valid_rows"] = int(np.asarray(batch[Columns.VALID]).sum())
            return super().update_from_batch(batch, timestep)

    algo = ppo(learner_class=RecordingLearner)
    try:
        episodes = algo.env_runner.sample(num_timesteps=300)
        [result] = algo.learner_group.update(episodes=episodes)
    finally:
        algo.stop()
    [shapes] = seen
    lengths = [len(e) for e in episodes if len(e)]
    assert shapes[Columns.OBS] == (max(lengths), len(lengths), 4)  # [T, B, obs]
    assert shapes[Columns.REWARDS] == (max(lengths), len(lengths))
    assert shapes["valid_rows"] == sum(lengths) >= 300
    assert math.isfinite(result["default_policy"]["total_loss"])


@pytest.mark.slow
@pytest.mark.parametrize("num_learners", [0, 2])
def test_a_custom_loop_of_episodes_and_learner_group_updates_learns_cartpole(num_learners):
    algo = ppo(num_learners)
    returns = []
    try:
        for _ in range(15):
            episodes = algo.env_runner.sample(num_timesteps=2000)
            algo.learner_group.update(episodes=episodes)
            algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group)
            returns.append(float(np.mean([e.get_return() for e in episodes if e.is_done])))
            if returns[-1] >= 100:
                break
    finally:
        algo.stop()
    # Random play returns about 21 (the first iteration here); 100 takes about 10 iterations.
    assert returns[-1] >= 100, [round(r) for r in returns]

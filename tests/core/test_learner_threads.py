"""The driver's Learner may update with a second torch thread when its gradient steps are large and
a core is free (rlx.core.learner.threads: measured against one thread), and leaves torch's setting
as it was afterwards."""
from __future__ import annotations

import pytest
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.core.learner import threads


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(threads, "_available_cores", lambda: 2)


SAC_PARAMS = 200_000  # about SAC's default [256, 256] policy and twin Q-networks


def test_large_updates_on_a_free_core_get_two_threads(two_cores):
    config = SACConfig().environment("Pendulum-v1")
    assert threads.update_threads(config, SAC_PARAMS) == 2
    ppo = PPOConfig().environment("CartPole-v1")
    assert threads.update_threads(ppo, 9_000) is None  # [64, 64] on minibatches of 512: no gain


def test_users_and_remote_runners_and_gpus_keep_their_threads(two_cores, monkeypatch):
    assert threads.update_threads(SACConfig().env_runners(num_env_runners=2), SAC_PARAMS) is None
    assert threads.update_threads(SACConfig().framework(torch_num_threads=1), SAC_PARAMS) is None
    assert threads.update_threads(SACConfig().learners(num_cpus_per_learner=3), 10) == 3
    assert threads.update_threads(SACConfig(), SAC_PARAMS, device_type="cuda") is None
    assert threads.update_threads(SACConfig().learners(num_learners=2), SAC_PARAMS) is None
    monkeypatch.setattr(threads, "_available_cores", lambda: 1)
    assert threads.update_threads(SACConfig(), SAC_PARAMS) is None


@pytest.mark.slow
def test_the_update_runs_with_the_chosen_threads_and_restores_them(two_cores):
    algo = (SACConfig().environment("Pendulum-v1").debugging(seed=0)
            .training(num_steps_sampled_before_learning_starts=64)
            .reporting(min_sample_timesteps_per_iteration=100).build())
    try:
        learner = algo.learner
        seen = []
        update = learner.update_from_batch

        def recording(batch, timestep):
            seen.append(torch.get_num_threads())
            return update(batch, timestep)

        learner.update_from_batch = recording
        before = torch.get_num_threads()
        algo.train()
        assert set(seen) == {1, 2}  # both timed on real updates (rlx.core.learner.threads.UpdateThreads)
        assert learner._update_threads.chosen in (1, 2)
        assert torch.get_num_threads() == before == 1  # sampling and acting keep one thread
    finally:
        algo.stop()

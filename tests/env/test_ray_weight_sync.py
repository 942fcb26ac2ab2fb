"""Weights reach Ray EnvRunners through the object store: one ray.put per sync, and every
runner reads that same object (not a copy per runner sent by the driver)."""
from __future__ import annotations


import numpy as np
import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402
from rlx.env.runner_group.calls import SetWeightsCall  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_session(ray_for_module):
    """The shared local Ray, this module shipped to its workers."""
    return ray_for_module


def runner_weights(runner):
    return runner.worker_index, runner.weights_seq_no, runner.get_weights()


def test_one_put_per_sync_and_every_runner_reads_it(monkeypatch):
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=3, num_envs_per_env_runner=1, env_runner_backend="ray",
                           num_cpus_per_env_runner=0.5)
              .training(train_batch_size=96, minibatch_size=32, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        algo.train()  # the learner's weights change
        group = algo.env_runner_group
        puts, sent = [], {}
        real_put = ray.put
        monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(value) or real_put(value, **kw))
        for handle in group.remote_workers():
            real_submit = handle.submit

            def spy(call, handle=handle, real_submit=real_submit):
                if isinstance(call, SetWeightsCall):
                    sent.setdefault(handle.index, []).append(call.weights)
                return real_submit(call)

            monkeypatch.setattr(handle, "submit", spy)
        group.sync_weights(from_worker_or_learner_group=algo.learner, weights_seq_no=1000)
        assert len(puts) == 1  # one copy of the weights leaves the driver, however many runners
        assert sorted(sent) == [1, 2, 3]
        refs = [weights for per_runner in sent.values() for weights in per_runner]
        assert all(isinstance(ref, ray.ObjectRef) for ref in refs) and len(set(refs)) == 1
        # Every runner has the learner's weights, at the version sent.
        learner = algo.learner.get_weights()
        learner = learner.get("default_policy", learner)
        for index, seq_no, weights in group.foreach_env_runner(runner_weights, local_env_runner=False):
            assert seq_no == 1000
            assert set(weights) == set(learner)
            assert all(np.allclose(weights[k], learner[k]) for k in learner)
        # A sync of a version every runner has sends nothing.
        group.sync_weights(from_worker_or_learner_group=algo.learner, weights_seq_no=1000)
        assert len(puts) == 1
    finally:
        algo.stop()

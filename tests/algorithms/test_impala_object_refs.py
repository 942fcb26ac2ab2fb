"""IMPALA/APPO on Ray EnvRunners: fragments travel as object references, not through the driver."""
from __future__ import annotations

import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.appo import APPOConfig  # noqa: E402
from rlx.algorithms.impala import IMPALAConfig  # noqa: E402
from rlx.core.remote_fragment import RemoteFragment  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_cluster(local_ray):
    local_ray()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _config(cls, **learners):
    return (
        cls()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2, env_runner_backend="ray", rollout_fragment_length=50,
                     num_envs_per_env_runner=2)
        .training(train_batch_size=500, lr=0.002, vf_loss_coeff=0.25, entropy_coeff=0.0)
        .learners(**learners)
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=1000)
        .debugging(seed=0)
    )


class _GetSpy:
    """Records every ObjectRef the driver passes to ray.get."""

    def __init__(self, monkeypatch):
        self.fetched: set = set()
        real = ray.get

        def spy(refs, *args, **kwargs):
            for ref in refs if isinstance(refs, list) else [refs]:
                if isinstance(ref, ray.ObjectRef):
                    self.fetched.add(ref.hex())
            return real(refs, *args, **kwargs)

        monkeypatch.setattr(ray, "get", spy)


def test_with_aggregator_actors_the_driver_never_fetches_a_fragment_impala_learns_and_survives_a_kill(monkeypatch):
    # One build for both checks (3 Ray actors each): the kill comes after the fetch checks,
    # so the fragments counted there all came from the runners as they were built.
    spy = _GetSpy(monkeypatch)
    algo = _config(IMPALAConfig, num_aggregator_actors_per_learner=1) \
        .fault_tolerance(restart_failed_env_runners=True).build()
    arrived: list = []
    add = algo._add_fragment
    algo._add_fragment = lambda sample: (arrived.append(sample.batch), add(sample))[1]
    try:
        assert len(algo.aggregators) == 1
        best = -np.inf
        for _ in range(40):
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"])
            if best >= 80:
                break
        assert best >= 80, best
        # Every fragment reached the driver as a reference with its step counts, never as arrays ...
        assert arrived and all(isinstance(b, RemoteFragment) and isinstance(b.payload, ray.ObjectRef)
                               for b in arrived)
        # ... and the driver fetched none of them (it fetches the aggregators' train batches only).
        assert not spy.fetched & {b.payload.hex() for b in arrived}
        assert spy.fetched, "the driver's learner fetched the aggregated train batches"
        assert result["num_env_steps_sampled_lifetime"] == sum(b.env_steps() for b in arrived)
        assert result["num_env_steps_trained_lifetime"] > 0

        # A killed runner takes only its unread fragments (in the object store with it) and
        # training goes on.
        before = result
        algo.env_runner_group.remote_workers()[0].kill()
        results = [algo.train() for _ in range(2)]
        trained = [r["num_env_steps_trained_lifetime"] for r in results]
        assert trained[-1] > before["num_env_steps_trained_lifetime"]
        assert all(r["num_env_steps_trained_lifetime"] <= r["num_env_steps_sampled_lifetime"] for r in results)
    finally:
        algo.stop()


def test_appo_without_aggregators_fetches_the_fragments_where_the_learner_is():
    # One runner: the fragments' path to the learner does not depend on how many send them.
    algo = _config(APPOConfig).env_runners(num_env_runners=1).training(use_circular_buffer=False).build()
    try:
        assert algo.aggregators is None
        result = algo.train()
        pending = list(algo.learner_queue._entries)
        assert result["num_env_steps_trained_lifetime"] > 0
        # Queued train batches hold references until the learner takes them.
        assert all(isinstance(part, RemoteFragment) for entry in pending for part in entry[0].parts)
    finally:
        algo.stop()


def test_with_a_ray_learner_actor_the_driver_fetches_no_sample_at_all(monkeypatch):
    spy = _GetSpy(monkeypatch)
    config = _config(IMPALAConfig, num_learners=1, learner_backend="ray", num_aggregator_actors_per_learner=1)
    algo = config.env_runners(num_env_runners=1).build()
    arrived: list = []
    add = algo._add_fragment
    algo._add_fragment = lambda sample: (arrived.append(sample.batch), add(sample))[1]
    try:
        trained = 0
        for _ in range(5):
            trained = algo.train()["num_env_steps_trained_lifetime"]
            if trained >= 1000:
                break
        assert trained >= 1000
        sampled = {b.payload.hex() for b in arrived}
        queued = {entry[0].parts[0].hex() for entry in algo.learner_queue._entries}
        # The learner actor fetched every train batch; the driver only weights and small answers.
        assert not spy.fetched & sampled
        assert not spy.fetched & queued
    finally:
        algo.stop()

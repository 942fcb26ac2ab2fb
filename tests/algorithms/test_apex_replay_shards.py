"""Ape-X on Ray EnvRunners: the replay memory lives in shard actors the runners add to directly."""
from __future__ import annotations

import os
import sys

import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.apex_dqn import ApexDQNConfig  # noqa: E402
from rlx.core.remote_fragment import RemoteFragment  # noqa: E402


@pytest.fixture(scope="module")
def ray_cluster(local_ray):
    local_ray()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _config(**training) -> ApexDQNConfig:
    return (
        ApexDQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2, env_runner_backend="ray", rollout_fragment_length=16)
        .training(train_batch_size=64, training_intensity=8, lr=0.002, num_steps_sampled_before_learning_starts=500,
                  target_network_update_freq=500, replay_buffer_config={"capacity": 50000}, **training)
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=1000)
        .debugging(seed=0)
    )


def test_rllib_optimizer_key_names_the_number_of_shards():
    config = _config(optimizer={"num_replay_buffer_shards": 3, "type": "adam"})
    config.validate()
    assert config.num_replay_buffer_shards == 3 and config.optimizer == {"type": "adam"}


def test_runners_add_to_shard_actors_and_the_learner_replays_from_them(ray_cluster):
    algo = _config(num_replay_buffer_shards=2, max_requests_in_flight_per_replay_worker=1) \
        .fault_tolerance(restart_failed_env_runners=True).build()
    arrived: list = []
    add = algo._add_samples
    algo._add_samples = lambda samples: (arrived.extend((s.runner_index, s.batch) for s in samples),
                                         add(samples))[1]
    try:
        shards = algo.replay_shards
        assert shards is not None and len(shards.shards) == 2 and shards.depth == 1
        # Two shard actors, each in a process of its own.
        assert all(isinstance(shard, ray.actor.ActorHandle) for shard in shards.shards)
        assert len({loc["pid"] for loc in shards.locations} - {os.getpid()}) == 2
        in_flight = []
        next_replay = shards.next_replay

        def counting(requests, n_step):
            out = next_replay(requests, n_step)
            in_flight.append(len(shards._requests))
            return out

        shards.next_replay = counting
        best, result = 0.0, {}
        for _ in range(40):
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"])
            if best >= 80:
                break
        assert best >= 80, best
        # The runners' fragments went to the shards; the driver saw their step counts only.
        assert sum(isinstance(b, RemoteFragment) for _, b in arrived) >= len(arrived) - 4  # (before assignment)
        assert len(algo.local_replay_buffer) == 0
        # (A shard may hold fragments whose answers have not reached the driver yet: 2 runners x
        # 2 requests x 16 steps.)
        assert 0 < result["apex"]["replay_buffer_size"] <= result["num_env_steps_sampled_lifetime"] + 64
        assert result["apex"]["num_replay_shards"] == 2
        # max_requests_in_flight_per_replay_worker=1: at most one queued request per shard.
        assert in_flight and max(in_flight) <= 1
        assert result["num_env_steps_trained_lifetime"] > 0
        # A restarted runner has no shard: the driver adds its first fragments for it and tells it
        # its shard again, after which it adds to the shard itself.
        killed = algo.env_runner_group.remote_workers()[0]
        killed.kill()
        arrived.clear()

        def from_killed() -> list[bool]:  # whether each of its fragments since the kill went to the shard
            return [isinstance(b, RemoteFragment) for index, b in arrived if index == killed.index]

        # The restart runs in the background (the others sample meanwhile): on a loaded machine the
        # rebuilt runner's first fragments can take a few iterations to arrive.
        for _ in range(20):
            after = algo.train()
            seen = from_killed()
            if False in seen and seen[-1]:
                break
        assert after["num_env_steps_sampled_lifetime"] > result["num_env_steps_sampled_lifetime"]
        assert algo.env_runner_group.num_remote_worker_restarts >= 1
        seen = from_killed()
        # The driver added the rebuilt runner's first fragment(s) for it, then the runner added to its shard.
        assert False in seen and seen[-1], seen
    finally:
        algo.stop()

"""EnvRunners and evaluation EnvRunners as Ray actors on a two-node cluster (`two_node_cluster` in
tests/conftest.py): they run on the node that is not the driver's, and killing a runner actor and an
evaluation runner actor mid-training neither stops train() nor stalls it (their replacements
start in the background), and nothing is counted twice."""
from __future__ import annotations

import statistics
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402

TRAIN_BATCH = 200
EVAL_EPISODES = 2


def cluster_config() -> PPOConfig:
    on_worker_node = {"worker_node": 1}
    return (PPOConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=2, num_envs_per_env_runner=1, num_cpus_per_env_runner=0.5,
                         custom_resources_per_env_runner=on_worker_node, env_runner_backend="ray")
            .training(train_batch_size=TRAIN_BATCH, minibatch_size=100, num_epochs=1)
            .evaluation(evaluation_interval=1, evaluation_num_env_runners=2, evaluation_duration=EVAL_EPISODES,
                        evaluation_duration_unit="episodes",
                        evaluation_config={"custom_resources_per_env_runner": on_worker_node})
            .fault_tolerance(restart_failed_env_runners=True)
            .debugging(seed=0))


def actor_node(actor) -> str:
    """The node an actor runs on, as Ray's GCS has it (ray.util.state needs the dashboard)."""
    from ray._private import state

    return state.actors(actor_id=actor._actor_id.hex())["Address"]["NodeID"]


def kill_during_next_train(handles, delay_s: float) -> threading.Thread:
    """Kill the Ray actors of `handles` (as a crash or a lost node would) `delay_s` after now."""
    def kill():
        time.sleep(delay_s)
        for handle in handles:
            ray.kill(handle.actor, no_restart=True)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_runners_and_evaluation_runners_on_the_other_node_survive_kills(two_node_cluster):
    algo = cluster_config().build()
    try:
        group = algo.env_runner_group
        first = algo.train()
        eval_group = algo.eval_env_runner_group
        assert eval_group.backend == "ray"
        for handle in group.remote_workers() + eval_group.remote_workers():
            assert handle.node_id == two_node_cluster.worker_node_id
            assert actor_node(handle.actor) == two_node_cluster.worker_node_id
        assert first["evaluation"]["env_runners"]["num_episodes"] == EVAL_EPISODES

        results, times = [first], []
        for _ in range(4):
            started = time.perf_counter()
            results.append(algo.train())
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        killer = kill_during_next_train([group.remote_workers()[0], eval_group.remote_workers()[1]], median / 3)
        after, restarting = [], []
        for _ in range(5):
            started = time.perf_counter()
            results.append(algo.train())
            after.append(time.perf_counter() - started)
            restarting.append(group.num_remote_workers_waiting_for_restart()
                              + eval_group.num_remote_workers_waiting_for_restart())
        killer.join()
        print(f"\niteration times before the kills {[round(t, 2) for t in times]}, "
              f"from the kills on {[round(t, 2) for t in after]}")
        # Training went on: every iteration sampled and trained its batch, evaluated its episodes.
        for result in results:
            assert TRAIN_BATCH <= result["num_env_steps_sampled_this_iter"] < 2 * TRAIN_BATCH
            assert result["num_env_steps_trained_this_iter"] == result["num_env_steps_sampled_this_iter"]
            assert result["evaluation"]["env_runners"]["num_episodes"] == EVAL_EPISODES
        assert results[-1]["num_env_steps_sampled_lifetime"] == sum(r["num_env_steps_sampled_this_iter"]
                                                                    for r in results)
        # Each killed actor was replaced once, in the background: no iteration stalled on it.
        deadline = time.monotonic() + 60
        while (group.num_healthy_remote_workers() < 2 or eval_group.num_healthy_remote_workers() < 2) \
                and time.monotonic() < deadline:
            algo.train()
        assert group.num_remote_worker_restarts == 1 and eval_group.num_remote_worker_restarts == 1
        assert group.num_healthy_remote_workers() == 2 and eval_group.num_healthy_remote_workers() == 2
        # train() returned while replacements were still starting (it did not wait for them), and
        # no iteration stalled: at most 3x the median, or 3 s where iterations take ~0.1 s and the
        # one runner left samples the whole batch beside two actors starting on a 2-core machine.
        assert any(restarting), restarting
        assert max(after) <= max(3 * median, 3.0), (times, after)
    finally:
        algo.stop()


def test_the_test_cluster_is_not_found_by_ray_init_without_an_address(two_node_cluster, monkeypatch):
    """Other pytest-xdist workers' ray.init(num_cpus=...) must start their own Ray, not join this
    cluster (CI failed when they found it through /tmp/ray/ray_current_cluster)."""
    from ray._private import services

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert services.get_ray_address_from_environment(None, None) is None

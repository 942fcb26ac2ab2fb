"""Time per train() before and after a Ray EnvRunner actor and an evaluation runner actor are
killed, on a two-node Ray cluster started on this machine (ray.cluster_utils.Cluster).

PPO on CartPole-v1 with 2 Ray EnvRunners and 2 Ray evaluation runners, all on the second node
(custom resource `worker_node`), restart_failed_env_runners=True. After BEFORE iterations a
thread kills one runner actor and one evaluation runner actor with ray.kill a third of a median
iteration into the next train(); AFTER more iterations follow. Prints one JSON object: the
iteration times, their median before the kills, the slowest after (and its ratio to the
median), where the time of each iteration went (sampling, evaluation, the rest), the restarts
and the live placement groups (a replacement takes its predecessor's bundle), and the load.

Usage: python benchmarks/ray_runner_restart.py [BEFORE] [AFTER] [TRAIN_BATCH]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time


def main(before: int = 8, after: int = 12, train_batch: int = 1000) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from rlx.algorithms import evaluation_runs
    from rlx.algorithms.ppo import PPOConfig

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "resources": {"head_node": 1000}})
    cluster.add_node(num_cpus=4, resources={"worker_node": 1000})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    on_worker = {"worker_node": 1}
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, num_envs_per_env_runner=1, num_cpus_per_env_runner=0.5,
                           custom_resources_per_env_runner=on_worker, env_runner_backend="ray")
              .training(train_batch_size=train_batch, minibatch_size=250, num_epochs=1)
              .evaluation(evaluation_interval=1, evaluation_num_env_runners=2, evaluation_duration=2,
                          evaluation_config={"custom_resources_per_env_runner": on_worker})
              .fault_tolerance(restart_failed_env_runners=True)
              .debugging(seed=0))
    algo = config.build()
    phases: dict[str, float] = {"sample": 0.0, "evaluate": 0.0, "evaluation_sync": 0.0}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases[name] += time.perf_counter() - started
        return wrapper

    group = algo.env_runner_group
    group.sample = timed("sample", group.sample)
    real_evaluate, real_sync = evaluation_runs.evaluate, evaluation_runs.sync_evaluation_runners
    evaluation_runs.evaluate = timed("evaluate", real_evaluate)
    evaluation_runs.sync_evaluation_runners = timed("evaluation_sync", real_sync)
    try:
        algo.train()  # warm-up: builds the evaluation runners
        eval_group = algo.eval_env_runner_group
        rows = []

        def one() -> None:
            phases["sample"] = phases["evaluate"] = phases["evaluation_sync"] = 0.0
            started = time.perf_counter()
            algo.train()
            total = time.perf_counter() - started
            rows.append({"s": round(total, 3), "sample_s": round(phases["sample"], 3),
                         "evaluate_s": round(phases["evaluate"], 3),
                         "evaluation_sync_s": round(phases["evaluation_sync"], 3),
                         "healthy": [group.num_healthy_remote_workers(), eval_group.num_healthy_remote_workers()]})

        for _ in range(before):
            one()
        median = statistics.median(r["s"] for r in rows)
        victims = [group.remote_workers()[0], eval_group.remote_workers()[1]]

        def kill() -> None:
            time.sleep(median / 3)
            for handle in victims:
                ray.kill(handle.actor, no_restart=True)

        killer = threading.Thread(target=kill, daemon=True)
        killer.start()
        for _ in range(after):
            one()
        killer.join()
        slowest = max(r["s"] for r in rows[before:])
        live_pgs = [pg for pg in ray.util.placement_group_table().values() if pg["state"] == "CREATED"]
        return {
            "benchmark": "ray_runner_restart", "train_batch_size": train_batch,
            "median_before_s": round(median, 3), "slowest_after_s": slowest,
            "slowest_over_median": round(slowest / median, 2),
            "iterations_before": rows[:before], "iterations_after": rows[before:],
            "restarts": [group.num_remote_worker_restarts, eval_group.num_remote_worker_restarts],
            "live_placement_groups": len(live_pgs), "loadavg": open("/proc/loadavg").read().split()[:3],
        }
    finally:
        evaluation_runs.evaluate, evaluation_runs.sync_evaluation_runners = real_evaluate, real_sync
        algo.stop()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    print(json.dumps(main(*(int(a) for a in sys.argv[1:]))))

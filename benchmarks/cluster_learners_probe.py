"""PPO (num_learners=2) or DD-PPO (2 workers) on a two-node Ray cluster started on this machine
(ray.cluster_utils.Cluster), trained on CartPole to a return threshold; prints where the learner
actors ran and the iterations and time it took, as JSON.

Usage: python benchmarks/cluster_learners_probe.py [--algo ppo|ddppo] [--threshold 450] [--budget-s 300]
       [--kill-learner-at N]

`--kill-learner-at N` kills learner actor 1 with ray.kill before iteration N and reports the
iteration times around it (the group replaces it within that iteration's update).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ppo", "ddppo"), default="ppo")
    parser.add_argument("--threshold", type=float, default=450.0)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--kill-learner-at", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "resources": {"head_node": 1000}})
    worker = cluster.add_node(num_cpus=4, resources={"worker_node": 1000})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    head = ray.get_runtime_context().get_node_id()
    try:
        if args.algo == "ppo":
            from rlx.algorithms.ppo import PPOConfig

            config = (PPOConfig().environment("CartPole-v1")
                      .env_runners(num_env_runners=2, custom_resources_per_env_runner={"worker_node": 1})
                      .resources(placement_strategy="SPREAD")
                      .learners(num_learners=2)
                      .training(train_batch_size=2000, minibatch_size=250, num_epochs=8, lr=1e-3,
                                model={"fcnet_hiddens": [64, 64]})
                      .debugging(seed=0))
        else:
            from rlx.algorithms.ddppo import DDPPOConfig

            config = (DDPPOConfig().environment("CartPole-v1")
                      .env_runners(num_env_runners=2, num_envs_per_env_runner=4, rollout_fragment_length=128)
                      .resources(placement_strategy="STRICT_SPREAD")
                      .training(minibatch_size=128, num_epochs=8, lr=1e-3, model={"fcnet_hiddens": [64, 64]})
                      .debugging(seed=0))
        start = time.monotonic()
        algo = config.build()
        build_s = time.monotonic() - start
        group = algo.learner
        nodes = ["driver's" if n == head else "worker" if n == worker.node_id else n for n in group.node_ids]
        best, times, it, killed, joined = 0.0, [], 0, None, None
        train_start = time.monotonic()
        while time.monotonic() - train_start < args.budget_s and best < args.threshold:
            it += 1
            if it == args.kill_learner_at:
                ray.kill(group._handles[1].actor, no_restart=True)
                killed = it
            t0 = time.monotonic()
            result = algo.train()
            times.append(time.monotonic() - t0)
            if killed and joined is None and len(group.actor_ids) == 2:
                joined = it  # the replacement took part in this iteration's update
            best = max(best, float(result["env_runners"].get("episode_return_mean", 0.0) or 0.0))
        print(json.dumps({
            "algo": args.algo, "learner_backend": group.learner_backend, "learner_nodes": nodes,
            "threshold": args.threshold, "best_return": round(best, 1), "reached": best >= args.threshold,
            "iterations": it, "train_s": round(time.monotonic() - train_start, 1), "build_s": round(build_s, 1),
            "iteration_median_s": round(statistics.median(times), 3), "iteration_max_s": round(max(times), 3),
            "iteration_max_at": times.index(max(times)) + 1,
            "killed_learner_at": killed, "replacement_joined_at": joined,
            "iteration_s_at_join": round(times[joined - 1], 3) if joined else None,
            "iteration_s_around_kill": [round(t, 3) for t in times[max(0, (killed or 1) - 3):(killed or 0) + 2]]
            if killed else None,
            "env_steps_sampled": int(result.get("num_env_steps_sampled_lifetime", 0)),
            "loadavg": open("/proc/loadavg").read().split()[:3],
        }))
        algo.stop()
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()

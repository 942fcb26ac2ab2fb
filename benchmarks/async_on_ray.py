"""IMPALA/APPO fragment references, Ape-X replay shards and A3C runner gradients: what the driver handles.

Each case trains CartPole-v1 for a fixed wall time and reports env steps sampled and trained
per second, the driver's own CPU time per 1,000 trained env steps (what the driver spends, the
figure that has to stay flat as runners are added), and the bytes the driver receives per
fragment (a pickled fragment as the runner answers it). The "by value" variants switch the
runner-side hook off (the runners answer their fragments, as before issue 34).

    python benchmarks/async_on_ray.py [seconds per case]      # prints JSON

On a 2-core machine the runners, actors and the driver share the cores: throughput is not the
point, the driver's share is.
"""
from __future__ import annotations

import json
import os
import pickle
import sys
import time

import ray

from rlx.algorithms.a3c import A3CConfig
from rlx.algorithms.apex_dqn import ApexDQNConfig
from rlx.algorithms.impala import IMPALAConfig


class ImpalaByValue(IMPALAConfig):
    runner_fragment_hook = None




class A3CByValue(A3CConfig):
    runner_fragment_hook = None


def _impala(cls, **learners):
    return (cls().environment("CartPole-v1")
            .env_runners(num_env_runners=2, env_runner_backend="ray", rollout_fragment_length=50,
                         num_envs_per_env_runner=2)
            .training(train_batch_size=500, lr=0.002).learners(**learners)
            .reporting(min_time_s_per_iteration=1).debugging(seed=0))


def _apex(cls, shards):
    return (cls().environment("CartPole-v1")
            .env_runners(num_env_runners=2, env_runner_backend="ray", rollout_fragment_length=16)
            .training(train_batch_size=64, training_intensity=8, lr=0.002, num_steps_sampled_before_learning_starts=500,
                      target_network_update_freq=500, replay_buffer_config={"capacity": 50000},
                      num_replay_buffer_shards=shards)
            .reporting(min_time_s_per_iteration=1, min_sample_timesteps_per_iteration=0).debugging(seed=0))


def _a3c(cls, backend):
    return (cls().environment("CartPole-v1")
            .env_runners(num_env_runners=2, env_runner_backend=backend, rollout_fragment_length=20)
            .training(grads_per_step=50, lr=0.001).reporting(min_time_s_per_iteration=1).debugging(seed=0))


def run(name: str, config, seconds: float) -> dict:
    algo = config.build()
    sizes: list[int] = []
    group = algo.env_runner_group
    original = group.async_sample

    def measuring(*args, **kwargs):
        samples = original(*args, **kwargs)
        sizes.extend(len(pickle.dumps(s.batch, protocol=5)) for s in samples[:4])
        return samples

    group.async_sample = measuring
    try:
        algo.train()  # warm-up (actors started, first weights out)
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        first = algo.train()
        result = first
        while time.perf_counter() - start_wall < seconds:
            result = algo.train()
        wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
        sampled = result["num_env_steps_sampled_lifetime"] - first["num_env_steps_sampled_lifetime"]
        trained = result["num_env_steps_trained_lifetime"] - first["num_env_steps_trained_lifetime"]
        return {
            "case": name, "wall_s": round(wall, 1),
            "env_steps_sampled_per_s": round(sampled / wall), "env_steps_trained_per_s": round(trained / wall),
            "driver_cpu_s_per_1k_trained_steps": round(1000 * cpu / max(trained, 1), 3),
            "bytes_per_fragment_at_driver": int(sum(sizes) / max(len(sizes), 1)),
            "episode_return_mean": round(result["env_runners"]["episode_return_mean"], 1),
        }
    finally:
        algo.stop()


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=6, include_dashboard=False, log_to_driver=False)
    loadavg = open("/proc/loadavg").read().split()[:3]
    cases = [
        ("IMPALA fragments by value", _impala(ImpalaByValue)),
        ("IMPALA fragment refs, driver joins", _impala(IMPALAConfig)),
        ("IMPALA fragment refs, 1 aggregator actor", _impala(IMPALAConfig, num_aggregator_actors_per_learner=1)),
        ("APEX driver buffer (shards=0)", _apex(ApexDQNConfig, 0)),
        ("APEX 2 replay shards", _apex(ApexDQNConfig, 2)),
        ("A3C driver gradients (process runners)", _a3c(A3CByValue, "process")),
        ("A3C runner gradients (process runners)", _a3c(A3CConfig, "process")),
        ("A3C runner gradients (Ray runners)", _a3c(A3CConfig, "ray")),
    ]
    results = [run(name, config, seconds) for name, config in cases]
    ray.shutdown()
    print(json.dumps({"loadavg_at_start": loadavg, "seconds_per_case": seconds, "results": results}, indent=1))


if __name__ == "__main__":
    main()

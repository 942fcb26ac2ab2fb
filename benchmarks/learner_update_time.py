"""PPO learner update time on CartPole-shaped batches: the driver's Learner (num_learners=0)
against LearnerGroups of 1 and 2 learners on the process and the Ray backend.

Usage: python benchmarks/learner_update_time.py [--batch 4000] [--minibatch 128] [--epochs 1] [--repeats 5]

Each configuration updates `repeats` times on the same synthetic time-major batch (after one
warm-up update) and reports the median and min wall time of `update_from_batch` as one JSON line;
the Ray rows start a one-node Ray instance (ray.init(num_cpus=4)). Start-up time of the group is
reported apart (`start_s`). On a machine with fewer cores than learners nothing speeds up: the
numbers then show what the data-parallel machinery costs (shipping shards, all-reduces).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym
import numpy as np


def ppo_batch(T: int, B: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A time-major [T, B] PPO batch with CartPole's spaces."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(T, B, 2)).astype(np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    actions = (rng.random((T, B)) < probs[..., 1]).astype(np.int64)
    return {
        "obs": rng.normal(size=(T, B, 4)).astype(np.float32),
        "new_obs": rng.normal(size=(T, B, 4)).astype(np.float32),
        "actions": actions,
        "rewards": np.ones((T, B), np.float32),
        "terminateds": rng.random((T, B)) < 0.05,
        "truncateds": np.zeros((T, B), bool),
        "action_dist_inputs": logits,
        "action_logp": np.log(np.take_along_axis(probs, actions[..., None], -1)[..., 0]).astype(np.float32),
    }


def measure(backend: str, num_learners: int, args: argparse.Namespace) -> dict:
    """One row: median/min update time of `num_learners` learners on `backend` ("driver" for 0)."""
    from rlx.algorithms.ppo import PPOConfig
    from rlx.algorithms.ppo.ppo_learner import PPOLearner
    from rlx.core.learner_group import LearnerGroup
    from rlx.core.models import ActorCriticModule
    from rlx.core.rl_module import RLModuleSpec

    config = (PPOConfig().training(train_batch_size=args.batch, minibatch_size=args.minibatch,
                                   num_epochs=args.epochs)
              .learners(num_learners=num_learners, learner_backend="auto" if backend == "driver" else backend)
              .debugging(seed=0))
    module = RLModuleSpec(ActorCriticModule, gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2),
                          {"fcnet_hiddens": [256, 256]}).build()
    start = time.perf_counter()
    learner = PPOLearner(config, module) if num_learners == 0 else \
        LearnerGroup(config, PPOLearner, module, num_learners=num_learners)
    start_s = time.perf_counter() - start
    batch = ppo_batch(args.batch // 8, 8)
    try:
        learner.update_from_batch(batch, timestep=0)  # warm-up
        times = []
        for i in range(args.repeats):
            t0 = time.perf_counter()
            learner.update_from_batch(batch, timestep=i + 1)
            times.append(time.perf_counter() - t0)
    finally:
        if num_learners:
            learner.stop()
    return {"backend": backend, "num_learners": num_learners, "start_s": round(start_s, 3),
            "update_median_s": round(statistics.median(times), 4), "update_min_s": round(min(times), 4),
            "batch": args.batch, "minibatch": args.minibatch, "epochs": args.epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4000)
    parser.add_argument("--minibatch", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch

    # As many torch threads as each learner rank uses (num_cpus_per_learner=1): a comparison of
    # the machinery, not of thread counts (spinning torch threads also collapse on a loaded box).
    torch.set_num_threads(1)
    rows = [measure("driver", 0, args), measure("process", 1, args), measure("process", 2, args)]
    import ray

    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        rows += [measure("ray", 1, args), measure("ray", 2, args)]
    finally:
        ray.shutdown()
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()

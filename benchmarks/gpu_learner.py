"""Learner updates per second on the CPU and (when torch sees one) on a CUDA GPU.

Usage: python benchmarks/gpu_learner.py [--repeats N] [--cases ppo_mlp ppo_cnn sac_mlp]

For each case the same algorithm is built twice, once with a CPU Learner and once with
`num_gpus_per_learner=1`, one train batch is sampled and the Learner's update on it is
timed. The EnvRunners stay on the CPU in both runs, so the GPU figure includes moving the
batch to the device once per update and copying the weights back to the EnvRunner.

- ppo_mlp: PPO, [256, 256] MLP, CartPole-v1, train batch 4000, minibatch 128, 1 epoch:
  minibatch updates per second.
- ppo_cnn: PPO, the default 84x84x4 CNN on random uint8 frames, train batch 1024,
  minibatch 128, 1 epoch: minibatch updates per second.
- sac_mlp: SAC, [256, 256] policy and twin Q, Pendulum-v1, batch 256: updates per second.

One JSON line per case and device, then a summary line with GPU/CPU ratios. Without a GPU
only the CPU lines print (and the summary says so).
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np


class RandomFrames(gym.Env):
    """84x84x4 uint8 frames of noise and six actions: a stand-in for an Atari env's shapes."""

    def __init__(self, config: Any = None):
        self.observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self._frames = np.random.default_rng(0).integers(0, 256, (32, 84, 84, 4), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self._t = 0
        return self._frames[0], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        return self._frames[self._t % 32], float(action == 0), False, self._t >= 200, {}


def _ppo(env: Any, model: dict, batch: int) -> Any:
    from rlx.algorithms.ppo import PPOConfig

    return (PPOConfig().environment(env).training(model=model, train_batch_size=batch, minibatch_size=128,
                                                  num_epochs=1).debugging(seed=0))


def _sac() -> Any:
    from rlx.algorithms.sac import SACConfig

    net = {"fcnet_hiddens": [256, 256]}
    return (SACConfig().environment("Pendulum-v1")
            .training(q_model_config=net, policy_model_config=net, train_batch_size=256,
                      num_steps_sampled_before_learning_starts=300)
            .reporting(min_sample_timesteps_per_iteration=300).debugging(seed=0))


CASES: dict[str, Callable[[], Any]] = {
    "ppo_mlp": lambda: _ppo("CartPole-v1", {"fcnet_hiddens": [256, 256]}, 4000),
    "ppo_cnn": lambda: _ppo(RandomFrames, {}, 1024),
    "sac_mlp": _sac,
}


def _update_rate(algo: Any, repeats: int) -> tuple[float, int]:
    """(updates per second, gradient steps per update call) of the algorithm's Learner."""
    if hasattr(algo, "local_replay_buffer"):
        algo.train()  # fills the buffer past learning_starts
        cfg = algo.config
        batch = algo.local_replay_buffer.sample(cfg.total_train_batch_size, n_step=1, gamma=cfg.gamma)
    else:
        batch = algo.env_runner_group.sample(algo.config.train_batch_size)
    timestep = 10_000
    metrics = algo.learner.update_from_batch(batch, timestep=timestep)  # warm-up (and CUDA kernels)
    steps = int(metrics.get("num_minibatch_updates", 1)) if isinstance(metrics, dict) else 1
    _sync()
    start = time.perf_counter()
    for _ in range(repeats):
        algo.learner.update_from_batch(batch, timestep=timestep)
    _sync()
    return repeats * steps / (time.perf_counter() - start), steps


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rates: dict[str, dict[str, float]] = {}
    for case in args.cases:
        for device in devices:
            config = CASES[case]()
            if device == "cuda":
                config = config.learners(num_gpus_per_learner=1)
            algo = config.build()
            try:
                rate, steps = _update_rate(algo, args.repeats)
                learner_device = str(algo.learner.device)
            finally:
                algo.stop()
            rates.setdefault(case, {})[device] = rate
            print(json.dumps({"case": case, "device": learner_device, "updates_per_s": round(rate, 1),
                              "gradient_steps_per_update_call": steps, "torch_threads": torch.get_num_threads()}))
    summary: dict[str, Any] = {"summary": "gpu_over_cpu_updates_per_s"}
    if "cuda" in devices:
        summary.update({case: round(r["cuda"] / r["cpu"], 2) for case, r in rates.items()})
        summary["gpu"] = torch.cuda.get_device_name(0)
    else:
        summary["note"] = "torch sees no CUDA device here: CPU figures only"
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

"""Learner updates per second on the CPU and (when torch sees one) on a CUDA GPU.

Usage: python benchmarks/gpu_learner.py [--repeats N] [--cases ppo_mlp ppo_cnn sac_mlp]
                                        [--variants fp32 bf16 fp16 compile] [--cpu-variants fp32]

For each case the same algorithm is built once per device and variant, one train batch is
sampled and the Learner's update on it is timed. The EnvRunners stay on the CPU in every run,
so a GPU figure includes moving the batch to the device once per update and copying the weights
back to the EnvRunner.

- ppo_mlp: PPO, [256, 256] MLP, CartPole-v1, train batch 4000, minibatch 128, 1 epoch:
  minibatch updates per second.
- ppo_cnn: PPO, the default 84x84x4 CNN on random uint8 frames, train batch 1024,
  minibatch 128, 1 epoch: minibatch updates per second.
- sac_mlp: SAC, [256, 256] policy and twin Q, Pendulum-v1, batch 256: updates per second.

Variants: fp32 (plain), bf16 / fp16 (`learners(mixed_precision=...)`), compile
(`framework(torch_compile_learner=True)`, inductor; its first update, which compiles, is timed
apart as `first_update_s`). One JSON line per case, device and variant, then a summary line with
each GPU variant's rate over the CPU fp32 rate. Without a GPU only the CPU lines print.
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


VARIANTS: dict[str, Callable[[Any], Any]] = {
    "fp32": lambda config: config,
    "bf16": lambda config: config.learners(mixed_precision="bf16"),
    "fp16": lambda config: config.learners(mixed_precision="fp16"),
    "compile": lambda config: config.framework(torch_compile_learner=True),
}


def _update_rate(algo: Any, repeats: int) -> tuple[float, int, float]:
    """(updates per second, gradient steps per update call, seconds of the first update call)
    of the algorithm's Learner."""
    if hasattr(algo, "local_replay_buffer"):
        algo.train()  # fills the buffer past learning_starts (and runs the first updates)
        cfg = algo.config
        batch = algo.local_replay_buffer.sample(cfg.total_train_batch_size, n_step=1, gamma=cfg.gamma)
    else:
        batch = algo.env_runner_group.sample(algo.config.train_batch_size)
    timestep = 10_000
    start = time.perf_counter()
    metrics = algo.learner.run_update(batch, timestep=timestep)  # warm-up (CUDA kernels, compilation)
    _sync()
    first = time.perf_counter() - start
    algo.learner.run_update(batch, timestep=timestep)
    steps = int(metrics.get("num_minibatch_updates", 1)) if isinstance(metrics, dict) else 1
    _sync()
    start = time.perf_counter()
    for _ in range(repeats):
        algo.learner.run_update(batch, timestep=timestep)
    _sync()
    return repeats * steps / (time.perf_counter() - start), steps, first


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--variants", nargs="*", default=["fp32", "bf16", "compile"], choices=list(VARIANTS),
                        help="what runs on the GPU")
    parser.add_argument("--cpu-variants", nargs="*", default=["fp32"], choices=list(VARIANTS),
                        help="what runs on the CPU (the first is the baseline of the summary)")
    args = parser.parse_args()
    runs = [("cpu", v) for v in args.cpu_variants]
    if torch.cuda.is_available():
        runs += [("cuda", v) for v in args.variants]
    rates: dict[str, dict[str, float]] = {}
    for case in args.cases:
        for device, variant in runs:
            config = VARIANTS[variant](CASES[case]())
            if device == "cuda":
                config = config.learners(num_gpus_per_learner=1)
            algo = config.build()
            try:
                rate, steps, first = _update_rate(algo, args.repeats)
                learner_device = str(algo.learner.device)
            finally:
                algo.stop()
            rates.setdefault(case, {})[f"{device}_{variant}"] = rate
            print(json.dumps({"case": case, "device": learner_device, "variant": variant,
                              "updates_per_s": round(rate, 1), "first_update_s": round(first, 2),
                              "gradient_steps_per_update_call": steps, "torch_threads": torch.get_num_threads()}),
                  flush=True)
    baseline = f"cpu_{args.cpu_variants[0]}"
    summary: dict[str, Any] = {"summary": f"updates_per_s_over_{baseline}"}
    for case, by_run in rates.items():
        summary[case] = {run: round(rate / by_run[baseline], 2) for run, rate in by_run.items() if run != baseline}
    if torch.cuda.is_available():
        summary["gpu"] = torch.cuda.get_device_name(0)
    else:
        summary["note"] = "torch sees no CUDA device here: CPU figures only"
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

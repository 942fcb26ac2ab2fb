"""Learner updates per second of the replay-based algorithms, and where a training step's time goes.

Usage: python benchmarks/learner_updates.py [ALGO[:ENV] ...]   (default: DQN SAC TD3 DDPG)
       add CONFIG_JSON as the last argument to override settings for all of them,
       e.g. '{"q_model_config": {"fcnet_hiddens": [64, 64]}}'.

For each algorithm (defaults; torch threads as rlx.core.learner.threads picks) it fills the replay buffer, then times:
`update_s` one learner update on a replayed train batch, `replay_sample_s` drawing that
batch, `env_sample_s` one EnvRunner.sample() call (rollout_fragment_length steps per
sub-env), and `training_step_s` a whole training step (sample, add, replay, update,
priorities). One JSON line per algorithm.

`matmul_floor_s` is the time of the update's matrix products alone (their shapes recorded with
torch.profiler during one update, then replayed as bare products on preallocated inputs): the
arithmetic no implementation of the same networks and batch can skip. `matmul_share` is
floor / update; the rest is elementwise ops, autograd, the optimizers and per-op dispatch.
"""
from __future__ import annotations

import json
import sys
import time

DEFAULT_ENVS = {"DQN": "CartPole-v1", "SAC": "Pendulum-v1", "TD3": "Pendulum-v1", "DDPG": "Pendulum-v1"}


def _timeit(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


_MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}


def matmul_floor(update, repeats: int, threads: int | None) -> float:
    """Seconds per call of the matrix products `update()` runs, replayed bare (see module doc)
    with `threads` torch threads (the update's own count; None: as set)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        update()
    products = []
    for event in prof.events():
        if event.name in _MATMUL_OPS:
            shapes = [s for s in event.input_shapes if s]
            a, b = shapes[-2], shapes[-1]  # (addmm/baddbmm take the bias first)
            products.append((torch.randn(a), torch.randn(b)))

    def replay() -> None:
        for a, b in products:
            torch.matmul(a, b)

    previous = torch.get_num_threads()
    torch.set_num_threads(threads or previous)
    try:
        return _timeit(replay, repeats)
    finally:
        torch.set_num_threads(previous)


def measure(algo_name: str, env: str, overrides: dict, repeats: int = 200) -> dict:
    """Seconds per update / replay sample / env sample / training step for one algorithm."""
    from rlx.algorithms.registry import get_algorithm_config

    config = get_algorithm_config(algo_name).environment(env).debugging(seed=0)
    config.update_from_dict({"num_steps_sampled_before_learning_starts": 500,
                             "min_sample_timesteps_per_iteration": 1000, **overrides})
    algo = config.build()
    algo.train()  # fills the buffer past learning_starts
    cfg = algo.config
    n = cfg.n_step_range[0]
    batch = algo.local_replay_buffer.sample(cfg.total_train_batch_size, n_step=n, gamma=cfg.gamma)
    timestep = algo._counters["num_env_steps_sampled_lifetime"]
    out = {
        "algo": algo_name,
        "env": env,
        "train_batch_size": cfg.total_train_batch_size,
        "update_s": _timeit(lambda: algo.learner.run_update(batch, timestep), repeats),
        "replay_sample_s": _timeit(lambda: algo.local_replay_buffer.sample(
            cfg.total_train_batch_size, n_step=n, gamma=cfg.gamma), repeats),
        "env_sample_s": _timeit(lambda: algo.env_runner.sample(), repeats),
        "env_steps_per_sample": cfg.get_rollout_fragment_length() * cfg.num_envs_per_env_runner,
        "training_step_s": _timeit(algo.training_step, repeats),
        "matmul_floor_s": matmul_floor(lambda: algo.learner.run_update(batch, timestep), repeats,
                                       algo.learner._update_threads.chosen),
        "update_threads": algo.learner._update_threads.chosen,
    }
    out["matmul_share"] = round(out["matmul_floor_s"] / out["update_s"], 3)
    out["updates_per_s"] = round(1.0 / out["update_s"], 1)
    for key in ("update_s", "replay_sample_s", "env_sample_s", "training_step_s", "matmul_floor_s"):
        out[key] = round(out[key], 6)
    algo.stop()
    return out


def main() -> None:
    args = sys.argv[1:]
    overrides = {}
    if args and args[-1].startswith("{"):
        overrides = json.loads(args.pop())
    for spec in args or list(DEFAULT_ENVS):
        name, _, env = spec.partition(":")
        print(json.dumps(measure(name, env or DEFAULT_ENVS.get(name.upper(), "CartPole-v1"), overrides)))


if __name__ == "__main__":
    main()

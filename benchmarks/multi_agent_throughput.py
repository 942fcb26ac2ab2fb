"""Multi-agent sampling and training throughput next to single-agent CartPole and the plain loops.

Multi-agent CartPole (`MultiAgentCartPole`, 4 agents, 2 policies mapped by agent_id % 2)
against single-agent CartPole-v1, both through PPO's local EnvRunner with the same
num_envs_per_env_runner and the same number of env steps per sample() call, and against
plain Python loops with random actions (the floor any sampler pays):

- `raw_1`: one CartPole-v1 env per env step (the anchor of single-agent sampling);
- `raw_4`: 4 CartPole-v1 envs stepped per env step, each reset on its own (4 agent steps
  per env step: the per-transition floor of multi-agent sampling);
- `raw_ma_env`: the MultiAgentCartPole class itself stepped with an action dict of the
  agents still acting (its env-step semantics: an agent whose pole falls leaves, the episode
  ends when all have, so fewer than 4 agent steps per env step).

Then `algo.train()` (PPO, same train_batch_size) multi-agent vs single-agent: env steps/s
and agent steps/s of whole iterations.

Timed rounds are interleaved (every setup once per round) and the median is reported; the
ratios are measured in this run, which is what to read (absolute figures vary by machine).
Prints one JSON object. `--profile` also prints a cProfile of multi-agent sampling
(top entries by tottime) to stderr.

    python benchmarks/multi_agent_throughput.py [--num-envs 8] [--sample-steps 4000] [--rounds 9]
        [--train-batch-size 4000] [--train-iters 5] [--profile]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np

NUM_AGENTS = 4
N_ACTS = 100_000


def _mapping_fn(agent_id: Any, episode: Any = None, worker: Any = None, **kwargs: Any) -> str:
    return f"p{int(agent_id) % 2}"


def _acts() -> list[int]:
    return np.random.default_rng(0).integers(0, 2, size=N_ACTS).tolist()


# ---------------------------------------------------------------------------- raw loops


def make_raw_single(n_envs: int) -> Callable[[int], tuple[int, int]]:
    """A loop stepping `n_envs` CartPole-v1 envs round-robin, one env step each (random actions)."""
    envs = [gym.make("CartPole-v1") for _ in range(n_envs)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    acts = _acts()
    k = [0]

    def run(env_steps: int) -> tuple[int, int]:
        j = k[0]
        done_steps = 0
        while done_steps < env_steps:
            for e in envs:
                _, _, term, trunc, _ = e.step(acts[j % N_ACTS])
                if term or trunc:
                    e.reset()
                j += 1
            done_steps += n_envs
        k[0] = j
        return done_steps, done_steps

    return run


def make_raw_four(n_envs: int) -> Callable[[int], tuple[int, int]]:
    """`n_envs` groups of NUM_AGENTS CartPole-v1 envs: an env step steps every env of a group."""
    groups = [[gym.make("CartPole-v1") for _ in range(NUM_AGENTS)] for _ in range(n_envs)]
    for g, group in enumerate(groups):
        for i, e in enumerate(group):
            e.reset(seed=g * NUM_AGENTS + i)
    acts = _acts()
    k = [0]

    def run(env_steps: int) -> tuple[int, int]:
        j = k[0]
        done_steps = 0
        while done_steps < env_steps:
            for group in groups:
                for e in group:
                    _, _, term, trunc, _ = e.step(acts[j % N_ACTS])
                    if term or trunc:
                        e.reset()
                    j += 1
            done_steps += n_envs
        k[0] = j
        return done_steps, done_steps * NUM_AGENTS

    return run


def make_raw_ma_env(n_envs: int) -> Callable[[int], tuple[int, int]]:
    """`n_envs` MultiAgentCartPole envs stepped with an action dict for the agents still acting."""
    from rlx.env.multi_agent_env import ALL_AGENTS
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    envs = [MultiAgentCartPole({"num_agents": NUM_AGENTS}) for _ in range(n_envs)]
    acting = [list(e.reset(seed=i * NUM_AGENTS)[0]) for i, e in enumerate(envs)]
    acts = _acts()
    k = [0]

    def run(env_steps: int) -> tuple[int, int]:
        j = k[0]
        done_steps = agent_steps = 0
        while done_steps < env_steps:
            for b, e in enumerate(envs):
                action_dict = {}
                for aid in acting[b]:
                    action_dict[aid] = acts[j % N_ACTS]
                    j += 1
                agent_steps += len(action_dict)
                obs, _, terms, truncs, _ = e.step(action_dict)
                if terms[ALL_AGENTS] or truncs[ALL_AGENTS]:
                    acting[b] = list(e.reset()[0])
                else:
                    acting[b] = [a for a in obs if not (terms.get(a) or truncs.get(a))]
            done_steps += n_envs
        k[0] = j
        return done_steps, agent_steps

    return run


# ---------------------------------------------------------------------------- rlx


def ppo_config(multi_agent: bool, num_envs: int, train_batch_size: int, seed: int) -> Any:
    """PPO on MultiAgentCartPole (4 agents, 2 policies) or on CartPole-v1, local runner only."""
    from rlx.algorithms.ppo import PPOConfig
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    config = PPOConfig()
    if multi_agent:
        config = config.environment(MultiAgentCartPole, env_config={"num_agents": NUM_AGENTS}).multi_agent(
            policies={"p0", "p1"}, policy_mapping_fn=_mapping_fn)
    else:
        config = config.environment("CartPole-v1")
    return (config.env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs)
            .training(train_batch_size=train_batch_size).debugging(seed=seed))


def make_runner_sampler(algo: Any, multi_agent: bool) -> Callable[[int], tuple[int, int]]:
    """sample(num_timesteps=n) on the algorithm's local EnvRunner, then get_metrics() as train() does."""
    runner = algo.env_runner

    def run(env_steps: int) -> tuple[int, int]:
        batch = runner.sample(num_timesteps=env_steps)
        runner.get_metrics()
        if multi_agent:
            return batch.env_steps(), batch.agent_steps()
        n = int(batch["rewards"].size)
        return n, n

    return run


def timed(fn: Callable[[int], tuple[int, int]], steps: int) -> tuple[float, float]:
    """(env steps/s, agent steps/s) of one call."""
    start = time.perf_counter()
    env_steps, agent_steps = fn(steps)
    elapsed = time.perf_counter() - start
    return env_steps / elapsed, agent_steps / elapsed


def sampling(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """Interleaved rounds of every sampler; medians of env and agent steps/s."""
    ma_algo = ppo_config(True, args.num_envs, args.train_batch_size, args.seed).build()
    sa_algo = ppo_config(False, args.num_envs, args.train_batch_size, args.seed).build()
    samplers = {
        "raw_1": make_raw_single(args.num_envs),
        "raw_4": make_raw_four(args.num_envs),
        "raw_ma_env": make_raw_ma_env(args.num_envs),
        "sa": make_runner_sampler(sa_algo, False),
        "ma": make_runner_sampler(ma_algo, True),
    }
    for fn in samplers.values():  # warmup
        for _ in range(args.warmup):
            fn(args.sample_steps)
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in samplers}
    for _ in range(args.rounds):
        for name, fn in samplers.items():
            rates[name].append(timed(fn, args.sample_steps))
    med = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
           for name, rs in rates.items()}
    sa_algo.stop()
    ma_env, ma_agent = med["ma"]
    sa_env = med["sa"][0]
    raw1 = med["raw_1"][0]
    raw4_env, raw4_agent = med["raw_4"]
    rawma_env, rawma_agent = med["raw_ma_env"]
    out = {
        "ma_env_steps_per_s": round(ma_env),
        "ma_agent_steps_per_s": round(ma_agent),
        "ma_agent_steps_per_env_step": round(ma_agent / ma_env, 3),
        "sa_env_steps_per_s": round(sa_env),
        "raw_1_env_steps_per_s": round(raw1),
        "raw_4_env_steps_per_s": round(raw4_env),
        "raw_4_agent_steps_per_s": round(raw4_agent),
        "raw_ma_env_env_steps_per_s": round(rawma_env),
        "raw_ma_env_agent_steps_per_s": round(rawma_agent),
        "ma_vs_sa_env_steps": round(ma_env / sa_env, 3),
        "ma_vs_sa_agent_steps": round(ma_agent / sa_env, 3),
        "sa_vs_raw_1": round(sa_env / raw1, 3),
        "ma_vs_raw_ma_env_env_steps": round(ma_env / rawma_env, 3),
        "ma_vs_raw_ma_env_agent_steps": round(ma_agent / rawma_agent, 3),
        "ma_vs_raw_4_agent_steps": round(ma_agent / raw4_agent, 3),
        "raw_ma_env_vs_raw_4_agent_steps": round(rawma_agent / raw4_agent, 3),
    }
    return out, ma_algo


def training(args: argparse.Namespace) -> dict[str, Any]:
    """Whole train() iterations, multi-agent and single-agent interleaved; medians."""
    algos = {name: ppo_config(name == "ma", args.num_envs, args.train_batch_size, args.seed).build()
             for name in ("sa", "ma")}
    for algo in algos.values():
        for _ in range(args.train_warmup):
            algo.train()
    per: dict[str, list[tuple[float, float, float]]] = {name: [] for name in algos}
    for _ in range(args.train_iters):
        for name, algo in algos.items():
            before = algo._counters.get("num_agent_steps_sampled_lifetime", 0)
            start = time.perf_counter()
            result = algo.train()
            elapsed = time.perf_counter() - start
            env_steps = result["num_env_steps_sampled_this_iter"]
            agent_steps = (result["num_agent_steps_sampled_lifetime"] - before) if name == "ma" else env_steps
            per[name].append((elapsed, env_steps / elapsed, agent_steps / elapsed))
    for algo in algos.values():
        algo.stop()
    med = {name: tuple(statistics.median(r[i] for r in rs) for i in range(3)) for name, rs in per.items()}
    (ma_s, ma_env, ma_agent), (sa_s, sa_env, _) = med["ma"], med["sa"]
    return {
        "train_ma_s_per_iter": round(ma_s, 3),
        "train_sa_s_per_iter": round(sa_s, 3),
        "train_ma_env_steps_per_s": round(ma_env),
        "train_ma_agent_steps_per_s": round(ma_agent),
        "train_sa_env_steps_per_s": round(sa_env),
        "train_ma_vs_sa_env_steps": round(ma_env / sa_env, 3),
        "train_ma_vs_sa_agent_steps": round(ma_agent / sa_env, 3),
    }


def profile_ma_sampling(algo: Any, args: argparse.Namespace) -> None:
    """cProfile of multi-agent sampling (top entries by tottime) to stderr."""
    import cProfile
    import pstats

    runner = algo.env_runner
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.rounds):
        runner.sample(num_timesteps=args.sample_steps)
        runner.get_metrics()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(args.profile_top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=8, help="num_envs_per_env_runner (and raw-loop copies)")
    parser.add_argument("--sample-steps", type=int, default=4000, help="env steps per timed sample() call")
    parser.add_argument("--rounds", type=int, default=9, help="timed sampling rounds (median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed sample() calls per sampler")
    parser.add_argument("--train-batch-size", type=int, default=4000)
    parser.add_argument("--train-iters", type=int, default=5, help="timed train() iterations each (median)")
    parser.add_argument("--train-warmup", type=int, default=1, help="untimed train() iterations each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile multi-agent sampling to stderr")
    parser.add_argument("--profile-top", type=int, default=15)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "multi_agent_throughput", "env": "MultiAgentCartPole vs CartPole-v1",
        "num_agents": NUM_AGENTS, "num_policies": 2, "num_envs_per_env_runner": args.num_envs,
        "sample_steps": args.sample_steps, "rounds": args.rounds, "train_batch_size": args.train_batch_size,
    }
    sample_figures, ma_algo = sampling(args)
    result.update(sample_figures)
    if args.profile:
        profile_ma_sampling(ma_algo, args)
    ma_algo.stop()
    if not args.skip_train:
        result["train_iters"] = args.train_iters
        result.update(training(args))
    result["wall_s"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

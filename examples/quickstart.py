"""Quickstart: train PPO on CartPole-v1 until it is solved, save it, restore it, evaluate it.

    python examples/quickstart.py [--target 450] [--max-steps 300000] [--episodes 10] [--seed 0]

"Solved" means a mean return of at least 450 over the last 100 training episodes. The
checkpoint goes to ./checkpoints/ppo_cartpole (or --checkpoint-dir). The script exits
non-zero if training does not reach the target or the restored policy evaluates below it.
"""
from __future__ import annotations

import argparse
import sys
import time

START = time.time()

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from rlx.algorithms.algorithm import Algorithm  # noqa: E402
from rlx.algorithms.ppo import PPOConfig  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=float, default=450.0, help="mean return that counts as solved")
    parser.add_argument("--max-steps", type=int, default=300_000, help="env-step budget for training")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-dir", default="checkpoints/ppo_cartpole")
    return parser.parse_args()


def train(args: argparse.Namespace) -> tuple[Algorithm, bool]:
    """Train until the target or the budget; print one line per iteration."""
    algo = PPOConfig().environment("CartPole-v1").debugging(seed=args.seed).build()
    print(f"Training PPO on CartPole-v1 (target: mean return {args.target:g} over the last 100 episodes)")
    print(f"{'iter':>4}  {'env steps':>9}  {'return mean':>11}  {'return max':>10}  {'episodes':>8}  {'time':>6}")
    solved = False
    while True:
        result = algo.train()
        runners = result["env_runners"]
        ret = runners["episode_return_mean"]
        print(
            f"{result['training_iteration']:>4}  {result['num_env_steps_sampled_lifetime']:>9}  "
            f"{ret:>11.1f}  {runners['episode_return_max']:>10.1f}  {runners['num_episodes_lifetime']:>8}  "
            f"{time.time() - START:>5.1f}s",
            flush=True,
        )
        if ret >= args.target:
            solved = True
            break
        if result["num_env_steps_sampled_lifetime"] >= args.max_steps:
            break
    return algo, solved


def evaluate(algo: Algorithm, episodes: int, seed: int) -> list[float]:
    """Run greedy (explore=False) episodes in a fresh env and return their returns."""
    env = gym.make("CartPole-v1")
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed * 100 + i)
        total, done = 0.0, False
        while not done:
            action = algo.compute_single_action(obs, explore=False)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        print(f"  Episode #{i + 1}: reward: {total:.0f}")
    env.close()
    return returns


def main() -> int:
    args = parse_args()
    algo, solved = train(args)
    path = algo.save(args.checkpoint_dir)
    algo.stop()
    print(f"\nCheckpoint saved in {path}")
    if not solved:
        print(f"Training stopped at the step budget ({args.max_steps}) before reaching {args.target:g}.")
        return 1
    restored = Algorithm.from_checkpoint(path)
    print(f"Restored {type(restored).__name__} from the checkpoint; evaluating {args.episodes} episodes:")
    returns = evaluate(restored, args.episodes, args.seed)
    restored.stop()
    mean = float(np.mean(returns))
    print(f"\nEvaluation: mean return {mean:.1f} over {len(returns)} episodes (total time {time.time() - START:.1f}s)")
    return 0 if mean >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())

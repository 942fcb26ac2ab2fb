"""PPO on an Atari game (default ALE/Pong-v5) with DeepMind preprocessing and the default CNN.

Prints JSON lines: first the raw ALE loop's frames/s (random actions through the same
DeepMind wrappers, no policy) as the anchor, then one line per training iteration (env steps,
frames = 4 x steps, wall time, mean episode return over the last 100 episodes), then a summary
with rlx's frames/s and its ratio to the anchor. Not a CI job: Pong needs millions of frames
to win; on a laptop CPU this shows the throughput and the first part of the return curve.

    python benchmarks/atari_ppo.py [--env ALE/Pong-v5] [--minutes 10] [--num-env-runners 0]
        [--num-envs-per-env-runner 8] [--train-batch-size 1024] [--minibatch-size 256]
        [--num-gpus-per-learner 0]

Needs `pip install -c constraints.txt -e '.[atari]'` in the rlx checkout.
"""
from __future__ import annotations

import argparse
import json
import math
import time

FRAMESKIP = 4  # ALE/...-v5 envs repeat each action 4 frames


def raw_loop_frames_per_s(env_id: str, seconds: float = 5.0) -> float:
    """Frames/s of one DeepMind-wrapped env stepped with random actions (the sampling floor)."""
    import ale_py
    import gymnasium as gym

    from rlx.env.wrappers.atari_wrappers import wrap_deepmind

    gym.register_envs(ale_py)
    env = wrap_deepmind(gym.make(env_id))
    env.reset(seed=0)
    env.action_space.seed(0)
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    env.close()
    return steps * FRAMESKIP / (time.perf_counter() - start)


def main() -> None:
    """Run the benchmark and print its JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--num-env-runners", type=int, default=0)
    parser.add_argument("--num-envs-per-env-runner", type=int, default=8)
    parser.add_argument("--train-batch-size", type=int, default=1024)
    parser.add_argument("--minibatch-size", type=int, default=256)
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    args = parser.parse_args()

    from rlx.algorithms.ppo import PPOConfig

    anchor = raw_loop_frames_per_s(args.env)
    print(json.dumps({"anchor": "raw DeepMind-wrapped env loop, random actions", "env": args.env,
                      "frames_per_s": round(anchor, 1)}), flush=True)
    # RLlib's tuned Atari PPO settings (vf_share_layers, clipped value loss, entropy bonus),
    # scaled down to a CPU: 8 sub-envs, 128-step fragments.
    config = (
        PPOConfig()
        .environment(args.env, clip_rewards=True)
        .env_runners(num_env_runners=args.num_env_runners, num_envs_per_env_runner=args.num_envs_per_env_runner,
                     rollout_fragment_length=128)
        .learners(num_gpus_per_learner=args.num_gpus_per_learner)
        .training(lr=2.5e-4, train_batch_size=args.train_batch_size, minibatch_size=args.minibatch_size,
                  num_epochs=4, lambda_=0.95,
                  clip_param=0.1, vf_clip_param=10.0, entropy_coeff=0.01, vf_loss_coeff=0.5, kl_coeff=0.0,
                  grad_clip=0.5)
        .rl_module(model_config={"vf_share_layers": True, "post_fcnet_hiddens": [512]})
        .debugging(seed=0)
    )
    algo = config.build()
    start = time.perf_counter()
    steps = 0
    returns: list[float] = []
    while time.perf_counter() - start < args.minutes * 60:
        result = algo.train()
        steps = result["num_env_steps_sampled_lifetime"]
        ret = result["env_runners"].get("episode_return_mean")
        ret = None if ret is None or math.isnan(ret) else round(float(ret), 2)  # no episode finished yet
        returns.append(ret)
        print(json.dumps({"iteration": result["training_iteration"], "env_steps": steps,
                          "frames": steps * FRAMESKIP, "seconds": round(time.perf_counter() - start, 1),
                          "episode_return_mean": ret}), flush=True)
    seconds = time.perf_counter() - start
    algo.stop()
    rate = steps * FRAMESKIP / seconds
    window = [r for r in returns if r is not None]
    print(json.dumps({"summary": True, "env": args.env, "frames": steps * FRAMESKIP, "seconds": round(seconds, 1),
                      "frames_per_s": round(rate, 1), "ratio_to_raw_loop": round(rate / anchor, 3),
                      "first_return": window[0] if window else None,
                      "last_return": window[-1] if window else None,
                      "best_return": max(window) if window else None}), flush=True)


if __name__ == "__main__":
    main()

"""Write the input of the BC and MARWIL tuned examples: a trained PPO's CartPole-v1 experiences.

    python tuned_examples/bc/generate_cartpole_expert_data.py [OUT_DIR] [STEPS]

Trains PPO with rlx's defaults until its mean return reaches 450 (about 5 s on a 2-core
machine), then samples STEPS (default 20000) env steps with those weights through a copy of
its config with `offline_data(output=OUT_DIR)` (default /tmp/rlx-cartpole-expert): JSON-lines
files, one sampled batch (4000 steps) per line, as any Algorithm writes them with `output`.
"""
from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_DIR = "/tmp/rlx-cartpole-expert"
EXPERT_RETURN = 450.0


def record_expert_data(path: str | Path, steps: int = 20_000, seed: int = 0) -> float:
    """Train PPO on CartPole-v1 to a mean return of 450, write `steps` env steps of it into `path`
    and return the expert's mean return (the last 100 training episodes)."""
    from rlx.algorithms.ppo import PPOConfig

    expert = PPOConfig().environment("CartPole-v1").debugging(seed=seed).build()
    try:
        ret = float("nan")
        for _ in range(100):
            ret = expert.train()["env_runners"]["episode_return_mean"]
            if ret >= EXPERT_RETURN:
                break
        recorder = expert.config.copy(copy_frozen=False).offline_data(output=str(path)).build()
        try:
            recorder.set_weights(expert.get_weights())
            written = 0
            while written < steps:  # one line per train batch, as training with `output` writes them
                batch = recorder.env_runner_group.sample(num_timesteps=min(steps - written, 4000))
                written += batch["rewards"].size
        finally:
            recorder.stop()
    finally:
        expert.stop()
    return ret


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    ret = record_expert_data(out, steps)
    print(f"Wrote {steps} env steps of a PPO expert (mean return {ret:.1f}) to {out}")


if __name__ == "__main__":
    main()

"""Write the input of the CQL tuned example: a trained SAC's Pendulum-v1 experiences.

    python tuned_examples/cql/generate_pendulum_expert_data.py [OUT_DIR] [STEPS]

Trains SAC with the settings of tuned_examples/sac/pendulum-sac.yaml until its mean return
(last 5 episodes) reaches -300 (about 15 s on a 2-core machine), then samples STEPS (default
10000) env steps with those weights, exploring as SAC does, through a copy of its config with
`offline_data(output=OUT_DIR)` (default /tmp/rlx-pendulum-expert): JSON-lines files whose
Box actions are normalized to [-1, 1] (read them with actions_in_input_normalized=True).
"""
from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_DIR = "/tmp/rlx-pendulum-expert"
EXPERT_RETURN = -300.0


def expert_config(seed: int = 0):
    """SACConfig of tuned_examples/sac/pendulum-sac.yaml."""
    from rlx.algorithms.sac import SACConfig

    return (SACConfig().environment("Pendulum-v1")
            .training(q_model_config={"fcnet_hiddens": [64, 64]}, policy_model_config={"fcnet_hiddens": [64, 64]})
            .reporting(metrics_num_episodes_for_smoothing=5, min_sample_timesteps_per_iteration=200)
            .debugging(seed=seed))


def record_expert_data(path: str | Path, steps: int = 10_000, seed: int = 0, target: float = EXPERT_RETURN,
                       max_env_steps: int = 20_000) -> float:
    """Train SAC on Pendulum-v1 to a mean return of `target` (at most `max_env_steps`), write
    `steps` env steps of it into `path` and return the expert's mean return (its last 5 episodes)."""
    expert = expert_config(seed).build()
    try:
        ret = float("nan")
        while True:
            result = expert.train()
            ret = result["env_runners"]["episode_return_mean"]
            if ret >= target or result["num_env_steps_sampled_lifetime"] >= max_env_steps:
                break
        recorder = expert.config.copy(copy_frozen=False).offline_data(output=str(path)).build()
        try:
            recorder.set_weights(expert.get_weights())
            written = 0
            while written < steps:
                batch = recorder.env_runner_group.sample(num_timesteps=min(steps - written, 2000))
                written += batch["rewards"].size
        finally:
            recorder.stop()
    finally:
        expert.stop()
    return ret


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    ret = record_expert_data(out, steps)
    print(f"Wrote {steps} env steps of a SAC expert (mean return {ret:.1f}) to {out}")


if __name__ == "__main__":
    main()

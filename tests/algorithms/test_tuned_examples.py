"""Every tuned example learns, at a CI-sized bar below its full pass criterion.

Each test reads tuned_examples/<algo>/<env>.yaml (the file `benchmarks/tuned_example.py`
runs to the full criterion), applies its config with a fixed seed, and trains until a
smaller return threshold within a smaller env-step budget, so the suite's time stays
bounded. The YAML's own stop values are checked to be the issue's pass criteria.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from rlx.algorithms.registry import get_algorithm_config

ROOT = Path(__file__).resolve().parents[2]
RETURN_KEY = "env_runners/episode_return_mean"

# ppo/cartpole-ppo.yaml is not here: tests/cli/test_cli_train.py::
# test_ppo_tuned_example_reaches_its_return_through_the_cli trains it to its full criterion
# (450 within 100k env steps, seed 0) through `rlx train file`, the same run this test would make.
CASES = [
    # tuned example, (full return criterion, full env-step budget), CI threshold, CI budget
    ("dqn/cartpole-dqn.yaml", (450.0, 200_000), 150.0, 25_000),
    ("sac/pendulum-sac.yaml", (-250.0, 20_000), -400.0, 6_000),
    ("td3/pendulum-td3.yaml", (-250.0, 30_000), -400.0, 12_000),
    ("ddpg/pendulum-ddpg.yaml", (-250.0, 30_000), -400.0, 12_000),
    ("pg/cartpole-pg.yaml", (150.0, 100_000), 150.0, 100_000),
    ("a2c/cartpole-a2c.yaml", (450.0, 500_000), 300.0, 300_000),
    ("apex_dqn/cartpole-apex-dqn.yaml", (150.0, 100_000), 150.0, 60_000),
    ("apex_ddpg/pendulum-apex-ddpg.yaml", (-250.0, 50_000), -400.0, 50_000),
    ("ddppo/cartpole-ddppo.yaml", (450.0, 200_000), 150.0, 40_000),
    ("es/cartpole-es.yaml", (450.0, 200_000), 150.0, 40_000),
    ("ars/cartpole-ars.yaml", (450.0, 200_000), 150.0, 40_000),
]


# Settings CI changes in a tuned example: with remote runners, APEX's progress per sampled step
# depends on how fast this machine's learner thread keeps up with them (APEX-DDPG: 17k-42k env
# steps to -400 measured on 2 busy cores; APEX-DQN stalled at 137 by 60k when the suite ran beside
# other learning tests), so CI runs the same configs with the driver's runner alone, where sampling
# and updates alternate deterministically; tests/algorithms/test_apex.py covers the asynchronous path.
CI_OVERRIDES = {"apex_ddpg/pendulum-apex-ddpg.yaml": {"num_env_runners": 0},
                "apex_dqn/cartpole-apex-dqn.yaml": {"num_env_runners": 0}}


def load_example(relpath: str) -> dict:
    """The single experiment of a tuned-example file."""
    data = yaml.safe_load((ROOT / "tuned_examples" / relpath).read_text())
    assert isinstance(data, dict) and len(data) == 1, f"{relpath} should hold one experiment"
    return next(iter(data.values()))


@pytest.mark.slow
@pytest.mark.parametrize("relpath, criterion, threshold, budget", CASES, ids=[c[0].split("/")[0] for c in CASES])
def test_tuned_example_learns(relpath, criterion, threshold, budget):
    spec = load_example(relpath)
    assert spec["stop"] == {RETURN_KEY: criterion[0], "num_env_steps_sampled_lifetime": criterion[1]}
    config = get_algorithm_config(spec["run"]).update_from_dict(
        {**(spec.get("config") or {}), **CI_OVERRIDES.get(relpath, {})})
    algo = config.environment(spec["env"]).debugging(seed=0).build()
    progress: list[tuple[int, float]] = []
    steps, reached = 0, False
    while steps < budget:
        result = algo.train()
        steps = result["num_env_steps_sampled_lifetime"]
        ret = result["env_runners"]["episode_return_mean"]
        progress.append((steps, round(ret, 1)))
        if not math.isnan(ret) and ret >= threshold:
            reached = True
            break
    algo.stop()
    assert reached, (
        f"{relpath}: episode_return_mean did not reach {threshold} within {budget} env steps; "
        f"progress (steps, return): {progress}"
    )

"""IMPALA's CartPole tuned example keeps its return when trained far past its stop criterion.

With Adam (the example's optimizer before 2026-11-29), the return fell from 500 to 9-220 after
a stretch at the 500-step cap: the gradients there are near zero, Adam's second-moment
estimates shrink with them, and the first failed episode's gradient then moves every weight by
up to ~3x the learning rate at once (the 100-episode mean went 495 -> 143 within 3 iterations,
also with a synchronous runner and with a decaying learning rate, and in APPO's example). The
example now uses the IMPALA paper's RMSProp with epsilon 0.1, whose steps stay proportional to
the gradient when gradients are small.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlx.algorithms.registry import get_algorithm_config

ROOT = Path(__file__).resolve().parents[2]
RETURN = "episode_return_mean"
#: Iterations a dip below 300 has to get back to the target return. The return is a mean over
#: 100 episodes, so even a policy that is fixed at once needs several iterations to show it;
#: a one-core CI simulation saw a dip to 152 that took 12 iterations back to 450.
RECOVERY = 20


def _tuned_example(path: str):
    [spec] = yaml.safe_load((ROOT / path).read_text()).values()
    config = get_algorithm_config(spec["run"]).environment(spec["env"]).debugging(seed=0)
    config.update_from_dict(dict(spec["config"]))
    return config, spec["stop"]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["tuned_examples/impala/cartpole-impala.yaml"])
def test_trained_five_times_past_its_stop_the_return_stays_up(path):
    config, stop = _tuned_example(path)
    target = stop[f"env_runners/{RETURN}"]
    budget = stop["num_env_steps_sampled_lifetime"]
    algo = config.build()
    try:
        returns: list[float] = []
        reached_at = None
        steps = 0
        # Train until the stop criterion, then on to 5x the env steps it took.
        while reached_at is None and steps < budget or reached_at is not None and steps < 5 * reached_at:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            returns.append(result["env_runners"].get(RETURN, 0.0))
            if reached_at is None and returns[-1] >= target:
                reached_at = steps
                first = len(returns)
        assert reached_at is not None, f"never reached {target} in {budget} env steps: {returns}"
        after = returns[first:]
        # No collapse: a fall below 300 (seen on loaded CI machines, to 132-152 for 3-6 iterations,
        # with asynchronous runners' policy lag) must come back to the target within
        # RECOVERY iterations; the Adam collapse this guards against stayed at 9-220 for good.
        for i, ret in enumerate(after):
            if ret < 300:
                recovered = any(r >= target for r in after[i:i + RECOVERY])
                assert recovered, f"the return fell to {ret:.1f} after reaching {target} and stayed down: {after}"
        assert sum(after[-10:]) / 10 >= 400, after
    finally:
        algo.stop()

"""How many torch intra-op threads the driver's Learner updates with.

rlx samples and acts with one torch thread (`torch_num_threads=1`): small batches of
observations run fastest that way. A Learner whose gradient steps are large (parameters times
rows per step, e.g. SAC's [256, 256] networks on batches of 256) computes faster with a second
thread when a second core is free; measured on 2 cores, SAC's update took 12.6 ms with one
thread and 8.8 ms with two, while PPO's default [64, 64] networks on minibatches of 512 gained
nothing. So the Learner switches to 2 threads for the update and back afterwards when:

- the user set neither `torch_num_threads` nor `num_cpus_per_learner` (set, the latter is the
  update's thread count, as it is for learner processes);
- no remote EnvRunners run on the other cores, the Learner is on the CPU and in the driver;
- this process may use at least 2 cores and the update is at least AUTO_WORK_THRESHOLD
  parameter-rows per gradient step.
"""
from __future__ import annotations

import os

from rlx.core.config_view import ResolvedConfig

__all__ = ["AUTO_WORK_THRESHOLD", "update_threads"]

#: Trainable parameters x rows per gradient step from which a second thread pays off (SAC's
#: default networks on batches of 256: about 50M; PPO's [64, 64] on 512 rows: about 5M).
AUTO_WORK_THRESHOLD = 20_000_000


def update_threads(config: ResolvedConfig, num_params: int, device_type: str = "cpu") -> int | None:
    """The torch thread count for the Learner's updates, or None to leave torch's setting alone."""
    if device_type != "cpu" or int(getattr(config, "num_learners", 0) or 0) > 0:
        return None
    user_set = getattr(config, "is_user_set", lambda key: False)
    if user_set("num_cpus_per_learner"):
        return max(1, int(config.num_cpus_per_learner))
    if user_set("torch_num_threads") or config.torch_num_threads is None:
        return None
    if int(config.num_env_runners) > 0 or _available_cores() < 2:
        return None
    rows = getattr(config, "minibatch_size", None) or config.train_batch_size
    return 2 if num_params * int(rows) >= AUTO_WORK_THRESHOLD else None


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1

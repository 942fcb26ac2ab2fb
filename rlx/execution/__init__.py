"""RLlib's `ray.rllib.execution` helpers at rlx's path: `rollout_ops.synchronous_parallel_sample`."""

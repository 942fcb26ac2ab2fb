"""Sampling with an EnvRunnerGroup's local runner (the group has no remote runners): one
fragment, or fragments until enough steps, each bounded by sample_timeout_s as a remote
runner's request is (rlx.env.runner_group.stuck_runners.LocalSampleBound)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlx.env.runner_group.batches import concat_batches

if TYPE_CHECKING:
    from rlx.env.env_runner_group import EnvRunnerGroup


def sampling_local_runner(group: EnvRunnerGroup) -> Any:
    """The group's local EnvRunner, which samples when the group has no remote runners."""
    runner = group.local_env_runner
    if runner is None:
        raise RuntimeError("This EnvRunnerGroup has neither remote EnvRunners nor a local one to sample with; "
                           "build it with local_env_runner=True or num_env_runners > 0.")
    return runner


def sample_local(group: EnvRunnerGroup, num_timesteps: int | None, explore: bool | None) -> Any:
    """One fragment of the local runner (`num_timesteps` None), or fragments joined along time
    until they hold at least `num_timesteps` steps (as count_steps_by counts them)."""
    runner = sampling_local_runner(group)
    if num_timesteps is None:
        batch = _local_sample_call(group, runner, explore)
    else:
        batches = []
        collected = 0
        while collected < num_timesteps:
            batches.append(_local_sample_call(group, runner, explore))
            collected += group._count_steps(batches[-1])
        batch = concat_batches(batches)
    group.num_resets = runner.num_resets
    return batch


def _local_sample_call(group: EnvRunnerGroup, runner: Any, explore: bool | None) -> Any:
    """One sample() (a fragment) of the local runner, bounded by sample_timeout_s. Runners
    without sub-envs (external envs) bound their own waits."""
    if not group._local_bound.bounded or not getattr(runner, "has_envs", True):
        return runner.sample(explore=explore)
    return group._local_bound.run(group.runner_handles()[0], _LocalSample(explore),
                                  progress=lambda: runner.num_env_steps_sampled_lifetime + runner.num_resets)


class _LocalSample:
    """The local runner's sample() call, run on its own thread (LocalSampleBound)."""

    def __init__(self, explore: bool | None):
        self.explore = explore

    def __call__(self, runner: Any) -> Any:
        return runner.sample(explore=self.explore)

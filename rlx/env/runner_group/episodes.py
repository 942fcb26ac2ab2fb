"""`EnvRunnerGroup.sample()` when its runners return episodes (RLlib's new API stack).

A custom Algorithm's `training_step` (or a group built from a config alone) gets the episodes
of all runners joined in one list, as RLlib's `synchronous_parallel_sample(...,
_uses_new_env_runners=True)` joins them: the local runner samples when there are no remote
runners, else every remote runner in service samples one fragment per round, until
`num_timesteps` env steps are collected.
"""
from __future__ import annotations

import logging
from typing import Any

from rlx.env.runner.runner import episodes_by_default
from rlx.env.runner_group.local_sampling import sampling_local_runner

logger = logging.getLogger("rlx")


class SampleEpisodes:
    """`runner.sample(...)` (picklable, for remote runners)."""

    def __init__(self, explore: bool | None, random_actions: bool = False):
        self.explore = explore
        self.random_actions = random_actions

    def __call__(self, runner: Any) -> Any:
        return runner.sample(explore=self.explore, random_actions=self.random_actions)


def runners_return_episodes(group: Any) -> bool:
    """Whether the runners that sample for `group` return episodes: the local runner's setting
    (no remote runners), else what a remote runner of the group's config does by default."""
    runner = group.local_env_runner
    if runner is not None and group.num_remote_env_runners() == 0:
        return bool(runner.returns_episodes)
    cached = group.__dict__.get("_remote_runners_return_episodes")
    if cached is None:  # (the config does not change: decided once)
        from_config_alone = group._module_spec is None and getattr(group, "_local_module", None) is None
        cached = group.__dict__["_remote_runners_return_episodes"] = episodes_by_default(group.config,
                                                                                          from_config_alone)
    return bool(cached)


def sample_episodes(group: Any, num_timesteps: int | None, explore: bool | None,
                    random_actions: bool = False) -> list[Any]:
    """The episodes (finished ones and chunks of ongoing ones) of one sampling round of every
    runner, or of as many rounds as it takes to collect `num_timesteps` env steps."""
    out: list[Any] = []
    collected = 0
    call = SampleEpisodes(explore, random_actions)
    while True:
        if group.num_remote_env_runners() == 0:
            rounds = [call(sampling_local_runner(group))]
        else:
            rounds = group.foreach_env_runner(call, local_env_runner=False)
        if not rounds:
            logger.warning("EnvRunnerGroup.sample(): no remote EnvRunner in service returned episodes; returning "
                           "the %d episodes collected so far.", len(out))
            return out
        for episodes in rounds:
            if not isinstance(episodes, list):
                raise TypeError(f"EnvRunnerGroup.sample() expected episodes from its runners, got "
                                f"{type(episodes).__name__}; set runner.returns_episodes the same on every runner.")
            out.extend(episodes)
            collected += sum(e.env_steps() for e in episodes)
        if num_timesteps is None or collected >= num_timesteps:
            return out

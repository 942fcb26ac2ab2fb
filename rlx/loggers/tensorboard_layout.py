"""Which result keys TBXLogger draws in TensorBoard, and under which tags.

A result dict carries many values twice: under the new API stack's key and under an old
(Trainer-era) name kept for compatibility (`episode_reward_mean` is
`env_runners/episode_return_mean`, `info/learner/<id>/learner_stats/<x>` is
`learners/<id>/<x>`, ...); a single-agent run also reports its one agent's and one module's
return next to the episode return. TensorBoard gets one tag per value: the new-stack key.
The old names stay in the result dicts, result.json and progress.csv.

Tags sort so that the curves a user looks for first come first (TensorBoard orders groups, the
part of a tag before its first '/', and the tags within a group alphabetically):

- `1_return/<key>`: the mean episode return (training, then evaluation);
- `2_episode_len/<key>`: the mean episode length;
- `3_throughput/<key>`: env steps sampled and trained per second, learner updates per second;
- `run/<key>`: the other top-level numbers (step counters, iteration times);
- `<key>` for everything else, grouped by its section (`env_runners`, `evaluation`,
  `learners`, `perf`, `timers`, ...).

`logger_config={"tensorboard_legacy_keys": True}` writes Ray Tune's layout instead (what
rlx wrote before, and what Tune's TBXLoggerCallback writes for a trial): every key, the old
names included, as `ray/tune/<key>`.
"""
from __future__ import annotations

from typing import Any, Iterator

#: Prefix of every tag in Ray Tune's layout.
TUNE_TAG_PREFIX = "ray/tune/"
#: The `logger_config` key that selects Ray Tune's layout, old names included.
LEGACY_KEYS_OPTION = "tensorboard_legacy_keys"

#: Top-level old names of values the result also holds under a new-stack key (with an
#: `evaluation/` prefix, the same names in evaluation results).
_LEGACY_NAMES = frozenset({
    "episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
    "episodes_this_iter", "episodes_total", "timesteps_total", "timesteps_this_iter",
    "num_env_steps_sampled", "num_env_steps_trained", "info/num_env_steps_sampled", "info/num_env_steps_trained",
})
#: Top-level sections holding only old names of new-stack values (other `info/` keys, which a
#: callback may add, are drawn).
_LEGACY_SECTIONS = ("info/learner/", "hist_stats/", "custom_metrics/", "policy_reward_mean/", "policy_reward_min/",
                    "policy_reward_max/", "sampler_results/")
#: New-stack keys that repeat another new-stack key's value: key -> the key drawn instead.
_REPEATS = {
    "env_runners/num_env_steps_sampled_lifetime": "num_env_steps_sampled_lifetime",
    "env_runners/num_env_steps_sampled": "num_env_steps_sampled_this_iter",
    # Equal to the env steps unless several agents act in a step.
    "num_agent_steps_sampled_lifetime": "num_env_steps_sampled_lifetime",
    "num_agent_steps_trained_lifetime": "num_env_steps_trained_lifetime",
    "num_agent_steps_sampled_this_iter": "num_env_steps_sampled_this_iter",
    "num_agent_steps_trained_this_iter": "num_env_steps_trained_this_iter",
}
#: Top-level values that are no curve: `done` is False until Tune ends a trial.
_NOT_CURVES = frozenset({"done"})
#: Per-agent / per-module sections, and the key a single agent's or module's entry repeats: its
#: mean return is the episode return, its step counts are the env steps (when equal).
_PER_AGENT = {
    "env_runners/agent_episode_returns_mean/": "env_runners/episode_return_mean",
    "env_runners/module_episode_returns_mean/": "env_runners/episode_return_mean",
    "env_runners/num_agent_steps_sampled_lifetime/": "num_env_steps_sampled_lifetime",
    "env_runners/num_module_steps_sampled_lifetime/": "num_env_steps_sampled_lifetime",
    "env_runners/num_agent_steps_sampled/": "num_env_steps_sampled_this_iter",
    "env_runners/num_module_steps_sampled/": "num_env_steps_sampled_this_iter",
}

#: The first groups (see the module docstring): group -> the keys in it (with an
#: `evaluation/` prefix too).
HEADLINE_GROUPS: dict[str, tuple[str, ...]] = {
    "1_return": ("env_runners/episode_return_mean",),
    "2_episode_len": ("env_runners/episode_len_mean",),
    "3_throughput": ("env_runners/num_env_steps_sampled_lifetime_throughput",
                     "num_env_steps_trained_lifetime_throughput", "num_learner_updates_throughput"),
}
_HEADLINE = {key: group for group, keys in HEADLINE_GROUPS.items() for key in keys}
#: The group of the top-level numbers that are not headline values.
RUN_GROUP = "run"


def is_legacy_key(key: str) -> bool:
    """Whether flat result `key` is an old name of a value the result also holds under a
    new-stack key ('episode_reward_mean', 'info/learner/...', 'evaluation/episode_reward_mean')."""
    key = key.removeprefix("evaluation/")
    return key in _LEGACY_NAMES or key.startswith(_LEGACY_SECTIONS)


def tensorboard_tag(key: str, legacy: bool = False) -> str:
    """The TensorBoard tag of flat result `key`: 'env_runners/episode_return_mean' ->
    '1_return/env_runners/episode_return_mean', 'learners/default_policy/total_loss' as it is,
    'time_this_iter_s' -> 'run/time_this_iter_s'; with `legacy`, Ray Tune's
    'ray/tune/<key>'."""
    if legacy:
        return TUNE_TAG_PREFIX + key
    group = _HEADLINE.get(key.removeprefix("evaluation/"))
    if group is not None:
        return f"{group}/{key}"
    if "/" not in key:
        return f"{RUN_GROUP}/{key}"
    return key


def drawn_keys(flat: dict[str, Any], legacy: bool = False) -> list[str]:
    """The keys of a flattened result whose values are drawn (and logged to W&B / MLflow): with
    `legacy`, all of them; otherwise each value once, under its new-stack key (old names,
    new-stack keys repeating another's value, and `done` are left out)."""
    if legacy:
        return list(flat)
    return [key for key, value in flat.items()
            if key not in _NOT_CURVES and not is_legacy_key(key) and not _repeats_another(key, value, flat)]


def drawn_items(flat: dict[str, Any], legacy: bool = False) -> Iterator[tuple[str, Any]]:
    """(tag, value) of every entry of a flattened result that TensorBoard gets (`drawn_keys`)."""
    for key in drawn_keys(flat, legacy):
        yield tensorboard_tag(key, legacy), flat[key]


def _repeats_another(key: str, value: Any, flat: dict[str, Any]) -> bool:
    """Whether new-stack `key` holds the value of another key that is drawn instead."""
    prefix = "evaluation/" if key.startswith("evaluation/") else ""
    bare = key[len(prefix):]
    other = _REPEATS.get(bare)
    if other is not None:
        return (prefix + other) in flat and _same(flat[prefix + other], value)
    for section, other in _PER_AGENT.items():
        if bare.startswith(section):
            # One agent (module): its return is the episode return, drawn as such (a mean over
            # other bookkeeping, so not compared); its step counts when they are the env steps.
            if sum(1 for k in flat if k.startswith(prefix + section)) != 1 or (prefix + other) not in flat:
                return False
            return "episode_returns" in section or _same(flat[prefix + other], value)
    return False


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays and the like: not a repeat of a counter
        return False

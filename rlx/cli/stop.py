"""Stop criteria of `rlx train`: {result_key: value}, met when any result value reaches its bound.

RLlib's result keys changed names over the years (`episode_reward_mean`,
`sampler_results/episode_reward_mean`, `env_runners/episode_reward_mean`, ... are all
today's `env_runners/episode_return_mean`); `canonical_key` maps every legacy name a tuned
example may use to the key rlx reports, so old stop criteria work unchanged.

Keys are checked before the first iteration (`StopCriteria.check_before_training`): a key
that no result of this run can hold is refused at once. Keys under a section where
callbacks or evaluation add values later (`env_runners/`, `evaluation/`,
`custom_metrics/`) are accepted up front and may be missing from early results.
"""
from __future__ import annotations

import math
import re
from typing import Any

from rlx.utils.errors import ConfigError

#: Sections whose keys may first appear after some iterations: custom metrics that
#: callbacks log when an episode ends, and evaluation results.
LATE_SECTIONS = ("env_runners", "evaluation", "custom_metrics")
#: Sections present from the first result on; a missing key there is an error then.
CHECKED_SECTIONS = ("learners", "info", "fault_tolerance")

#: Episode statistics of an env_runners section, by every name RLlib gave them (the
#: section itself was called `sampler_results/`, or was the top level of the result).
_EPISODE_KEYS = {
    "episode_reward_mean": "episode_return_mean",
    "episode_reward_min": "episode_return_min",
    "episode_reward_max": "episode_return_max",
    "episode_return_mean": "episode_return_mean",
    "episode_return_min": "episode_return_min",
    "episode_return_max": "episode_return_max",
    "episode_len_mean": "episode_len_mean",
    "episode_len_min": "episode_len_min",
    "episode_len_max": "episode_len_max",
    "episodes_this_iter": "num_episodes",
    "num_episodes": "num_episodes",
}

#: Counters at the top level of a training result, by their legacy names. Agent steps
#: count every agent's actions (the same as env steps in single-agent runs).
_TOP_LEVEL_KEYS = {
    **{name: "num_env_steps_sampled_lifetime" for name in (
        "timesteps_total", "num_env_steps_sampled", "num_steps_sampled", "info/num_env_steps_sampled",
        "info/num_steps_sampled",
    )},
    **{name: "num_agent_steps_sampled_lifetime" for name in (
        "agent_timesteps_total", "num_agent_steps_sampled", "info/num_agent_steps_sampled",
    )},
    **{name: "num_env_steps_trained_lifetime" for name in (
        "num_env_steps_trained", "num_steps_trained", "info/num_env_steps_trained", "info/num_steps_trained",
    )},
    **{name: "num_agent_steps_trained_lifetime" for name in (
        "num_agent_steps_trained", "info/num_agent_steps_trained",
    )},
    **{name: "num_env_steps_sampled_this_iter" for name in (
        "timesteps_this_iter", "num_steps_sampled_this_iter",
    )},
    "num_steps_trained_this_iter": "num_env_steps_trained_this_iter",
    "episodes_total": "env_runners/num_episodes_lifetime",
    "num_healthy_workers": "fault_tolerance/num_healthy_workers",
    "num_remote_worker_restarts": "fault_tolerance/num_remote_worker_restarts",
}

#: Keys every training result of rlx holds from the first iteration on.
REPORTED_KEYS = frozenset({
    "training_iteration", "time_this_iter_s", "time_total_s", "timestamp", "time_since_restore",
    "iterations_since_restore", "num_env_steps_sampled_lifetime", "num_env_steps_trained_lifetime",
    "num_env_steps_sampled_this_iter", "num_env_steps_trained_this_iter", "num_agent_steps_sampled_lifetime",
    "num_agent_steps_trained_lifetime", "num_agent_steps_sampled_this_iter", "num_agent_steps_trained_this_iter",
    "fault_tolerance/num_healthy_workers", "fault_tolerance/num_remote_worker_restarts",
    *(f"env_runners/{name}" for name in (
        "episode_return_mean", "episode_return_min", "episode_return_max", "episode_len_mean",
        "episode_len_min", "episode_len_max", "num_episodes", "num_episodes_lifetime", "num_env_steps_sampled",
        "num_env_steps_sampled_lifetime",
    )),
})

#: Old stack learner stats: info/learner/<policy>/[learner_stats/]<stat> -> learners/<policy>/<stat>.
_LEARNER_STATS = re.compile(r"info/learner/([^/]+)/(?:learner_stats/)?(.+)")


def canonical_key(key: str) -> str:
    """The key rlx reports for a stop key written in any of RLlib's spellings:
    `episode_reward_mean`, `sampler_results/episode_reward_mean` and
    `env_runners/episode_reward_mean` are all `env_runners/episode_return_mean`;
    `evaluation/...` forms map into `evaluation/env_runners/...`; `timesteps_total` and
    `info/num_env_steps_sampled` are `num_env_steps_sampled_lifetime`. Other keys are
    returned unchanged."""
    if key in REPORTED_KEYS:
        return key
    if key in _TOP_LEVEL_KEYS:
        return _TOP_LEVEL_KEYS[key]
    learner = _LEARNER_STATS.fullmatch(key)
    if learner:
        return f"learners/{learner.group(1)}/{learner.group(2)}"
    prefix, rest = ("evaluation/", key[len("evaluation/"):]) if key.startswith("evaluation/") else ("", key)
    in_section = False
    for section in ("sampler_results/", "env_runners/"):
        if rest.startswith(section):
            rest, in_section = rest[len(section):], True
            break
    if rest in _EPISODE_KEYS:
        return f"{prefix}env_runners/{_EPISODE_KEYS[rest]}"
    if in_section:
        return f"{prefix}env_runners/{rest}"
    if not prefix and f"env_runners/{key}" in REPORTED_KEYS:
        return f"env_runners/{key}"  # a bare episode statistic, e.g. num_episodes_lifetime
    return key


def legacy_keys() -> list[str]:
    """Every legacy stop key `canonical_key` translates (for suggestions and the docs)."""
    names = set(_TOP_LEVEL_KEYS) | set(_EPISODE_KEYS)
    names |= {f"{section}/{name}" for section in ("sampler_results", "env_runners", "evaluation",
                                                  "evaluation/sampler_results", "evaluation/env_runners")
              for name in _EPISODE_KEYS}
    return sorted(name for name in names if canonical_key(name) != name)


def lookup(result: dict[str, Any], key: str) -> Any:
    """The value of `key` in a result dict; nested keys are written 'a/b'. A bare key that
    is not at the top level is also looked up under `env_runners/` (the new stack's place
    for episode statistics). Returns None when absent."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, dict) or part not in node:
            node = None
            break
        node = node[part]
    if node is None and "/" not in key:
        runners = result.get("env_runners")
        if isinstance(runners, dict):
            return runners.get(key)
    return node


def _flat_keys(result: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for k, v in result.items():
        name = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            keys.extend(_flat_keys(v, name))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            keys.append(name)
    return keys


def _section(key: str) -> str | None:
    return key.split("/", 1)[0] if "/" in key else None


def suggest(key: str, candidates: list[str] | None = None) -> str:
    """' Did you mean ...?' for a stop key, naming what rlx reports for a legacy
    suggestion, plus where callbacks' metrics live for a bare name."""
    import difflib

    pool = sorted(REPORTED_KEYS | set(legacy_keys()) | set(candidates or ()))
    # A high cutoff: keys share long prefixes (env_runners/...), which alone look similar.
    matches = difflib.get_close_matches(key, pool, n=3, cutoff=0.8)
    text = ""
    if matches:
        named = [f"'{m}'" + (f" (= {canonical_key(m)})" if canonical_key(m) != m else "") for m in matches]
        text = f" Did you mean {named[0]}?" if len(named) == 1 else f" Did you mean one of: {', '.join(named)}?"
    if "/" not in key:
        text += f" (A metric that callbacks log is reported as env_runners/{key}.)"
    return text


def _has_custom_result_code(config: Any) -> bool:
    """Whether something besides rlx's own code may add keys to the results: callbacks, or
    an Algorithm class that is not one of rlx's."""
    values = config.to_dict()
    if any(value is not None for name, value in values.items() if name.startswith("callbacks")):
        return True
    algo_class = getattr(config, "algo_class", None)
    return algo_class is not None and not getattr(algo_class, "__module__", "").startswith("rlx.")


def _runs_evaluation(config: Any) -> bool:
    interval = config.to_dict().get("evaluation_interval")
    # A search space (grid_search dict) may set it: let the trials tell.
    return interval is not None and not (isinstance(interval, (int, float)) and interval <= 0)


class StopCriteria:
    """Stop criteria {key: bound}: `met(result)` names the criteria a result reaches
    (`result[key] >= bound`, keys in any of RLlib's spellings, see `canonical_key`); an
    empty set of criteria never stops."""

    def __init__(self, criteria: dict[str, Any] | None):
        self.criteria: dict[str, float] = {}
        for key, bound in (criteria or {}).items():
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise ConfigError(f"Stop criterion '{key}' must be a number, got {bound!r}.")
            if isinstance(bound, float) and math.isnan(bound):
                raise ConfigError(f"Stop criterion '{key}' is NaN, which no result ever reaches, so training would "
                                  f"never stop; give a number, e.g. {{\"{key}\": 100}}.")
            self.criteria[str(key)] = float(bound) if isinstance(bound, float) else bound
        self._checked = False
        #: Messages about late keys still missing from the first result, for the caller to show.
        self.notes: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.criteria)

    def check_before_training(self, config: Any) -> None:
        """Refuse, before anything runs, a key that no result of `config`'s run can hold: an
        unknown top-level name or section, or an evaluation key without evaluation_interval.
        With callbacks or an Algorithm class of the user's, which may add any key, only the
        first result can tell, so nothing is refused here."""
        custom = _has_custom_result_code(config)
        for key in self.criteria:
            name = canonical_key(key)
            section = _section(name)
            if section == "evaluation" and not custom and not _runs_evaluation(config):
                raise ConfigError(
                    f"Stop criterion '{key}' is an evaluation result, but this config runs no evaluation. Set "
                    "evaluation_interval, e.g. --config '{\"evaluation_interval\": 1}', or stop on a training key "
                    "such as env_runners/episode_return_mean."
                )
            known = name in REPORTED_KEYS or section in LATE_SECTIONS + CHECKED_SECTIONS
            if not known and not custom:
                raise ConfigError(f"Stop criterion '{key}' is not a key of the training results.{suggest(key)} "
                                  "Nested keys are written a/b, e.g. env_runners/episode_return_mean.")

    def value(self, result: dict[str, Any], key: str) -> Any:
        """The result's value for stop key `key` (under rlx's name, else as written)."""
        value = lookup(result, canonical_key(key))
        return lookup(result, key) if value is None else value

    def met(self, result: dict[str, Any]) -> list[str]:
        """Descriptions ('key >= bound') of the criteria `result` reaches. On the first result,
        raises ConfigError for a missing key outside the late sections, and adds a note to
        `notes` for a missing late one."""
        if not self._checked:
            self._check_keys(result)
            self._checked = True
        reached = []
        for key, bound in self.criteria.items():
            value = self.value(result, key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) \
                    and value >= bound:
                reached.append(f"{key} >= {_fmt(bound)}")
        return reached

    def _check_keys(self, result: dict[str, Any]) -> None:
        for key in self.criteria:
            if self.value(result, key) is not None:
                continue
            name = canonical_key(key)
            hint = suggest(key, _flat_keys(result))
            if _section(name) in LATE_SECTIONS:
                self.notes.append(f"Stop criterion '{key}' is not in the results yet; training stops once it "
                                  f"appears (evaluation results, or metrics that callbacks log) and reaches its "
                                  f"bound.{hint}")
                continue
            raise ConfigError(f"Stop criterion '{key}' is not a key of the training results.{hint} "
                              "Nested keys are written a/b, e.g. env_runners/episode_return_mean.")

    def describe(self) -> str:
        """'a >= 1 or b >= 2' (with rlx's name of a legacy key), or 'Ctrl-C' when there are no criteria."""
        if not self.criteria:
            return "Ctrl-C (no stop criteria)"
        parts = []
        for key, bound in self.criteria.items():
            name = canonical_key(key)
            parts.append(f"{key} >= {_fmt(bound)}" + (f" ({name})" if name != key else ""))
        return " or ".join(parts)


def _fmt(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:g}"

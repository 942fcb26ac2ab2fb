"""The result dict of train() and evaluate(), from merged EnvRunner metrics.

Training and evaluation both reduce their runners' MetricsLogger output with these
functions, so `result["env_runners"]` and `result["evaluation"]["env_runners"]` have the
same keys, and both carry the same legacy aliases (`episode_reward_mean`, ...).
`train_result` assembles one training iteration's result.
"""
from __future__ import annotations

import math
import numbers
import os
import socket
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx.utils.metrics.metrics_logger import MetricsLogger

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm

#: What callbacks put on one finished episode: (custom_metrics, hist_data).
EpisodeExtras = tuple[dict[str, Any], dict[str, Any]]
#: One reported episode: (return, length, ((policy_id, that policy's agents' return), ...),
#: its extras or None).
Episode = tuple[float, int, tuple, "EpisodeExtras | None"]


def train_result(algo: "Algorithm", learner_results: dict[str, Any], sampled: int, trained: int,
                 elapsed: float) -> dict[str, Any]:
    """The result dict of one training iteration of `algo` (before callbacks and Algorithm-side
    metrics are added): episode statistics over the smoothing window, counters, learner
    metrics, fault tolerance, timing, and the old API's names for the same values."""
    counters = algo._counters
    # Peek (not reduce) so that values logged by on_train_result are reduced together with
    # these in add_algorithm_metrics; the peeked values are what reduce() would give.
    peeked = algo.metrics.peek("env_runners") if "env_runners" in algo.metrics else {}
    hist = peeked.get("hist_stats", {})
    episodes = smoothed_episodes(algo._episodes_window, logged_episodes(hist))
    env_runners = env_runner_section(peeked, algo.config.keep_per_episode_custom_metrics, episodes)
    counters["num_episodes_lifetime"] += int(env_runners["num_episodes"])
    env_runners["num_episodes_lifetime"] = counters["num_episodes_lifetime"]
    env_runners["num_env_steps_sampled"] = sampled
    env_runners["num_env_steps_sampled_lifetime"] = counters["num_env_steps_sampled_lifetime"]
    # Sub-envs rebuilt by restart_failed_sub_environments on every runner (the runners count them).
    env_runners["num_sub_env_restarts"] = int(env_runners.get("num_sub_env_restarts", 0))
    counters["num_sub_env_restarts_lifetime"] = \
        counters.get("num_sub_env_restarts_lifetime", 0) + env_runners["num_sub_env_restarts"]
    env_runners["num_sub_env_restarts_lifetime"] = counters["num_sub_env_restarts_lifetime"]
    now = time.time()
    result = {
        "training_iteration": algo.iteration,
        "time_this_iter_s": elapsed,
        "time_total_s": algo._time_total_s,
        "timestamp": int(now),
        "date": datetime.fromtimestamp(now).strftime("%Y-%m-%d_%H-%M-%S"),
        "done": False,
        "num_env_steps_sampled_lifetime": counters["num_env_steps_sampled_lifetime"],
        "num_env_steps_trained_lifetime": counters["num_env_steps_trained_lifetime"],
        "num_env_steps_sampled_this_iter": sampled,
        "num_env_steps_trained_this_iter": trained,
        "env_runners": env_runners,
        "learners": {mid: dict(m) for mid, m in learner_results.items()},
        "fault_tolerance": fault_tolerance_section(algo.env_runner_group),
        "iterations_since_restore": algo._iterations_since_restore,
        "time_since_restore": algo._time_since_restore,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        # Legacy names of the same values.
        **legacy_episode_keys(env_runners),
        "episodes_total": counters["num_episodes_lifetime"],
        "timesteps_total": counters["num_env_steps_sampled_lifetime"],
        "timesteps_this_iter": sampled,
        "num_env_steps_sampled": counters["num_env_steps_sampled_lifetime"],
        "num_env_steps_trained": counters["num_env_steps_trained_lifetime"],
        "info": {
            "learner": {mid: {"learner_stats": dict(m)} for mid, m in learner_results.items()},
            "num_env_steps_sampled": counters["num_env_steps_sampled_lifetime"],
            "num_env_steps_trained": counters["num_env_steps_trained_lifetime"],
        },
    }
    for key in ("num_agent_steps_sampled_lifetime", "num_agent_steps_trained_lifetime"):
        result[key] = counters[key]
    result.update(policy_reward_stats(env_runners["hist_stats"], algo.learners.sole_module_id))
    return result


def logged_episodes(hist_stats: dict[str, Any]) -> list[Episode]:
    """The episodes the runners logged under `hist_stats` (returns, lengths, per-policy returns
    and extras, one entry per episode in the same order), as Episode tuples."""
    returns = list(hist_stats.get("episode_reward", []))
    n = len(returns)
    lengths = _aligned(hist_stats.get("episode_lengths"), n, 0)
    policy_returns = _aligned(hist_stats.get("episode_policy_returns"), n, ())
    extras = _aligned(hist_stats.get("episode_extras"), n, None)
    return [(r, length, tuple(p), e) for r, length, p, e in zip(returns, lengths, policy_returns, extras)]


def _aligned(values: list | None, n: int, missing: Any) -> list:
    """`values` when it has one entry per episode, else `missing` for each."""
    values = list(values) if values is not None else []
    return values if len(values) == n else [missing] * n


def smoothed_episodes(window: Any, this_iteration: list[Episode]) -> list[Episode]:
    """The episodes to report: add this iteration's to `window` (a deque with maxlen
    metrics_num_episodes_for_smoothing) and return the window, or all of this iteration's
    episodes when there are more (seed 003: excess episodes are never cut)."""
    window.extend(this_iteration)
    if len(this_iteration) >= window.maxlen:
        return list(this_iteration)
    return list(window)


def add_policy_hist_stats(hist_stats: dict[str, Any], episodes: list[Episode]) -> None:
    """hist_stats["policy_<id>_reward"]: the returns of each agent that used policy <id> in the
    reported episodes (the old API's per-policy statistics)."""
    for _, _, policy_returns, _ in episodes:
        for policy_id, value in policy_returns:
            hist_stats.setdefault(f"policy_{policy_id}_reward", []).append(value)


def add_episode_extras(section: dict[str, Any], episodes: list[Episode]) -> None:
    """Add the reported episodes' custom metrics ({name: [value per episode]}) under
    section["custom_metrics"] and their histogram data under section["hist_stats"], so both
    cover the same episodes as the returns."""
    custom, hist = section.setdefault("custom_metrics", {}), section["hist_stats"]
    for *_, extras in episodes:
        if extras is None:
            continue
        episode_metrics, episode_hist = extras
        for name, value in episode_metrics.items():
            custom.setdefault(str(name), []).append(value)
        for name, values in episode_hist.items():
            hist.setdefault(str(name), []).extend(histogram_values(values))


def histogram_values(values: Any) -> list:
    """An episode's hist_data entry as a list of values (a single value is one)."""
    if isinstance(values, np.ndarray):
        return values.ravel().tolist()
    return list(values) if isinstance(values, (list, tuple)) else [values]


def add_algorithm_metrics(metrics: MetricsLogger, result: dict[str, Any]) -> None:
    """Reduce the Algorithm's MetricsLogger (clearing per-iteration stats) and put what
    Algorithm callbacks logged at the top level of `result`."""
    reduced = metrics.reduce(compile=True)
    env_runner_values = reduced.pop("env_runners", {})
    # Keys logged under env_runners by Algorithm callbacks (not by the runners) are added too.
    for key, value in env_runner_values.items():
        if key not in ("custom_metrics", "hist_stats"):
            result["env_runners"].setdefault(key, value)
    deep_update(result, reduced)


def summarize_runner_metrics(runner_metrics: list[dict], keep_per_episode_custom_metrics: bool = False) -> dict[str, Any]:
    """Merge the `get_metrics()` dicts of several EnvRunners into evaluation-style results:
    `{"env_runners": {...}, "episode_reward_mean": ..., ...}`."""
    merged = MetricsLogger()
    merged.merge_and_log_n_dicts(list(runner_metrics), key="env_runners")
    reduced = merged.reduce(compile=True).get("env_runners", {}) if runner_metrics else {}
    env_runners = env_runner_section(reduced, keep_per_episode_custom_metrics)
    return {"env_runners": env_runners, **legacy_episode_keys(env_runners)}


def env_runner_section(
    reduced: dict[str, Any] | None,
    keep_per_episode_custom_metrics: bool,
    episodes: list[Episode] | None = None,
) -> dict[str, Any]:
    """The `env_runners` section from a reduced (or peeked) MetricsLogger branch.

    Episode statistics, custom metrics and histogram data come from `episodes` (the smoothing
    window) or, when not given, from every episode the runners logged (`hist_stats`); the
    statistics are NaN without episodes. The custom metrics become `<name>_mean/_min/_max` (or
    per-episode lists when asked to).
    """
    out = dict(reduced or {})
    hist = dict(out.get("hist_stats") or {})
    if episodes is None:
        episodes = logged_episodes(hist)
    for raw in ("episode_policy_returns", "episode_extras"):  # per-episode records, not histograms
        hist.pop(raw, None)
    returns, lengths = [e[0] for e in episodes], [e[1] for e in episodes]
    hist["episode_reward"] = returns
    hist["episode_lengths"] = lengths
    out["hist_stats"] = hist
    out["custom_metrics"] = dict(out.get("custom_metrics") or {})
    add_policy_hist_stats(hist, episodes)
    add_episode_extras(out, episodes)
    out.update(_stats("episode_return", returns))
    out.update(_stats("episode_len", lengths))
    out.setdefault("num_episodes", 0)
    out.setdefault("num_env_steps_sampled", 0)
    out.setdefault("agent_episode_returns_mean", {})
    out.setdefault("module_episode_returns_mean", {})
    out["custom_metrics"] = summarize_custom_metrics(out.get("custom_metrics") or {},
                                                     keep_per_episode_custom_metrics)
    return out


def _stats(prefix: str, values: list) -> dict[str, float]:
    if not values:
        return {f"{prefix}_mean": math.nan, f"{prefix}_min": math.nan, f"{prefix}_max": math.nan}
    floats = [float(v) for v in values]
    return {f"{prefix}_mean": sum(floats) / len(floats), f"{prefix}_min": min(floats), f"{prefix}_max": max(floats)}


def summarize_custom_metrics(per_episode: dict[str, Any], keep_per_episode: bool) -> dict[str, Any]:
    """{name: [value per episode]} -> {name_mean, name_min, name_max} (or the lists themselves).

    Values that are not numbers (a user may store anything) are reported as lists.
    """
    out: dict[str, Any] = {}
    for name, values in per_episode.items():
        if isinstance(values, dict):  # nested names: ("custom_metrics", "a", "b")
            for sub, summary in summarize_custom_metrics(values, keep_per_episode).items():
                out[f"{name}/{sub}"] = summary
            continue
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        if keep_per_episode or not all(is_real_number(v) for v in values):
            out[name] = values
            continue
        if not values:
            continue
        floats = [float(v) for v in values]
        out[f"{name}_mean"] = sum(floats) / len(floats)
        out[f"{name}_min"] = min(floats)
        out[f"{name}_max"] = max(floats)
    return out


def is_real_number(value: Any) -> bool:
    """Whether `value` is a real number (bools are not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def legacy_episode_keys(env_runners: dict[str, Any]) -> dict[str, Any]:
    """The old (Trainer-era) top-level names of an env_runners section's values."""
    return {
        "episode_reward_mean": env_runners["episode_return_mean"],
        "episode_reward_min": env_runners["episode_return_min"],
        "episode_reward_max": env_runners["episode_return_max"],
        "episode_len_mean": env_runners["episode_len_mean"],
        "episodes_this_iter": env_runners["num_episodes"],
        "custom_metrics": env_runners["custom_metrics"],
        "hist_stats": env_runners["hist_stats"],
    }


def policy_reward_stats(hist_stats: dict[str, Any], sole_policy_id: str | None = None) -> dict[str, dict[str, float]]:
    """The old API's `policy_reward_mean/min/max`: {policy_id: statistic} over the returns of each
    agent that used the policy (`hist_stats["policy_<id>_reward"]`); a single-agent run's one
    policy (`sole_policy_id`, its learner container's) has the episode returns."""
    per_policy = {key[len("policy_"):-len("_reward")]: list(values) for key, values in hist_stats.items()
                  if key.startswith("policy_") and key.endswith("_reward")}
    if sole_policy_id is not None:
        per_policy = {sole_policy_id: list(hist_stats.get("episode_reward", []))}
    out: dict[str, dict[str, float]] = {"policy_reward_mean": {}, "policy_reward_min": {}, "policy_reward_max": {}}
    for policy_id, values in per_policy.items():
        if values:
            for stat, value in _stats("r", values).items():
                out[f"policy_reward_{stat[2:]}"][policy_id] = value
    return out


def fault_tolerance_section(group: Any) -> dict[str, int]:
    """`result["fault_tolerance"]` of an EnvRunnerGroup: remote runners in service, restarts so
    far, and failed runners that will be back (waiting out their restart delay or being
    rebuilt beside training; the runners in service sample meanwhile)."""
    return {
        "num_healthy_workers": group.num_healthy_remote_workers(),
        "num_remote_worker_restarts": group.num_remote_worker_restarts,
        "num_remote_workers_waiting_for_restart": group.num_remote_workers_waiting_for_restart(),
    }


def deep_update(target: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """Merge nested `updates` into `target` in place (dicts merge, other values replace)."""
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_update(target[key], value)
        else:
            target[key] = value
    return target

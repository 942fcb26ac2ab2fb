"""An EnvRunner's callbacks and episode metrics: which events fire, with what, and what a
finished episode logs.

`EpisodeEvents` (a mixin of the EnvRunner) looks the handlers up once (an event nobody handles
is never dispatched and costs nothing per step), builds the keyword arguments every episode
event gets, and logs each finished episode: its return and length (the raw values the
Algorithm smooths), its agents' and modules' returns, and the custom metrics and histogram
data callbacks put on it.
"""
from __future__ import annotations

from typing import Any, Iterable


from rlx.env.runner.parts import RunnerParts
from rlx.utils.metrics import NUM_EPISODES_LIFETIME
from rlx.utils.metrics.metrics_logger import MetricsLogger

#: Where runners log each finished episode's return and length (lists, reduce=None).
EPISODE_RETURNS_KEY = ("hist_stats", "episode_reward")
EPISODE_LENGTHS_KEY = ("hist_stats", "episode_lengths")
#: Where multi-agent runners log each finished episode's ((policy_id, agent return), ...).
EPISODE_POLICY_RETURNS_KEY = ("hist_stats", "episode_policy_returns")
#: Where runners that track episode objects log each finished episode's (custom_metrics, hist_data).
EPISODE_EXTRAS_KEY = ("hist_stats", "episode_extras")

#: Where runners log windowed mean returns per agent and per module (policy).
AGENT_RETURNS_KEY = ("agent_episode_returns_mean",)
MODULE_RETURNS_KEY = ("module_episode_returns_mean",)

#: Events whose handlers need per-episode objects in the sampling loop.
EPISODE_EVENTS = ("on_episode_created", "on_episode_start", "on_episode_step", "on_episode_end",
                  "on_postprocess_trajectory")


def episode_extras(episode: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """What callbacks put on a finished episode: (its custom_metrics, its hist_data), copied."""
    return dict(episode.custom_metrics), dict(episode.hist_data)


def log_episode_returns(metrics: MetricsLogger, window: int, episode_return: float, length: int,
                        agent_returns: Iterable[tuple[Any, str | None, float]], per_policy: bool,
                        extras: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
    """Log one finished episode: its return and length (raw values since the last get_metrics();
    the Algorithm smooths them over metrics_num_episodes_for_smoothing episodes, never cutting an
    iteration's excess ones), a windowed mean return per agent and per module, with
    `per_policy` the ((policy_id, agent return), ...) the old API's per-policy statistics use,
    and the episode's `extras` (custom_metrics, hist_data) when the runner tracks episode
    objects, reported over the same episodes as the returns.
    `agent_returns` holds (agent_id, module_id or None, return) per agent."""
    metrics.log_value(EPISODE_RETURNS_KEY, episode_return, reduce=None)
    metrics.log_value(EPISODE_LENGTHS_KEY, length, reduce=None)
    if extras is not None:
        metrics.log_value(EPISODE_EXTRAS_KEY, extras, reduce=None)
    metrics.log_value("num_episodes", 1, reduce="sum", clear_on_reduce=True)
    metrics.log_value(NUM_EPISODES_LIFETIME, 1, reduce="lifetime_sum")  # (the root logger adds them up)
    per_module: dict[str, float] = {}
    policy_returns = []
    for aid, pid, ret in agent_returns:
        metrics.log_value(AGENT_RETURNS_KEY + (str(aid),), ret, window=window)
        if pid is not None:
            per_module[pid] = per_module.get(pid, 0.0) + ret
            policy_returns.append((pid, ret))
    if per_policy:
        metrics.log_value(EPISODE_POLICY_RETURNS_KEY, tuple(policy_returns), reduce=None)
    for pid, ret in per_module.items():
        metrics.log_value(MODULE_RETURNS_KEY + (pid,), ret, window=window)


class EpisodeEvents(RunnerParts):
    """The callback side of an EnvRunner."""

    def _resolve_callbacks(self) -> None:
        # Handlers are looked up once; an event nobody handles is None and never dispatched.
        cb = self._callbacks
        self._on_episode_created = cb.get("on_episode_created")
        self._on_episode_start = cb.get("on_episode_start")
        self._on_episode_step = cb.get("on_episode_step")
        self._on_episode_end = cb.get("on_episode_end")
        self._on_sample_end = cb.get("on_sample_end")
        self._on_postprocess_trajectory = cb.get("on_postprocess_trajectory")
        #: Whether any episode event has a handler (the loop then keeps episode objects).
        self._track_episodes = any(cb.has(e) for e in EPISODE_EVENTS)

    @property
    def callbacks(self) -> Any:
        """This runner's CallbackDispatcher (its `.instances` are the RLlibCallback objects)."""
        return self._callbacks

    @property
    def policy_config(self) -> Any:
        """Old name of `config` (`worker.policy_config["in_evaluation"]`)."""
        return self.config

    def _episode_kwargs(self, i: int) -> dict[str, Any]:
        """What every episode event of sub-env `i` gets."""
        return {
            "episode": self._episodes[i], "env_runner": self, "metrics_logger": self.metrics,
            "env": self._episode_env(i), "env_index": i, "rl_module": self.module, "worker": self,
            "base_env": self.env, "policies": self.policy_map,
        }

    def _fire_episode_event(self, handler: Any, i: int) -> None:
        """Call an episode event's handler (if any) for sub-env `i`'s episode."""
        if handler is not None:
            handler(**self._episode_kwargs(i))

    def _fire_episode_end(self, i: int) -> None:
        """Call on_episode_end (if handled) for sub-env `i`'s episode, with `prev_episode_chunks`:
        the earlier chunks of it that sample() returned (empty unless the runner returns episodes)."""
        handler = self._on_episode_end
        if handler is not None:
            chunks = self._prev_chunks.pop(self._episodes[i].id_, []) if self._prev_chunks else []
            handler(**self._episode_kwargs(i), prev_episode_chunks=chunks)

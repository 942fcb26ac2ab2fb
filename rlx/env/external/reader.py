"""ExternalEnvInput: the InputReader that trains on an ExternalEnv's episodes.

It gives the env a backend (episode book + batched policy), starts its thread, and on
every `next()` refreshes the acting weights from the training module, waits for completed
steps and returns them as a flat SampleBatch; the offline path (rlx.offline.offline_io)
turns that into the time-major batch Learners train on. With a multi-agent config (an
ExternalMultiAgentEnv, or a policy server of several policies) the backend maps agents to
policies and the batches are MultiAgentBatches of per-policy rows, which the offline path
turns into the per-policy time-major batches a multi-agent EnvRunner samples. Finished
episodes' returns and lengths go into the local EnvRunner's metrics, so
`result["env_runners"]` reports them (per agent and per policy, multi-agent).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from rlx.env.config_view import EnvConfig
from rlx.env.external.episodes import SOLE_AGENT, AgentStep, EpisodeBook
from rlx.env.external.inference import BatchedPolicy, PolicySet
from rlx.env.external.multi_agent import MultiAgentEpisodeBackend
from rlx.env.external_env import ExternalEnvStopped
from rlx.offline.input_reader import InputReader
from rlx.utils.errors import ConfigError, NotSupportedYetError

logger = logging.getLogger("rlx")


class EpisodeBackend:
    """The episode commands of an ExternalEnv (or a policy server's clients) on a book and a policy
    (the one-agent case of rlx.env.external.multi_agent.MultiAgentEpisodeBackend)."""

    multi_agent = False

    def __init__(self, book: EpisodeBook, policy: BatchedPolicy):
        self.book = book
        self.policy = policy
        self.closed = False

    def start_episode(self, episode_id: str | None, training_enabled: bool = True) -> str:
        """Open an episode; returns its id."""
        self._check_open()
        return self.book.start(episode_id, training_enabled)

    def _check_open(self) -> None:
        if self.closed:
            raise ExternalEnvStopped("the Algorithm training on this external env was stopped")

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action for `observation`, recorded as the episode's next step."""
        self._check_open()
        self.book.get(episode_id)  # unknown episodes fail before any computing
        row = self.policy.prepare(observation)
        decision = self.policy.act(row)
        step = AgentStep(row, self.policy.row_action(decision.env_action), decision.logp, decision.dist_inputs)
        self.book.act(episode_id, {SOLE_AGENT: row}, {SOLE_AGENT: step})
        return decision.env_action

    def log_action(self, episode_id: str, observation: Any, action: Any, logp: float | None = None,
                   dist_inputs: np.ndarray | None = None) -> None:
        """Record the action taken for `observation` (with the behaviour policy's log-prob and
        distribution inputs when the caller knows them)."""
        self._check_open()
        self.book.get(episode_id)
        row = self.policy.prepare(observation)
        self.book.act(episode_id, {SOLE_AGENT: row}, {SOLE_AGENT: AgentStep(row, self.policy.row_action(action), logp,
                                                                            dist_inputs)})

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None) -> None:
        """Add a reward to the episode's last action."""
        self._check_open()
        self.book.add_reward(episode_id, float(reward))

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """Finish the episode at `observation`."""
        self._check_open()
        self.book.get(episode_id)
        self.book.end(episode_id, {SOLE_AGENT: self.policy.prepare(observation)}, bool(truncated))


def has_policy_slots(worker: Any) -> bool:
    """Whether `worker` is a MultiAgentEnvRunner (one module per policy)."""
    return isinstance(getattr(worker, "slots", None), dict)


def check_external_runner(worker: Any, what: str) -> None:
    """NotSupportedYetError/ConfigError when the Algorithm's local EnvRunner cannot act for external episodes."""
    if worker is None:
        raise ConfigError(f"{what} needs the Algorithm's local EnvRunner (its IOContext has none).")
    if worker.config.observation_filter not in (None, "NoFilter"):
        raise NotSupportedYetError(f"observation_filter={worker.config.observation_filter!r} with {what}",
                                   "external observations do not update filters",
                                   fix="Leave observation_filter='NoFilter'.")
    if worker.config.normalize_rewards:
        raise NotSupportedYetError(f"environment(normalize_rewards=True) with {what}",
                                   "the rewards of external episodes are not scaled",
                                   fix="Leave normalize_rewards=False.")


class ExternalEnvInput(InputReader):
    """Reads an ExternalEnv's completed steps as training batches.

    Args:
        ioctx: the IOContext (its `worker` is the Algorithm's local EnvRunner).
        env: the ExternalEnv (its thread is started here unless already running).
        idle_timeout: seconds `next()` waits for a full fragment before returning what it has.
        episode_timeout_s: an episode not heard of for this long is dropped.
        max_queued_steps: completed steps kept while the trainer is busy.
        max_open_episodes: episodes open at once.
    """

    def __init__(self, ioctx: Any, env: Any, idle_timeout: float = 3.0, episode_timeout_s: float = 600.0,
                 max_queued_steps: int = 1_000_000, max_open_episodes: int = 10_000):
        worker: Any = getattr(ioctx, "worker", None)  # the local EnvRunner; check_external_runner refuses None
        what = type(env).__name__
        check_external_runner(worker, what)
        multi_agent = has_policy_slots(worker)
        _check_env_kind(env, what, multi_agent)
        for name in () if multi_agent else ("observation_space", "action_space"):
            ours, theirs = getattr(worker, name), getattr(env, name, None)
            if theirs is not None and ours != theirs:
                raise ConfigError(f"{what}.{name} is {theirs}, but the Algorithm's is {ours}: configure "
                                  f"config.environment({name}=...) with the external env's space.")
        self.ioctx = ioctx
        self.env = env
        self.worker = worker
        self.idle_timeout = float(idle_timeout)
        config = worker.config
        self.book = EpisodeBook(max_open_episodes=max_open_episodes, episode_timeout_s=episode_timeout_s,
                                max_queued_steps=max_queued_steps, multi_agent=multi_agent,
                                count_env_steps=getattr(config, "count_steps_by", "env_steps") != "agent_steps")
        if multi_agent:
            self.policy: Any = PolicySet(worker, explore=bool(config.explore))
            self.backend: Any = MultiAgentEpisodeBackend(self.book, self.policy, worker)
        else:
            self.policy = BatchedPolicy(worker, explore=bool(config.explore))
            self.backend = EpisodeBackend(self.book, self.policy)
        self._fragment = fragment_length(config)
        self._warned_dropped = 0
        env._attach(self.backend)
        if not env.is_alive():
            env.start()

    def next(self) -> Any:
        """The steps completed since the last call (at least one), as a flat SampleBatch (a
        MultiAgentBatch of them, multi-agent)."""
        self.policy.sync_from(self.worker.module)
        while True:
            self.book.wait_rows(self._fragment, timeout_s=1.0, idle_timeout_s=self.idle_timeout)
            self._report_episodes()
            batch = self.book.drain()
            if batch is not None:
                self._warn_dropped()
                return batch
            if not self.env.is_alive():
                raise RuntimeError(f"{type(self.env).__name__}.run() has returned: no more experience will "
                                   "arrive to train on.")

    def _report_episodes(self) -> None:
        for stats in self.book.take_episode_stats():
            if isinstance(stats, tuple):
                self.worker._log_episode(*stats)
            else:  # a multi-agent episode's MultiAgentEpisode
                self.worker._log_episode(stats)

    def _warn_dropped(self) -> None:
        dropped = self.book.num_steps_dropped
        if dropped > self._warned_dropped:
            logger.warning("%d external steps were dropped because the trainer fell behind (max_queued_steps=%d).",
                           dropped - self._warned_dropped, self.book.max_queued_steps)
            self._warned_dropped = dropped

    def close(self) -> None:
        """End the env's episode calls (its thread's next call ends it) and stop its serving,
        when it has a stop() (the policy server does)."""
        self.backend.closed = True
        stop = getattr(self.env, "stop", None)
        if callable(stop):
            stop()
        if self.env.is_alive() and self.env is not threading.current_thread():
            # Let its loop reach its next episode call and end, rather than be cut off mid-step
            # at interpreter exit; a loop that waits on something else is left running.
            self.env.join(timeout=1.0)


def _check_env_kind(env: Any, what: str, multi_agent: bool) -> None:
    """ConfigError when a multi-agent external env meets a single-agent config, or the reverse."""
    env_multi = bool(getattr(env, "_rlx_multi_agent", False))
    if env_multi and not multi_agent:
        raise ConfigError(f"{what} is an ExternalMultiAgentEnv, but the config trains one policy: give it "
                          "config.multi_agent(policies=..., policy_mapping_fn=...) (with env=None, each policy's "
                          "spaces come from its PolicySpec or config.environment(observation_space=..., "
                          "action_space=...)).")
    if multi_agent and not env_multi:
        raise ConfigError(f"{what} is a single-agent ExternalEnv, but the config is multi-agent "
                          "(config.multi_agent): subclass ExternalMultiAgentEnv, whose episode methods take dicts "
                          "keyed by agent id, or train one policy.")


def fragment_length(config: EnvConfig) -> int:
    """Steps `next()` waits for: the config's rollout fragment length."""
    try:
        return max(1, int(config.get_rollout_fragment_length()))
    except Exception:  # a config without rollout settings (plain dicts in tests)
        return 200


"""The open episodes of an external env and the training rows they complete.

An external application reports an episode step by step: the agents' observations and the
actions taken (`act`), rewards (`add_rewards`), the final observations (`end`). A single-agent
episode is the one-agent case: its agent is registered when it starts. A row (obs, action,
reward, next obs, ...) is one agent's step; it is complete once the observation after its
action arrives (that agent's next observation, or the episode's end). Rewards logged between
two actions of an agent add up into its row, as a multi-agent EnvRunner adds them up, so
agents that act in turns get one row per action of their own.

Complete rows wait in the book until the trainer drains them as one flat SampleBatch (a
MultiAgentBatch of them, one per policy, for a multi-agent book), each agent's rows of an
episode together and in order, so rlx's offline path turns them into the same time-major
batch an EnvRunner samples.
"""
from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.env.external.codec import RequestError
from rlx.offline.episode_rows import AGENT_INDEX, EPS_ID, T
from rlx.core.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

#: Finished episode ids remembered, to answer "already completed" (older ones are forgotten).
_FINISHED_MEMORY = 100_000
#: The agent id of a single-agent episode.
SOLE_AGENT = None
#: The done-dict key that ends every agent of an episode (RLlib's "__all__").
ALL_AGENTS = "__all__"


@dataclass
class AgentStep:
    """One agent's observation (as the module's input row) and the action taken for it, with
    the behaviour policy's log-probability and distribution inputs when known."""

    obs: np.ndarray
    action: np.ndarray
    logp: float | None = None
    dist_inputs: np.ndarray | None = None


@dataclass
class _Agent:
    policy: str
    index: int  # the agent's index in its episode (the rows' agent_index)
    length: int = 0  # rows completed
    reward: float = 0.0  # reward since its last action
    step: AgentStep | None = None  # the pending step: awaiting the agent's next observation
    last_obs: np.ndarray | None = None  # the next observation of a step that ends without a new one
    done: bool = False  # marked done (multiagent_done_dict): its pending step ends terminated
    finished: bool = False  # its last step was written; it takes no more steps


@dataclass
class _Episode:
    key: str
    number: int
    training_enabled: bool
    last_seen: float
    view: Any = None  # the MultiAgentEpisode that policy_mapping_fn and the metrics see (multi-agent)
    agents: dict = field(default_factory=dict)
    env_steps: int = 0  # env steps completed
    stepping: bool = False  # actions were taken and await the next observations
    episode_return: float = 0.0
    all_done: bool = False
    observed: bool = False  # the view has had the first observations
    step_actions: dict = field(default_factory=dict)  # for the view: the last env step's actions
    step_rewards: dict = field(default_factory=dict)  # for the view: rewards since the last observations


@dataclass
class _Row:
    obs: np.ndarray
    action: np.ndarray
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool
    number: int
    agent: int
    t: int
    logp: float | None
    dist_inputs: np.ndarray | None
    policy: str


class EpisodeBook:
    """Thread-safe store of open episodes and completed rows.

    Args:
        max_open_episodes: episodes open at once (more get a 429 error).
        episode_timeout_s: an episode not heard of for this long is dropped (its client is
            gone); the rows it completed stay, its unfinished steps are lost.
        max_queued_steps: completed rows kept while the trainer is busy; beyond it the oldest
            are dropped (counted in `num_steps_dropped`).
        collect: keep rows for training (False: only episode statistics, for `rlx serve`).
        multi_agent: episodes have several agents, mapped to policies by the caller, and
            `drain()` returns MultiAgentBatches.
        count_env_steps: `wait_rows` counts env steps, not rows (agent steps); multi-agent only.
    """

    def __init__(self, max_open_episodes: int = 10_000, episode_timeout_s: float = 600.0,
                 max_queued_steps: int = 1_000_000, collect: bool = True, multi_agent: bool = False,
                 count_env_steps: bool = False):
        self._lock = threading.Condition()
        self._open: dict[str, _Episode] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._rows: list[_Row] = []
        self._queued_env_steps = 0  # env steps of training episodes completed since the last drain
        self._stats: list[Any] = []
        self._numbers = itertools.count(1)
        self.max_open_episodes = int(max_open_episodes)
        self.episode_timeout_s = float(episode_timeout_s)
        self.max_queued_steps = int(max_queued_steps)
        self.collect = bool(collect)
        self.multi_agent = bool(multi_agent)
        self.count_env_steps = bool(count_env_steps) and self.multi_agent
        self.num_steps = 0  # rows completed (training or not)
        self.num_env_steps = 0  # env steps completed (training or not)
        self.num_steps_dropped = 0
        self.num_episodes_expired = 0
        self._last_reap = time.monotonic()

    # ------------------------------------------------------------------ episode commands

    def start(self, key: str | None, training_enabled: bool, view: Any = None) -> str:
        """Open an episode (a fresh id when `key` is None); returns its id. `view`: the
        MultiAgentEpisode of a multi-agent episode."""
        with self._lock:
            self._reap()
            key = uuid.uuid4().hex if key is None else key
            if key in self._open:
                raise RequestError(409, f"episode {key!r} is already started.")
            if key in self._finished:
                raise RequestError(409, f"episode {key!r} has already completed.")
            if len(self._open) >= self.max_open_episodes:
                raise RequestError(429, f"{len(self._open)} episodes are open, the most this server keeps "
                                        "(max_open_episodes): end episodes before starting new ones.")
            episode = _Episode(key, next(self._numbers), bool(training_enabled), time.monotonic(), view)
            if not self.multi_agent:
                episode.agents[SOLE_AGENT] = _Agent(DEFAULT_POLICY_ID, 0)
            self._open[key] = episode
            return key

    def get(self, key: str) -> _Episode:
        """An open episode (RequestError 404/409 when unknown or finished)."""
        with self._lock:
            return self._get(key)

    def _get(self, key: str) -> _Episode:
        episode = self._open.get(key)
        if episode is None:
            if key in self._finished:
                raise RequestError(409, f"episode {key!r} has already completed.")
            raise RequestError(404, f"episode {key!r} is not open: call start_episode() first (an episode idle "
                                    f"for more than {self.episode_timeout_s:g} s is dropped).")
        episode.last_seen = time.monotonic()
        return episode

    def agents(self, key: str) -> tuple[dict[Any, str], set, Any]:
        """({agent id: policy id} of the episode's agents so far, the agents marked done whose
        last step is still open, the episode's view)."""
        with self._lock:
            episode = self._get(key)
            done = {aid for aid, a in episode.agents.items() if a.done and not a.finished}
            return {aid: a.policy for aid, a in episode.agents.items()}, done, episode.view

    def add_agents(self, key: str, policies: dict[Any, str]) -> dict[Any, str]:
        """Register agents new to the episode with their policies (an agent registered meanwhile
        keeps its policy); returns {agent id: policy id} of every agent of the episode."""
        with self._lock:
            episode = self._get(key)
            for aid, pid in policies.items():
                if aid not in episode.agents:
                    episode.agents[aid] = _Agent(pid, len(episode.agents))
                    if episode.view is not None:
                        episode.view.agent_to_module_map[aid] = pid
            return {aid: a.policy for aid, a in episode.agents.items()}

    def act(self, key: str, observations: dict[Any, np.ndarray], steps: dict[Any, AgentStep],
            raw: tuple[dict, dict] | None = None) -> None:
        """Record the agents' observations (completing their pending steps) and the steps of the
        agents that act on them (`steps`, a subset of `observations`). An agent marked done
        takes no new step: its observation ends its last one. `raw`: (observations, actions)
        as the env has them, for the episode's view."""
        with self._lock:
            episode = self._get(key)
            if episode.all_done:
                raise RequestError(409, f"every agent of episode {key!r} is done (__all__): end it with "
                                        "end_episode().")
            agents = episode.agents
            for aid in observations:
                agent = agents.get(aid)
                if agent is None:
                    raise RequestError(422, f"agent {aid!r} is not mapped to a policy in episode {key!r}.")
                if agent.finished:
                    raise RequestError(409, f"agent {aid!r} is done in episode {key!r}; it takes no more steps.")
                if aid in steps and agent.done:
                    raise RequestError(409, f"agent {aid!r} is done in episode {key!r}; it takes no more actions.")
            self._count_env_step(episode)
            for aid, row in observations.items():
                agent = agents[aid]
                self._complete(episode, agent, row, terminated=agent.done, truncated=False)
                agent.last_obs = row
                agent.finished = agent.done
            for agent in agents.values():  # done agents without an observation end at their last one
                if agent.done and not agent.finished:
                    self._complete(episode, agent, agent.last_obs, terminated=True, truncated=False)
                    agent.finished = True
            for aid, step in steps.items():
                agent = agents[aid]
                agent.step, agent.reward = step, 0.0
            episode.stepping = bool(steps)
            if episode.view is not None and raw is not None:
                self._record_view(episode, raw[0])
                episode.step_actions = raw[1]
            self._lock.notify_all()

    def add_rewards(self, key: str, rewards: dict[Any, float], dones: dict | None = None) -> None:
        """Add rewards to the agents' last actions (and their returns); mark the agents `dones`
        names (or all, with "__all__": True) done."""
        with self._lock:
            episode = self._get(key)
            agents = episode.agents
            missing = [aid for aid in list(rewards) + [a for a in dones or () if a != ALL_AGENTS] if aid not in agents]
            if missing:
                raise RequestError(422, f"agent {missing[0]!r} is not mapped to a policy in episode {key!r}.")
            for aid, reward in rewards.items():
                agent = agents[aid]
                if agent.step is not None:
                    agent.reward += reward
                episode.episode_return += reward
                if episode.view is not None:
                    episode.step_rewards[aid] = episode.step_rewards.get(aid, 0.0) + reward
            for aid, done in (dones or {}).items():
                if not done:
                    continue
                if aid == ALL_AGENTS:
                    episode.all_done = True
                    for agent in agents.values():
                        agent.done = True
                else:
                    agents[aid].done = True

    def add_reward(self, key: str, reward: float) -> None:
        """Add a reward to a single-agent episode's last action (and its return)."""
        self.add_rewards(key, {SOLE_AGENT: reward})

    def end(self, key: str, observations: dict[Any, np.ndarray], truncated: bool) -> None:
        """Finish the episode at the agents' `observations` (an agent not in them ends at its last
        observation): terminated, or truncated (cut by a time limit) for the agents not done."""
        with self._lock:
            episode = self._get(key)
            unknown = [aid for aid in observations if aid not in episode.agents]
            if unknown:
                raise RequestError(422, f"agent {unknown[0]!r} is not mapped to a policy in episode {key!r}.")
            self._count_env_step(episode)
            for aid, agent in episode.agents.items():
                if agent.finished:
                    continue
                terminated = agent.done or not truncated
                self._complete(episode, agent, observations.get(aid, agent.last_obs), terminated, not terminated)
                agent.finished = True
            del self._open[key]
            self._remember_finished(key)
            if episode.view is not None:
                self._record_view(episode, observations, final=True, truncated=truncated)
                self._stats.append(episode.view)
            else:
                self._stats.append((episode.episode_return, episode.env_steps))
            self._lock.notify_all()

    def _count_env_step(self, episode: _Episode) -> None:
        """The observations that arrive complete the env step the last actions took."""
        if not episode.stepping:
            return
        episode.stepping = False
        episode.env_steps += 1
        self.num_env_steps += 1
        if self.collect and episode.training_enabled:
            self._queued_env_steps += 1

    def _complete(self, episode: _Episode, agent: _Agent, next_obs: np.ndarray, terminated: bool,
                  truncated: bool) -> None:
        step = agent.step
        if step is None:
            return
        row = _Row(step.obs, step.action, agent.reward, next_obs, terminated, truncated, episode.number,
                   agent.index, agent.length, step.logp, step.dist_inputs, agent.policy)
        agent.length += 1
        agent.step = None
        self.num_steps += 1
        if not (self.collect and episode.training_enabled):
            return
        self._rows.append(row)
        if len(self._rows) > self.max_queued_steps:
            before = len(self._rows)
            drop = before - self.max_queued_steps
            del self._rows[:drop]
            self.num_steps_dropped += drop
            self._queued_env_steps -= self._queued_env_steps * drop // before

    @staticmethod
    def _record_view(episode: _Episode, observations: dict, final: bool = False, truncated: bool = False) -> None:
        """Tell the episode's view (what users see) what happened since the last observations."""
        view = episode.view
        if not episode.observed:
            episode.observed = True
            if not final:
                view.add_env_reset(observations, {})
        else:
            terminated = final and (not truncated or episode.all_done)
            view.add_env_step(observations, episode.step_actions, episode.step_rewards,
                              {ALL_AGENTS: terminated}, {ALL_AGENTS: final and not terminated}, {})
        episode.step_rewards = {}
        episode.step_actions = {}
        if final:
            terminated = not truncated or episode.all_done
            view.finish(terminated, not terminated)

    def _remember_finished(self, key: str) -> None:
        self._finished[key] = None
        if len(self._finished) > _FINISHED_MEMORY:
            self._finished.popitem(last=False)

    def _reap(self) -> None:
        """Drop episodes whose client has not been heard of for episode_timeout_s."""
        now = time.monotonic()
        if now - self._last_reap < min(1.0, self.episode_timeout_s / 4):
            return
        self._last_reap = now
        stale = [k for k, e in self._open.items() if now - e.last_seen > self.episode_timeout_s]
        for key in stale:
            del self._open[key]
            self._remember_finished(key)
        self.num_episodes_expired += len(stale)

    # ------------------------------------------------------------------ trainer side

    @property
    def num_open_episodes(self) -> int:
        """Episodes started and not yet ended (nor expired)."""
        with self._lock:
            return len(self._open)

    def _ready(self) -> int:
        return self._queued_env_steps if self.count_env_steps else len(self._rows)

    def wait_rows(self, min_rows: int, timeout_s: float, idle_timeout_s: float) -> int:
        """Wait until `min_rows` steps are queued (env steps with `count_env_steps`, else rows),
        or `idle_timeout_s` passed with at least one; gives up after `timeout_s` (returns the
        steps queued then)."""
        start = time.monotonic()
        with self._lock:
            while True:
                self._reap()
                n = self._ready()
                waited = time.monotonic() - start
                if n >= min_rows or (n and waited >= idle_timeout_s) or waited >= timeout_s:
                    return n
                self._lock.wait(timeout=min(0.25, max(0.01, timeout_s - waited)))

    def drain(self) -> SampleBatch | MultiAgentBatch | None:
        """The queued rows as a flat SampleBatch (each episode's rows together, in order), or a
        MultiAgentBatch of them per policy (each agent's rows of an episode together), or None
        when there are none. The behaviour columns are there only when every row (of the
        policy) has them."""
        with self._lock:
            if not self._rows:
                return None
            rows, self._rows = self._rows, []
            env_steps, self._queued_env_steps = self._queued_env_steps, 0
        if not self.multi_agent:
            return _columns(rows, with_agent_index=False)
        per_policy: dict[str, list[_Row]] = {}
        for row in rows:
            per_policy.setdefault(row.policy, []).append(row)
        return MultiAgentBatch({pid: _columns(part, with_agent_index=True) for pid, part in per_policy.items()},
                               env_steps)

    def take_episode_stats(self) -> list[Any]:
        """The episodes finished since the last call: (return, length) of single-agent ones, the
        MultiAgentEpisode of multi-agent ones."""
        with self._lock:
            stats, self._stats = self._stats, []
        return stats


def _columns(rows: list[_Row], with_agent_index: bool) -> SampleBatch:
    """Rows as a flat SampleBatch, sorted by episode, agent and step."""
    rows.sort(key=lambda r: (r.number, r.agent, r.t))
    batch = {
        Columns.OBS: np.stack([r.obs for r in rows]),
        Columns.NEXT_OBS: np.stack([r.next_obs for r in rows]),
        Columns.ACTIONS: np.stack([r.action for r in rows]),
        Columns.REWARDS: np.asarray([r.reward for r in rows], np.float32),
        Columns.TERMINATEDS: np.asarray([r.terminated for r in rows], bool),
        Columns.TRUNCATEDS: np.asarray([r.truncated for r in rows], bool),
        EPS_ID: np.asarray([r.number for r in rows], np.int64),
        T: np.asarray([r.t for r in rows], np.int64),
    }
    if with_agent_index:
        batch[AGENT_INDEX] = np.asarray([r.agent for r in rows], np.int64)
    if all(r.logp is not None and r.dist_inputs is not None for r in rows):
        batch[Columns.ACTION_LOGP] = np.asarray([r.logp for r in rows], np.float32)
        # (every row has them, checked above)
        batch[Columns.ACTION_DIST_INPUTS] = np.stack([r.dist_inputs for r in rows if r.dist_inputs is not None])
    return SampleBatch(batch)

"""MultiAgentEpisode: what callbacks and policy_mapping_fn see of one multi-agent episode.

It holds each agent's policy (module) for the episode, per-agent returns and step counts,
the last observation and info of each agent, and user data. With `record=True` (when an
episode callback needs it) it also keeps each agent's full SingleAgentEpisode.
The training data itself never lives here: the runner writes it into per-module arrays.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from rlx.env.single_agent_episode import SingleAgentEpisode


class MultiAgentEpisode:
    """One episode of one multi-agent sub-env: agents, their policies, returns and user data."""

    def __init__(self, id_: str | None = None, *, env_index: int = 0, worker_index: int = 0,
                 record: bool = False):
        self.id_ = id_ if id_ is not None else uuid.uuid4().hex
        self.env_index = env_index
        self.worker_index = worker_index
        self.user_data: dict[str, Any] = {}
        self.custom_data: dict[str, Any] = self.user_data
        self.custom_metrics: dict[str, Any] = {}
        self.hist_data: dict[str, Any] = {}
        self.media: dict[str, Any] = {}
        self.is_terminated = False
        self.is_truncated = False
        #: {agent_id: module_id} chosen by policy_mapping_fn (once per agent per episode).
        self.agent_to_module_map: dict[Any, str] = {}
        #: {agent_id: SingleAgentEpisode} when recording (an episode callback is defined).
        self.agent_episodes: dict[Any, SingleAgentEpisode] = {}
        self._record = record
        #: True for the episodes a runner makes up to ask policy_mapping_fn which policy each
        #: agent uses when it infers the policies' spaces (never stepped).
        self.is_space_probe = False
        self._agent_returns: dict[Any, float] = {}
        self._agent_steps: dict[Any, int] = {}
        self._last_obs: dict[Any, Any] = {}
        self._last_infos: dict[Any, Any] = {}
        self._last_actions: dict[Any, Any] = {}
        self._last_rewards: dict[Any, float] = {}  # since each agent's last observation
        self._awaiting: set[Any] = set()  # acted, next observation not yet received
        self._last_step_agents: list[Any] = []  # agents that got an observation in the latest step
        self.observation_space: Any = None
        self.action_space: Any = None
        self._env_t = 0
        self._start_time = time.perf_counter()
        self._end_time: float | None = None

    # ------------------------------------------------------------------ recording (by the runner)

    def add_env_reset(self, observations: dict, infos: dict) -> None:
        """Record the reset observations (and infos) of the agents that act first."""
        self.add_env_step(observations, {}, {}, {}, {}, infos, count_step=False)

    def add_env_step(self, observations: dict, actions: dict, rewards: dict, terminateds: dict,
                     truncateds: dict, infos: dict, count_step: bool = True) -> None:
        """Record one env step: the actions of the agents that acted and what the env returned."""
        if not self._record and count_step:
            self._fast_step(observations, actions, rewards, infos)
            return
        if count_step:
            self._env_t += 1
        self._last_step_agents = list(observations)
        for aid, action in actions.items():
            self._last_actions[aid] = action
            self._agent_steps[aid] = self._agent_steps.get(aid, 0) + 1
            self._awaiting.add(aid)
        for aid, reward in rewards.items():
            self._agent_returns[aid] = self._agent_returns.get(aid, 0.0) + float(reward)
            self._last_rewards[aid] = self._last_rewards.get(aid, 0.0) + float(reward)
        all_t, all_tr = bool(terminateds.get("__all__", False)), bool(truncateds.get("__all__", False))
        infos = infos if isinstance(infos, dict) else {}
        for aid in list(observations) + [a for a in self._awaiting if a not in observations]:
            done_t = bool(terminateds.get(aid, False)) or all_t
            done_tr = (bool(truncateds.get(aid, False)) or all_tr) and not done_t
            info = infos.get(aid, {})
            if aid in observations:
                self._last_obs[aid], self._last_infos[aid] = observations[aid], info
                self._agent_returns.setdefault(aid, 0.0)
                self._agent_steps.setdefault(aid, 0)
            elif not (done_t or done_tr):
                continue  # acted, still waiting for its next observation
            episode = self.agent_episodes.get(aid)
            if aid in self._awaiting:
                self._awaiting.discard(aid)
                reward = self._last_rewards.pop(aid, 0.0)
                if self._record and episode is not None and not episode.is_done:
                    episode.add_env_step(self._last_obs.get(aid), self._last_actions[aid], reward, info,
                                         terminated=done_t, truncated=done_tr)
            elif self._record and aid in observations and (episode is None or episode.is_done):
                self._last_rewards.pop(aid, None)
                episode = SingleAgentEpisode(env_index=self.env_index, worker_index=self.worker_index)
                episode.agent_id = aid
                episode.module_id = self.agent_to_module_map.get(aid)
                episode.multi_agent_episode_id = self.id_
                episode.add_env_reset(observations[aid], info)
                self.agent_episodes[aid] = episode

    def _fast_step(self, observations: dict, actions: dict, rewards: dict, infos: Any) -> None:
        """add_env_step when nothing needs the per-agent episodes: counters, returns, last values."""
        self._env_t += 1
        self._last_step_agents = list(observations)
        steps, returns = self._agent_steps, self._agent_returns
        for aid in actions:
            steps[aid] = steps.get(aid, 0) + 1
        for aid, reward in rewards.items():
            returns[aid] = returns.get(aid, 0.0) + float(reward)
        for aid in observations:
            if aid not in returns:
                returns[aid] = 0.0
                steps.setdefault(aid, 0)
        self._last_obs.update(observations)
        self._last_actions.update(actions)
        if isinstance(infos, dict):
            self._last_infos.update(infos)

    def finish(self, terminated: bool, truncated: bool) -> None:
        """Mark the episode done (the env returned "__all__")."""
        self.is_terminated = bool(terminated)
        self.is_truncated = bool(truncated) and not self.is_terminated
        self._end_time = time.perf_counter()

    # ------------------------------------------------------------------ what users read

    @property
    def is_done(self) -> bool:
        """Whether the episode ended."""
        return self.is_terminated or self.is_truncated

    @property
    def episode_id(self) -> int:
        """The old API's integer episode id (derived from `id_`)."""
        return int(self.id_[:15], 16) if _is_hex(self.id_) else abs(hash(self.id_))

    @property
    def env_id(self) -> int:
        """Old name of `env_index`."""
        return self.env_index

    @property
    def agent_ids(self) -> list[Any]:
        """Every agent that appeared in this episode so far."""
        return list(self._agent_returns)

    def get_agents(self) -> list[Any]:
        """Every agent that appeared in this episode so far (old API)."""
        return self.agent_ids

    def module_for(self, agent_id: Any) -> str | None:
        """The module (policy) id `agent_id` uses in this episode."""
        return self.agent_to_module_map.get(agent_id)

    policy_for = module_for

    def get_return(self) -> float:
        """The sum of every agent's rewards so far."""
        return float(sum(self._agent_returns.values()))

    @property
    def total_reward(self) -> float:
        """Old name of `get_return()`."""
        return self.get_return()

    @property
    def agent_episode_returns(self) -> dict[Any, float]:
        """{agent_id: return so far}."""
        return dict(self._agent_returns)

    @property
    def agent_rewards(self) -> dict[tuple[Any, str | None], float]:
        """{(agent_id, policy_id): return so far} (old API)."""
        return {(aid, self.agent_to_module_map.get(aid)): ret for aid, ret in self._agent_returns.items()}

    def env_steps(self) -> int:
        """Env steps taken in this episode."""
        return self._env_t

    def agent_steps(self) -> int:
        """Actions taken by all agents together in this episode."""
        return int(sum(self._agent_steps.values()))

    @property
    def env_t(self) -> int:
        """Env steps taken in this episode."""
        return self._env_t

    @property
    def length(self) -> int:
        """Env steps taken in this episode (old API)."""
        return self._env_t

    def __len__(self) -> int:
        return self._env_t

    def get_duration_s(self) -> float:
        """Seconds since the episode started (until it ended, once it has)."""
        end = self._end_time if self._end_time is not None else time.perf_counter()
        return end - self._start_time

    def last_observation_for(self, agent_id: Any) -> Any:
        """The last observation `agent_id` received."""
        return self._last_obs.get(agent_id)

    last_raw_obs_for = last_observation_for

    def last_info_for(self, agent_id: Any) -> Any:
        """The last info `agent_id` received."""
        return self._last_infos.get(agent_id)

    def last_action_for(self, agent_id: Any) -> Any:
        """The last action `agent_id` took."""
        return self._last_actions.get(agent_id)

    def get_agents_that_stepped(self) -> list[Any]:
        """The agents that received an observation in the latest env step (or the reset)."""
        return list(self._last_step_agents)

    def _per_agent(self, getter: str, indices: Any, agent_ids: Any, kwargs: dict) -> Any:
        if agent_ids is None and isinstance(indices, str) and indices in self.agent_episodes:
            # rlx's older form get_actions(agent_id): that agent's whole list.
            return getattr(self.agent_episodes[indices], getter)(None, **kwargs)
        if agent_ids is None:
            ids = self.get_agents_that_stepped() if indices == -1 else list(self.agent_episodes)
        else:
            ids = [agent_ids] if not isinstance(agent_ids, (list, tuple, set)) else list(agent_ids)
        out = {}
        for aid in ids:
            episode = self.agent_episodes.get(aid)
            if episode is None:
                if indices == -1 and getter == "get_observations" and aid in self._last_obs:
                    out[aid] = self._last_obs[aid]  # episodes not recorded: the latest is known
                    continue
                self._agent_episode(aid)  # raises the explanatory KeyError
            out[aid] = getattr(episode, getter)(indices, **kwargs)
        return out

    def get_observations(self, indices: Any = None, agent_ids: Any = None, **kwargs: Any) -> dict[Any, Any]:
        """{agent id: observations}: indices as in SingleAgentEpisode.get_observations, for each
        agent in `agent_ids` (default: with indices=-1 the agents that got an observation in the
        latest step, else every recorded agent). Without recorded per-agent episodes (no episode
        callback or connector), only the latest observations (indices=-1 or None) are known."""
        if indices is None and agent_ids is None and not self.agent_episodes:
            return dict(self._last_obs)
        return self._per_agent("get_observations", indices, agent_ids, kwargs)

    def get_actions(self, indices: Any = None, agent_ids: Any = None, **kwargs: Any) -> dict[Any, Any]:
        """{agent id: actions}, indexed as get_observations (recorded episodes)."""
        return self._per_agent("get_actions", indices, agent_ids, kwargs)

    def get_rewards(self, indices: Any = None, agent_ids: Any = None, **kwargs: Any) -> dict[Any, Any]:
        """{agent id: rewards per step it acted}, indexed as get_observations (recorded episodes)."""
        return self._per_agent("get_rewards", indices, agent_ids, kwargs)

    def get_infos(self, indices: Any = None, agent_ids: Any = None, **kwargs: Any) -> dict[Any, Any]:
        """{agent id: infos}, indexed as get_observations (recorded episodes)."""
        return self._per_agent("get_infos", indices, agent_ids, kwargs)

    def _agent_episode(self, agent_id: Any) -> SingleAgentEpisode:
        if agent_id not in self.agent_episodes:
            raise KeyError(f"Agent {agent_id!r} has no recorded steps in episode {self.id_}; it has "
                           f"{sorted(map(str, self.agent_episodes))}. Steps are recorded when an episode callback "
                           "(on_episode_step, on_episode_end, ...) is defined.")
        return self.agent_episodes[agent_id]

    def __repr__(self) -> str:
        return (f"MultiAgentEpisode(id_={self.id_!r}, env_index={self.env_index}, env_steps={self._env_t}, "
                f"agents={self.agent_ids!r}, return={self.get_return():.3f})")


def _is_hex(text: str) -> bool:
    try:
        int(text[:15], 16)
    except ValueError:
        return False
    return True

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

from rlx.env.episode_env_steps import SKIP_ENV_TS_TAG, EnvStepMap, get_by_env_steps
from rlx.env.episode_state import multi_agent_episode_from_state, multi_agent_episode_get_state
from rlx.env.single_agent_episode import EpisodeError, SingleAgentEpisode


class MultiAgentEpisode:
    """One episode of one multi-agent sub-env: agents, their policies, returns and user data.

    Recorded (`record=True`, as for runners that return episodes and for episode callbacks),
    it keeps each agent's SingleAgentEpisode and which agent step each env step reached
    (`env_t_to_agent_t`), so the getters index by env step as RLlib 2.60's do
    (`get_observations(-1)`: what the agents that stepped last observed) or, with
    `env_steps=False`, by each agent's own steps.
    """

    #: RLlib's mark, in env_t_to_agent_t, of an env step at which an agent got no observation.
    SKIP_ENV_TS_TAG = SKIP_ENV_TS_TAG

    def __init__(self, id_: str | None = None, *, env_index: int = 0, worker_index: int = 0,
                 record: bool = False, env_t_started: int = 0):
        self.id_ = id_ if id_ is not None else uuid.uuid4().hex
        #: The global env step at which this chunk starts (0 for an episode's first chunk).
        self.env_t_started = int(env_t_started)
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
        self._last_extra: dict[Any, Any] = {}  # the extra model outputs of each awaiting agent's action
        self._last_step_agents: list[Any] = []  # agents that got an observation in the latest step
        self.observation_space: Any = None
        self.action_space: Any = None
        self._env_t = self.env_t_started
        #: {agent_id: agent step at each env step of the chunk} (recorded episodes only).
        self._env_steps_map = EnvStepMap()
        #: Each agent's return and steps before this chunk (a chunk's own are the differences).
        self._returns_before: dict[Any, float] = {}
        self._steps_before: dict[Any, int] = {}
        self._start_time = time.perf_counter()
        self._end_time: float | None = None

    # ------------------------------------------------------------------ recording (by the runner)

    def add_env_reset(self, observations: dict, infos: dict) -> None:
        """Record the reset observations (and infos) of the agents that act first."""
        self.add_env_step(observations, {}, {}, {}, {}, infos, count_step=False)

    def add_env_step(self, observations: dict, actions: dict, rewards: dict, terminateds: dict,
                     truncateds: dict, infos: dict, count_step: bool = True,
                     extra_model_outputs: dict | None = None) -> None:
        """Record one env step: the actions of the agents that acted (and, by agent, their
        modules' extra outputs: {agent_id: {key: value}}) and what the env returned."""
        if not self._record and count_step:
            self._fast_step(observations, actions, rewards, infos)
            return
        if count_step:
            self._env_t += 1
        self._last_step_agents = list(observations)
        before = {aid: (ep, ep.t) for aid, ep in self.agent_episodes.items()} if self._record else None
        extra = extra_model_outputs or {}
        for aid, action in actions.items():
            self._last_actions[aid] = action
            if extra:
                self._last_extra[aid] = extra.get(aid)
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
                                         terminated=done_t, truncated=done_tr,
                                         extra_model_outputs=self._last_extra.pop(aid, None))
            elif self._record and aid in observations and (episode is None or episode.is_done):
                self._last_rewards.pop(aid, None)
                episode = SingleAgentEpisode(env_index=self.env_index, worker_index=self.worker_index)
                episode.agent_id = aid
                episode.module_id = self.agent_to_module_map.get(aid)
                episode.multi_agent_episode_id = self.id_
                episode.add_env_reset(observations[aid], info)
                self.agent_episodes[aid] = episode
        if before is not None:
            self._map_env_step(before)

    def _map_env_step(self, before: dict[Any, tuple[SingleAgentEpisode, int]]) -> None:
        """Record in env_t_to_agent_t which agents stepped in the env step just added (their
        episode's step count moved, or they started an episode)."""
        stepped = {}
        for aid, episode in self.agent_episodes.items():
            previous = before.get(aid)
            if previous is None or previous[0] is not episode:
                if previous is not None:
                    self._env_steps_map.forget(aid)  # (a new episode of the same agent: the old steps are gone)
                stepped[aid] = episode.t
            elif episode.t != previous[1]:
                stepped[aid] = episode.t
        self._env_steps_map.record(stepped)

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
        """The sum of every agent's rewards in this chunk (the whole episode unless it was `cut()`)."""
        return float(sum(self._agent_returns.values()) - sum(self._returns_before.values()))

    def whole_episode_return(self) -> float:
        """The sum of every agent's rewards since the episode's reset (across chunks)."""
        return float(sum(self._agent_returns.values()))

    @property
    def total_reward(self) -> float:
        """Old name of the episode's return (since its reset)."""
        return self.whole_episode_return()

    @property
    def agent_episode_returns(self) -> dict[Any, float]:
        """{agent_id: return since the episode's reset}."""
        return dict(self._agent_returns)

    @property
    def agent_rewards(self) -> dict[tuple[Any, str | None], float]:
        """{(agent_id, policy_id): return so far} (old API)."""
        return {(aid, self.agent_to_module_map.get(aid)): ret for aid, ret in self._agent_returns.items()}

    def env_steps(self) -> int:
        """Env steps taken in this chunk (the whole episode unless it was `cut()`)."""
        return self._env_t - self.env_t_started

    def agent_steps(self) -> int:
        """Actions taken by all agents together in this chunk."""
        return int(sum(self._agent_steps.values()) - sum(self._steps_before.values()))

    @property
    def env_t(self) -> int:
        """The global env step the episode has reached (env steps since its reset)."""
        return self._env_t

    @property
    def length(self) -> int:
        """Env steps since the episode's reset (old API)."""
        return self._env_t

    def __len__(self) -> int:
        return self._env_t - self.env_t_started

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

    def get_agents_that_stepped(self) -> set[Any]:
        """The agents that received an observation in the latest env step (or the reset), done or not."""
        return set(self._last_step_agents)

    @property
    def env_t_to_agent_t(self) -> dict[Any, list[Any]]:
        """{agent_id: [the agent step (its observation index) reached at each env step of this
        chunk, or "S" where it got no observation]}: RLlib's mapping, its first
        `len_lookback_buffer` entries (after a `cut()`) the env steps before the chunk. Kept for
        recorded episodes."""
        return self._env_steps_map.data

    @property
    def agent_t_started(self) -> dict[Any, int]:
        """{agent_id: the agent step its episode chunk starts at}."""
        return {aid: episode.t_started for aid, episode in self.agent_episodes.items()}

    def _per_agent(self, getter: str, indices: Any, agent_ids: Any, kwargs: dict) -> Any:
        if agent_ids is None and isinstance(indices, str) and indices in self.agent_episodes:
            # rlx's older form get_actions(agent_id): that agent's whole list.
            return getattr(self.agent_episodes[indices], getter)(None, **kwargs)
        ids = list(self.agent_episodes) if agent_ids is None else \
            [agent_ids] if not isinstance(agent_ids, (list, tuple, set)) else list(agent_ids)
        out = {}
        for aid in ids:
            out[aid] = getattr(self._agent_episode(aid), getter)(indices, **kwargs)
        return out

    def _get(self, what: str, indices: Any, agent_ids: Any, env_steps: bool, return_list: bool,
             kwargs: dict, key: str | None = None) -> Any:
        """The getters' one path: by env step (RLlib's default) or by each agent's steps."""
        if not self.agent_episodes and what in ("observations", "infos") and indices in (None, -1) \
                and agent_ids is None and not return_list:
            # Not recorded (no episode callback or connector): only the latest values are known.
            latest = self._last_obs if what == "observations" else self._last_infos
            if indices is None:
                return dict(latest)
            return {aid: latest[aid] for aid in self._last_step_agents if aid in latest}
        if not env_steps:
            if return_list:
                raise ValueError(f"get_{what}(env_steps=False, return_list=True): a list of multi-agent dicts has "
                                 "one dict per env step; use env_steps=True, or return_list=False.")
            if key is not None:
                ids = list(self.agent_episodes) if agent_ids is None else \
                    [agent_ids] if not isinstance(agent_ids, (list, tuple, set)) else list(agent_ids)
                return {aid: self._agent_episode(aid).get_extra_model_outputs(key, indices, **kwargs) for aid in ids}
            return self._per_agent(f"get_{what}", indices, agent_ids, kwargs)
        if agent_ids is not None and not isinstance(agent_ids, (list, tuple, set, frozenset)):
            self._agent_episode(agent_ids)  # (an unknown agent: the explanatory KeyError)
        if isinstance(indices, str) and agent_ids is None and indices in self.agent_episodes:
            return self._per_agent(f"get_{what}", indices, None, kwargs)
        if not self.agent_episodes and self._env_t > self.env_t_started:
            raise KeyError(f"Episode {self.id_} recorded no per-agent steps, so get_{what}() knows only the latest "
                           "observations; steps are recorded when an episode callback (on_episode_step, "
                           "on_episode_end, ...) or a connector is defined, or the runner returns episodes.")
        return get_by_env_steps(self, what, indices, agent_ids, key=key, return_list=return_list,
                                neg_index_as_lookback=bool(kwargs.get("neg_index_as_lookback", False)),
                                fill=kwargs.get("fill"), one_hot_discrete=bool(kwargs.get("one_hot_discrete", False)))

    def get_observations(self, indices: Any = None, agent_ids: Any = None, *, env_steps: bool = True,
                         return_list: bool = False, **kwargs: Any) -> Any:
        """{agent id: observations}, as RLlib's MultiAgentEpisode.get_observations.

        With `env_steps` (default) `indices` are env steps of this chunk (0: its first, -1: the
        latest; a list or slice: several), and only the agents that got an observation at an
        env step appear for it (`fill=...` gives the others that value); with
        `env_steps=False` they are each agent's own steps. `neg_index_as_lookback`, `fill` and
        `one_hot_discrete` work as in SingleAgentEpisode; `return_list` gives a list of
        {agent id: observation}, one per env step. Without recorded per-agent episodes (no
        episode callback or connector), only the latest observations (indices=-1 or None) are known.
        """
        return self._get("observations", indices, agent_ids, env_steps, return_list, kwargs)

    def get_actions(self, indices: Any = None, agent_ids: Any = None, *, env_steps: bool = True,
                    return_list: bool = False, **kwargs: Any) -> Any:
        """{agent id: actions}, indexed as get_observations: the action an agent took after its
        observation at each env step (the latest env step has none yet; an action still waiting
        for the agent's next observation is included)."""
        return self._get("actions", indices, agent_ids, env_steps, return_list, kwargs)

    def get_rewards(self, indices: Any = None, agent_ids: Any = None, *, env_steps: bool = True,
                    return_list: bool = False, **kwargs: Any) -> Any:
        """{agent id: rewards}, indexed as get_actions: what each action earned until the agent's
        next observation."""
        return self._get("rewards", indices, agent_ids, env_steps, return_list, kwargs)

    def get_infos(self, indices: Any = None, agent_ids: Any = None, *, env_steps: bool = True,
                  return_list: bool = False, **kwargs: Any) -> Any:
        """{agent id: infos}, indexed as get_observations."""
        return self._get("infos", indices, agent_ids, env_steps, return_list, kwargs)

    def get_extra_model_outputs(self, key: str, indices: Any = None, agent_ids: Any = None, *,
                                env_steps: bool = True, return_list: bool = False, **kwargs: Any) -> Any:
        """{agent id: extra model outputs under `key`} (e.g. "action_logp"), indexed as get_actions."""
        return self._get("extra_model_outputs", indices, agent_ids, env_steps, return_list, kwargs, key=key)

    def get_terminateds(self) -> dict[Any, bool]:
        """{agent id: whether its episode terminated, "__all__": whether this episode did}."""
        out = {aid: bool(episode.is_terminated) for aid, episode in self.agent_episodes.items()}
        out["__all__"] = bool(self.is_terminated)
        return out

    def get_truncateds(self) -> dict[Any, bool]:
        """{agent id: whether its episode was truncated, "__all__": whether this episode was}."""
        out = {aid: bool(episode.is_truncated) for aid, episode in self.agent_episodes.items()}
        out["__all__"] = bool(self.is_truncated)
        return out

    def get_agents_to_act(self) -> set[Any]:
        """The agents that received an observation in the latest env step and are not done: those
        whose actions the env expects next."""
        return {aid for aid in self._last_step_agents
                if aid not in self.agent_episodes or not self.agent_episodes[aid].is_done}

    # ------------------------------------------------------------------ chunks

    def cut(self, len_lookback_buffer: int = 0) -> "MultiAgentEpisode":
        """A successor chunk of this ongoing episode: same id, length 0, starting at global env
        step `self.env_t`; each agent's episode still going on is cut (keeping
        `len_lookback_buffer` steps as lookback), agents' hanging actions and rewards carry over."""
        if self.is_done:
            raise EpisodeError(f"Episode {self.id_} is done; only an ongoing episode can be cut into a successor.")
        successor = MultiAgentEpisode(self.id_, env_index=self.env_index, worker_index=self.worker_index,
                                      record=self._record, env_t_started=self._env_t)
        successor.agent_to_module_map = dict(self.agent_to_module_map)
        successor.agent_episodes = {aid: ep.cut(len_lookback_buffer) for aid, ep in self.agent_episodes.items()
                                    if not ep.is_done}
        successor.user_data.update(self.user_data)
        successor.observation_space, successor.action_space = self.observation_space, self.action_space
        successor._agent_returns = dict(self._agent_returns)
        successor._agent_steps = dict(self._agent_steps)
        successor._returns_before = dict(self._agent_returns)
        successor._steps_before = dict(self._agent_steps)
        successor._last_obs, successor._last_infos = dict(self._last_obs), dict(self._last_infos)
        successor._last_actions, successor._last_rewards = dict(self._last_actions), dict(self._last_rewards)
        successor._awaiting = set(self._awaiting)
        successor._last_extra = dict(self._last_extra)
        successor._last_step_agents = list(self._last_step_agents)
        successor._env_steps_map = self._env_steps_map.cut(len_lookback_buffer, successor.agent_episodes)
        return successor

    def concat_episode(self, other: "MultiAgentEpisode") -> None:
        """Append chunk `other` (this episode's successor, starting at this chunk's last env step)
        in place: each agent's episode is concatenated with its successor (agents new in `other`
        are added)."""
        if other.id_ != self.id_:
            raise EpisodeError(f"concat_episode: episode {other.id_} is not a chunk of episode {self.id_}.")
        if self.is_done:
            raise EpisodeError(f"concat_episode: episode {self.id_} is already done; nothing can follow it.")
        if other.env_t_started != self._env_t:
            raise EpisodeError(f"concat_episode: the other chunk starts at env step {other.env_t_started}, this one "
                               f"ends at env step {self._env_t}; concatenate chunks in order.")
        for aid, episode in other.agent_episodes.items():
            mine = self.agent_episodes.get(aid)
            if mine is None or mine.is_done:
                self.agent_episodes[aid] = episode
            else:
                mine.concat_episode(episode)
        self.agent_to_module_map.update(other.agent_to_module_map)
        for aid, ret in other._agent_returns.items():
            self._agent_returns[aid] = self._agent_returns.get(aid, 0.0) + ret - other._returns_before.get(aid, 0.0)
        for aid, steps in other._agent_steps.items():
            self._agent_steps[aid] = self._agent_steps.get(aid, 0) + steps - other._steps_before.get(aid, 0)
        self._env_steps_map.extend(other._env_steps_map)
        self._env_t = other._env_t
        self._last_obs.update(other._last_obs)
        self._last_infos.update(other._last_infos)
        self._last_actions.update(other._last_actions)
        self._last_step_agents = list(other._last_step_agents)
        self.is_terminated, self.is_truncated = other.is_terminated, other.is_truncated
        self._end_time = other._end_time
        self.custom_data.update(other.custom_data)

    def to_numpy(self) -> "MultiAgentEpisode":
        """Turn every agent's episode into NumPy arrays (SingleAgentEpisode.to_numpy), in place; returns self."""
        for episode in self.agent_episodes.values():
            episode.to_numpy()
        return self

    def get_state(self) -> dict[str, Any]:
        """This episode as a dict of plain values, in RLlib's layout plus what rlx's episode keeps
        besides (rlx.env.episode_state); `MultiAgentEpisode.from_state` rebuilds it."""
        return multi_agent_episode_get_state(self)

    @staticmethod
    def from_state(state: dict[str, Any]) -> "MultiAgentEpisode":
        """The episode of a `get_state()` dict (rlx's or RLlib's); EpisodeStateError when malformed."""
        return multi_agent_episode_from_state(state, MultiAgentEpisode, SingleAgentEpisode)

    def _agent_episode(self, agent_id: Any) -> SingleAgentEpisode:
        if agent_id not in self.agent_episodes:
            raise KeyError(f"Agent {agent_id!r} has no recorded steps in episode {self.id_}; it has "
                           f"{sorted(map(str, self.agent_episodes))}. Steps are recorded when an episode callback "
                           "(on_episode_step, on_episode_end, ...) is defined.")
        return self.agent_episodes[agent_id]

    def __repr__(self) -> str:
        return (f"MultiAgentEpisode(id_={self.id_!r}, env_index={self.env_index}, env_steps={len(self)}, "
                f"agents={self.agent_ids!r}, return={self.get_return():.3f})")


def _is_hex(text: str) -> bool:
    try:
        int(text[:15], 16)
    except ValueError:
        return False
    return True

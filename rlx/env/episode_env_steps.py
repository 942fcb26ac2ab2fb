"""A MultiAgentEpisode's data by env step, as RLlib 2.60's MultiAgentEpisode indexes it.

Agents of a multi-agent env do not all step at every env step, so each agent's
SingleAgentEpisode counts its own steps. `EnvStepMap` keeps, per agent, the agent step (the
index of its observation, `SingleAgentEpisode.t` at the time) it reached at every env step of
the chunk, or `SKIP_ENV_TS_TAG` ("S") where the agent got no observation: RLlib's
`MultiAgentEpisode.env_t_to_agent_t`. Entry 0 (after a lookback of `lookback` entries kept
by `cut()`) is the chunk's first env step. `get_by_env_steps` answers
`get_observations(indices, env_steps=True)` and its siblings from it: env step `i` of
observations and infos is what the agent observed at env step `i`; of actions, rewards and
extra model outputs what it did after observing at env step `i` (the last env step has none
yet; an action still waiting for its next observation is the episode's "hanging" one).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from rlx.env.single_agent_episode import _positions

#: RLlib's mark of an env step at which an agent got no observation.
SKIP_ENV_TS_TAG = "S"
#: What get_by_env_steps reads per step of an agent: observations/infos by observation index,
#: the others by action index.
_BY_OBSERVATION = ("observations", "infos")


class EnvStepMap:
    """{agent id: [agent step or "S"] per env step} of one episode chunk, with `lookback` entries
    (env steps before the chunk) in front."""

    def __init__(self, lookback: int = 0, data: dict[Any, list[Any]] | None = None):
        self.lookback = int(lookback)
        self.data: dict[Any, list[Any]] = data if data is not None else {}
        #: Entries per agent (lookback included): every list has this length.
        self.size = max((len(v) for v in self.data.values()), default=0)

    def record(self, agent_t: dict[Any, int]) -> None:
        """Add one env step: `agent_t` maps the agents that got an observation at it to their
        agent step; every other agent gets "S"; an agent seen first gets "S" before."""
        for aid in agent_t:
            if aid not in self.data:
                self.data[aid] = [SKIP_ENV_TS_TAG] * self.size
        for aid, entries in self.data.items():
            entries.append(agent_t.get(aid, SKIP_ENV_TS_TAG))
        self.size += 1

    def forget(self, agent_id: Any) -> None:
        """Mark every recorded step of `agent_id` "S" (its episode was replaced by a new one)."""
        if agent_id in self.data:
            self.data[agent_id] = [SKIP_ENV_TS_TAG] * self.size

    def cut(self, len_lookback_buffer: int, agents: Iterable[Any]) -> "EnvStepMap":
        """The map of the successor chunk of `agents`: the last env step (its entry 0) and up to
        `len_lookback_buffer` env steps before it as lookback."""
        keep = max(0, min(int(len_lookback_buffer), self.size - 1))
        return EnvStepMap(keep, {aid: list(self.data[aid][self.size - keep - 1:]) for aid in agents
                                 if aid in self.data})

    def extend(self, other: "EnvStepMap") -> None:
        """Append the env steps of `other` (the successor chunk) after its entry 0."""
        start = other.lookback + 1
        steps = other.size - start
        for aid, entries in other.data.items():
            if aid not in self.data:
                self.data[aid] = [SKIP_ENV_TS_TAG] * self.size
            self.data[aid].extend(entries[start:])
        for aid, entries in self.data.items():
            if aid not in other.data:
                entries.extend([SKIP_ENV_TS_TAG] * steps)
        self.size += max(steps, 0)

    def get_state(self) -> dict[Any, dict[str, Any]]:
        """{agent id: {"data": [...], "lookback": L}} (the layout of RLlib's buffer states)."""
        return {aid: {"data": list(entries), "lookback": self.lookback} for aid, entries in self.data.items()}

    @classmethod
    def from_state(cls, state: dict[Any, Any]) -> "EnvStepMap":
        """The map of a `get_state()` dict."""
        lookbacks = {int(v.get("lookback", 0)) for v in state.values()} or {0}
        if len(lookbacks) != 1:
            raise ValueError(f"env_t_to_agent_t: every agent's lookback must be the same, got {sorted(lookbacks)}.")
        return cls(lookbacks.pop(), {aid: list(v["data"]) for aid, v in state.items()})


def get_by_env_steps(episode: Any, what: str, indices: Any, agent_ids: Any, *, neg_index_as_lookback: bool,
                     fill: Any, return_list: bool, key: str | None = None, one_hot_discrete: bool = False) -> Any:
    """`episode`'s `what` ("observations", "actions", "rewards", "infos", "extra_model_outputs"
    under `key`) at env steps `indices` (None: all; an int: one; a list or slice: several), for
    the agents in `agent_ids` (None: all) that stepped there.

    Returns {agent id: value} for one index, {agent id: [values]} for several (an agent's
    steps without an observation left out, or `fill` given there), or with `return_list` a
    list of {agent id: value}, one per env step.
    """
    by_obs = what in _BY_OBSERVATION
    steps = episode._env_steps_map
    n = len(episode) + 1 if by_obs else len(episode)
    has_fill = fill is not None
    positions, single = _positions(n, indices, "env step", neg_index_as_lookback, has_fill)
    plist = [positions] if isinstance(positions, int) else list(positions)
    if not has_fill and isinstance(indices, slice) and neg_index_as_lookback:
        plist = [p for p in plist if 0 <= steps.lookback + p < steps.lookback + n]
    if single and not has_fill and not 0 <= steps.lookback + plist[0] < steps.lookback + n:
        raise IndexError(f"env step index {indices} out of range: the episode chunk has {n} env steps of {what}"
                         + (f" (and {steps.lookback} in its lookback)." if steps.lookback else "."))
    wanted = _agent_list(episode, agent_ids)
    per_step: list[dict[Any, Any]] = [{} for _ in plist]
    for aid in wanted:
        sa_episode = episode.agent_episodes.get(aid)
        entries = steps.data.get(aid)
        if sa_episode is None or entries is None:
            continue
        for row, p in enumerate(plist):
            j = steps.lookback + p
            agent_t = entries[j] if 0 <= j < steps.lookback + n and j < len(entries) else None
            if agent_t is None or agent_t == SKIP_ENV_TS_TAG:
                if has_fill:
                    per_step[row][aid] = _filled(sa_episode, what, key, fill)
                continue
            index = int(agent_t) - sa_episode.t_started
            if what not in _BY_OBSERVATION and index >= len(sa_episode) and aid not in episode._awaiting:
                # The agent's last observation (it is done, or has not acted yet): no action after it.
                if has_fill:
                    per_step[row][aid] = _filled(sa_episode, what, key, fill)
                continue
            per_step[row][aid] = _agent_value(episode, sa_episode, aid, what, key, index, fill, one_hot_discrete)
    if return_list:
        return per_step
    if single:
        return per_step[0]
    out: dict[Any, Any] = {}
    for aid in wanted:
        values = [row[aid] for row in per_step if aid in row]
        if values:
            sa_episode = episode.agent_episodes[aid]
            as_array = sa_episode.is_numpy and what != "infos" and not isinstance(values[0], (dict, tuple))
            out[aid] = np.asarray(values) if as_array else values
    return out


def _agent_list(episode: Any, agent_ids: Any) -> list[Any]:
    if agent_ids is None:
        return list(episode.agent_episodes)
    if isinstance(agent_ids, (list, tuple, set, frozenset)):
        return list(agent_ids)
    return [agent_ids]


def _agent_value(episode: Any, sa_episode: Any, aid: Any, what: str, key: str | None, index: int, fill: Any,
                 one_hot_discrete: bool) -> Any:
    """The value of `sa_episode` at its chunk-relative step `index` (negative: its lookback);
    an action at the agent's latest observation is the hanging one, kept by the episode."""
    if what not in _BY_OBSERVATION and index == len(sa_episode) and aid in episode._awaiting:
        if what == "actions":
            return episode._last_actions[aid]
        if what == "rewards":
            return episode._last_rewards.get(aid, 0.0)
        return (episode._last_extra.get(aid) or {}).get(key)
    kwargs: dict[str, Any] = {"neg_index_as_lookback": True}
    if fill is not None:
        kwargs["fill"] = fill
    if what == "actions" and one_hot_discrete:
        kwargs["one_hot_discrete"] = True
    if what == "extra_model_outputs":
        return sa_episode.get_extra_model_outputs(key, index, **kwargs)
    return getattr(sa_episode, f"get_{what}")(index, **kwargs)


def _filled(sa_episode: Any, what: str, key: str | None, fill: Any) -> Any:
    """`fill` shaped like the agent's items (an index no episode reaches, read with `fill`)."""
    beyond = -(10**9)
    if what == "extra_model_outputs":
        return sa_episode.get_extra_model_outputs(key, beyond, neg_index_as_lookback=True, fill=fill)
    return getattr(sa_episode, f"get_{what}")(beyond, neg_index_as_lookback=True, fill=fill)

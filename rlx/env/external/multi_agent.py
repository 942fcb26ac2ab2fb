"""The episode commands of multi-agent external episodes (ExternalMultiAgentEnv, a multi-agent
policy server): dicts keyed by agent id, each agent acting with the policy that the config's
policy_mapping_fn gives it (once per agent per episode, as the multi-agent EnvRunner asks it).

Every agent's steps go into the episode book as rows of its policy, so the batches drained
from the book are MultiAgentBatches that the offline path turns into the per-policy
time-major batches a multi-agent EnvRunner samples.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.env.external.codec import RequestError, _short
from rlx.env.external.episodes import ALL_AGENTS, AgentStep, EpisodeBook
from rlx.env.external.inference import PolicySet
from rlx.env.external_env import ExternalEnvStopped
from rlx.env.multi_agent_episode import MultiAgentEpisode


class MultiAgentEpisodeBackend:
    """The episode commands of multi-agent external episodes on a book and the policies' acting copies.

    Args:
        book: the episode book (multi_agent=True).
        policies: the acting copies of the runner's policies.
        runner: the Algorithm's MultiAgentEnvRunner (its policy_mapping_fn maps the agents).
    """

    multi_agent = True

    def __init__(self, book: EpisodeBook, policies: PolicySet, runner: Any):
        self.book = book
        self.policy = policies
        self.runner = runner
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise ExternalEnvStopped("the Algorithm training on this external env was stopped")

    # ------------------------------------------------------------------ agents

    def policies_for(self, episode_id: str, agent_ids: Any) -> dict[Any, str]:
        """{agent id: policy id} of `agent_ids` in the episode; agents new to it are mapped with
        policy_mapping_fn (RequestError 422 when it cannot map one)."""
        return self._policies(episode_id, agent_ids)[0]

    def _policies(self, episode_id: str, agent_ids: Any) -> tuple[dict[Any, str], set]:
        known, done, view = self.book.agents(episode_id)
        new = {aid: self._map(aid, view) for aid in agent_ids if aid not in known}
        if new:
            known = self.book.add_agents(episode_id, new)
        return {aid: known[aid] for aid in agent_ids}, done

    def _map(self, agent_id: Any, view: Any) -> str:
        if agent_id == ALL_AGENTS:
            raise RequestError(422, "'__all__' is not an agent id; it only ends every agent in a done dict.")
        try:
            hash(agent_id)
        except TypeError:
            raise RequestError(422, f"agent ids must be hashable, got {_short(agent_id)}.") from None
        try:
            pid = self.runner._mapper(agent_id, view, worker=self.runner)
        except Exception as err:  # the user's mapping function: its error names the agent
            raise RequestError(422, f"agent {agent_id!r} is unknown: policy_mapping_fn cannot map it to one of the "
                                    f"policies {sorted(self.policy.policies)} ({type(err).__name__}: {err}).") from None
        if pid not in self.runner.slots:
            raise RequestError(422, f"agent {agent_id!r} is mapped to policy {pid!r}, which this Algorithm does not "
                                    "have.")
        return pid

    # ------------------------------------------------------------------ episode commands

    def start_episode(self, episode_id: str | None, training_enabled: bool = True) -> str:
        """Open a multi-agent episode; returns its id."""
        import uuid

        self._check_open()
        key = uuid.uuid4().hex if episode_id is None else episode_id
        return self.book.start(key, training_enabled, view=MultiAgentEpisode(key))

    def get_action(self, episode_id: str, observation_dict: dict) -> dict:
        """The policies' actions for the agents of `observation_dict` (recorded as their next
        steps); agents marked done get no action: the observation ends their last step."""
        self._check_open()
        observations = _agent_values(observation_dict, "observation_dict")
        policies, done = self._policies(episode_id, observations)
        rows = {aid: self.policy.get(policies[aid]).prepare(obs) for aid, obs in observations.items()}
        groups: dict[str, list[Any]] = {}
        for aid in observations:
            if aid not in done:
                groups.setdefault(policies[aid], []).append(aid)
        steps, actions = {}, {}
        for pid, members in groups.items():
            policy = self.policy.get(pid)
            for aid, decision in zip(members, policy.act_rows([rows[aid] for aid in members])):
                actions[aid] = decision.env_action
                steps[aid] = AgentStep(rows[aid], policy.row_action(decision.env_action), decision.logp,
                                       decision.dist_inputs)
        self.book.act(episode_id, rows, steps, raw=(observation_dict, actions))
        return actions

    def log_action(self, episode_id: str, observation_dict: dict, action_dict: dict,
                   logp: dict | None = None, dist_inputs: dict | None = None) -> None:
        """Record the agents' observations and the actions taken for them (with the behaviour
        policy's log-probabilities and distribution inputs, per agent, when known)."""
        self._check_open()
        observations = _agent_values(observation_dict, "observation_dict")
        actions = _agent_values(action_dict, "action_dict", allow_empty=True)
        policies, done = self._policies(episode_id, observations)
        extra = [a for a in actions if a not in observations]
        if extra:
            raise RequestError(422, f"action_dict has an action for agent {extra[0]!r}, which is not in "
                                    "observation_dict.")
        missing = [a for a in observations if a not in actions and a not in done]
        if missing:
            raise RequestError(422, f"agent {missing[0]!r} observed but has no action in action_dict (only agents "
                                    "marked done in log_returns' multiagent_done_dict may observe without acting).")
        rows = {aid: self.policy.get(policies[aid]).prepare(obs) for aid, obs in observations.items()}
        steps = {}
        for aid, action in actions.items():
            policy = self.policy.get(policies[aid])
            lp = None if logp is None else logp.get(aid)
            dist = None if dist_inputs is None else dist_inputs.get(aid)
            steps[aid] = AgentStep(rows[aid], policy.row_action(action), None if lp is None else float(lp),
                                   None if dist is None else np.asarray(dist, np.float32))
        self.book.act(episode_id, rows, steps, raw=(observation_dict, action_dict))

    def log_returns(self, episode_id: str, reward_dict: dict, info_dict: dict | None = None,
                    multiagent_done_dict: dict | None = None) -> None:
        """Add rewards to the agents' last actions; `multiagent_done_dict` marks agents done
        ("__all__": True: all of them)."""
        self._check_open()
        rewards = _agent_values(reward_dict, "reward_dict", allow_empty=True)
        dones = {} if multiagent_done_dict is None else _agent_values(multiagent_done_dict, "multiagent_done_dict",
                                                                      allow_empty=True)
        self._policies(episode_id, list(rewards) + [a for a in dones if a != ALL_AGENTS])
        self.book.add_rewards(episode_id, {aid: _number(r, aid) for aid, r in rewards.items()},
                              {aid: bool(d) for aid, d in dones.items()})

    def end_episode(self, episode_id: str, observation_dict: dict, truncated: bool = False) -> None:
        """Finish the episode at the agents' final observations."""
        self._check_open()
        observations = _agent_values(observation_dict or {}, "observation_dict", allow_empty=True)
        policies, _ = self._policies(episode_id, observations)
        rows = {aid: self.policy.get(policies[aid]).prepare(obs) for aid, obs in observations.items()}
        self.book.end(episode_id, rows, bool(truncated))


def _agent_values(value: Any, what: str, allow_empty: bool = False) -> dict:
    if not isinstance(value, dict):
        raise RequestError(422, f"{what} must be a dict keyed by agent id (a multi-agent episode), got "
                                f"{type(value).__name__}.")
    if not value and not allow_empty:
        raise RequestError(422, f"{what} names no agent.")
    return value


def _number(value: Any, agent_id: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RequestError(422, f"the reward of agent {agent_id!r} must be a number, got {_short(value)}.") from None
    if not np.isfinite(number):
        raise RequestError(422, f"the reward of agent {agent_id!r} must be finite, got {number}.")
    return number

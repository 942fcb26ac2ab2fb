"""A multi-agent policy server's request handling: the commands take JSON objects keyed by
agent id, and each agent's values are checked against the spaces of its policy.

- GET_ACTION `{"episode_id", "observation": {agent: obs}}` -> `{"action": {agent: action}}`
  (agents marked done get no action).
- LOG_ACTION `{"episode_id", "observation": {...}, "action": {...}}`, plus
  `"action_logp"`/`"action_dist_inputs"` objects from local-inference clients.
- LOG_RETURNS `{"episode_id", "reward": {agent: number}, "info": {...}, "done": {agent: bool}}`
  (`"done": {"__all__": true}` ends every agent).
- END_EPISODE `{"episode_id", "observation": {...}, "truncated": false}`.
- MAP_AGENTS `{"episode_id", "agent_ids": [...]}` -> `{"policies": {agent: policy id}}`: the
  policy each agent uses in the episode (local-inference clients act with it).
- COMPUTE_ACTIONS `{"observations": [...], "policy_id": "p0"}`: one policy's actions, no episode.

Agent ids are the objects' keys: strings, where one that writes an integer ("0") is read as
that integer (JSON turned the client's integer ids into strings); answers key by the same
strings. GET /spec describes every policy, GET /weights holds every policy's weights as
'<policy id>/<parameter>' tensors.
"""
from __future__ import annotations

import time
from typing import Any

from rlx.env.config_view import EnvConfig
from rlx.env.external import codec
from rlx.env.external.codec import RequestError
from rlx.env.external.server import MAX_COMPUTE_BATCH, ServerApp, encoded_config
from rlx.utils.checkpoints import space_to_dict


class MultiAgentServerApp(ServerApp):
    """Answers HTTP requests with a MultiAgentEpisodeBackend (rlx.env.external.multi_agent).

    Args:
        backend: the episode commands (book + the policies' acting copies + agent mapping).
        spec: a callable returning the JSON-able description local-inference clients build
            their modules from.
    """

    def __init__(self, backend: Any, spec: Any):
        super().__init__(backend, spec)
        self._commands["MAP_AGENTS"] = self._map_agents

    # ------------------------------------------------------------------ values of agents

    def _agents(self, request: dict, key: str, episode: str, allow_empty: bool = False) -> tuple[dict, dict]:
        """(the agent dict of field `key`, {agent id: policy id} of its agents)."""
        values = codec.agent_dict(codec.field(request, key), key, allow_empty=allow_empty)
        return values, self.backend.policies_for(episode, list(values))

    def _observations(self, request: dict, episode: str, allow_empty: bool = False) -> dict:
        values, policies = self._agents(request, "observation", episode, allow_empty)
        return {aid: codec.from_space(v, self.policy.get(policies[aid]).observation_space,
                                      f"observation[{str(aid)!r}]", check_bounds=False)
                for aid, v in values.items()}

    # ------------------------------------------------------------------ commands

    def _get_action(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        actions = self.backend.get_action(key, self._observations(request, key))
        return {"action": {str(aid): codec.to_jsonable(a) for aid, a in actions.items()}}

    def _log_action(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        observations = self._observations(request, key)
        raw_actions, policies = self._agents(request, "action", key, allow_empty=True)
        actions = {aid: codec.from_space(v, self.policy.get(policies[aid]).action_space, f"action[{str(aid)!r}]",
                                         check_bounds=True)
                   for aid, v in raw_actions.items()}
        logp, dist = request.get("action_logp"), request.get("action_dist_inputs")
        if (logp is None) != (dist is None):
            raise RequestError(422, "give both action_logp and action_dist_inputs, or neither.")
        if logp is not None:
            logp = codec.agent_dict(logp, "action_logp", allow_empty=True)
            dist = codec.agent_dict(dist, "action_dist_inputs", allow_empty=True)
            if set(logp) != set(actions) or set(dist) != set(actions):
                raise RequestError(422, "action_logp and action_dist_inputs must name the same agents as action.")
            logp = {aid: codec.log_prob(value, f"action_logp[{str(aid)!r}]") for aid, value in logp.items()}
            dist = {aid: codec.float_row(v, self.policy.get(policies[aid]).dist_size,
                                         f"action_dist_inputs[{str(aid)!r}]") for aid, v in dist.items()}
        self.backend.log_action(key, observations, actions, logp, dist)
        return {}

    def _log_returns(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        rewards = codec.agent_dict(codec.field(request, "reward"), "reward", allow_empty=True)
        for aid, value in rewards.items():
            try:
                rewards[aid] = codec.reward(value)
            except RequestError as err:
                raise RequestError(422, f"reward[{str(aid)!r}]: {err}") from None
        info = codec.info(request.get("info"))
        done = request.get("done")
        if done is not None:
            done = codec.agent_dict(done, "done", allow_empty=True, allow_all=True)
            done = {aid: codec.flag(v, f"done[{str(aid)!r}]", False) for aid, v in done.items()}
        self.backend.log_returns(key, rewards, info, done)
        return {}

    def _end_episode(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        truncated = codec.flag(request.get("truncated"), "truncated", False)
        self.backend.end_episode(key, self._observations(request, key, allow_empty=True), truncated)
        return {}

    def _map_agents(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        ids = codec.field(request, "agent_ids")
        if not isinstance(ids, list) or not 0 < len(ids) <= codec.MAX_AGENTS:
            raise RequestError(400, f"agent_ids must be a list of 1 to {codec.MAX_AGENTS} agent ids.")
        agents = [codec.agent_id(a) for a in ids]
        policies = self.backend.policies_for(key, agents)
        return {"policies": {str(aid): pid for aid, pid in policies.items()}}

    def _compute_actions(self, request: dict) -> dict:
        observations = codec.field(request, "observations")
        if not isinstance(observations, list) or not 0 < len(observations) <= MAX_COMPUTE_BATCH:
            raise RequestError(400, f"observations must be a list of 1 to {MAX_COMPUTE_BATCH} observations.")
        pids = sorted(self.policy.policies)
        pid = request.get("policy_id")
        if pid is None and len(pids) == 1:
            pid = pids[0]
        if pid not in self.policy.policies:
            raise RequestError(422, f"policy_id must name the policy to act with, one of {pids}; got "
                                    f"{codec._short(pid)}.")
        explore = codec.flag(request.get("explore"), "explore", False)
        policy = self.policy.get(pid)
        rows = [policy.prepare(codec.from_space(o, policy.observation_space, f"observations[{i}]", check_bounds=False))
                for i, o in enumerate(observations)]
        return {"actions": codec.to_jsonable([d.env_action for d in policy.act_many(rows, explore)])}


def describe_multi_agent(config: EnvConfig, policies: Any) -> dict:
    """The /spec answer of a multi-agent server: what a local-inference client needs to build
    every policy's module (agents are mapped by the server: MAP_AGENTS)."""
    algo_class = getattr(config, "algo_class", None)
    return {
        "algorithm_class": None if algo_class is None else f"{algo_class.__module__}:{algo_class.__qualname__}",
        "config": encoded_config(config),
        "multi_agent": True,
        "policies": {pid: {"observation_space": space_to_dict(p.observation_space),
                           "action_space": space_to_dict(p.action_space), "dist_size": p.dist_size}
                     for pid, p in sorted(policies.policies.items())},
        "weights_version": policies.version,
        "time": time.time(),
    }

"""PolicyClient: run episodes against a policy server (`ray.rllib.env.policy_client`).

    client = PolicyClient("http://127.0.0.1:9900", inference_mode="remote")
    episode_id = client.start_episode()
    action = client.get_action(episode_id, obs)
    client.log_returns(episode_id, reward)
    client.end_episode(episode_id, obs)

`inference_mode="remote"`: every call is one request and the server's current policy acts.
`inference_mode="local"`: the client builds the server's module from GET /spec, loads its
weights (safetensors) and refreshes them every `update_interval` seconds; it acts locally
and reports its steps (with their log-probabilities) to the server in batches, at each
episode's end and every `report_every` commands. Bodies are JSON; nothing is pickled.

Against a multi-agent server (a config with several policies), observations, actions,
rewards and dones are dicts keyed by agent id, as ExternalMultiAgentEnv takes them:

    actions = client.get_action(episode_id, {0: obs0, 1: obs1})
    client.log_returns(episode_id, {0: r0, 1: r1}, multiagent_done_dict={1: True})
    client.end_episode(episode_id, {0: obs0})

In local mode the client builds every policy's module and asks the server once per agent
and episode which policy the agent uses (the server's policy_mapping_fn decides).
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from rlx.env.external.auth import resolve_token
from rlx.env.external.codec import dumps, to_jsonable
from rlx.env.external.http import HttpClient, PolicyServerError
from rlx.env.external.local_policy import build_local_algorithm
from rlx.utils.errors import ConfigError, NotSupportedYetError

__all__ = ["PolicyClient", "PolicyServerError"]


class PolicyClient:
    """REST client of a PolicyServerInput (or `rlx serve`).

    Args:
        address: the server's URL, e.g. "http://127.0.0.1:9900".
        inference_mode: "remote" (the server acts) or "local" (this process acts with a copy).
        update_interval: local mode: seconds between weight refreshes (None: only on
            `update_policy_weights()`).
        session: RLlib's requests.Session; not supported (rlx keeps its own connection).
        auth_token: the server's token (default: $RLX_POLICY_SERVER_TOKEN).
        timeout: seconds to wait for one answer.
        connect_timeout: seconds to keep retrying while the server is not up yet.
        report_every: local mode: send buffered steps once this many commands wait.
    """

    def __init__(self, address: str, inference_mode: str = "local", update_interval: float | None = 10.0,
                 session: Any = None, *, auth_token: str | None = None, timeout: float = 60.0,
                 connect_timeout: float = 60.0, report_every: int = 300):
        if session is not None:
            raise NotSupportedYetError("PolicyClient(session=...)", "rlx keeps one keep-alive connection itself",
                                       fix="Leave session=None.")
        if inference_mode not in ("local", "remote"):
            raise ConfigError(f"inference_mode must be 'local' or 'remote', got {inference_mode!r}.")
        self.address = address
        self.local = inference_mode == "local"
        self._http = HttpClient(address, resolve_token(auth_token), timeout=timeout, connect_timeout=connect_timeout)
        self._lock = threading.Lock()
        self._pending: list[dict] = []
        self._report_every = max(1, int(report_every))
        self.update_interval = update_interval
        self._policy: Any = None
        self._policies: dict[str, Any] = {}  # multi-agent local inference: every policy
        self.multi_agent = False  # known in local mode (from /spec)
        self._agent_policies: dict[str, dict] = {}  # multi-agent local inference: episode -> {agent: policy}
        self._done_agents: dict[str, set] = {}  # multi-agent local inference: episode -> agents marked done
        self._algo: Any = None
        self._weights_version: str | None = None
        self._last_update = 0.0
        if self.local:
            self._setup_local_policy()

    # ------------------------------------------------------------------ episode API

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Start an episode; returns its id (a fresh one when `episode_id` is None)."""
        if not self.local:
            return self._send({"command": "START_EPISODE", "episode_id": episode_id,
                               "training_enabled": training_enabled})["episode_id"]
        self._update_local_policy()
        episode_id = uuid.uuid4().hex if episode_id is None else episode_id
        self._queue({"command": "START_EPISODE", "episode_id": episode_id, "training_enabled": training_enabled})
        return episode_id

    def get_action(self, episode_id: str | list, observation: Any) -> Any:
        """The policy's action for `observation` (recorded as the episode's next step). With a
        list of episode ids, `observation` maps each id to its observation and a dict of
        actions comes back. Multi-agent: `observation` maps agent ids to observations and the
        actions come back as a dict keyed by the same ids (agents marked done get none)."""
        if isinstance(episode_id, (list, tuple)):
            return {eid: self.get_action(eid, observation[eid]) for eid in episode_id}
        if not self.local:
            action = self._send({"command": "GET_ACTION", "episode_id": episode_id,
                                 "observation": to_jsonable(observation)})["action"]
            return _same_keys(action, observation)
        self._update_local_policy()
        if self.multi_agent:
            return self._local_multi_agent_action(episode_id, observation)
        action, _, extra = self._policy.compute_single_action(self._policy.filter_observation(observation))
        self._queue({"command": "LOG_ACTION", "episode_id": episode_id, "observation": to_jsonable(observation),
                     "action": to_jsonable(action), "action_logp": float(extra["action_logp"]),
                     "action_dist_inputs": to_jsonable(extra["action_dist_inputs"])})
        return action

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Record an action chosen outside the policy for `observation`."""
        command = {"command": "LOG_ACTION", "episode_id": episode_id, "observation": to_jsonable(observation),
                   "action": to_jsonable(action)}
        if self.local:
            self._queue(command)
        else:
            self._send(command)

    def log_returns(self, episode_id: str, reward: float | dict, info: dict | None = None,
                    multiagent_done_dict: dict | None = None) -> None:
        """Record a reward for the episode's last action. Multi-agent: `reward` maps agent ids
        to rewards, and `multiagent_done_dict` marks agents done ({agent_id: True}, or
        {"__all__": True} for all)."""
        command = {"command": "LOG_RETURNS", "episode_id": episode_id, "reward": to_jsonable(reward),
                   "info": to_jsonable(info) if info else None, "done": to_jsonable(multiagent_done_dict)}
        if self.local:
            if self.multi_agent and multiagent_done_dict:
                done = self._done_agents.setdefault(episode_id, set())
                done.update(aid for aid, d in multiagent_done_dict.items() if d)
            self._queue(command)
        else:
            self._send(command)

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """End the episode at `observation` (`truncated=True`: cut by a time limit, not terminated)."""
        command = {"command": "END_EPISODE", "episode_id": episode_id, "observation": to_jsonable(observation),
                   "truncated": bool(truncated)}
        if self.local:
            self._agent_policies.pop(episode_id, None)
            self._done_agents.pop(episode_id, None)
            self._queue(command)
            self.flush()
        else:
            self._send(command)

    def compute_actions(self, observations: list, explore: bool = False) -> list:
        """Actions for a batch of observations, without an episode (what `rlx serve` is for)."""
        return self._send({"command": "COMPUTE_ACTIONS", "observations": to_jsonable(list(observations)),
                           "explore": bool(explore)})["actions"]

    def update_policy_weights(self) -> None:
        """Fetch the server's current weights now (local inference)."""
        self._update_local_policy(force=True)

    def flush(self) -> None:
        """Send the steps buffered in local inference mode."""
        with self._lock:
            commands, self._pending = self._pending, []
        if commands:
            self._send({"command": "REPORT", "commands": commands})

    def close(self) -> None:
        """Send what is buffered and close the connection."""
        try:
            self.flush()
        finally:
            self._http.close_connection()
            if self._algo is not None:
                self._algo.stop()
                self._algo = None

    # ------------------------------------------------------------------ internals

    def _send(self, data: dict) -> dict:
        _, _, body = self._http.request("POST", "/", dumps(data))
        return json.loads(body)

    def _queue(self, command: dict) -> None:
        with self._lock:
            self._pending.append(command)
            full = len(self._pending) >= self._report_every
        if full:
            self.flush()

    def _setup_local_policy(self) -> None:
        _, _, body = self._http.request("GET", "/spec")
        spec = json.loads(body)
        self._algo = build_local_algorithm(spec)
        self.multi_agent = bool(spec.get("multi_agent"))
        if self.multi_agent:
            self._policies = {pid: self._algo.get_policy(pid) for pid in spec["policies"]}
        else:
            self._policy = self._algo.get_policy()
        self._update_local_policy(force=True)

    def _local_multi_agent_action(self, episode_id: str, observations: dict) -> dict:
        """Act for a multi-agent episode's agents with the local policies (the server maps new
        agents to policies) and queue the step with its log-probabilities."""
        mapping = self._agent_policies.setdefault(episode_id, {})
        new = [aid for aid in observations if aid not in mapping]
        if new:  # one request: the queued commands (the episode's start), then the mapping
            with self._lock:
                commands, self._pending = self._pending, []
            ask = {"command": "MAP_AGENTS", "episode_id": episode_id, "agent_ids": to_jsonable(new)}
            answer = self._send({"command": "REPORT", "commands": commands + [ask]})["results"][-1]["policies"]
            mapping.update({aid: answer[str(aid)] for aid in new})
        done = self._done_agents.get(episode_id, ())
        actions, logps, dists = {}, {}, {}
        for aid, obs in observations.items():
            if aid in done:
                continue
            policy = self._policies[mapping[aid]]
            action, _, extra = policy.compute_single_action(policy.filter_observation(obs))
            actions[aid], logps[aid] = action, float(extra["action_logp"])
            dists[aid] = extra["action_dist_inputs"]
        self._queue({"command": "LOG_ACTION", "episode_id": episode_id, "observation": to_jsonable(observations),
                     "action": to_jsonable(actions), "action_logp": to_jsonable(logps),
                     "action_dist_inputs": to_jsonable(dists)})
        return actions

    def _update_local_policy(self, force: bool = False) -> None:
        if not self.local:
            return
        now = time.monotonic()
        if not force and (self.update_interval is None or now - self._last_update < self.update_interval):
            return
        from rlx.env.external.inference import load_weights_bytes

        self._last_update = now
        query = "" if self._weights_version is None else f"?version={self._weights_version}"
        status, headers, body = self._http.request("GET", "/weights" + query)
        if status == 304:
            return
        if self.multi_agent:
            from rlx.env.external.inference import load_state, split_policy_weights

            for pid, arrays in split_policy_weights(body).items():
                if pid in self._policies:
                    load_state(self._policies[pid].module, arrays)
        else:
            load_weights_bytes(self._policy.module, body)
        content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        self._weights_version = content_type.partition("version=")[2] or None


def _same_keys(answer: Any, observation: Any) -> Any:
    """A multi-agent answer keyed by the client's own agent ids (JSON made them strings)."""
    if not isinstance(answer, dict) or not isinstance(observation, dict):
        return answer
    ids = {str(k): k for k in observation}
    return {ids.get(k, k): v for k, v in answer.items()}

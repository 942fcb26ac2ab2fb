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
        actions comes back."""
        if isinstance(episode_id, (list, tuple)):
            return {eid: self.get_action(eid, observation[eid]) for eid in episode_id}
        if not self.local:
            return self._send({"command": "GET_ACTION", "episode_id": episode_id,
                               "observation": to_jsonable(observation)})["action"]
        self._update_local_policy()
        action, _, extra = self._policy.compute_single_action(observation)
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

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None,
                    multiagent_done_dict: dict | None = None) -> None:
        """Record a reward for the episode's last action."""
        command = {"command": "LOG_RETURNS", "episode_id": episode_id, "reward": to_jsonable(reward),
                   "info": to_jsonable(info) if info else None, "done": to_jsonable(multiagent_done_dict)}
        if self.local:
            self._queue(command)
        else:
            self._send(command)

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """End the episode at `observation` (`truncated=True`: cut by a time limit, not terminated)."""
        command = {"command": "END_EPISODE", "episode_id": episode_id, "observation": to_jsonable(observation),
                   "truncated": bool(truncated)}
        if self.local:
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
        from rlx.env.external.local_policy import build_local_algorithm

        _, _, body = self._http.request("GET", "/spec")
        self._algo = build_local_algorithm(json.loads(body))
        self._policy = self._algo.get_policy()
        self._update_local_policy(force=True)

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
        load_weights_bytes(self._policy.module, body)
        content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        self._weights_version = content_type.partition("version=")[2] or None

"""The policy server's request handling: routes, commands, validation against the spaces.

Routes (JSON bodies; every one needs `Authorization: Bearer <token>` when the server has a token):

- `POST /` or `POST /api`: one command, `{"command": "GET_ACTION", "episode_id": ..., ...}`:
  START_EPISODE, GET_ACTION, LOG_ACTION, LOG_RETURNS, END_EPISODE (RLlib's names), plus
  COMPUTE_ACTIONS (`{"observations": [...], "explore": false}`, no episode: deployment)
  and REPORT (`{"commands": [...]}`, several commands in order: local-inference clients).
- `GET /weights?version=N`: the acting weights as safetensors bytes (304 when unchanged).
- `GET /spec`: spaces, algorithm class and config, for local-inference clients.
- `GET /health`: open episodes and steps seen.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from rlx.env.config_view import EnvConfig
from rlx.env.external import codec
from rlx.env.external.codec import RequestError
from rlx.env.external.http import BINARY, JSON, Response
from rlx.utils.checkpoints import encode_value, space_to_dict

#: Commands one REPORT request may hold.
MAX_REPORT_COMMANDS = 10_000
#: Observations one COMPUTE_ACTIONS request may hold.
MAX_COMPUTE_BATCH = 4096


class ServerApp:
    """Answers HTTP requests with an EpisodeBackend (rlx.env.external.reader).

    Args:
        backend: the episode commands (book + batched policy).
        spec: a callable returning the JSON-able description local-inference clients build
            their module from.
    """

    def __init__(self, backend: Any, spec: Callable[[], dict]):
        self.backend = backend
        self.policy = backend.policy
        self._spec = spec
        self.num_requests = 0
        self._commands: dict[str, Callable[[dict], dict]] = {
            "START_EPISODE": self._start_episode,
            "GET_ACTION": self._get_action,
            "LOG_ACTION": self._log_action,
            "LOG_RETURNS": self._log_returns,
            "END_EPISODE": self._end_episode,
            "COMPUTE_ACTIONS": self._compute_actions,
            "REPORT": self._report,
        }

    def __call__(self, method: str, path: str, body: bytes, raw_path: str = "") -> Response:
        self.num_requests += 1  # approximate under threads; for the health report only
        if method == "POST" and path in ("/", "/api"):
            request = codec.loads(body)
            return 200, JSON, codec.dumps(self.command(request))
        if method == "GET" and path == "/weights":
            return self._weights(raw_path)
        if method == "GET" and path == "/spec":
            # Box bounds may be infinite: Python's JSON writes (and reads) them as Infinity.
            return 200, JSON, json.dumps(self._spec()).encode()
        if method == "GET" and path == "/health":
            book = self.backend.book
            return 200, JSON, codec.dumps({"status": "ok", "open_episodes": book.num_open_episodes,
                                           "steps": book.num_steps, "weights_version": self.policy.version})
        if path in ("/", "/api", "/weights", "/spec", "/health"):
            raise RequestError(405, f"{method} {path} is not allowed; see the routes in rlx.env.external.server.")
        raise RequestError(404, f"no route {path!r}: POST / for commands, GET /weights, /spec or /health.")

    def command(self, request: dict, nested: bool = False) -> dict:
        """Run one command (a decoded JSON object) and return its JSON-able answer."""
        name = codec.field(request, "command")
        if not isinstance(name, str) or name.upper() not in self._commands or (nested and name.upper() == "REPORT"):
            raise RequestError(400, f"unknown command {codec._short(name)}; commands are "
                                    f"{', '.join(c for c in self._commands if not (nested and c == 'REPORT'))}.")
        return self._commands[name.upper()](request)

    # ------------------------------------------------------------------ commands

    def _obs(self, request: dict, key: str = "observation") -> Any:
        return codec.from_space(codec.field(request, key), self.policy.observation_space, key, check_bounds=False)

    def _start_episode(self, request: dict) -> dict:
        key = codec.episode_id(request.get("episode_id"), allow_none=True)
        enabled = codec.flag(request.get("training_enabled"), "training_enabled", True)
        return {"episode_id": self.backend.start_episode(key, enabled)}

    def _get_action(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        action = self.backend.get_action(key, self._obs(request))
        return {"action": codec.to_jsonable(action)}

    def _log_action(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        obs = self._obs(request)
        action = codec.from_space(codec.field(request, "action"), self.policy.action_space, "action",
                                  check_bounds=True)
        logp = request.get("action_logp")
        dist = request.get("action_dist_inputs")
        if (logp is None) != (dist is None):
            raise RequestError(422, "give both action_logp and action_dist_inputs, or neither.")
        if logp is not None:
            logp = codec.log_prob(logp)
            dist = codec.float_row(dist, self.policy.dist_size, "action_dist_inputs")
        self.backend.log_action(key, obs, action, logp, dist)
        return {}

    def _log_returns(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        reward = codec.reward(codec.field(request, "reward"))
        codec.info(request.get("info"))
        if request.get("done") is not None:
            raise RequestError(422, "log_returns(multiagent_done_dict=...) is for multi-agent servers; this one "
                                    "serves one policy: end episodes with end_episode().")
        self.backend.log_returns(key, reward)
        return {}

    def _end_episode(self, request: dict) -> dict:
        key = codec.episode_id(codec.field(request, "episode_id"))
        truncated = codec.flag(request.get("truncated"), "truncated", False)
        self.backend.end_episode(key, self._obs(request), truncated)
        return {}

    def _compute_actions(self, request: dict) -> dict:
        observations = codec.field(request, "observations")
        if not isinstance(observations, list) or not 0 < len(observations) <= MAX_COMPUTE_BATCH:
            raise RequestError(400, f"observations must be a list of 1 to {MAX_COMPUTE_BATCH} observations.")
        explore = codec.flag(request.get("explore"), "explore", False)
        space = self.policy.observation_space
        rows = [self.policy.prepare(codec.from_space(o, space, f"observations[{i}]", check_bounds=False))
                for i, o in enumerate(observations)]
        actions = [d.env_action for d in self.policy.act_many(rows, explore)]
        return {"actions": codec.to_jsonable(actions)}

    def _report(self, request: dict) -> dict:
        commands = codec.field(request, "commands")
        if not isinstance(commands, list) or len(commands) > MAX_REPORT_COMMANDS:
            raise RequestError(400, f"commands must be a list of at most {MAX_REPORT_COMMANDS} command objects.")
        results = []
        for i, sub in enumerate(commands):
            if not isinstance(sub, dict):
                raise RequestError(400, f"commands[{i}] is not a JSON object (the {i} before it were applied).")
            try:
                results.append(self.command(sub, nested=True))
            except RequestError as err:
                raise RequestError(err.status, f"commands[{i}]: {err} (the {i} before it were applied).") from None
        return {"results": results}

    # ------------------------------------------------------------------ weights

    def _weights(self, raw_path: str) -> Response:
        query = parse_qs(urlsplit(raw_path).query)
        version, data = self.policy.weights_bytes()
        known = query.get("version", [None])[0]
        if known is not None and known == str(version):
            return 304, BINARY, b""
        return 200, f"{BINARY}; version={version}", data


def describe(config: EnvConfig, policy: Any) -> dict:
    """The /spec answer: what a local-inference client needs to build the same module."""
    algo_class = getattr(config, "algo_class", None)
    return {
        "algorithm_class": None if algo_class is None else f"{algo_class.__module__}:{algo_class.__qualname__}",
        "config": encoded_config(config),
        "observation_space": space_to_dict(policy.observation_space),
        "action_space": space_to_dict(policy.action_space),
        "weights_version": policy.version,
        "dist_size": policy.dist_size,
        "time": time.time(),
    }


def encoded_config(config: EnvConfig) -> dict:
    """The config as checkpoint JSON, without the settings that cannot be written as JSON."""
    encoded = {}
    for key, value in config.to_dict().items():
        item = encode_value(value)
        if not _has_unserializable(item):
            encoded[key] = item
    return encoded


def _has_unserializable(value: Any) -> bool:
    if isinstance(value, dict):
        return "__unserializable__" in value or any(_has_unserializable(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unserializable(v) for v in value)
    return False

"""PolicyServerInput: train on episodes that external applications report over HTTP
(`ray.rllib.env.policy_server_input`).

    config = (PPOConfig()
              .environment(env=None, observation_space=obs_space, action_space=act_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 9900)))

The server is an ExternalEnv whose `run()` serves HTTP: each client's episodes are open
episodes of that env, its actions come from the current policy (remote inference) or are
logged by the client (local inference), and its completed steps become the same training
batches an EnvRunner samples. With a multi-agent config (config.multi_agent) it is an
ExternalMultiAgentEnv: observations, actions, rewards and dones are JSON objects keyed by
agent id, each agent acting with its policy. See docs/external.md for the protocol and
security notes.
"""
from __future__ import annotations

from typing import Any

from rlx.env.external.auth import DEFAULT_ADDRESS, check_bind, resolve_token
from rlx.env.external.http import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_REQUEST_TIMEOUT_S,
    HttpServer,
    check_limits,
)
from rlx.env.external.multi_agent_server import MultiAgentServerApp, describe_multi_agent
from rlx.env.external.reader import ExternalEnvInput, fragment_length, has_policy_slots
from rlx.env.external.server import ServerApp, describe
from rlx.env.external_env import ExternalEnv
from rlx.utils.errors import ConfigError


class _ServingEnv(ExternalEnv):
    """The external env whose episodes are the HTTP clients'; `run()` serves requests. With a
    multi-agent config it is a multi-agent external env: requests hold dicts keyed by agent id."""

    def __init__(self, ioctx: Any, address: str, port: int, token: str | None, max_request_bytes: int,
                 limits: dict[str, Any]):
        worker = ioctx.worker
        self._rlx_multi_agent = has_policy_slots(worker)
        if self._rlx_multi_agent:
            super().__init__(None, None)  # each policy has its spaces (worker.slots)
        else:
            super().__init__(worker.action_space, worker.observation_space)
        self._config = ioctx.config
        self._http_args = (address, port, token, max_request_bytes)
        self._http_limits = limits
        self.http: HttpServer | None = None

    def _attach(self, backend: Any) -> None:
        super()._attach(backend)
        address, port, token, max_bytes = self._http_args
        if backend.multi_agent:
            app: Any = MultiAgentServerApp(backend, spec=lambda: describe_multi_agent(self._config, backend.policy))
        else:
            app = ServerApp(backend, spec=lambda: describe(self._config, backend.policy))
        # Binds now: the port is known.
        self.http = HttpServer(app, address, port, token, max_bytes, **self._http_limits)

    def run(self) -> None:
        """Serve HTTP requests until stop()."""
        assert self.http is not None
        self.http.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self.http is not None:
            self.http.stop()


class PolicyServerInput(ExternalEnvInput):
    """An InputReader fed by PolicyClients over HTTP.

    Args:
        ioctx: the IOContext the Algorithm passes to `input_`.
        address: the address to listen on; anything but a loopback address needs `auth_token`.
        port: the port (0 picks a free one; see `.port`).
        idle_timeout: seconds `next()` waits for a full fragment before returning what it has.
        max_sample_queue_size: RLlib's queue of batches; here the bound on steps kept while
            the trainer is busy is `max_sample_queue_size * rollout_fragment_length`.
        auth_token: clients must send `Authorization: Bearer <token>` (default:
            $RLX_POLICY_SERVER_TOKEN); requests without it get 401.
        max_request_bytes: requests with larger bodies get 413.
        episode_timeout_s: an episode whose client has not been heard of for this long is dropped.
        max_open_episodes: episodes open at once (more get 429).
        max_connections: connections served at once; one more is answered 503 and closed.
        request_timeout_s: a request must arrive whole within this many seconds of its first
            byte (else 408 and the connection is closed), and its answer be taken within as long.
        idle_timeout_s: a keep-alive connection is closed after this long without a request.
    """

    def __init__(self, ioctx: Any, address: str = DEFAULT_ADDRESS, port: int = 9900, idle_timeout: float = 3.0,
                 max_sample_queue_size: int = 20, *, auth_token: str | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, episode_timeout_s: float = 600.0,
                 max_open_episodes: int = 10_000, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S):
        token = resolve_token(auth_token)
        if not isinstance(address, str) or not address:
            raise ConfigError(f"PolicyServerInput address must be a host name or IP, got {address!r}.")
        check_bind(address, token)
        if int(max_sample_queue_size) < 1:
            raise ConfigError("max_sample_queue_size must be at least 1.")
        limits: dict[str, Any] = {"max_connections": max_connections, "request_timeout_s": request_timeout_s,
                                  "idle_timeout_s": idle_timeout_s}
        check_limits(**limits)  # now, not when the server binds
        env = _ServingEnv(ioctx, address, int(port), token, int(max_request_bytes), limits)
        queued = max(int(max_sample_queue_size) * fragment_length(ioctx.config), 10_000)
        super().__init__(ioctx, env, idle_timeout=idle_timeout, episode_timeout_s=episode_timeout_s,
                         max_queued_steps=queued, max_open_episodes=max_open_episodes)
        self.address = address

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self.env.http.port

    @property
    def url(self) -> str:
        """The http://address:port clients connect to."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}"

"""`rlx serve CHECKPOINT`: answer action requests with a trained policy over HTTP.

The same transport and auth as PolicyServerInput (rlx.env.external): PolicyClients in
remote or local inference mode run episodes against it (nothing is trained), and
`POST / {"command": "COMPUTE_ACTIONS", "observations": [...]}` answers a batch without
episodes. It listens on 127.0.0.1 unless --address says otherwise, which needs a token
($RLX_POLICY_SERVER_TOKEN or --auth-token-file). A multi-agent checkpoint is served with all
its policies (rlx.env.external.multi_agent_server), its policy_mapping_fn mapping the agents.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rlx.algorithms.algorithm import Algorithm
from rlx.cli.env_source import import_modules, rebuild_env_source, resolve_gymnasium_id
from rlx.cli.evaluate import read_checkpoint_metadata
from rlx.env.external.auth import check_bind, resolve_token
from rlx.env.external.episodes import EpisodeBook
from rlx.env.external.http import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_TIMEOUT_S,
    HttpServer,
    check_limits,
)
from rlx.env.external.inference import BatchedPolicy, PolicySet
from rlx.env.external.multi_agent import MultiAgentEpisodeBackend
from rlx.env.external.multi_agent_server import MultiAgentServerApp, describe_multi_agent
from rlx.env.external.reader import EpisodeBackend, check_external_runner, has_policy_slots
from rlx.env.external.server import ServerApp, describe
from rlx.utils.errors import ConfigError


class PolicyService:
    """A checkpoint's policy behind an HTTP server (nothing is trained)."""

    def __init__(self, checkpoint: str, address: str = "127.0.0.1", port: int = 9900, auth_token: str | None = None,
                 explore: bool = False, max_request_bytes: int = 1 << 20, config_overrides: dict | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S):
        token = resolve_token(auth_token)
        check_bind(address, token)
        limits: dict[str, Any] = {"max_connections": max_connections, "request_timeout_s": request_timeout_s,
                                  "idle_timeout_s": idle_timeout_s}
        check_limits(**limits)  # before the checkpoint is loaded
        # Serving reads no training input and writes no output (a policy trained from a
        # PolicyServerInput stored its input_ callable, which is not needed, nor restorable).
        overrides = {"num_env_runners": 0, "evaluation_interval": None, "input": "sampler", "output": None,
                     **(config_overrides or {})}
        self.algo = Algorithm.from_checkpoint(checkpoint, config_overrides=overrides)
        try:
            runner = self.algo.env_runner_group.local_env_runner
            check_external_runner(runner, "rlx serve")
            self.app: ServerApp
            backend: EpisodeBackend | MultiAgentEpisodeBackend
            if has_policy_slots(runner):  # every policy; the checkpoint's policy_mapping_fn maps agents
                policies = PolicySet(runner, explore=explore)
                backend = MultiAgentEpisodeBackend(EpisodeBook(collect=False, multi_agent=True), policies, runner)
                self.app = MultiAgentServerApp(backend,
                                               spec=lambda: describe_multi_agent(self.algo.config, policies))
            else:
                policy = BatchedPolicy(runner, explore=explore)
                backend = EpisodeBackend(EpisodeBook(collect=False), policy)
                self.app = ServerApp(backend, spec=lambda: describe(self.algo.config, policy))
            self.http = HttpServer(self.app, address, port, token, max_request_bytes, **limits)
        except BaseException:
            self.algo.stop()
            raise
        host = f"[{address}]" if ":" in address else address
        self.url = f"http://{host}:{self.http.port}"

    def start(self) -> "PolicyService":
        """Serve on a background thread; returns self."""
        self.http.start()
        return self

    def serve_forever(self) -> None:
        """Serve on this thread until interrupted."""
        self.http.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the Algorithm."""
        self.http.stop()
        self.algo.stop()


def run_serve_command(args: argparse.Namespace) -> int:
    """Run `rlx serve` until interrupted."""
    import json

    import_modules(args.imports)
    # What the checkpoint records about where its env comes from, as rlx evaluate does.
    rebuild_env_source(read_checkpoint_metadata(args.checkpoint), args.checkpoint)
    token = None
    if args.auth_token_file:
        path = Path(args.auth_token_file)
        if not path.is_file():
            raise ConfigError(f"--auth-token-file {path} does not exist.")
        token = path.read_text().strip()
    overrides = json.loads(args.config) if args.config else None
    if overrides is not None and not isinstance(overrides, dict):
        raise ConfigError("--config must be a JSON object of settings.")
    if args.env is not None:
        overrides = {**(overrides or {}), "env": resolve_gymnasium_id(args.env)[0]}
    service = PolicyService(args.checkpoint, address=args.address, port=args.port, auth_token=token,
                            explore=args.explore, max_request_bytes=args.max_request_bytes,
                            config_overrides=overrides, max_connections=args.max_connections,
                            request_timeout_s=args.request_timeout_s, idle_timeout_s=args.idle_timeout_s)
    print(f"rlx serve: serving {args.checkpoint} at {service.url} (Ctrl-C to stop)", flush=True)
    try:
        service.serve_forever()
    finally:
        service.stop()
    return 0

"""EnvRunnerServerForExternalInference: an EnvRunner whose episodes come from an external
simulator over TCP (RLlib's `ray.rllib.env.external.env_runner_server_for_external_inference`).

    config = (PPOConfig()
              .environment(observation_space=obs_space, action_space=act_space,
                           env_config={"port": 5555})
              .env_runners(env_runner_cls=EnvRunnerServerForExternalInference))

Each runner listens on `env_config["port"]` + its worker index (port 0: any free port,
see `.port`) for one client at a time, which speaks RLlib 2.60's RLlink protocol
(rlx.env.external.rllink). The client owns the env and the acting: it asks for the config
(GET_CONFIG: the pickled AlgorithmConfig, whose `get_rl_module_spec().build()` is a module
like this runner's) and the weights (GET_STATE), steps its simulator with its own copy of
the module, and sends the episodes it collected (EPISODES, or EPISODES_AND_GET_STATE to wait
for the weights the next training step produces: on-policy sampling).

`sample()` waits (at most `sample_timeout_s`) for episodes to arrive and returns them as a
time-major batch: they go through the external episode book and the offline path's
conversion (rlx.env.external.episode_chunks), the same path an HTTP client's episodes take.
A client blocked on EPISODES_AND_GET_STATE gets its SET_STATE when this runner next samples
or gets new weights, whichever comes first; by then the Learner's update is done.

env_config keys: "port" (5555), "host" ("localhost"; RLlink has no authentication),
"message_timeout_s" (60: a message must arrive whole within this time of its first byte).
"""
from __future__ import annotations

import dataclasses
import logging
import pickle
import threading
import time
from typing import Any

import numpy as np

from rlx.core import COMPONENT_RL_MODULE
from rlx.core.columns import Columns
from rlx.env.config_view import EnvConfig
from rlx.env.env_runner import EnvInfo, SingleAgentEnvRunner
from rlx.env.external.codec import RequestError
from rlx.env.external.episode_chunks import ChunkWriter, read_chunks
from rlx.env.external.episodes import EpisodeBook
from rlx.env.external.inference import BatchedPolicy
from rlx.env.external.reader import EpisodeBackend, check_external_runner
from rlx.env.external.rllink import RLlink
from rlx.env.external.rllink_server import RLlinkServer
from rlx.offline.behaviour import fill_behaviour_columns
from rlx.offline.spaces import spaces_of
from rlx.offline.training_batch import to_training_batch
from rlx.utils.errors import ConfigError, NotSupportedYetError

logger = logging.getLogger("rlx")

#: RLlib's key of the weights' version in SET_STATE's state.
WEIGHTS_SEQ_NO = "weights_seq_no"
#: The requests this server answers.
REQUESTS = (RLlink.PING, RLlink.GET_CONFIG, RLlink.GET_STATE, RLlink.EPISODES, RLlink.EPISODES_AND_GET_STATE)


class EnvRunnerServerForExternalInference(SingleAgentEnvRunner):
    """An EnvRunner that serves one external client over TCP and samples the episodes it sends.

    Args are SingleAgentEnvRunner's; the spaces come from
    `config.environment(observation_space=..., action_space=...)` (there is no env here).
    """

    def __init__(self, config: EnvConfig, worker_index: int = 0, num_workers: int = 0, module_spec: Any = None,
                 module: Any = None, env_info: EnvInfo | None = None, **kwargs: Any):
        if config.observation_space is None or config.action_space is None:
            raise ConfigError("EnvRunnerServerForExternalInference has no env to read spaces from: set "
                              "config.environment(observation_space=..., action_space=...) to the external "
                              "simulator's spaces.")
        if config.policies is not None:  # (there is no env here that could be a MultiAgentEnv)
            raise NotSupportedYetError("EnvRunnerServerForExternalInference with a multi-agent config",
                                       "RLlink episodes are SingleAgentEpisodes",
                                       fix="Train one policy, or use PolicyServerInput for multi-agent clients.")
        if env_info is None:
            env_info = EnvInfo(config.observation_space, config.action_space, 1, False)
        super().__init__(config, worker_index=worker_index, num_workers=num_workers, module_spec=module_spec,
                         module=module, env_info=env_info)
        check_external_runner(self, type(self).__name__)
        self._client_spec = self._completed_spec(module_spec)
        env_config = dict(config.env_config or {})
        base_port = int(env_config.get("port", 5555))
        self.book = EpisodeBook(max_open_episodes=10_000, episode_timeout_s=600.0, max_queued_steps=10_000_000)
        self._policy = BatchedPolicy(self, explore=True)  # prepares rows; the client does the acting
        self._chunk_writer = ChunkWriter(EpisodeBackend(self.book, self._policy))
        self._arrived = threading.Condition()
        self._steps_waiting = 0
        self._state_lock = threading.Lock()
        self._state: dict[str, Any] = {}
        self._state_pending = False  # a client waits for SET_STATE (EPISODES_AND_GET_STATE)
        self._pickled_config: bytes | None = None
        self._snapshot_state()
        self.server = RLlinkServer(
            self._handle, host=str(env_config.get("host", "localhost")),
            port=0 if base_port == 0 else base_port + int(worker_index),
            message_timeout_s=float(env_config.get("message_timeout_s", 60.0)),
            send_timeout_s=float(env_config.get("message_timeout_s", 60.0)),
            name=f"rlx-rllink-runner{worker_index}")
        logger.info("EnvRunnerServerForExternalInference %d waits for its client on %s:%d.", worker_index,
                    self.server.host, self.server.port)

    # ------------------------------------------------------------------ connection

    @property
    def port(self) -> int:
        """The port this runner listens on."""
        return self.server.port

    @property
    def host(self) -> str:
        """The address this runner listens on."""
        return self.server.host

    def env_info(self) -> EnvInfo:
        """The spaces (a runner without envs of its own asks this)."""
        return EnvInfo(self.observation_space, self.action_space, self.num_envs, False)

    def assert_healthy(self) -> None:
        """Raise when the serving thread has died."""
        if not self.server.is_alive:
            raise RuntimeError(f"The RLlink server of EnvRunner {self.worker_index} (port {self.port}) stopped: "
                               f"{self.server.error!r}")

    def _completed_spec(self, module_spec: Any) -> Any:
        """The spec a client builds this runner's module from (spaces and model config filled in)."""
        spec = module_spec if module_spec is not None else self.config.get_rl_module_spec()
        return dataclasses.replace(
            spec,
            observation_space=spec.observation_space or self.module_observation_space,
            action_space=spec.action_space or self.action_space,
            model_config=spec.model_config if spec.model_config is not None else dict(self.config.model))

    # ------------------------------------------------------------------ messages (serving thread)

    def _handle(self, kind: RLlink, fields: dict) -> dict | None:
        if kind is RLlink.PING:
            return {"type": RLlink.PONG.name}
        if kind is RLlink.GET_CONFIG:
            return {"type": RLlink.SET_CONFIG.name, "config": self._config_bytes()}
        if kind is RLlink.GET_STATE:
            with self._state_lock:
                return {"type": RLlink.SET_STATE.name, "state": self._state}
        if kind in (RLlink.EPISODES, RLlink.EPISODES_AND_GET_STATE):
            chunks = read_chunks(fields, self.observation_space, self.action_space, self._policy.dist_size)
            with self._arrived:
                if kind is RLlink.EPISODES_AND_GET_STATE:
                    with self._state_lock:
                        self._state_pending = True
                try:
                    for chunk in chunks:
                        self._steps_waiting += self._chunk_writer.write(chunk)
                finally:
                    self._arrived.notify_all()
            return None
        names = ", ".join(k.name for k in REQUESTS)
        raise RequestError(400, f"{kind.name} is not a request this server answers; clients send {names}.")

    def _config_bytes(self) -> bytes:
        if self._pickled_config is None:
            config = self.config.copy(copy_frozen=False)
            config.rl_module(rl_module_spec=self._client_spec)
            try:
                self._pickled_config = pickle.dumps(config)
            except Exception as err:  # noqa: BLE001 - anything unpicklable in the config
                raise RequestError(500, f"the config cannot be pickled for SET_CONFIG ({type(err).__name__}: {err}); "
                                        "give callbacks, env creators and the like as importable classes or "
                                        "functions, not lambdas.") from None
        return self._pickled_config

    # ------------------------------------------------------------------ weights (driver thread)

    def _snapshot_state(self) -> None:
        """Take the module's weights now (between updates) as what GET_STATE answers."""
        weights = {k: np.ascontiguousarray(v) for k, v in self.module.get_state().items()}
        with self._state_lock:
            self._state = {COMPONENT_RL_MODULE: weights, WEIGHTS_SEQ_NO: int(self.weights_seq_no)}

    def _publish_state(self) -> None:
        """Snapshot the weights and answer a client that waits for them."""
        self._snapshot_state()
        with self._state_lock:
            pending, self._state_pending = self._state_pending, False
            state = self._state
        if pending:
            self.server.send({"type": RLlink.SET_STATE.name, "state": state})

    def set_weights(self, weights: dict[str, Any], global_vars: dict | None = None,
                    weights_seq_no: int | None = None) -> None:
        """Load new weights and send them to a client waiting on EPISODES_AND_GET_STATE."""
        super().set_weights(weights, global_vars=global_vars, weights_seq_no=weights_seq_no)
        self._publish_state()

    # ------------------------------------------------------------------ sampling (driver thread)

    def _sample(self, num_timesteps: int | None, num_episodes: int | None, explore: bool | None,
                random_actions: bool, force_reset: bool) -> dict[str, np.ndarray]:
        if num_episodes is not None:
            raise NotSupportedYetError("sample(num_episodes=...) on EnvRunnerServerForExternalInference",
                                       "the external client decides when it sends episodes",
                                       fix="Sample by timesteps (evaluation_duration_unit='timesteps').")
        self._publish_state()
        timeout = self.config.sample_timeout_s
        deadline = None if not timeout else time.monotonic() + float(timeout)
        rows = None
        while rows is None:
            self._wait_for_steps(deadline)
            with self._arrived:  # messages are written whole under this lock: drain whole ones
                rows = self.book.drain()
                steps, self._steps_waiting = self._steps_waiting, 0
            self._report_episodes()
        self.num_env_steps_sampled_lifetime += steps
        return self._training_batch(rows)

    def _wait_for_steps(self, deadline: float | None) -> None:
        """Wait until steps arrived; TimeoutError at `deadline` (sample_timeout_s; None: no limit)."""
        with self._arrived:
            while self._steps_waiting == 0:
                if deadline is not None and time.monotonic() >= deadline:
                    self.assert_healthy()
                    who = (f"its client {self.server.client_address} sent no steps" if self.server.is_connected
                           else "no client is connected")
                    raise TimeoutError(
                        f"EnvRunnerServerForExternalInference {self.worker_index} waited "
                        f"{float(self.config.sample_timeout_s or 0.0):g} s (sample_timeout_s) for episodes on "
                        f"{self.host}:{self.port}, but {who}. Start the external client (it connects to this port), "
                        "or raise config.env_runners(sample_timeout_s=...).")
                self._arrived.wait(timeout=0.25)

    def _report_episodes(self) -> None:
        for episode_return, length in self.book.take_episode_stats():
            self._log_episode(episode_return, length)

    def _training_batch(self, rows: Any) -> dict[str, np.ndarray]:
        """The book's rows as a one-column time-major batch (fragments one after another, each
        ending terminated or truncated), so batches of several calls join along time."""
        batch = to_training_batch(rows, spaces_of(self), "the episodes of the external client", multi_agent=False,
                                  normalize_actions=bool(self.config.normalize_actions), keep_postprocessed=False)
        valid = batch.pop(Columns.VALID, None)
        out = {}
        for name, array in batch.items():
            columns = [array[:, b] if valid is None else array[valid[:, b], b] for b in range(array.shape[1])]
            out[name] = np.concatenate(columns, axis=0)[:, None]
        fill_behaviour_columns(out, self.module)
        return out

    def stop(self) -> None:
        """Close the client's connection and the port, then the runner."""
        self.server.stop()
        super().stop()

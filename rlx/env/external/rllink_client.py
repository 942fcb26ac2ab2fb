"""RLlinkClient: the client side of the RLlink protocol, for external simulators written in
Python (a C++/C# simulator implements the same frames, see docs/external.md).

    client = RLlinkClient(port=5555)                 # connects, retrying until the server is up
    config = client.get_config()                     # the server's AlgorithmConfig
    module = config.get_rl_module_spec().build()
    module.set_state(client.get_state()[COMPONENT_RL_MODULE])
    ...  # step the simulator with the module, collect SingleAgentEpisodes
    state = client.send_episodes(episodes, get_state=True)   # on-policy: wait for new weights

Every call is bounded by `timeout_s`; an ERROR answer from the server raises RLlinkError with
the server's reason.
"""
from __future__ import annotations

import pickle
import socket
import time
from typing import Any, Sequence

from rlx.env.external.rllink import RLlink, RLlinkError, RLlinkTimeoutError, get_rllink_message, send_rllink_message


class RLlinkClient:
    """A connection to an EnvRunnerServerForExternalInference (or RLlib's).

    Args:
        host, port: the server's address (each EnvRunner listens on its base port + worker index).
        connect_timeout_s: how long to keep retrying while the server is not up yet.
        timeout_s: the longest any one answer may take (a SET_STATE after EPISODES_AND_GET_STATE
            comes after the server's next training step, so allow for that).
    """

    def __init__(self, host: str = "localhost", port: int = 5555, connect_timeout_s: float = 60.0,
                 timeout_s: float = 600.0):
        self.host, self.port = host, int(port)
        self.timeout_s = float(timeout_s)
        deadline = time.monotonic() + float(connect_timeout_s)
        while True:
            try:
                self.sock = socket.create_connection((host, self.port), timeout=max(0.1, deadline - time.monotonic()))
                break
            except (ConnectionRefusedError, socket.timeout, OSError) as err:
                if time.monotonic() >= deadline:
                    raise RLlinkTimeoutError(f"No RLlink server accepted a connection on {host}:{port} within "
                                             f"{connect_timeout_s:g} s ({err}).") from None
                time.sleep(0.2)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(None)

    def request(self, message: dict, expect: RLlink | None) -> dict:
        """Send `message`; with `expect`, wait for the answer of that type and return its fields."""
        send_rllink_message(self.sock, message, timeout_s=self.timeout_s)
        if expect is None:
            return {}
        kind, fields = get_rllink_message(self.sock, timeout_s=self.timeout_s)
        if kind is RLlink.ERROR:
            raise RLlinkError(f"The server refused the {message['type']} message: {fields.get('message')}")
        if kind is not expect:
            raise RLlinkError(f"Expected {expect.name} in answer to {message['type']}, got {kind.name}.")
        return fields

    def ping(self) -> None:
        """PING -> PONG (the handshake)."""
        self.request({"type": RLlink.PING.name}, RLlink.PONG)

    def get_config(self) -> Any:
        """The server's AlgorithmConfig (unpickled: connect only to servers you trust)."""
        return pickle.loads(self.request({"type": RLlink.GET_CONFIG.name}, RLlink.SET_CONFIG)["config"])

    def get_state(self) -> dict:
        """The server's current state: {"rl_module": weights, "weights_seq_no": n}."""
        return self.request({"type": RLlink.GET_STATE.name}, RLlink.SET_STATE)["state"]

    def send_episodes(self, episodes: Sequence[Any], get_state: bool = False) -> dict | None:
        """Send SingleAgentEpisodes (chunks: an unfinished episode continues, `cut()`, in a later
        call). With `get_state`, wait for the weights of the server's next training step and
        return its state (on-policy sampling)."""
        message = {"type": (RLlink.EPISODES_AND_GET_STATE if get_state else RLlink.EPISODES).name,
                   "episodes": [e.get_state() for e in episodes],
                   "timesteps": sum(len(e) for e in episodes)}
        if get_state:
            return self.request(message, RLlink.SET_STATE)["state"]
        self.request(message, None)
        return None

    def close(self) -> None:
        """Close the connection."""
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RLlinkClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""RLlinkServer: one TCP port, one external client at a time, RLlink messages to a handler.

The server binds when constructed (so a port in use fails at once, naming it) and serves
from a daemon thread: it accepts a client, reads its messages and hands each to
`handler(type, fields)`, sending back the reply the handler returns (if any). A client that
disconnects frees the port for the next one. A message that is not RLlink, or that the
handler refuses (ValueError: RequestError, EpisodeStateError, ...), is answered with
`{"type": "ERROR", "message": why}`, logged, and the connection is closed.

Every wait is bounded: accepting and idling poll `poll_s` so `stop()` ends the thread
promptly; a message, once its first byte arrived, must be complete within
`message_timeout_s`; a reply must be taken within `send_timeout_s`.
"""
from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from typing import Any, Callable

from rlx.env.external.rllink import (
    HEADER_BYTES,
    RLlink,
    RLlinkError,
    RLlinkProtocolError,
    read_body,
    recv_exact,
    send_rllink_message,
)
from rlx.utils.errors import ConfigError

logger = logging.getLogger("rlx")

Handler = Callable[[RLlink, dict], "dict | None"]


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (localhost, 127.x, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RLlinkServer:
    """Serves RLlink messages on `host:port` to `handler`.

    Args:
        handler: fn(message type, fields) -> reply dict (with "type") or None.
        host: address to listen on (RLlib's is "localhost"; RLlink has no authentication,
            so any other address is the caller's explicit choice and logged).
        port: the port (0: a free one, see `.port`).
        message_timeout_s: a message must arrive whole within this time of its first byte.
        send_timeout_s: a reply must be taken by the client within this time.
        max_message_bytes: larger messages are refused.
        poll_s: how often waiting threads look at the stop flag.
        name: the thread's name (logs say which runner's server it is).
    """

    def __init__(self, handler: Handler, host: str = "localhost", port: int = 5555, *,
                 message_timeout_s: float = 60.0, send_timeout_s: float = 60.0,
                 max_message_bytes: int = 256 * 1024 * 1024, poll_s: float = 0.2, name: str = "rlx-rllink-server"):
        self.handler = handler
        self.host = host
        self.message_timeout_s = float(message_timeout_s)
        self.send_timeout_s = float(send_timeout_s)
        self.max_message_bytes = int(max_message_bytes)
        self.poll_s = float(poll_s)
        if not is_loopback(host):
            logger.warning("RLlink server listening on %s: the protocol has no authentication, so anyone who can "
                           "reach this address can send episodes and read the config and weights.", host)
        self._listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, int(port)))
        except OSError as err:
            self._listener.close()
            raise ConfigError(f"The RLlink server cannot listen on {host}:{port}: {err}. Choose another port with "
                              "config.environment(env_config={'port': ...}) (each EnvRunner listens on port + its "
                              "worker index; port 0 picks free ports).") from None
        self._listener.listen(1)
        self._listener.settimeout(self.poll_s)
        self.port: int = self._listener.getsockname()[1]
        self._client: socket.socket | None = None
        self.client_address: Any = None
        self._send_lock = threading.Lock()
        self._stopped = threading.Event()
        #: The error that ended the serving thread, if one did.
        self.error: BaseException | None = None
        self.num_connections = 0
        self.num_messages = 0
        self._thread = threading.Thread(target=self._serve, name=f"{name}:{self.port}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public

    @property
    def is_connected(self) -> bool:
        """Whether a client is connected now."""
        return self._client is not None

    @property
    def is_alive(self) -> bool:
        """Whether the serving thread runs."""
        return self._thread.is_alive()

    def send(self, message: dict) -> bool:
        """Send `message` to the connected client; False (and the connection dropped) when there
        is none or it does not take it."""
        client = self._client
        if client is None:
            return False
        try:
            with self._send_lock:
                send_rllink_message(client, message, timeout_s=self.send_timeout_s)
            return True
        except RLlinkError as err:
            logger.warning("RLlink server on port %d: could not send %s to %s: %s", self.port, message.get("type"),
                           self.client_address, err)
            self._drop_client(client)
            return False

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop serving, close the client's connection and the port."""
        self._stopped.set()
        client = self._client
        if client is not None:
            self._drop_client(client)
        try:
            self._listener.close()
        except OSError:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout_s)

    # ------------------------------------------------------------------ serving thread

    def _serve(self) -> None:
        try:
            while not self._stopped.is_set():
                client = self._accept()
                if client is not None:
                    self._serve_client(client)
        except BaseException as err:  # noqa: BLE001 - kept for assert_healthy, then logged
            if not self._stopped.is_set():
                self.error = err
                logger.exception("RLlink server on port %d stopped: %s", self.port, err)

    def _accept(self) -> socket.socket | None:
        try:
            client, address = self._listener.accept()
        except socket.timeout:
            return None
        except OSError:
            if self._stopped.is_set():
                return None
            raise
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client, self.client_address = client, address
        self.num_connections += 1
        logger.info("RLlink server on port %d: client %s connected.", self.port, address)
        return client

    def _serve_client(self, client: socket.socket) -> None:
        try:
            while not self._stopped.is_set() and self._client is client:
                first = self._wait_for_message(client)
                if first is None:
                    continue
                deadline = time.monotonic() + self.message_timeout_s
                header = first + recv_exact(client, HEADER_BYTES - len(first), deadline)
                kind, fields = read_body(client, header, deadline, self.max_message_bytes)
                self.num_messages += 1
                try:
                    reply = self.handler(kind, fields)
                except ValueError as err:  # the handler refused it (RequestError, EpisodeStateError, ...)
                    self._refuse(client, str(err))
                    return
                except Exception as err:  # noqa: BLE001 - a bug or odd data must not end the server
                    logger.exception("RLlink server on port %d: handling a %s message failed", self.port, kind.name)
                    self._refuse(client, f"the server failed on this {kind.name} message ({type(err).__name__}: "
                                         f"{err})")
                    return
                if reply is not None:
                    self.send(reply)
        except RLlinkProtocolError as err:
            self._refuse(client, str(err))
        except RLlinkError as err:
            if not self._stopped.is_set():
                logger.info("RLlink server on port %d: client %s disconnected (%s).", self.port,
                            self.client_address, err)
        finally:
            self._drop_client(client)

    def _wait_for_message(self, client: socket.socket) -> bytes | None:
        """The first byte of the next message, or None after `poll_s` without one."""
        try:
            client.settimeout(self.poll_s)
            data = client.recv(1)
        except socket.timeout:
            return None
        except OSError as err:
            raise RLlinkError(f"connection error: {err}") from None
        if not data:
            raise RLlinkError("the client closed the connection")
        return data

    def _refuse(self, client: socket.socket, why: str) -> None:
        logger.error("RLlink server on port %d: refusing a message from %s and closing the connection: %s",
                     self.port, self.client_address, why)
        self.send({"type": RLlink.ERROR.name, "message": why})

    def _drop_client(self, client: socket.socket) -> None:
        if self._client is client:
            self._client = None
        try:
            client.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            client.close()
        except OSError:
            pass

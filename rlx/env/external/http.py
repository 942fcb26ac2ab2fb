"""HTTP transport of the policy server and client, on the standard library.

The server is a ThreadingHTTPServer (one thread per connection, keep-alive) that hands
each request to an app `handle(method, path, body) -> (status, content_type, bytes)`
after checking the token and the body size; whatever the app raises becomes a 4xx/500
answer and the server keeps serving. The client keeps one connection open and
reconnects when the server has closed an idle one.
"""
from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit

from rlx.env.external.auth import authorized
from rlx.env.external.codec import RequestError
from rlx.utils.errors import ConfigError, RLXError

logger = logging.getLogger("rlx")

JSON = "application/json"
BINARY = "application/octet-stream"
#: Default cap on a request body.
DEFAULT_MAX_REQUEST_BYTES = 1 << 20

#: The app's answer: (HTTP status, content type, body).
Response = tuple[int, str, bytes]
App = Callable[[str, str, bytes], Response]


class PolicyServerError(RLXError, RuntimeError):
    """The policy server refused a request or could not be reached (the message says why)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def error_body(status: int, message: str) -> Response:
    """A JSON error answer."""
    return status, JSON, json.dumps({"error": message, "status": status}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rlx-policy-server"
    timeout = 120  # seconds a connection may sit idle or half-sent before the server drops it
    disable_nagle_algorithm = True  # small answers go out at once, not after the client's delayed ACK

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (BaseHTTPRequestHandler's name)
        logger.debug("policy server: " + format, *args)

    def _answer(self, response: Response, close: bool = False) -> None:
        status, content_type, body = response
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="rlx"')
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _serve(self, method: str) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        if not authorized(self.headers.get("Authorization"), server.token):
            self._answer(error_body(401, "missing or wrong 'Authorization: Bearer <token>' header."), close=True)
            return
        body = b""
        if method == "POST":
            if self.headers.get("Transfer-Encoding"):
                self._answer(error_body(411, "send the body with a Content-Length header (no chunked encoding)."),
                             close=True)
                return
            length_text = self.headers.get("Content-Length")
            try:
                length = int(length_text) if length_text is not None else -1
            except ValueError:
                length = -1
            if length < 0:
                self._answer(error_body(411, "a POST request needs a valid Content-Length header."), close=True)
                return
            if length > server.max_request_bytes:
                self._answer(error_body(413, f"the request body has {length} bytes; this server accepts at most "
                                             f"{server.max_request_bytes} (max_request_bytes)."), close=True)
                return
            body = self.rfile.read(length)
            if len(body) != length:
                self.close_connection = True
                return
        try:
            response = server.app(method, self.path.split("?", 1)[0], body, self.path)
        except RequestError as err:
            response = error_body(err.status, str(err))
        except Exception as err:  # a bug or a failing policy: answer, log, keep serving
            logger.exception("policy server: %s %s failed", method, self.path)
            response = error_body(500, f"{type(err).__name__}: {err}")
        self._answer(response)

    def do_GET(self) -> None:  # noqa: N802 (BaseHTTPRequestHandler's name)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def _refuse(self) -> None:
        self._answer(error_body(405, f"method {self.command} is not allowed; use GET or POST."), close=True)

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse  # noqa: N815


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: Any, token: str | None, max_request_bytes: int):
        self.app = app
        self.token = token
        self.max_request_bytes = int(max_request_bytes)
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("policy server: connection from %s failed", client_address, exc_info=True)


class HttpServer:
    """A running HTTP server on its own thread; `port` is the bound port (port 0 picks one)."""

    def __init__(self, app: Any, address: str, port: int, token: str | None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        try:
            self._server = _Server((address, int(port)), app, token, max_request_bytes)
        except OSError as err:
            raise ConfigError(f"The policy server cannot listen on {address}:{port}: {err}. Pick another port "
                              "(port=0 chooses a free one).") from err
        self.address = address
        self.port = int(self._server.server_address[1])
        self._serving = threading.Event()
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Answer requests on this thread until stop()."""
        self._serving.set()
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> "HttpServer":
        """Answer requests on a thread of its own; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name=f"rlx-policy-server:{self.port}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting requests and close the listening socket."""
        if self._serving.is_set():
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


class HttpClient:
    """One keep-alive connection to a policy server, safe to share between threads."""

    def __init__(self, address: str, token: str | None, timeout: float = 60.0, connect_timeout: float = 60.0):
        parts = urlsplit(address if "://" in address else f"http://{address}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"PolicyClient address {address!r} is not an http(s)://host:port URL.")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._token = token
        self._timeout = float(timeout)
        self._connect_timeout = float(connect_timeout)
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        deadline = time.monotonic() + self._connect_timeout
        while True:
            conn = cls(self._host, self._port, timeout=self._timeout)
            try:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return conn
            except (ConnectionRefusedError, OSError) as err:
                conn.close()
                if time.monotonic() >= deadline:
                    raise PolicyServerError(f"cannot reach the policy server at {self._host}:{self._port}: {err}. "
                                            "Is it running (the Algorithm starts it at its first train())?") from err
                time.sleep(0.2)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one request; PolicyServerError for 4xx/5xx answers."""
        headers = {"Content-Type": JSON} if body is not None else {}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        with self._lock:
            for attempt in range(2):
                reused = self._conn is not None
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    self._conn.request(method, self._base + path, body=body, headers=headers)
                    response = self._conn.getresponse()
                    data = response.read()
                    break
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as err:
                    self.close_connection()
                    if not reused or attempt:  # a fresh connection failed: the server is gone
                        raise PolicyServerError(f"the policy server closed the connection: {err}") from err
                except (OSError, http.client.HTTPException) as err:
                    self.close_connection()
                    raise PolicyServerError(f"request to the policy server failed: {err}") from err
            if response.getheader("Connection", "").lower() == "close":
                self.close_connection()
        if response.status >= 400:
            try:
                message = json.loads(data)["error"]
            except Exception:
                message = data[:200].decode("utf-8", "replace")
            raise PolicyServerError(f"the policy server answered {response.status}: {message}", response.status)
        return response.status, dict(response.getheaders()), data

    def close_connection(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

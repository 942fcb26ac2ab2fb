"""HTTP transport of the policy server and client, on the standard library.

The server is a ThreadingHTTPServer (one thread per connection, keep-alive) that hands
each request to an app `handle(method, path, body) -> (status, content_type, bytes)`
after checking the token and the body size; whatever the app raises becomes a 4xx/500
answer and the server keeps serving. The client keeps one connection open and
reconnects when the server has closed an idle one.

Every wait is bounded: at most `max_connections` connections are served at once (one more
is answered 503 and closed at once, without a thread); a request (line, headers and body)
must arrive whole within `request_timeout_s` of its first byte, however slowly it trickles
(else 408 and the connection is closed); a keep-alive connection may sit idle between
requests for `idle_timeout_s`. A GET's body is read and discarded, never parsed as a request.
"""
from __future__ import annotations

import http.client
import io
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
#: Default cap on connections served at once (each has a thread).
DEFAULT_MAX_CONNECTIONS = 256
#: Default seconds a request may take to arrive whole (from its first byte), and its answer to be taken.
DEFAULT_REQUEST_TIMEOUT_S = 30.0
#: Default seconds a keep-alive connection may wait for its next request.
DEFAULT_IDLE_TIMEOUT_S = 60.0

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


def raw_error(status: int, reason: str, message: str, retry_after: int | None = None) -> bytes:
    """A whole HTTP/1.1 error answer that closes the connection, as bytes (for answers written
    before or without a parsed request)."""
    body = error_body(status, message)[2]
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {JSON}", f"Content-Length: {len(body)}"]
    if retry_after is not None:
        lines.append(f"Retry-After: {retry_after}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


class _DeadlineReader(io.RawIOBase):
    """The connection's reading side: each read waits at most until the current request's
    deadline (set when its first byte arrives), or `idle_timeout_s` between requests, so a
    request trickling in byte by byte cannot hold its thread longer than the deadline."""

    def __init__(self, sock: socket.socket, idle_timeout_s: float):
        super().__init__()
        self._sock = sock
        self.idle_timeout_s = idle_timeout_s
        self.deadline: float | None = None
        self.expired = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is None:
            timeout = self.idle_timeout_s
        else:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                self.expired = True
                raise TimeoutError("the request did not arrive within request_timeout_s")
        self._sock.settimeout(timeout)
        try:
            return self._sock.recv_into(buffer)
        except TimeoutError:
            self.expired = self.deadline is not None
            raise


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rlx-policy-server"
    disable_nagle_algorithm = True  # small answers go out at once, not after the client's delayed ACK

    def setup(self) -> None:
        super().setup()
        server: _Server = self.server  # type: ignore[assignment]
        self.rfile.close()  # the plain reader setup() made: ours bounds every read
        self._reader = _DeadlineReader(self.connection, server.idle_timeout_s)
        self._buffered = io.BufferedReader(self._reader)
        self.rfile = self._buffered
        self._answered = False

    def handle_one_request(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        reader = self._reader
        reader.deadline, reader.expired = None, False
        try:
            if not self._buffered.peek(1):  # the client closed the connection
                self.close_connection = True
                return
        except OSError:  # idle longer than idle_timeout_s (TimeoutError), or the client went away
            self.close_connection = True
            return
        reader.deadline = time.monotonic() + server.request_timeout_s
        self._answered = False
        try:
            super().handle_one_request()
        finally:
            reader.deadline = None
        if reader.expired and not self._answered:  # the request line or headers came too slowly
            self.close_connection = True
            try:
                self.connection.settimeout(server.request_timeout_s)
                self.wfile.write(raw_error(408, "Request Timeout", _too_slow(server)))
            except OSError:
                pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (BaseHTTPRequestHandler's name)
        logger.debug("policy server: " + format, *args)

    def _answer(self, response: Response, close: bool = False) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        status, content_type, body = response
        self._answered = True
        self.connection.settimeout(server.request_timeout_s)  # the client must take the answer in time too
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

    def _read_body(self, method: str) -> bytes | None:
        """The request's body (b"" for a GET: whatever it sent is read and dropped, so it is never
        taken for the next request); None when the request was answered with an error."""
        server: _Server = self.server  # type: ignore[assignment]
        if self.headers.get("Transfer-Encoding"):
            self._answer(error_body(411, "send the body with a Content-Length header (no chunked encoding)."),
                         close=True)
            return None
        length_text = self.headers.get("Content-Length")
        if length_text is None and method != "POST":
            return b""
        digits = (length_text or "").strip()
        length = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 18 else -1
        if length < 0:
            self._answer(error_body(411, f"a {method} request needs a valid Content-Length header."), close=True)
            return None
        if length > server.max_request_bytes:
            self._answer(error_body(413, f"the request body has {length} bytes; this server accepts at most "
                                         f"{server.max_request_bytes} (max_request_bytes)."), close=True)
            return None
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self._answer(error_body(408, _too_slow(server)), close=True)
            return None
        if len(body) != length:
            self.close_connection = True
            return None
        return body if method == "POST" else b""

    def _serve(self, method: str) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        if not authorized(self.headers.get("Authorization"), server.token):
            self._answer(error_body(401, "missing or wrong 'Authorization: Bearer <token>' header."), close=True)
            return
        body = self._read_body(method)
        if body is None:
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


def _too_slow(server: "_Server") -> str:
    return (f"the request did not arrive whole within {server.request_timeout_s:g} s of its first byte "
            "(request_timeout_s); the connection is closed.")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: Any, token: str | None, max_request_bytes: int,
                 max_connections: int, request_timeout_s: float, idle_timeout_s: float):
        self.app = app
        self.token = token
        self.max_request_bytes = int(max_request_bytes)
        self.max_connections = int(max_connections)
        self.request_timeout_s = float(request_timeout_s)
        self.idle_timeout_s = float(idle_timeout_s)
        self.num_connections = 0
        #: Connections answered 503 because `max_connections` were open.
        self.num_refused_connections = 0
        self._count_lock = threading.Lock()
        self._last_refusal_log = -float("inf")
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count_lock:
            full = self.num_connections >= self.max_connections
            if not full:
                self.num_connections += 1
        if full:
            self._refuse_busy(request)
            return
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except RuntimeError:  # no thread could be started
            with self._count_lock:
                self.num_connections -= 1
            self._refuse_busy(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count_lock:
                self.num_connections -= 1

    def _refuse_busy(self, sock: socket.socket) -> None:
        """Answer 503 on the accepting thread (no thread is started) and close the connection."""
        self.num_refused_connections += 1
        now = time.monotonic()
        if now - self._last_refusal_log >= 10.0:  # at most one warning per 10 s under a flood
            self._last_refusal_log = now
            logger.warning("policy server: %d connections are open (max_connections); refusing more with 503 "
                           "(%d refused so far).", self.max_connections, self.num_refused_connections)
        try:
            sock.settimeout(1.0)  # a fresh socket's send buffer takes the short answer at once
            sock.sendall(raw_error(503, "Service Unavailable",
                                   f"the policy server is serving {self.max_connections} connections, its "
                                   "max_connections; retry shortly.", retry_after=1))
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
            while sock.recv(65536):  # drop what the client already sent, so closing does not reset the answer
                pass
        except OSError:
            pass
        finally:
            sock.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("policy server: connection from %s failed", client_address, exc_info=True)


def _positive(value: Any, name: str, integer: bool = False) -> float:
    """`value` checked to be a positive finite number (an int when `integer`); ConfigError naming `name`."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value <= (1e18 if integer else 1e6):
        raise ConfigError(f"{name} must be a positive {'integer' if integer else 'number of seconds (at most 1e6)'}, "
                          f"got {value!r}.")
    return value


def check_limits(max_connections: int = DEFAULT_MAX_CONNECTIONS, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> None:
    """ConfigError naming the setting when a server limit is not a positive number."""
    _positive(max_connections, "max_connections", integer=True)
    _positive(request_timeout_s, "request_timeout_s")
    _positive(idle_timeout_s, "idle_timeout_s")


class HttpServer:
    """A running HTTP server on its own thread; `port` is the bound port (port 0 picks one).

    Args:
        app: answers requests: app(method, path, body, raw_path) -> (status, content type, bytes).
        address, port: where to listen.
        token: the bearer token requests must carry (None: no check).
        max_request_bytes: larger bodies are answered 413.
        max_connections: connections served at once; one more is answered 503 and closed.
        request_timeout_s: a request must arrive whole within this many seconds of its first
            byte (else 408), and its answer be taken within as long.
        idle_timeout_s: a keep-alive connection is closed after this long without a request.
    """

    def __init__(self, app: Any, address: str, port: int, token: str | None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, *,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S):
        _positive(max_request_bytes, "max_request_bytes", integer=True)
        check_limits(max_connections, request_timeout_s, idle_timeout_s)
        try:
            self._server = _Server((address, int(port)), app, token, max_request_bytes, max_connections,
                                   request_timeout_s, idle_timeout_s)
        except OSError as err:
            raise ConfigError(f"The policy server cannot listen on {address}:{port}: {err}. Pick another port "
                              "(port=0 chooses a free one).") from err
        self.address = address
        self.port = int(self._server.server_address[1])
        self.max_connections = int(max_connections)
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
        """(status, headers, body) of one request; PolicyServerError for 4xx/5xx answers. A 503
        (the server has max_connections open; it ran nothing) is retried for up to
        `connect_timeout` seconds, as a server that is not up yet is."""
        deadline = time.monotonic() + self._connect_timeout
        delay = 0.05
        while True:
            try:
                return self._request_once(method, path, body)
            except PolicyServerError as err:
                if err.status != 503 or time.monotonic() >= deadline:
                    raise
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(1.0, delay * 2)

    def _request_once(self, method: str, path: str, body: bytes | None) -> tuple[int, dict, bytes]:
        headers = {"Content-Type": JSON} if body is not None else {}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        with self._lock:
            for attempt in range(2):
                reused = self._conn is not None
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    try:
                        self._conn.request(method, self._base + path, body=body, headers=headers)
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the server may have answered (401, 413, 503) and closed before taking it all
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

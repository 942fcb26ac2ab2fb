"""The policy server's bounds (issue 33, item 3): values are checked after the cast to the
space's dtype, huge integers get 4xx (not 500), a GET's body is never run as a request,
connections and per-request read time are bounded with clear answers, and the bearer token
follows RFC 6750. Every socket here has a timeout, so nothing can hang."""
from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.env.external import codec
from rlx.env.policy_client import PolicyClient, PolicyServerError
from rlx.env.policy_server_input import PolicyServerInput
from rlx.utils.errors import ConfigError

TOKEN = "limits-token-123"


@contextlib.contextmanager
def policy_server(**kwargs):
    """A PPO Algorithm fed by a PolicyServerInput on a free port (CartPole's spaces)."""
    cartpole = gym.make("CartPole-v1")
    config = (PPOConfig()
              .environment(env=None, observation_space=cartpole.observation_space,
                           action_space=cartpole.action_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, auth_token=TOKEN,
                                                                   **kwargs))
              .debugging(seed=0))
    algo = config.build()
    try:
        yield algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()


def post(port: int, body: bytes | dict, headers: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", "/", body=data, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})})
        response = conn.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if raw else {})
    finally:
        conn.close()


def read_all(sock: socket.socket, seconds: float) -> bytes:
    """What the server sends on `sock` until it closes it or `seconds` pass."""
    data = b""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


def test_values_beyond_the_space_dtype_are_refused_with_422():
    with policy_server() as server:
        port = server.port
        _, started = post(port, {"command": "START_EPISODE"})
        eid = started["episode_id"]
        # 1e39 is finite in float64 but inf in float32 (CartPole's dtype, and the batch's rewards).
        cases = [
            {"command": "GET_ACTION", "episode_id": eid, "observation": [0.0, 1e39, 0.0, 0.0]},
            {"command": "COMPUTE_ACTIONS", "observations": [[0.0, 0.0, -1e39, 0.0]]},
            {"command": "LOG_ACTION", "episode_id": eid, "observation": [1e39, 0, 0, 0], "action": 0},
            {"command": "LOG_RETURNS", "episode_id": eid, "reward": 1e39},
            {"command": "LOG_RETURNS", "episode_id": eid, "reward": -3.5e38},
            {"command": "LOG_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0], "action": 0,
             "action_logp": -1e39, "action_dist_inputs": [0.0, 0.0]},
            {"command": "END_EPISODE", "episode_id": eid, "observation": [0, 0, 0, 1e39]},
        ]
        for body in cases:
            status, answer = post(port, body)
            assert status == 422, (body, answer)
            assert "float32" in answer["error"], answer
        # The episode is untouched: valid values still go through.
        status, answer = post(port, {"command": "GET_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0]})
        assert status == 200 and answer["action"] in (0, 1)
        assert post(port, {"command": "LOG_RETURNS", "episode_id": eid, "reward": 3.4e38})[0] == 200


def test_integer_box_values_that_would_wrap_are_refused():
    space = gym.spaces.Box(0, 255, (2,), np.uint8)
    for value in ([300, 0], [-1, 0], [1e39, 0], [1.5, 0]):
        with pytest.raises(codec.RequestError, match="uint8") as info:
            codec.from_space(value, space, "observation", check_bounds=False)
        assert info.value.status == 422
    assert codec.from_space([255, 0], space, "observation", check_bounds=False).tolist() == [255, 0]


def test_huge_integers_get_422_not_500():
    huge = 10 ** 400  # no float can hold it: float() raises OverflowError
    with policy_server() as server:
        port = server.port
        _, started = post(port, {"command": "START_EPISODE"})
        eid = started["episode_id"]
        cases = [
            {"command": "LOG_RETURNS", "episode_id": eid, "reward": huge},
            {"command": "LOG_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0], "action": 0,
             "action_logp": -huge, "action_dist_inputs": [0.0, 0.0]},
            {"command": "REPORT", "commands": [{"command": "LOG_RETURNS", "episode_id": eid, "reward": -huge}]},
            {"command": "GET_ACTION", "episode_id": eid, "observation": [0, huge, 0, 0]},
            {"command": "LOG_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0], "action": huge},
        ]
        for body in cases:
            status, answer = post(port, json.dumps(body).encode())
            assert status == 422, (body, answer)
            assert answer["error"], answer


def test_a_get_body_is_never_run_as_a_second_request():
    with policy_server() as server:
        inner = json.dumps({"command": "START_EPISODE", "episode_id": "smuggled"}).encode()
        smuggled = (b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                    b"\r\nContent-Length: " + str(len(inner)).encode() + b"\r\n\r\n" + inner)
        get = (b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
               b"\r\nContent-Length: " + str(len(smuggled)).encode() + b"\r\n\r\n" + smuggled)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(get)
            answer = read_all(sock, 1.5)
        assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 200"), answer
        # Had the body run, this episode id would be taken (409).
        assert post(server.port, {"command": "START_EPISODE", "episode_id": "smuggled"})[0] == 200


def test_connections_beyond_max_connections_get_a_clear_503():
    with policy_server(max_connections=4) as server:
        held = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(4)]
        try:
            time.sleep(0.3)  # the server has accepted them
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as extra:
                answer = read_all(extra, 3.0)
            assert answer.startswith(b"HTTP/1.1 503"), answer
            assert b"max_connections" in answer and b"Retry-After" in answer
            # A PolicyClient retries a 503 for connect_timeout seconds, then says why it gave up.
            with pytest.raises(PolicyServerError, match="503.*max_connections"):
                PolicyClient(server.url, inference_mode="remote", auth_token=TOKEN, timeout=5,
                             connect_timeout=0.5).start_episode()
            waiting: list = []
            client = PolicyClient(server.url, inference_mode="remote", auth_token=TOKEN, timeout=5, connect_timeout=5)
            thread = threading.Thread(target=lambda: waiting.append(client.start_episode()), daemon=True)
            thread.start()
            time.sleep(0.5)
            assert not waiting  # still refused while the slots are held
        finally:
            for sock in held:
                sock.close()
        thread.join(timeout=10)
        assert waiting and isinstance(waiting[0], str)  # served once a slot came back
        assert server.env.http._server.num_refused_connections >= 2


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_request_trickling_in_is_cut_at_request_timeout_s(part):
    with policy_server(request_timeout_s=1.0) as server:
        head = b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 100\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            if part == "body":
                sock.sendall(head + b"\r\n")
                head = b" " * 100
            start = time.monotonic()
            answer = b""
            for byte in head:  # one byte every 0.2 s: each read is quick, the request is not
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    break
                answer += read_all(sock, 0.2)
                if answer or time.monotonic() - start > 5:
                    break
            answer += read_all(sock, 1.0)
            elapsed = time.monotonic() - start
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"request_timeout_s" in answer
        assert elapsed < 3.0


def test_idle_connections_are_closed_after_idle_timeout_s_and_free_their_slot():
    with policy_server(idle_timeout_s=0.5, max_connections=1) as server:
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as idle:
            assert read_all(idle, 3.0) == b""  # closed by the server, without an answer
        assert time.monotonic() - start < 2.0
        # Its slot is free again; a keep-alive client reconnects after its idle connection closed.
        client = PolicyClient(server.url, inference_mode="remote", auth_token=TOKEN, timeout=5, connect_timeout=2)
        episode_id = client.start_episode()
        time.sleep(1.0)
        assert client.get_action(episode_id, [0.0, 0.0, 0.0, 0.0]) in (0, 1)


def test_bearer_scheme_in_any_case_and_blank_tokens_refused(monkeypatch):
    with policy_server() as server:
        for header in (f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer   {TOKEN}"):
            assert post(server.port, {"command": "START_EPISODE"}, {"Authorization": header})[0] == 200, header
        for header in ("Bearer", f"Bearer{TOKEN}", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer " + " " * 16):
            assert post(server.port, {"command": "START_EPISODE"}, {"Authorization": header})[0] == 401, header
    for token in (" " * 8, " " * 32, "two words here", "tab\tseparated"):
        with pytest.raises(ConfigError, match="RFC 6750"):
            PolicyClient("http://127.0.0.1:1", auth_token=token)
        monkeypatch.setenv("RLX_POLICY_SERVER_TOKEN", token)
        with pytest.raises(ConfigError, match="RLX_POLICY_SERVER_TOKEN"):
            PolicyClient("http://127.0.0.1:1")
        monkeypatch.delenv("RLX_POLICY_SERVER_TOKEN")
    cartpole = gym.make("CartPole-v1")
    config = (PPOConfig().environment(env=None, observation_space=cartpole.observation_space,
                                      action_space=cartpole.action_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, auth_token=" " * 8)))
    algo = config.build()
    try:
        with pytest.raises(ConfigError, match="bearer token"):
            algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()


@pytest.mark.parametrize("option, value", [("max_connections", 0), ("max_connections", 2.5),
                                           ("request_timeout_s", float("nan")), ("idle_timeout_s", -1),
                                           ("request_timeout_s", 1e308)])
def test_bad_server_limits_name_the_option(option, value):
    cartpole = gym.make("CartPole-v1")
    config = (PPOConfig().environment(env=None, observation_space=cartpole.observation_space,
                                      action_space=cartpole.action_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, **{option: value})))
    algo = config.build()
    try:
        with pytest.raises(ConfigError, match=option):
            algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()

"""Fuzzing the policy server with malformed and unauthenticated requests: every one gets a
4xx answer (never a 500 or a dropped server), and the server still serves a valid episode."""
from __future__ import annotations

import http.client
import json
import random
import socket

import gymnasium as gym

from rlx.algorithms.ppo import PPOConfig
from rlx.env.policy_client import PolicyClient
from rlx.env.policy_server_input import PolicyServerInput

TOKEN = "fuzz-token-123"
CARTPOLE = gym.make("CartPole-v1")


def _values(rng: random.Random):
    pool = [None, True, 0, -1, 2**70, 1e308, -0.0, "", "x" * 200, [], {}, [1, 2, 3, 4], [[1, 2], [3, 4]],
            [0.1, 0.2, 0.3, float("nan")], [0, 0, 0, 0], [1e40, 0, 0, 0], {"a": 1}, [None] * 4, "0", 1.5,
            [[[[[]]]]], ["1", "2", "3", "4"], 7, [0, 0, 0], [True, False, True, False],
            # finite in float64 but not in float32, and no float at all (issue 33): 422, never 500
            1e39, -1e39, 10**400, [0, 1e39, 0, 0], [0, 10**400, 0, 0], [10**400, 0.0]]
    return rng.choice(pool)


def _random_request(rng: random.Random, episode_id: str) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    if kind == 1:  # JSON that is not an object, or deeply nested
        return rng.choice([b"[]", b"1", b'"s"', b"null", b"[" * 5000 + b"]" * 5000, b'{"command": NaN}',
                           b'{"command": Infinity}', b"{", b'{"command": "GET_ACTION"'])
    command = rng.choice(["START_EPISODE", "GET_ACTION", "LOG_ACTION", "LOG_RETURNS", "END_EPISODE",
                          "COMPUTE_ACTIONS", "REPORT", "get_action", "BOGUS", 5, None])
    body = {"command": command}
    for key in ("episode_id", "observation", "action", "reward", "info", "training_enabled", "observations",
                "commands", "action_logp", "action_dist_inputs", "truncated", "explore", "done"):
        if rng.random() < 0.5:
            body[key] = _values(rng)
    if rng.random() < 0.5:
        body["episode_id"] = episode_id
    if command == "REPORT" and rng.random() < 0.5:
        body["commands"] = [{"command": "LOG_RETURNS", "episode_id": episode_id, "reward": _values(rng)},
                            {"command": "REPORT", "commands": []}]
    text = json.dumps(body, allow_nan=True)
    return text.encode()


def _send(port: int, body: bytes, headers: dict, method: str = "POST", path: str = "/") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body if method == "POST" else None, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_fuzzed_requests_get_4xx_and_the_server_survives():
    config = (PPOConfig().environment(env=None, observation_space=CARTPOLE.observation_space,
                                      action_space=CARTPOLE.action_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, auth_token=TOKEN,
                                                                   max_request_bytes=50_000))
              .debugging(seed=0))
    algo = config.build()
    server = algo.env_runner_group.offline_io.reader
    port = server.port
    auth = {"Authorization": f"Bearer {TOKEN}"}
    rng = random.Random(0)
    statuses = []
    try:
        client = PolicyClient(server.url, inference_mode="remote", auth_token=TOKEN)
        episode_id = client.start_episode()
        for i in range(400):
            body = _random_request(rng, episode_id)
            choice = rng.random()
            if choice < 0.15:  # no token, a wrong one, or a malformed header
                headers = rng.choice([{}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN},
                                      {"Authorization": "Basic Zm9vOmJhcg=="}])
                status = _send(port, body, headers)
                assert status == 401
            elif choice < 0.2:
                status = _send(port, body, auth, method=rng.choice(["GET", "PUT", "DELETE"]),
                               path=rng.choice(["/", "/weights?version=x", "/spec", "/../etc/passwd", "/health"]))
            else:
                status = _send(port, body, auth)
            statuses.append(status)
            assert status < 500, (status, body[:200])
        # Raw sockets: a lying Content-Length, a body over the cap, garbage request lines.
        for raw in (b"POST / HTTP/1.1\r\nContent-Length: 999999999\r\nAuthorization: Bearer " + TOKEN.encode()
                    + b"\r\n\r\n{}", b"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", b"\x00\xff garbage\r\n\r\n",
                    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer " + TOKEN.encode()
                    + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"POST / HTTP/1.1\r\nContent-Length: 10\r\n"
                    b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n{"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(raw)
                sock.shutdown(socket.SHUT_WR)
                answer = sock.recv(200)
                if answer:
                    assert not answer.startswith(b"HTTP/1.1 5") and not answer.startswith(b"HTTP/1.0 5"), answer
        # The server still works: a whole valid episode goes through and trains.
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=0)
        valid = client.start_episode()
        for _ in range(20):
            obs, reward, terminated, truncated, _ = env.step(client.get_action(valid, obs))
            client.log_returns(valid, reward)
            if terminated or truncated:
                break
        client.end_episode(valid, obs)
        batch = server.next()
        assert len(batch) >= 1
    finally:
        algo.stop()
    assert sum(s == 200 for s in statuses) < len(statuses)  # most were refused
    assert len(statuses) == 400


def _number_paths(value, path=()):
    """The paths to every number in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _number_paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _number_paths(item, path + (i,))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path


def _replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def test_every_number_beyond_float32_or_any_float_gets_422():
    """Each number of each valid command, replaced by one that is finite in float64 but inf in
    float32 (1e39) or no float at all (10**400), alone or inside a REPORT: 422, never 200 or 500."""
    config = (PPOConfig().environment(env=None, observation_space=CARTPOLE.observation_space,
                                      action_space=CARTPOLE.action_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, auth_token=TOKEN))
              .debugging(seed=0))
    algo = config.build()
    server = algo.env_runner_group.offline_io.reader
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        episode_id = PolicyClient(server.url, inference_mode="remote", auth_token=TOKEN).start_episode()
        obs = [0.01, 0.0, 0.02, 0.0]
        valid = [
            {"command": "GET_ACTION", "episode_id": episode_id, "observation": obs},
            {"command": "LOG_ACTION", "episode_id": episode_id, "observation": obs, "action": 0,
             "action_logp": -0.5, "action_dist_inputs": [0.1, -0.1]},
            {"command": "LOG_RETURNS", "episode_id": episode_id, "reward": 1.0},
            {"command": "END_EPISODE", "episode_id": episode_id, "observation": obs},
            {"command": "COMPUTE_ACTIONS", "observations": [obs, obs]},
        ]
        sent = 0
        for body in valid:
            for path in _number_paths(body):
                for bad in (1e39, -1e39, 10**400, -10**400):
                    poisoned = _replaced(body, path, bad)
                    for request in (poisoned, {"command": "REPORT", "commands": [poisoned]}):
                        status = _send(server.port, json.dumps(request).encode(), auth)
                        sent += 1
                        assert status == 422, (status, request)
        assert sent >= 100
        # The episode took none of them: it still ends cleanly.
        assert _send(server.port, json.dumps(valid[3]).encode(), auth) == 200
    finally:
        algo.stop()

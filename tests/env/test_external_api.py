"""The external application API: PolicyServerInput + PolicyClient (remote and local inference),
ExternalEnv, concurrency, auth and `rlx serve`."""
from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections import Counter, defaultdict

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.env.external_env import ExternalEnv, ExternalEnvStopped
from rlx.env.policy_client import PolicyClient, PolicyServerError
from rlx.env.policy_server_input import PolicyServerInput
from rlx.offline.episode_rows import EPS_ID, T
from rlx.utils.errors import ConfigError, NotSupportedYetError

CARTPOLE = gym.make("CartPole-v1")
OBS_SPACE, ACT_SPACE = CARTPOLE.observation_space, CARTPOLE.action_space


def server_config(**server_kwargs) -> PPOConfig:
    return (PPOConfig()
            .environment(env=None, observation_space=OBS_SPACE, action_space=ACT_SPACE)
            .env_runners(num_env_runners=0)
            .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, **server_kwargs))
            .training(train_batch_size=1000, minibatch_size=128)
            .reporting(metrics_num_episodes_for_smoothing=20)
            .debugging(seed=0))


def start_server(config: PPOConfig):
    algo = config.build()
    return algo, algo.env_runner_group.offline_io.reader  # building the reader starts the server


def run_cartpole(client: PolicyClient, stop: threading.Event, seed: int, on_step=None) -> None:
    """The seed's CartPole client: reset, start_episode, get_action/log_returns, end_episode."""
    env = gym.make("CartPole-v1")
    episode = 0
    while not stop.is_set():
        obs, _ = env.reset(seed=seed * 100_000 + episode)
        episode_id = client.start_episode(training_enabled=True)
        step = 0
        while True:
            action = client.get_action(episode_id, obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            if on_step is not None:
                reward = on_step(episode_id, episode, step)
            client.log_returns(episode_id, reward)
            step += 1
            if terminated or truncated:
                client.end_episode(episode_id, obs, truncated=truncated)
                break
        episode += 1


def start_clients(url: str, n: int, mode: str = "remote", on_step=None, **kwargs):
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop(i: int) -> None:
        try:
            client = PolicyClient(url, inference_mode=mode, **kwargs)
            run_cartpole(client, stop, i, on_step)
            client.close()
        except BaseException as err:  # reported by the test
            errors.append(err)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return stop, threads, errors


def stop_clients(stop, threads, errors) -> None:
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors


def post(port: int, body: bytes | dict, headers: dict | None = None, path: str = "/") -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, body=data, headers=headers or {})
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, (json.loads(raw) if raw else {})


# ---------------------------------------------------------------------------------------- learning


@pytest.mark.slow
def test_cartpole_server_and_remote_clients_learn():
    """The seed's CartPole server + client pair: PPO trains from steps that arrive over HTTP, and
    the episodes' returns are reported under env_runners like sampled ones."""
    algo, server = start_server(server_config())
    clients = start_clients(server.url, 2, mode="remote")
    best, start, steps = 0.0, time.time(), 0
    try:
        # A step budget, not a time budget (a loaded machine is slower); the time bound only
        # stops a run that hangs.
        while steps < 30_000 and time.time() - start < 300:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            best = max(best, result["env_runners"]["episode_return_mean"])
            if best >= 150:
                break
    finally:
        stop_clients(*clients)
        algo.stop()
    print(f"remote-inference CartPole reached {best:.1f} in {time.time() - start:.1f} s, "
          f"{result['num_env_steps_sampled_lifetime']} steps")
    assert best >= 150
    assert result["num_env_steps_sampled_lifetime"] <= 31_000


def test_local_inference_client_pulls_weights_and_reports_behaviour_columns():
    """A local-mode client builds the module from /spec, loads the server's weights, and its
    logged steps carry its log-probabilities into the training batch."""
    algo, server = start_server(server_config())
    try:
        client = PolicyClient(server.url, inference_mode="local", update_interval=None)
        server.policy.sync_from(server.worker.module)
        client.update_policy_weights()
        ours = client._policy.module.state_dict()
        for k, v in server.policy.module.state_dict().items():
            np.testing.assert_array_equal(ours[k].numpy(), v.numpy())
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=3)
        episode_id = client.start_episode()
        steps = 0
        for _ in range(30):
            obs_before = obs
            action = client.get_action(episode_id, obs)
            assert ACT_SPACE.contains(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            client.log_returns(episode_id, reward)
            steps += 1
            if terminated or truncated:
                break
        client.end_episode(episode_id, obs, truncated=not terminated)
        batch = server.next()
        assert len(batch) == steps
        assert "action_logp" in batch and np.all(batch["action_logp"] <= 0)
        np.testing.assert_allclose(batch["obs"][steps - 1], obs_before, rtol=1e-6)
        assert bool(batch["terminateds"][-1]) == bool(terminated)
        # The next weights the trainer publishes reach the client on update_policy_weights().
        for p in server.worker.module.parameters():
            p.data.add_(0.5)
        server.policy.sync_from(server.worker.module)
        client.update_policy_weights()
        first = next(iter(server.worker.module.state_dict()))
        np.testing.assert_array_equal(client._policy.module.state_dict()[first].numpy(),
                                      server.worker.module.state_dict()[first].numpy())
        client.close()
    finally:
        algo.stop()


def test_local_inference_clients_train():
    algo, server = start_server(server_config())
    clients = start_clients(server.url, 2, mode="local", update_interval=0.2)
    try:
        results = [algo.train() for _ in range(3)]
    finally:
        stop_clients(*clients)
        algo.stop()
    assert results[-1]["num_env_steps_sampled_lifetime"] >= 3 * 1000
    assert results[-1]["env_runners"]["num_episodes"] > 0
    assert np.isfinite(results[-1]["learners"]["default_policy"]["total_loss"])


class _CartPoleSimulator(ExternalEnv):
    """An ExternalEnv subclass running CartPole episodes in its own loop."""

    def run(self) -> None:
        try:
            self._loop()
        except ExternalEnvStopped:  # the Algorithm was stopped
            pass

    def _loop(self) -> None:
        env = gym.make("CartPole-v1")
        i = 0
        while True:
            obs, _ = env.reset(seed=i)
            episode_id = self.start_episode()
            while True:
                obs, reward, terminated, truncated, _ = env.step(self.get_action(episode_id, obs))
                self.log_returns(episode_id, reward)
                if terminated or truncated:
                    self.end_episode(episode_id, obs, truncated=truncated)
                    break
            i += 1


def test_external_env_subclass_as_input_trains_in_process():
    config = (PPOConfig().environment(env=None, observation_space=OBS_SPACE, action_space=ACT_SPACE)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: _CartPoleSimulator(ACT_SPACE, OBS_SPACE))
              .training(train_batch_size=1000, minibatch_size=128)
              .debugging(seed=0))
    algo = config.build()
    try:
        first = algo.train()
        second = algo.train()
    finally:
        algo.stop()
    # Every iteration trains on at least a train batch; the first can hold more, as the simulator's
    # thread runs (and queues steps) while the Algorithm is still being built.
    assert first["num_env_steps_sampled_lifetime"] >= 1000
    assert second["num_env_steps_sampled_lifetime"] - first["num_env_steps_sampled_lifetime"] >= 1000
    assert second["env_runners"]["episode_return_mean"] > 0


def test_external_env_errors():
    class Sim(ExternalEnv):
        def run(self) -> None:
            pass

    with pytest.raises(ConfigError, match="max_concurrent"):
        Sim(ACT_SPACE, OBS_SPACE, max_concurrent=4)
    with pytest.raises(ConfigError, match="not connected"):
        Sim(ACT_SPACE, OBS_SPACE).start_episode()
    with pytest.raises(TypeError):
        ExternalEnv(ACT_SPACE, OBS_SPACE)  # run() must be written


# ---------------------------------------------------------------------------------------- concurrency


def test_eight_concurrent_clients_lose_and_duplicate_no_step():
    """8 remote clients for a few seconds; every step a client took is in the training rows
    exactly once, in order, under the episode it belongs to (counted on both sides)."""
    algo, server = start_server(server_config())
    lock = threading.Lock()
    client_steps: dict[float, int] = defaultdict(int)

    tags: dict[str, float] = {}

    def tag(episode_id: str, episode: int, step: int) -> float:
        # The reward names the episode (a small integer: exact in float32), so server rows can
        # be matched to the client's count.
        with lock:
            value = tags.setdefault(episode_id, float(len(tags) + 1))
            client_steps[value] += 1
        return value

    rows: list = []
    clients = start_clients(server.url, 8, on_step=tag)
    try:
        # 5 s in CI; RLX_EXTERNAL_CONCURRENCY_S=30 runs the full 30 seconds.
        deadline = time.time() + float(os.environ.get("RLX_EXTERNAL_CONCURRENCY_S", "5"))
        while time.time() < deadline:
            rows.append(server.next())
        stop_clients(*clients)
        expected = sum(client_steps.values())
        while sum(len(b) for b in rows) < expected:
            rows.append(server.next())
    finally:
        algo.stop()
    eps = np.concatenate([b[EPS_ID] for b in rows])
    ts = np.concatenate([b[T] for b in rows])
    rewards = np.concatenate([b["rewards"] for b in rows])
    assert len(eps) == sum(client_steps.values())
    assert len(set(zip(eps.tolist(), ts.tolist()))) == len(eps), "a step arrived twice"
    server_steps: Counter = Counter()
    for e in np.unique(eps):
        mine = eps == e
        assert sorted(ts[mine].tolist()) == list(range(int(mine.sum()))), "a step of an episode is missing"
        assert len(np.unique(rewards[mine])) == 1
        server_steps[float(rewards[mine][0])] += int(mine.sum())
    assert dict(server_steps) == dict(client_steps)
    assert len(client_steps) >= 8


def test_vanished_client_loses_only_its_episode():
    algo, server = start_server(server_config(episode_timeout_s=0.5))
    try:
        gone = PolicyClient(server.url, inference_mode="remote")
        lost = gone.start_episode()
        obs = OBS_SPACE.sample() * 0.01
        for _ in range(5):
            gone.get_action(lost, obs)
            gone.log_returns(lost, 1.0)
        clients = start_clients(server.url, 2)
        time.sleep(1.0)
        batches = [server.next() for _ in range(2)]
        stop_clients(*clients)
        assert server.book.num_episodes_expired == 1
        with pytest.raises(PolicyServerError, match="409|404"):
            gone.get_action(lost, obs)
        # The other clients' episodes went on: more steps than the vanished client's, and
        # finished episodes among them.
        assert sum(len(b) for b in batches) > 5
        assert any(b["terminateds"].any() or b["truncateds"].any() for b in batches)
    finally:
        algo.stop()


# ---------------------------------------------------------------------------------------- transport


def test_auth_token_required_and_checked():
    algo, server = start_server(server_config(auth_token="s3cret-token"))
    try:
        status, body = post(server.port, {"command": "START_EPISODE"})
        assert status == 401 and "Bearer" in body["error"]
        status, _ = post(server.port, {"command": "START_EPISODE"}, {"Authorization": "Bearer wrong-token"})
        assert status == 401
        status, body = post(server.port, {"command": "START_EPISODE"}, {"Authorization": "Bearer s3cret-token"})
        assert status == 200 and body["episode_id"]
        with pytest.raises(PolicyServerError, match="401"):
            PolicyClient(server.url, inference_mode="remote", auth_token="wrong-token-x").start_episode()
        client = PolicyClient(server.url, inference_mode="remote", auth_token="s3cret-token")
        episode_id = client.start_episode()
        assert ACT_SPACE.contains(client.get_action(episode_id, OBS_SPACE.sample() * 0.01))
    finally:
        algo.stop()


def test_binding_beyond_loopback_needs_a_token(monkeypatch):
    monkeypatch.delenv("RLX_POLICY_SERVER_TOKEN", raising=False)
    algo = server_config().offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "0.0.0.0", 0)).build()
    try:
        with pytest.raises(ConfigError, match="auth token"):
            algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()


def test_bad_requests_get_clear_4xx_and_the_server_keeps_serving():
    algo, server = start_server(server_config(max_request_bytes=10_000))
    try:
        port = server.port
        _, started = post(port, {"command": "START_EPISODE"})
        eid = started["episode_id"]
        cases = [
            ({"command": "GET_ACTION", "episode_id": eid, "observation": [0.0, 1.0]}, 422, "shape"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": [0, 0, "x", 0]}, 422, "numbers"),
            ({"command": "GET_ACTION", "episode_id": "nope", "observation": [0, 0, 0, 0]}, 404, "start_episode"),
            ({"command": "LOG_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0], "action": 5}, 422, "outside"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": "lots"}, 422, "finite number"),
            ({"command": "FLY"}, 400, "unknown command"),
            ({"episode_id": eid}, 400, "'command'"),
            ({"command": "START_EPISODE", "episode_id": eid}, 409, "already started"),
        ]
        for body, status, words in cases:
            got, answer = post(port, body)
            assert got == status, (body, answer)
            assert words in answer["error"], answer
        assert post(port, b"{not json")[0] == 400
        assert post(port, b"[1, 2]")[0] == 400
        assert post(port, b"x" * 20_000)[0] == 413
        assert post(port, {"command": "START_EPISODE"}, path="/nowhere")[0] == 404
        got, answer = post(port, {"command": "GET_ACTION", "episode_id": eid, "observation": [0, 0, 0, 0]})
        assert got == 200 and answer["action"] in (0, 1)
    finally:
        algo.stop()


def test_external_multi_agent_env_with_a_single_agent_config_is_refused_clearly():
    """Multi-agent external episodes train a multi-agent config (tests/env/test_external_multi_agent.py);
    with a config of one policy the error says what to configure."""
    from rlx.env.external_multi_agent_env import ExternalMultiAgentEnv

    class MultiSim(ExternalMultiAgentEnv):
        def run(self) -> None:
            pass

    config = (PPOConfig().environment(env=None, observation_space=OBS_SPACE, action_space=ACT_SPACE)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: MultiSim(ACT_SPACE, OBS_SPACE)))
    algo = config.build()
    try:
        with pytest.raises(ConfigError, match="ExternalMultiAgentEnv.*config.multi_agent"):
            algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()


@pytest.mark.parametrize("setting, name", [({"observation_filter": "MeanStdFilter"}, "observation_filter"),
                                           ({"normalize_rewards": True}, "normalize_rewards")])
def test_observation_filters_and_reward_normalisation_are_refused_clearly(setting, name):
    config = server_config().update_from_dict(setting)
    algo = config.build()
    try:
        with pytest.raises(NotSupportedYetError, match=name):
            algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()


# ---------------------------------------------------------------------------------------- rlx serve


def test_rlx_serve_answers_with_the_checkpoint_policy(tmp_path):
    from rlx.cli.main import parse_args
    from rlx.cli.serve import PolicyService

    trainer = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0).debugging(seed=0).build()
    trainer.train()
    path = trainer.save(str(tmp_path / "ckpt")).checkpoint.path
    obs = [OBS_SPACE.sample() * 0.05 for _ in range(6)]
    expected = trainer.compute_actions({i: o for i, o in enumerate(obs)}, explore=False)
    trainer.stop()

    args = parse_args(["serve", path, "--port", "0"])
    assert args.command == "serve" and args.port == 0 and args.address == "127.0.0.1"
    service = PolicyService(path, port=0, auth_token="serve-token-1").start()
    try:
        client = PolicyClient(service.url, inference_mode="remote", auth_token="serve-token-1")
        actions = client.compute_actions([o.tolist() for o in obs])
        assert actions == [int(expected[i]) for i in range(6)]
        episode_id = client.start_episode()
        assert client.get_action(episode_id, obs[0]) == int(expected[0])
        client.end_episode(episode_id, obs[1])
        assert post(service.http.port, {"command": "COMPUTE_ACTIONS", "observations": [obs[0].tolist()]})[0] == 401
        local = PolicyClient(service.url, inference_mode="local", auth_token="serve-token-1")
        assert local.get_action(local.start_episode(), obs[2]) in (0, 1)
        local.close()
    finally:
        service.stop()
    with pytest.raises(ConfigError, match="auth token"):
        PolicyService(path, address="0.0.0.0", port=0)


def test_a_policy_trained_from_clients_can_be_served(tmp_path):
    """The deployment path: train from a policy server (env=None), save, `rlx serve` the checkpoint."""
    from rlx.cli.serve import PolicyService

    algo, server = start_server(server_config())
    clients = start_clients(server.url, 1)
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        obs = OBS_SPACE.sample() * 0.05
        expected = algo.compute_single_action(obs, explore=False)
    finally:
        stop_clients(*clients)
        algo.stop()
    service = PolicyService(path, port=0).start()
    try:
        client = PolicyClient(service.url, inference_mode="remote")
        assert client.compute_actions([obs.tolist()]) == [int(expected)]
    finally:
        service.stop()

"""RLlink over TCP: EnvRunnerServerForExternalInference, the protocol's frames, and training
PPO from an external CartPole client that acts itself."""
from __future__ import annotations

import pickle
import socket
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("msgpack")


def _config(**training):
    from rlx.algorithms.ppo import PPOConfig
    from rlx.env.external.env_runner_server_for_external_inference import EnvRunnerServerForExternalInference

    return (PPOConfig()
            .environment(observation_space=gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
                         action_space=gym.spaces.Discrete(2), env_config={"port": 0})
            .env_runners(env_runner_cls=EnvRunnerServerForExternalInference, num_env_runners=0)
            .training(**training))


def _connect(port):
    sock = socket.create_connection(("localhost", port), timeout=10)
    sock.settimeout(10)
    return sock


def _cartpole_episode(steps, terminated, seed=0):
    """A SingleAgentEpisode of `steps` CartPole-like steps with behaviour columns."""
    from rlx.env.single_agent_episode import SingleAgentEpisode

    rng = np.random.default_rng(seed)
    episode = SingleAgentEpisode(observations=[rng.normal(size=4).astype(np.float32)])
    for t in range(steps):
        episode.add_env_step(observation=rng.normal(size=4).astype(np.float32), action=int(t % 2), reward=1.0,
                             terminated=terminated and t == steps - 1,
                             extra_model_outputs={"action_dist_inputs": np.zeros(2, np.float32),
                                                  "action_logp": float(np.log(0.5))})
    return episode


def test_frames_are_msgpack_numpy_compatible_and_refuse_pickles():
    from rlx.env.external.rllink import RLlink, RLlinkProtocolError, pack_message, unpack_body

    message = {"type": RLlink.EPISODES, "x": np.arange(3, dtype=np.float32), "s": np.int64(7)}
    frame = pack_message(message)
    # What RLlib's peers (msgpack patched by msgpack_numpy 0.4.8) send for this message.
    expected = bytes.fromhex(
        "83a474797065a8455049534f444553a17885c4026e64c3c40474797065a33c6634c4046b696e64c400c40573686170659103c40464"
        "617461c40c000000000000803f00000040a17383c4026e64c2c40474797065a33c6938c40464617461c4080700000000000000")
    assert frame[:8] == str(len(expected)).zfill(8).encode() and frame[8:] == expected
    kind, fields = unpack_body(expected)
    assert kind is RLlink.EPISODES and fields["x"].dtype == np.float32 and fields["x"].tolist() == [0, 1, 2]
    assert fields["s"] == 7

    import msgpack

    pickled = msgpack.packb({"type": "EPISODES", "x": {b"nd": True, b"type": [["", "|O"]], b"kind": b"O",
                                                       b"shape": [1], b"data": pickle.dumps([1])}},
                            use_bin_type=True)
    with pytest.raises(RLlinkProtocolError, match="object arrays"):
        unpack_body(pickled)
    with pytest.raises(RLlinkProtocolError, match="Unknown message type 'HELLO'"):
        unpack_body(msgpack.packb({"type": "HELLO"}))
    with pytest.raises(RLlinkProtocolError, match="no 'type' field"):
        unpack_body(msgpack.packb({"episodes": []}))


def test_handshake_config_and_state_over_raw_socket():
    from rlx.core import COMPONENT_RL_MODULE
    from rlx.env.external.rllink import RLlink, get_rllink_message, send_rllink_message

    algo = _config().build()
    try:
        runner = algo.env_runner_group.local_env_runner
        sock = _connect(runner.port)
        send_rllink_message(sock, {"type": "PING"})
        assert get_rllink_message(sock, timeout_s=10)[0] is RLlink.PONG
        send_rllink_message(sock, {"type": "GET_CONFIG"})
        kind, fields = get_rllink_message(sock, timeout_s=10)
        assert kind is RLlink.SET_CONFIG
        config = pickle.loads(fields["config"])
        module = config.get_rl_module_spec().build()
        send_rllink_message(sock, {"type": "GET_STATE"})
        kind, fields = get_rllink_message(sock, timeout_s=10)
        assert kind is RLlink.SET_STATE and fields["state"]["weights_seq_no"] == 0
        module.set_state(fields["state"][COMPONENT_RL_MODULE])
        for name, value in algo.get_module().state_dict().items():
            assert np.allclose(module.state_dict()[name].numpy(), value.detach().numpy())
        sock.close()
    finally:
        algo.stop()


def test_episode_chunks_continue_across_messages_and_train_on_the_one_path():
    from rlx.env.external.rllink_client import RLlinkClient

    algo = _config().build()
    try:
        runner = algo.env_runner_group.local_env_runner
        with RLlinkClient(port=runner.port, connect_timeout_s=10, timeout_s=10) as client:
            episode = _cartpole_episode(30, terminated=False)
            client.send_episodes([episode])
            rest = episode.cut()
            for t in range(20):
                rest.add_env_step(observation=np.zeros(4, np.float32), action=1, reward=2.0, terminated=t == 19,
                                  extra_model_outputs={"action_dist_inputs": np.zeros(2, np.float32),
                                                       "action_logp": float(np.log(0.5))})
            client.send_episodes([rest, _cartpole_episode(5, terminated=False, seed=1)])
            client.ping()  # one connection's messages are handled in order: both chunks are in now
            deadline = time.monotonic() + 10
            batch = runner.sample()
            while batch["rewards"].size < 55 and time.monotonic() < deadline:
                more = runner.sample()
                batch = {k: np.concatenate([batch[k], more[k]]) for k in batch}
        assert batch["obs"].shape == (55, 1, 4)  # one column: every step sent, none held back
        assert batch["rewards"][:, 0].tolist() == [1.0] * 30 + [2.0] * 20 + [1.0] * 5
        done = batch["terminateds"][:, 0] | batch["truncateds"][:, 0]
        # The episode's 50 steps join up; the running episode's chunk ends truncated (bootstrapped).
        assert np.flatnonzero(done).tolist() == [49, 54] and batch["terminateds"][49, 0]
        assert np.allclose(batch["action_logp"], np.log(0.5))
        metrics = runner.get_metrics()["hist_stats"]  # the episodes that ended: one, over two messages
        assert list(metrics["episode_reward"].peek()) == [70.0]
        assert list(metrics["episode_lengths"].peek()) == [50]
    finally:
        algo.stop()


@pytest.mark.parametrize("fields, error", [
    ({"type": "EPISODES", "episodes": [{"id_": "e1", "observations": {"data": [np.zeros(4)], "lookback": 0},
                                        "actions": {"data": [0], "lookback": 0},
                                        "rewards": {"data": [1.0], "lookback": 0}}]},
     "one observation more than actions"),
    ({"type": "EPISODES", "episodes": [{"id_": "e1", "observations": {"data": [np.zeros(3), np.zeros(3)],
                                                                      "lookback": 0},
                                        "actions": {"data": [0], "lookback": 0},
                                        "rewards": {"data": [1.0], "lookback": 0}}]},
     "observations have shape"),
    ({"type": "EPISODES", "episodes": [{"id_": "e1", "observations": {"data": [np.zeros(4), np.zeros(4)],
                                                                      "lookback": 0},
                                        "actions": {"data": [5], "lookback": 0},
                                        "rewards": {"data": [1.0], "lookback": 0}}]},
     "action 0 .* is outside Discrete"),
    # finite in float64, inf in float32 (the space's dtype and the batch's rewards): refused (issue 33)
    ({"type": "EPISODES", "episodes": [{"id_": "e1", "observations": {"data": [np.zeros(4), np.full(4, 1e39)],
                                                                      "lookback": 0},
                                        "actions": {"data": [0], "lookback": 0},
                                        "rewards": {"data": [1.0], "lookback": 0}}]},
     "observations holds 1e\\+39 .* float32"),
    ({"type": "EPISODES", "episodes": [{"id_": "e1", "observations": {"data": [np.zeros(4), np.zeros(4)],
                                                                      "lookback": 0},
                                        "actions": {"data": [0], "lookback": 0},
                                        "rewards": {"data": [1e39], "lookback": 0}}]},
     "reward must be a finite number within float32"),
    ({"type": "SET_STATE", "state": {}}, "SET_STATE is not a request this server answers"),
])
def test_bad_messages_get_an_error_and_the_port_serves_the_next_client(fields, error):
    from rlx.env.external.rllink import RLlink, get_rllink_message, send_rllink_message

    algo = _config().build()
    try:
        runner = algo.env_runner_group.local_env_runner
        sock = _connect(runner.port)
        send_rllink_message(sock, fields)
        kind, answer = get_rllink_message(sock, timeout_s=10)
        assert kind is RLlink.ERROR
        import re

        assert re.search(error, answer["message"]), answer["message"]
        assert sock.recv(1) == b""  # the server closed the connection
        sock.close()
        # Nothing of the refused message reached the book; a new client is served.
        assert runner.book.drain() is None
        sock = _connect(runner.port)
        sock.sendall(b"12ab5678garbage")
        kind, answer = get_rllink_message(sock, timeout_s=10)
        assert kind is RLlink.ERROR and "Bad message header" in answer["message"]
        sock.close()
        sock = _connect(runner.port)
        send_rllink_message(sock, {"type": "PING"})
        assert get_rllink_message(sock, timeout_s=10)[0] is RLlink.PONG
        sock.close()
    finally:
        algo.stop()


def test_sample_without_a_client_times_out_naming_the_port():
    algo = _config().env_runners(sample_timeout_s=0.5).build()
    try:
        port = algo.env_runner_group.local_env_runner.port
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=f"localhost:{port}, but no client is connected"):
            algo.train()
        assert time.monotonic() - start < 10
    finally:
        algo.stop()


@pytest.mark.slow
def test_external_cartpole_client_trains_ppo_over_tcp():
    from rlx.examples.envs.classes.utils.dummy_external_client import _dummy_external_client

    config = _config(lr=0.0005, num_epochs=6, minibatch_size=128, train_batch_size=2000).debugging(seed=3)
    algo = config.build()
    stop = threading.Event()
    try:
        port = algo.env_runner_group.local_env_runner.port
        sent = []
        client = threading.Thread(target=lambda: sent.append(_dummy_external_client(port, stop=stop, seed=3)),
                                  daemon=True)
        client.start()
        start, best = time.monotonic(), 0.0
        for _ in range(25):
            result = algo.train()
            best = max(best, result["env_runners"].get("episode_return_mean", 0.0))
            if best >= 100.0:
                break
        assert best >= 100.0, f"CartPole return only reached {best} in 25 iterations over TCP"
        assert time.monotonic() - start < 240
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 2000
    finally:
        algo.stop()
        stop.set()
    client.join(timeout=10)
    assert not client.is_alive() and sent and sent[0] >= 2000  # the client ended when the server closed

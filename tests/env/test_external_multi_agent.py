"""Multi-agent training from external applications: ExternalMultiAgentEnv in process, and a
PolicyServerInput of a multi-agent config with PolicyClients in remote and local inference
mode (dicts keyed by agent id, agents that act in turns, per-agent dones)."""
from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.env.external_env import ExternalEnv, ExternalEnvStopped
from rlx.env.external_multi_agent_env import ExternalMultiAgentEnv
from rlx.env.policy_client import PolicyClient, PolicyServerError
from rlx.env.policy_server_input import PolicyServerInput
from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
from rlx.offline.episode_rows import AGENT_INDEX, EPS_ID, T
from rlx.policy.sample_batch import MultiAgentBatch
from rlx.utils.errors import ConfigError

CARTPOLE = gym.make("CartPole-v1")
OBS_SPACE, ACT_SPACE = CARTPOLE.observation_space, CARTPOLE.action_space
#: Agents 0 and 2 share policy p0; agent 1 has p1; any other agent id is unknown.
POLICY_OF = {0: "p0", 1: "p1", 2: "p0"}


def map_agent(agent_id, episode, **kwargs):
    return POLICY_OF[agent_id]


def multi_agent_config(input_) -> PPOConfig:
    return (PPOConfig()
            .environment(env=None, observation_space=OBS_SPACE, action_space=ACT_SPACE)
            .env_runners(num_env_runners=0)
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=map_agent)
            .offline_data(input_=input_)
            .training(train_batch_size=1000, minibatch_size=128, lr=1e-3)
            .reporting(metrics_num_episodes_for_smoothing=20)
            .debugging(seed=0))


def start_server(**server_kwargs):
    server_kwargs.setdefault("idle_timeout", 0.5)
    algo = multi_agent_config(lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, **server_kwargs)).build()
    return algo, algo.env_runner_group.offline_io.reader  # building the reader starts the server


def post(port: int, body: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/", body=json.dumps(body).encode())
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, (json.loads(raw) if raw else {})


def play_cartpoles(api, episode: int) -> None:
    """One episode of 2-agent CartPole, reported through `api` (an ExternalMultiAgentEnv or a
    PolicyClient): an agent whose pole fell is marked done and its last observation is its last."""
    env = MultiAgentCartPole({"num_agents": 2})
    obs, _ = env.reset(seed=episode)
    episode_id = api.start_episode()
    while True:
        actions = api.get_action(episode_id, obs)
        assert set(actions) == set(obs) - {a for a in obs if a not in env.agents}
        obs, rewards, terminateds, truncateds, _ = env.step(actions)
        dones = {aid: True for aid in rewards if terminateds[aid] or truncateds[aid]}
        api.log_returns(episode_id, rewards, multiagent_done_dict=dones)
        if terminateds["__all__"] or truncateds["__all__"]:
            api.end_episode(episode_id, obs)
            return


class TwoCartPoles(ExternalMultiAgentEnv):
    """An ExternalMultiAgentEnv running 2-agent CartPole episodes in its own loop."""

    def run(self) -> None:
        episode = 0
        try:
            while True:
                play_cartpoles(self, episode)
                episode += 1
        except ExternalEnvStopped:  # the Algorithm was stopped
            pass


# ---------------------------------------------------------------------------------------- learning


@pytest.mark.slow
def test_external_multi_agent_env_trains_two_policies_in_process():
    """The in-process ExternalMultiAgentEnv path: each agent's steps train its own policy, and
    both policies learn 2-agent CartPole (untrained: about 20 per agent)."""
    algo = multi_agent_config(lambda ioctx: TwoCartPoles(ACT_SPACE, OBS_SPACE)).build()
    progress, start = [], time.time()
    try:
        while True:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            per_module = result["env_runners"]["module_episode_returns_mean"]
            progress.append((steps, {pid: round(r, 1) for pid, r in per_module.items()}))
            if (set(per_module) == {"p0", "p1"} and min(per_module.values()) >= 100) or steps >= 20_000:
                break
    finally:
        algo.stop()
    print(f"in-process 2-agent CartPole: {progress[-1]} after {time.time() - start:.1f} s")
    assert min(per_module.values()) >= 100, progress
    assert steps < 20_000
    assert set(result["env_runners"]["agent_episode_returns_mean"]) == {"0", "1"}
    assert set(result["learners"]) >= {"p0", "p1"}


# ---------------------------------------------------------------------------------------- counting


def run_turn_based_client(client: PolicyClient, stop: threading.Event, seed: int, log: dict, lock) -> None:
    """Episodes where agents act in turns: at step k, agents 0 and 1 act together (k % 3 == 0),
    or only 0, or only 1; agent 2 joins at step 1 and is marked done after step 3 (its last
    observation comes with step 4's). Every reward names its (episode, agent), so the server's
    rows can be matched to the client's count of each agent's actions."""
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        episode_id = client.start_episode()
        tags = {}
        length = int(rng.integers(2, 12))
        for k in range(length):
            acting = [[0, 1], [0], [1]][k % 3] + ([2] if 1 <= k <= 3 else [])
            observations = {aid: OBS_SPACE.sample() * 0.1 for aid in acting}
            if k == 4:
                observations[2] = OBS_SPACE.sample() * 0.1  # agent 2's last observation
            actions = client.get_action(episode_id, observations)
            assert set(actions) == set(acting), (actions, acting)
            assert all(ACT_SPACE.contains(int(a)) for a in actions.values())
            with lock:
                for aid in acting:
                    tag = tags.setdefault(aid, float(len(log["steps"]) + 1))
                    log["steps"][tag] += 1
                    log["ends"][tag] = "terminated" if aid == 2 and k == 3 else None
                log["env_steps"] += 1
            client.log_returns(episode_id, {aid: tags[aid] for aid in acting},
                               multiagent_done_dict={2: True} if k == 3 else None)
        truncated = bool(rng.random() < 0.5)
        with lock:
            for tag in tags.values():
                if log["ends"][tag] is None:
                    log["ends"][tag] = "truncated" if truncated else "terminated"
        client.end_episode(episode_id, {0: OBS_SPACE.sample() * 0.1, 1: OBS_SPACE.sample() * 0.1},
                           truncated=truncated)


def test_clients_over_http_lose_and_duplicate_no_agent_step():
    """4 remote clients play turn-based multi-agent episodes over HTTP at once: every agent step a
    client took is one row of its agent's policy, exactly once and in order, with the rewards
    of that agent only, and the last row of each agent ends as the client ended it."""
    algo, server = start_server()
    log = {"steps": Counter(), "ends": {}, "env_steps": 0}
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop(i: int) -> None:
        try:
            run_turn_based_client(PolicyClient(server.url, inference_mode="remote"), stop, i, log, lock)
        except BaseException as err:  # reported by the test
            errors.append(err)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(4)]
    batches: list[MultiAgentBatch] = []
    try:
        for t in threads:
            t.start()
        deadline = time.time() + 3.0
        while time.time() < deadline:
            batches.append(server.next())
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert not errors, errors
        expected = sum(log["steps"].values())
        while sum(b.agent_steps() for b in batches) < expected:
            batches.append(server.next())
    finally:
        stop.set()
        algo.stop()
    assert all(isinstance(b, MultiAgentBatch) for b in batches)
    assert sum(b.env_steps() for b in batches) == log["env_steps"]
    server_steps: Counter = Counter()
    for pid in ("p0", "p1"):
        parts = [b.policy_batches[pid] for b in batches if pid in b.policy_batches]
        column = {k: np.concatenate([p[k] for p in parts]) for k in (EPS_ID, AGENT_INDEX, T, "rewards",
                                                                       "terminateds", "truncateds")}
        keys = list(zip(column[EPS_ID].tolist(), column[AGENT_INDEX].tolist()))
        assert len(set(zip(keys, column[T].tolist()))) == len(keys), "an agent step arrived twice"
        for key in set(keys):
            mine = np.asarray([k == key for k in keys])
            steps = column[T][mine]
            assert sorted(steps.tolist()) == list(range(int(mine.sum()))), "an agent step is missing"
            rewards = np.unique(column["rewards"][mine])
            assert len(rewards) == 1, "rewards of another agent or episode were mixed in"
            tag = float(rewards[0])
            server_steps[tag] += int(mine.sum())
            order = np.argsort(steps)
            terminated = column["terminateds"][mine][order]
            truncated = column["truncateds"][mine][order]
            assert not (terminated | truncated)[:-1].any(), "an agent's episode ended before its last step"
            ended = "terminated" if terminated[-1] else "truncated" if truncated[-1] else None
            assert ended == log["ends"][tag], (tag, ended, log["ends"][tag])
    assert dict(server_steps) == dict(log["steps"])
    assert len(log["steps"]) >= 12


# ---------------------------------------------------------------------------------------- bad requests


def test_malformed_multi_agent_requests_get_4xx_and_the_server_keeps_serving():
    algo, server = start_server()
    try:
        port = server.port
        eid = post(port, {"command": "START_EPISODE"})[1]["episode_id"]
        ok = [0.0, 0.0, 0.0, 0.0]
        cases = [
            ({"command": "GET_ACTION", "episode_id": eid, "observation": ok}, 422, "keyed by agent id"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": {}}, 422, "names no agent"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": {"9": ok}}, 422, "unknown"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": {"__all__": ok}}, 422, "not an agent id"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": {"x" * 200: ok}}, 422, "characters"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": {"0": [0.0, 1.0]}}, 422, "shape"),
            ({"command": "GET_ACTION", "episode_id": eid, "observation": {"1": [0, "x", 0, 0]}}, 422, "numbers"),
            ({"command": "GET_ACTION", "episode_id": "nope", "observation": {"0": ok}}, 404, "start_episode"),
            ({"command": "LOG_ACTION", "episode_id": eid, "observation": {"0": ok}, "action": {"0": 5}}, 422,
             "outside"),
            ({"command": "LOG_ACTION", "episode_id": eid, "observation": {"0": ok}, "action": {"0": 1.5}}, 422,
             "integer"),
            ({"command": "LOG_ACTION", "episode_id": eid, "observation": {"0": ok}, "action": {"1": 1}}, 422,
             "not in observation"),
            ({"command": "LOG_ACTION", "episode_id": eid, "observation": {"0": ok}, "action": {"0": 1},
              "action_logp": {"0": 0.5}, "action_dist_inputs": {"0": [0.0, 0.0]}}, 422, "log-probability"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": 1.0}, 422, "keyed by agent id"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": {"0": "lots"}}, 422, "finite number"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": {"7": 1.0}}, 422, "unknown"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": {}, "done": {"0": "yes"}}, 400,
             "true or false"),
            ({"command": "LOG_RETURNS", "episode_id": eid, "reward": {}, "done": [0]}, 422, "keyed by agent id"),
            ({"command": "MAP_AGENTS", "episode_id": eid, "agent_ids": "0"}, 400, "agent_ids"),
            ({"command": "MAP_AGENTS", "episode_id": eid, "agent_ids": [[0]]}, 422, "strings or integers"),
            ({"command": "COMPUTE_ACTIONS", "observations": [ok]}, 422, "policy_id"),
            ({"command": "END_EPISODE", "episode_id": eid, "observation": {"0": [float("inf")] * 4}}, 400, "JSON"),
        ]
        for body, status, words in cases:
            got, answer = post(port, body)
            assert got == status, (body, answer)
            assert words in answer["error"], (body, answer)
        # Random agent dicts: every one is answered, none with a 5xx (on an episode not trained on).
        fuzzed = post(port, {"command": "START_EPISODE", "training_enabled": False})[1]["episode_id"]
        rng = np.random.default_rng(0)
        statuses: Counter = Counter()
        pool = [None, True, 0, -1, 2**70, 1e308, "", "x" * 200, [], {}, ok, [0, 0, 0], [[1, 2], [3, 4]], "0", 1.5,
                [0, 0, 0, 0, 0], [None] * 4, {"a": 1}, [True] * 4]
        keys = ["0", "1", "2", "9", "__all__", "-1", "x", "00", ""]
        for i in range(300):
            body = {"command": str(rng.choice(["GET_ACTION", "LOG_ACTION", "LOG_RETURNS", "END_EPISODE", "MAP_AGENTS",
                                               "COMPUTE_ACTIONS", "REPORT"])), "episode_id": fuzzed}
            for field in ("observation", "action", "reward", "done", "action_logp", "action_dist_inputs",
                          "agent_ids", "observations", "policy_id", "commands", "info"):
                if rng.random() < 0.5:
                    agents = rng.choice(keys, size=int(rng.integers(0, 3)), replace=False)
                    value = {str(k): pool[rng.integers(len(pool))] for k in agents} if rng.random() < 0.7 \
                        else pool[rng.integers(len(pool))]
                    body[field] = value
            got, answer = post(port, body)
            assert got < 500, (body, answer)
            statuses[got] += 1
            if got == 409 or (got == 200 and body["command"] == "END_EPISODE"):  # the episode is over: a new one
                fuzzed = post(port, {"command": "START_EPISODE", "training_enabled": False})[1]["episode_id"]
        assert statuses[200] >= 5 and sum(n for s, n in statuses.items() if 400 <= s < 500) >= 150, statuses
        # Agent 0 is marked done: its next observation is its last, and it takes no more steps.
        assert post(port, {"command": "GET_ACTION", "episode_id": eid, "observation": {"0": ok, "1": ok}})[0] == 200
        assert post(port, {"command": "LOG_RETURNS", "episode_id": eid, "reward": {"0": 1.0, "1": 0.5},
                           "done": {"0": True}})[0] == 200
        got, answer = post(port, {"command": "GET_ACTION", "episode_id": eid, "observation": {"0": ok, "1": ok}})
        assert got == 200 and set(answer["action"]) == {"1"}
        got, answer = post(port, {"command": "GET_ACTION", "episode_id": eid, "observation": {"0": ok, "1": ok}})
        assert got == 409 and "done" in answer["error"]
        got, answer = post(port, {"command": "COMPUTE_ACTIONS", "observations": [ok, ok], "policy_id": "p1"})
        assert got == 200 and len(answer["actions"]) == 2
        assert post(port, {"command": "MAP_AGENTS", "episode_id": eid, "agent_ids": [0, "1", 2]})[1] == \
            {"policies": {"0": "p0", "1": "p1", "2": "p0"}}
        assert post(port, {"command": "END_EPISODE", "episode_id": eid, "observation": {"1": ok}})[0] == 200
        batch = server.next()
        assert set(batch.policy_batches) == {"p0", "p1"}
        p0, p1 = batch.policy_batches["p0"], batch.policy_batches["p1"]
        assert len(p0["rewards"]) == 1 and p0["terminateds"][0] and p0["rewards"][0] == 1.0
        assert len(p1["rewards"]) == 2 and p1["rewards"].tolist() == [0.5, 0.0] and p1["terminateds"].tolist() == \
            [False, True]
    finally:
        algo.stop()


# ---------------------------------------------------------------------------------------- local inference


def test_local_inference_client_gets_every_policys_weights_and_trains_them():
    algo, server = start_server()
    try:
        client = PolicyClient(server.url, inference_mode="local", update_interval=None)
        assert client.multi_agent and set(client._policies) == {"p0", "p1"}
        # The server publishes new weights of both policies: the client gets each one's.
        for shift, pid in ((0.5, "p0"), (-0.25, "p1")):
            for p in server.worker.module[pid].parameters():
                p.data.add_(shift)
        server.policy.sync_from(server.worker.module)
        client.update_policy_weights()
        for pid in ("p0", "p1"):
            ours = client._policies[pid].module.state_dict()
            theirs = server.worker.module[pid].state_dict()
            assert set(ours) == set(theirs)
            for k, v in theirs.items():
                np.testing.assert_array_equal(ours[k].numpy(), v.detach().numpy())
        assert not np.array_equal(next(iter(client._policies["p0"].module.parameters())).detach().numpy(),
                                  next(iter(client._policies["p1"].module.parameters())).detach().numpy())
        # A local episode: the client acts, the server maps its agents and gets the log-probs.
        play_cartpoles(client, episode=3)
        batch = server.next()
        for pid in ("p0", "p1"):
            part = batch.policy_batches[pid]
            assert np.all(part["action_logp"] <= 0) and part["action_dist_inputs"].shape[1] == 2
            assert part["terminateds"][-1]
        # Local clients train both policies.
        stop = threading.Event()
        errors: list[BaseException] = []

        def loop(i: int) -> None:
            try:
                worker = PolicyClient(server.url, inference_mode="local", update_interval=0.2)
                episode = 100 * i
                while not stop.is_set():
                    play_cartpoles(worker, episode)
                    episode += 1
                worker.close()
            except BaseException as err:  # reported by the test
                errors.append(err)

        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        try:
            result = algo.train()
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        assert not errors, errors
        assert result["num_env_steps_sampled_lifetime"] >= 1000
        for pid in ("p0", "p1"):
            assert np.isfinite(result["learners"][pid]["total_loss"])
        client.close()
    finally:
        algo.stop()


# ---------------------------------------------------------------------------------------- config errors


def test_single_agent_external_env_with_a_multi_agent_config_is_refused_clearly():
    class Sim(ExternalEnv):
        def run(self) -> None:
            pass

    algo = multi_agent_config(lambda ioctx: Sim(ACT_SPACE, OBS_SPACE)).build()
    try:
        with pytest.raises(ConfigError, match="ExternalMultiAgentEnv"):
            algo.env_runner_group.offline_io.reader
    finally:
        algo.stop()


def test_remote_client_keeps_its_agent_ids_and_server_errors_reach_it():
    algo, server = start_server()
    try:
        client = PolicyClient(server.url, inference_mode="remote")
        eid = client.start_episode()
        actions = client.get_action(eid, {0: OBS_SPACE.sample() * 0.1, 1: OBS_SPACE.sample() * 0.1})
        assert set(actions) == {0, 1}  # integer ids, as the client gave them
        with pytest.raises(PolicyServerError, match="422.*unknown"):
            client.get_action(eid, {5: OBS_SPACE.sample() * 0.1})
    finally:
        algo.stop()


def test_a_runner_without_envs_says_what_to_configure_when_asked_to_sample():
    from rlx.utils.errors import EnvError

    algo = multi_agent_config(lambda ioctx: TwoCartPoles(ACT_SPACE, OBS_SPACE)).build()
    try:
        runner = algo.env_runner_group.local_env_runner
        assert runner.envs == [] and set(runner.slots) == {"p0", "p1"}
        with pytest.raises(EnvError, match="No environment is configured"):
            runner.sample()
    finally:
        algo.stop()


def test_rlx_serve_serves_every_policy_of_a_multi_agent_checkpoint(tmp_path):
    """The deployment path: train two policies from a policy server, save, serve the checkpoint;
    its policy_mapping_fn maps the clients' agents, in remote and local inference mode."""
    from rlx.cli.serve import PolicyService

    algo, server = start_server()
    try:
        client = PolicyClient(server.url, inference_mode="remote")
        for episode in range(3):
            play_cartpoles(client, episode)
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        obs = {0: OBS_SPACE.sample() * 0.05, 1: OBS_SPACE.sample() * 0.05}
        expected = {aid: int(algo.compute_single_action(o, policy_id=POLICY_OF[aid], explore=False))
                    for aid, o in obs.items()}
    finally:
        algo.stop()
    service = PolicyService(path, port=0).start()
    try:
        remote = PolicyClient(service.url, inference_mode="remote")
        assert remote.get_action(remote.start_episode(), obs) == expected
        got, answer = post(service.http.port, {"command": "COMPUTE_ACTIONS", "observations": [obs[1].tolist()],
                                               "policy_id": "p1"})
        assert got == 200 and answer["actions"] == [expected[1]]
        local = PolicyClient(service.url, inference_mode="local", update_interval=None)
        assert local.multi_agent and set(local._policies) == {"p0", "p1"}
        actions = local.get_action(local.start_episode(), obs)
        assert set(actions) == {0, 1}
        local.close()
    finally:
        service.stop()

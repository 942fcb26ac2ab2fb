"""Checkpoints of what a user makes at run time: make_multi_agent(...) env classes, env classes
defined inside a function, and lambda policy_mapping_fns, round-tripped through save ->
Algorithm.from_checkpoint, `rlx evaluate` and `rlx serve` (in fresh processes)."""
from __future__ import annotations

import json
import os
from pathlib import Path
import selectors
import subprocess
import time

import gymnasium as gym
import numpy as np
import pytest

from cli_helpers import rlx_executable, run_rlx
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.env.multi_agent_env import make_multi_agent
from rlx.utils.errors import CheckpointError, ConfigError

SMALL = dict(train_batch_size=64, minibatch_size=32, num_epochs=1)
OBSERVATIONS = np.random.default_rng(0).uniform(-0.2, 0.2, size=(16, 4)).astype(np.float32)


def two_agent_config(env, **multi_agent):
    """Two agents, two policies, mapped with a lambda written as the docs write it."""
    return (PPOConfig().environment(env, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"},
                         policy_mapping_fn=lambda agent_id, episode, worker=None, **kw: f"p{agent_id % 2}",
                         **multi_agent)
            .training(**SMALL).env_runners(rollout_fragment_length=32).debugging(seed=0))


def actions_of(algo, policy_id):
    return [int(algo.compute_single_action(obs, policy_id=policy_id, explore=False)) for obs in OBSERVATIONS]


def save(config, path):
    """Build, train once, save to `path`; return the per-policy greedy actions on OBSERVATIONS."""
    algo = config.build()
    try:
        algo.train()
        algo.save(str(path))
        return {pid: actions_of(algo, pid) for pid in algo.policy_ids}
    finally:
        algo.stop()


def assert_acts_as_saved(restored, expected):
    """Each agent acts with the policy the stored mapping gives it, with the saved weights."""
    mapping = restored.config.policy_mapping_fn
    env = restored.env_runner.envs[0]
    assert list(env.possible_agents) == [0, 1]
    for agent_id in env.possible_agents:
        policy_id = mapping(agent_id, None)
        assert policy_id == f"p{agent_id}"
        assert actions_of(restored, policy_id) == expected[policy_id]


# ------------------------------------------------------------------ make_multi_agent


def test_make_multi_agent_of_an_env_name_and_a_lambda_mapping_round_trip(tmp_path):
    env_cls = make_multi_agent("CartPole-v1")
    expected = save(two_agent_config(env_cls), tmp_path / "ckpt")

    restored = Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        assert restored.config.is_multi_agent and sorted(restored.policy_ids) == ["p0", "p1"]
        assert_acts_as_saved(restored, expected)
        # Saved again, the restored Algorithm's checkpoint loads too (the stored forms re-store).
        restored.save(str(tmp_path / "again"))
    finally:
        restored.stop()
    again = Algorithm.from_checkpoint(tmp_path / "again")
    try:
        assert_acts_as_saved(again, expected)
    finally:
        again.stop()


def test_make_multi_agent_of_a_lambda_creator_is_given_back_when_loading(tmp_path):
    env_cls = make_multi_agent(lambda env_config: gym.make("CartPole-v1"))
    expected = save(two_agent_config(env_cls), tmp_path / "ckpt")

    with pytest.raises(CheckpointError) as err:
        Algorithm.from_checkpoint(tmp_path / "ckpt")
    message = str(err.value)
    assert "make_multi_agent(<function" in message
    assert "Algorithm.from_checkpoint(path, env=" in message and "config_overrides" in message
    assert "register_env" in message

    for kwargs in ({"env": env_cls}, {"config_overrides": {"env": env_cls}}):
        restored = Algorithm.from_checkpoint(tmp_path / "ckpt", **kwargs)
        try:
            assert_acts_as_saved(restored, expected)
        finally:
            restored.stop()


def test_a_registered_make_multi_agent_class_is_stored_by_its_name(tmp_path, monkeypatch):
    from rlx.env import registry

    monkeypatch.setattr(registry, "_ENV_REGISTRY", dict(registry._ENV_REGISTRY))
    env_cls = make_multi_agent(lambda env_config: gym.make("CartPole-v1"))
    registry.register_env("two_cartpoles_of_a_lambda", env_cls)
    expected = save(two_agent_config(env_cls), tmp_path / "ckpt")

    restored = Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        assert restored.config.env == "two_cartpoles_of_a_lambda"
        assert_acts_as_saved(restored, expected)
    finally:
        restored.stop()


# ------------------------------------------------------------------ env classes defined in a function


def test_an_env_class_defined_in_a_function(tmp_path, monkeypatch):
    from rlx.env import registry

    class CornerEnv(gym.Env):
        def __init__(self, config=None):
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.t = 0

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(4, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.full(4, 0.1 * self.t, np.float32), float(action), self.t >= 5, False, {}

    config = PPOConfig().environment(CornerEnv).training(**SMALL).env_runners(rollout_fragment_length=32)
    save(config, tmp_path / "unregistered")
    with pytest.raises(CheckpointError) as err:
        Algorithm.from_checkpoint(tmp_path / "unregistered")
    message = str(err.value)
    assert "CornerEnv" in message and "env=" in message and "register_env" in message
    restored = Algorithm.from_checkpoint(tmp_path / "unregistered", env=CornerEnv)
    try:
        assert restored.config.env is CornerEnv
        restored.train()
    finally:
        restored.stop()

    # Registered under a name before saving: the checkpoint stores the name, which resolves
    # wherever it is registered (here, in this process).
    monkeypatch.setattr(registry, "_ENV_REGISTRY", dict(registry._ENV_REGISTRY))
    registry.register_env("corner_env_of_a_test", CornerEnv)
    expected = save(config, tmp_path / "registered")
    meta = json.loads((tmp_path / "registered" / "rlx_checkpoint.json").read_text())
    assert meta["env"] == "corner_env_of_a_test"
    restored = Algorithm.from_checkpoint(tmp_path / "registered")
    try:
        assert restored.config.env == "corner_env_of_a_test"
        assert actions_of(restored, "default_policy") == expected["default_policy"]
    finally:
        restored.stop()


# ------------------------------------------------------------------ lambda policy_mapping_fn


def test_a_lambda_mapping_is_stored_as_the_policy_of_each_agent(tmp_path):
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    expected = save(two_agent_config(MultiAgentCartPole), tmp_path / "ckpt")
    restored = Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        mapping = restored.config.policy_mapping_fn
        assert [mapping(agent_id, None) for agent_id in (0, 1)] == ["p0", "p1"]
        assert mapping("1", None) == "p1"  # agent ids that came through JSON
        with pytest.raises(ConfigError, match=r"policy_mapping_fn=fn"):
            mapping(7, None)
        assert_acts_as_saved(restored, expected)
        restored.train()  # the table maps the agents of new episodes as the lambda did
    finally:
        restored.stop()

    # A mapping given when loading replaces the stored one.
    swapped = Algorithm.from_checkpoint(tmp_path / "ckpt",
                                        policy_mapping_fn=lambda agent_id, episode, **kw: f"p{1 - agent_id}")
    try:
        assert swapped.config.policy_mapping_fn(1, None) == "p0"
    finally:
        swapped.stop()


def test_an_episode_dependent_lambda_mapping_keeps_its_first_answer_with_one_warning(tmp_path, caplog):
    episodes_seen: dict = {}

    def swap_each_episode(agent_id, episode, **kw):
        """The two agents get different policies, which swap from one episode to the next."""
        n = episodes_seen.setdefault(getattr(episode, "id_", None), len(episodes_seen))
        return ["p0", "p1"][(agent_id + n) % 2]

    config = two_agent_config(make_multi_agent("CartPole-v1")).multi_agent(policy_mapping_fn=swap_each_episode)
    algo = config.build()
    try:
        with caplog.at_level("WARNING", logger="rlx"):
            algo.save(str(tmp_path / "first"))
            algo.save(str(tmp_path / "second"))
    finally:
        algo.stop()
    warnings = [r for r in caplog.records if "different policies in different episodes" in r.getMessage()]
    assert len(warnings) == 1
    restored = Algorithm.from_checkpoint(tmp_path / "second")
    try:
        mapping = restored.config.policy_mapping_fn
        picked = [mapping(agent_id, None) for agent_id in (0, 1)]
        assert sorted(picked) == ["p0", "p1"]
        assert picked == [mapping(agent_id, None) for agent_id in (0, 1)]  # one policy per agent
    finally:
        restored.stop()


def test_policy_from_checkpoint_of_a_lambda_mapping(tmp_path):
    from rlx.policy.policy import Policy

    expected = save(two_agent_config(make_multi_agent("CartPole-v1")), tmp_path / "ckpt")
    policies = Policy.from_checkpoint(tmp_path / "ckpt")
    assert sorted(policies) == ["p0", "p1"]
    for pid, policy in policies.items():
        assert [int(policy.compute_single_action(obs, explore=False)[0]) for obs in OBSERVATIONS] == expected[pid]


# ------------------------------------------------------------------ the commands, in fresh processes


def test_rlx_evaluate_a_checkpoint_of_make_multi_agent_and_a_lambda_mapping(tmp_path):
    save(two_agent_config(make_multi_agent("CartPole-v1")), tmp_path / "ckpt")
    out = tmp_path / "episodes.json"
    result = run_rlx("evaluate", str(tmp_path / "ckpt"), "--episodes", "2", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Episode #2" in result.stdout
    episodes = json.loads(out.read_text())["episodes"]
    assert len(episodes) == 2 and all(e["complete"] for e in episodes)
    assert set(episodes[0]["actions"][0]) == {"0", "1"}  # both agents act, each with its policy


#: The checkpoints below name this test module (its lambdas); the command imports it from the
#: folder it was imported from, and it imports tests/cli_helpers.py: the command needs tests/ too.
HELPERS_PATH = str(Path(__file__).resolve().parents[1])


def test_rlx_evaluate_of_an_env_the_checkpoint_cannot_store_says_how(tmp_path):
    save(two_agent_config(make_multi_agent(lambda env_config: gym.make("CartPole-v1"))), tmp_path / "ckpt")
    result = run_rlx("evaluate", str(tmp_path / "ckpt"), "--episodes", "1", cwd=tmp_path,
                     env={"PYTHONPATH": HELPERS_PATH})
    assert result.returncode != 0
    assert "--env" in result.stderr and "register_env" in result.stderr
    (tmp_path / "two_cartpoles.py").write_text(
        "from rlx.env.multi_agent_env import make_multi_agent\nTwoCartPoles = make_multi_agent('CartPole-v1')\n")
    result = run_rlx("evaluate", str(tmp_path / "ckpt"), "--episodes", "1", "--env", "two_cartpoles:TwoCartPoles",
                     cwd=tmp_path, env={"PYTHONPATH": os.pathsep.join([str(tmp_path), HELPERS_PATH])})
    assert result.returncode == 0, result.stderr
    assert "Episode #1" in result.stdout


def _serve_url(process: subprocess.Popen, timeout: float = 120) -> str:
    """The URL `rlx serve` prints once it listens."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not selector.select(timeout=deadline - time.monotonic()):
            break
        line = process.stdout.readline()
        if not line:
            break
        if " at http://" in line:
            return line.split(" at ")[1].split()[0]
    raise AssertionError(f"rlx serve did not start: {process.stderr.read() if process.poll() is not None else ''}")


@pytest.mark.parametrize("storable", [True, False], ids=["stored-env", "env-given-with---env"])
def test_rlx_serve_a_checkpoint_of_make_multi_agent_and_a_lambda_mapping(tmp_path, storable):
    from rlx.env.policy_client import PolicyClient

    env_cls = make_multi_agent("CartPole-v1" if storable else lambda env_config: gym.make("CartPole-v1"))
    expected = save(two_agent_config(env_cls), tmp_path / "ckpt")
    env = {k: v for k, v in os.environ.items() if k != "RLX_POLICY_SERVER_TOKEN"}
    env["PYTHONPATH"] = HELPERS_PATH
    extra = []
    if not storable:
        (tmp_path / "two_cartpoles.py").write_text(
            "from rlx.env.multi_agent_env import make_multi_agent\nTwoCartPoles = make_multi_agent('CartPole-v1')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), HELPERS_PATH])
        extra = ["--env", "two_cartpoles:TwoCartPoles"]
    process = subprocess.Popen([rlx_executable(), "serve", str(tmp_path / "ckpt"), "--port", "0", *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        client = PolicyClient(_serve_url(process), inference_mode="remote")
        episode_id = client.start_episode()
        actions = client.get_action(episode_id, {0: OBSERVATIONS[0], 1: OBSERVATIONS[1]})
        assert {int(k): int(v) for k, v in actions.items()} == {0: expected["p0"][0], 1: expected["p1"][1]}
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


# ------------------------------------------------------------------ safety of stored recipes


def _edit_config(path, **changes):
    config_file = path / "config.json"
    config = json.loads(config_file.read_text())
    config.update(changes)
    config_file.write_text(json.dumps(config))


@pytest.mark.parametrize("stored, refused", [
    ({"__recipe__": "eval", "args": ["1"]}, "may call only rlx's factories"),
    ({"__recipe__": "make_multi_agent", "args": ["subprocess:Popen"]}, "standard library"),
    ({"__recipe__": "make_multi_agent", "args": [{"__import__": "os:system"}]}, "standard library"),
    ({"__recipe__": "policy_mapping_table", "args": [[[0, "p0"]]]}, "makes values only for policy_mapping_fn"),
])
def test_a_stored_recipe_calls_only_rlx_factories_with_checked_arguments(tmp_path, stored, refused):
    save(two_agent_config(make_multi_agent("CartPole-v1")), tmp_path / "ckpt")
    _edit_config(tmp_path / "ckpt", env=stored)
    with pytest.raises(CheckpointError, match=refused):
        Algorithm.from_checkpoint(tmp_path / "ckpt")

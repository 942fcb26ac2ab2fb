"""Policy.export_model / Algorithm.export_policy_model: the exported TorchScript and ONNX files run
without rlx (loaded in a subprocess where `import rlx` fails) and reproduce rlx's greedy actions
exactly on 100 observations, for PPO (MLP with an observation filter, continuous actions, CNN,
LSTM) and DQN; checkpointing(export_native_model_files=True) writes them into each checkpoint."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig

from conftest import small_config

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

N = 100
KINDS = ["ppo_mlp_filter", "ppo_continuous", "ppo_cnn", "ppo_lstm", "dqn", "dqn_discrete_obs"]

#: Runs in a fresh interpreter where rlx cannot be imported: loads every exported model with
#: torch.jit.load and onnxruntime and writes what they return.
RUN_WITHOUT_RLX = textwrap.dedent("""
    import json, sys
    sys.modules["rlx"] = None  # `import rlx` now raises ImportError
    import numpy as np, onnxruntime, torch
    root = sys.argv[1]
    for kind in json.loads(sys.argv[2]):
        data = np.load(f"{root}/{kind}/inputs.npz")
        obs, states = data["obs"], [data[f"state_{i}"] for i in range(int(data["num_states"]))]
        out = {}
        script = torch.jit.load(f"{root}/{kind}/ts/model.pt")
        with torch.no_grad():
            first = script(torch.from_numpy(obs), *[torch.from_numpy(s) for s in states])
            out["ts_actions"], out["ts_logits"] = first[0].numpy(), first[1].numpy()
            if states:  # a second step from the state the first one returned
                out["ts_actions_2"] = script(torch.from_numpy(obs), *first[2:])[0].numpy()
        session = onnxruntime.InferenceSession(f"{root}/{kind}/onnx/model.onnx")
        feeds = {"obs": obs, **{f"state_in_{i}": s for i, s in enumerate(states)}}
        first = session.run(None, feeds)
        out["onnx_actions"], out["onnx_logits"] = first[0], first[1]
        if states:
            feeds.update({f"state_in_{i}": s for i, s in enumerate(first[2:])})
            out["onnx_actions_2"] = session.run(None, feeds)[0]
        np.savez(f"{root}/{kind}/outputs.npz", **out)
""")


def _build(kind: str) -> Algorithm:
    """An untrained algorithm of `kind` (equality of actions needs no training)."""

    class SmallImages(gym.Env):
        """16x16 RGB frames (uint8), three actions: the CNN's input."""

        observation_space = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
        action_space = gym.spaces.Discrete(3)

        def __init__(self, config=None):
            pass

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, True, {}

    if kind == "ppo_mlp_filter":
        return PPOConfig().environment("CartPole-v1").env_runners(observation_filter="MeanStdFilter") \
            .debugging(seed=0).build()
    if kind == "ppo_continuous":
        return PPOConfig().environment("Pendulum-v1").debugging(seed=0).build()
    if kind == "ppo_cnn":
        return PPOConfig().environment(SmallImages).rl_module(
            model_config={"conv_filters": [[4, [4, 4], 2], [8, [4, 4], 2]]}).debugging(seed=0).build()
    if kind == "ppo_lstm":
        return PPOConfig().environment("CartPole-v1").rl_module(
            model_config={"use_lstm": True, "lstm_cell_size": 8}).debugging(seed=0).build()
    if kind == "dqn":
        return DQNConfig().environment("CartPole-v1").debugging(seed=0).build()
    return DQNConfig().environment("FrozenLake-v1").debugging(seed=0).build()  # Discrete obs: one-hot in the model


def _rlx_greedy(policy, obs: np.ndarray, states: list[np.ndarray]) -> dict[str, np.ndarray]:
    """rlx's greedy actions (and distribution inputs) for env observations, as compute_single_action
    takes them: preprocessed and filtered first."""
    rows = policy.filter_observations(list(obs))
    actions, state_out, extra = policy.compute_actions(rows, state_batches=states or None, explore=False)
    result = {"actions": np.asarray(actions), "logits": extra["action_dist_inputs"]}
    if states:
        result["actions_2"] = np.asarray(policy.compute_actions(rows, state_batches=state_out, explore=False)[0])
    return result


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every kind exported (TorchScript and ONNX) and run without rlx on the same 100 observations."""
    root = tmp_path_factory.mktemp("export")
    expected = {}
    for kind in KINDS:
        algo = _build(kind)
        try:
            policy = algo.get_policy()
            rng = np.random.default_rng(0)
            policy.observation_space.seed(0)
            obs = np.stack([policy.observation_space.sample() for _ in range(N)])
            if kind == "ppo_mlp_filter":  # statistics that change the observations noticeably
                policy.filter.apply_batch(rng.normal(0.5, 2.0, (64, 4)).astype(np.float32), update=True)
            states = [rng.normal(0, 1, (N,) + s.shape).astype(np.float32) for s in policy.get_initial_state()]
            algo.export_policy_model(str(root / kind / "ts"))
            policy.export_model(str(root / kind / "onnx"), onnx=17)
            np.savez(root / kind / "inputs.npz", obs=obs, num_states=len(states),
                     **{f"state_{i}": s for i, s in enumerate(states)})
            expected[kind] = _rlx_greedy(policy, obs, states)
        finally:
            algo.stop()
    proc = subprocess.run([sys.executable, "-c", RUN_WITHOUT_RLX, str(root), json.dumps(KINDS)],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = {kind: dict(np.load(root / kind / "outputs.npz")) for kind in KINDS}
    return root, expected, outputs


@pytest.mark.parametrize("fmt", ["ts", "onnx"])
@pytest.mark.parametrize("kind", KINDS)
def test_exported_model_reproduces_rlx_greedy_actions_without_rlx(exported, kind, fmt):
    _, expected, outputs = exported
    got = outputs[kind]
    assert got[f"{fmt}_actions"].shape[0] == N
    if kind == "ppo_continuous" and fmt == "onnx":
        # onnxruntime's matrix kernels round differently from torch's in the last bit of a float
        # mean; discrete (argmax) actions are exact, continuous ones agree to float32 precision.
        np.testing.assert_allclose(got[f"{fmt}_actions"], expected[kind]["actions"], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got[f"{fmt}_actions"], expected[kind]["actions"])
    assert got[f"{fmt}_actions"].dtype == expected[kind]["actions"].dtype
    np.testing.assert_allclose(got[f"{fmt}_logits"], expected[kind]["logits"], rtol=1e-5, atol=1e-5)
    if kind == "ppo_lstm":  # the returned state carries over: the second step agrees too
        np.testing.assert_array_equal(got[f"{fmt}_actions_2"], expected[kind]["actions_2"])


def test_export_info_names_inputs_outputs_and_preprocessing(exported):
    root, _, _ = exported
    info = json.loads((root / "ppo_lstm" / "onnx" / "export_info.json").read_text())
    assert info["files"] == {"model.onnx": {"format": "onnx", "opset": 17}}
    assert [i["name"] for i in info["inputs"]][:2] == ["obs", "state_in_0"]
    assert info["inputs"][0]["shape"] == ["batch", 4]
    cnn = json.loads((root / "ppo_cnn" / "ts" / "export_info.json").read_text())
    assert cnn["inputs"][0] == {"name": "obs", "shape": ["batch", 16, 16, 3], "dtype": "uint8"}
    assert cnn["preprocessing"]["in_model"] is True
    filtered = json.loads((root / "ppo_mlp_filter" / "ts" / "export_info.json").read_text())
    assert filtered["preprocessing"]["observation_filter"].startswith("MeanStdFilter")
    onehot = json.loads((root / "dqn_discrete_obs" / "ts" / "export_info.json").read_text())
    assert onehot["inputs"][0] == {"name": "obs", "shape": ["batch"], "dtype": "int64"}


def test_onnx_argument_must_be_an_opset(tmp_path):
    algo = small_config().build()
    try:
        with pytest.raises(ValueError, match="opset"):
            algo.get_policy().export_model(str(tmp_path), onnx=True)
    finally:
        algo.stop()


def test_onnx_export_without_onnx_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    algo = small_config().build()
    try:
        with pytest.raises(ImportError, match=r"export\]"):
            algo.export_policy_model(str(tmp_path), onnx=17)
    finally:
        algo.stop()


def test_checkpoint_with_export_native_model_files_contains_the_exported_models(tmp_path):
    import onnxruntime

    algo = small_config().checkpointing(export_native_model_files=True).build()
    try:
        path = Path(algo.save(str(tmp_path / "ckpt")))
        folder = path / "policies" / "default_policy" / "model"
        listed = json.loads((path / "rlx_checkpoint.json").read_text())["files"]
        for name in ("model.pt", "model.onnx", "export_info.json"):
            assert (folder / name).is_file()
            assert f"policies/default_policy/model/{name}" in listed
        policy = algo.get_policy()
        policy.observation_space.seed(1)
        obs = np.stack([policy.observation_space.sample() for _ in range(N)])
        want = policy.compute_actions(policy.filter_observations(list(obs)), explore=False)[0]
        with torch.no_grad():
            ts_actions = torch.jit.load(str(folder / "model.pt"))(torch.from_numpy(obs))[0].numpy()
        onnx_actions = onnxruntime.InferenceSession(str(folder / "model.onnx")).run(None, {"obs": obs})[0]
        np.testing.assert_array_equal(ts_actions, want)
        np.testing.assert_array_equal(onnx_actions, want)
        Algorithm.from_checkpoint(path).stop()  # the extra files pass the checkpoint's checks
    finally:
        algo.stop()

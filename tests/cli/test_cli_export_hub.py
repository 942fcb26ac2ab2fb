"""`rlx export CHECKPOINT --format onnx|torchscript`, `rlx hub push|download` and
`Algorithm.from_hub`, the Hub replaced by a local fake (no network): huggingface_hub's
HfApi.create_repo/upload_folder record what they get, snapshot_download serves a folder laid out
as the Hub would."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlx.algorithms.algorithm import Algorithm
from rlx.cli.main import main
from rlx.utils.errors import CheckpointError

from conftest import small_config

huggingface_hub = pytest.importorskip("huggingface_hub")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A PPO CartPole checkpoint after one (small) training iteration, and its greedy actions
    on 100 observations."""
    algo = small_config().build()
    try:
        algo.train()
        path = Path(algo.save(str(tmp_path_factory.mktemp("ckpt") / "ppo")))
        policy = algo.get_policy()
        policy.observation_space.seed(0)
        obs = np.stack([policy.observation_space.sample() for _ in range(100)])
        actions = policy.compute_actions(policy.filter_observations(list(obs)), explore=False)[0]
        weights = algo.get_weights()["default_policy"]
    finally:
        algo.stop()
    return path, obs, actions, weights


def test_rlx_export_writes_torchscript_and_onnx(checkpoint, tmp_path, capsys):
    onnxruntime = pytest.importorskip("onnxruntime")
    path, obs, actions, _ = checkpoint
    assert main(["export", str(path), "--out", str(tmp_path / "ts")]) == 0
    assert main(["export", str(path), "--format", "onnx", "--policy-id", "default_policy",
                 "--out", str(tmp_path / "onnx")]) == 0
    assert "model.onnx" in capsys.readouterr().out
    with torch.no_grad():
        ts_actions = torch.jit.load(str(tmp_path / "ts" / "model.pt"))(torch.from_numpy(obs))[0].numpy()
    onnx_actions = onnxruntime.InferenceSession(str(tmp_path / "onnx" / "model.onnx")).run(None, {"obs": obs})[0]
    np.testing.assert_array_equal(ts_actions, actions)
    np.testing.assert_array_equal(onnx_actions, actions)
    assert json.loads((tmp_path / "onnx" / "export_info.json").read_text())["files"]["model.onnx"]["opset"] == 17


def test_rlx_export_of_an_unknown_policy_names_the_stored_ones(checkpoint, tmp_path, capsys):
    path = checkpoint[0]
    assert main(["export", str(path), "--policy-id", "nope", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "'nope'" in err and "default_policy" in err


class FakeHub:
    """What the fake Hub received (create_repo, upload_folder) and the repositories it serves."""

    def __init__(self, root: Path):
        self.root = root
        self.created: list[dict] = []
        self.uploads: list[dict] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        hub = self

        def create_repo(api, repo_id, **kwargs):
            hub.created.append({"repo_id": repo_id, **kwargs})
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(api, *, repo_id, folder_path, **kwargs):
            repo = hub.root / repo_id
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(folder_path, repo)  # the staging folder is gone after the call
            (repo / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
            files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
            hub.uploads.append({"repo_id": repo_id, "files": files, **kwargs})

        def snapshot_download(repo_id, *, local_dir=None, **kwargs):
            source = hub.root / repo_id
            if not source.is_dir():
                raise FileNotFoundError(f"fake hub: no repository {repo_id}")
            shutil.copytree(source, local_dir, dirs_exist_ok=True)
            return str(local_dir)

        monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
        monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    hub = FakeHub(tmp_path / "hub")
    hub.install(monkeypatch)
    return hub


def test_hub_push_uploads_the_checkpoint_with_a_model_card(checkpoint, fake_hub, capsys):
    path = checkpoint[0]
    assert main(["hub", "push", str(path), "me/ppo-cartpole", "--private"]) == 0
    assert "https://huggingface.co/me/ppo-cartpole" in capsys.readouterr().out
    assert fake_hub.created[0]["repo_id"] == "me/ppo-cartpole" and fake_hub.created[0]["private"] is True
    upload = fake_hub.uploads[0]
    assert upload["repo_id"] == "me/ppo-cartpole" and upload["repo_type"] == "model"
    stored = json.loads((path / "rlx_checkpoint.json").read_text())["files"]
    assert set(stored + ["rlx_checkpoint.json", "README.md"]) <= set(upload["files"])
    card = (fake_hub.root / "me/ppo-cartpole" / "README.md").read_text()
    assert "library_name: rlx" in card and "# PPO on CartPole-v1" in card
    assert "Episode return | " in card and "n/a" not in card.split("Episode return")[1].splitlines()[0]
    assert "| `lr` |" in card and "Algorithm.from_hub(\"me/ppo-cartpole\")" in card
    assert not (path / "README.md").exists()  # the checkpoint itself is left as it was


def test_from_hub_loads_a_pushed_checkpoint(checkpoint, fake_hub, tmp_path):
    path, _, _, weights = checkpoint
    main(["hub", "push", str(path), "me/ppo-cartpole"])
    algo = Algorithm.from_hub("me/ppo-cartpole", local_dir=str(tmp_path / "download"))
    try:
        loaded = algo.get_weights()["default_policy"]
        assert set(loaded) == set(weights)
        for key in weights:
            np.testing.assert_array_equal(loaded[key], weights[key])
    finally:
        algo.stop()
    assert main(["hub", "download", "me/ppo-cartpole", "--out", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "rlx_checkpoint.json").is_file()


def test_from_hub_of_a_repository_without_a_checkpoint(fake_hub, tmp_path):
    (fake_hub.root / "me" / "notes").mkdir(parents=True)
    (fake_hub.root / "me" / "notes" / "README.md").write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="no rlx checkpoint"):
        Algorithm.from_hub("me/notes", local_dir=str(tmp_path / "d"))


def test_hub_without_huggingface_hub_names_the_extra(checkpoint, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    assert main(["hub", "push", str(checkpoint[0]), "me/x"]) == 1
    assert "huggingface_hub" in capsys.readouterr().err
    with pytest.raises(ImportError, match=r"hub\]"):
        Algorithm.from_hub("me/x")

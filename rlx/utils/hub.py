"""Share checkpoints on the Hugging Face Hub: push one with a model card, download one to load.

`rlx hub push CHECKPOINT REPO_ID` and `Algorithm.from_hub(REPO_ID)` use these functions. The
repository holds the checkpoint directory as it is (plus a generated README.md, the model
card), so `Algorithm.from_checkpoint` loads the downloaded folder with its usual checks. The
`huggingface_hub` package is optional (the `hub` extra) and imported only when used.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rlx.utils.atomic_directory import METADATA_FILE
from rlx.utils.checkpoints import checkpoint_dir, read_json, read_metadata
from rlx.utils.errors import CheckpointError, install_hint

#: The model card written into every pushed repository.
MODEL_CARD_FILE = "README.md"
#: Where `download_checkpoint` puts repositories unless told otherwise (one folder per repo).
DEFAULT_HUB_DIR = "~/.cache/rlx/hub"
#: Config settings the model card lists (those the checkpoint's config has).
CARD_CONFIG_KEYS = ("lr", "gamma", "train_batch_size", "train_batch_size_per_learner", "minibatch_size", "num_epochs",
                    "num_env_runners", "num_envs_per_env_runner", "observation_filter", "seed")
#: Model settings the model card lists.
CARD_MODEL_KEYS = ("fcnet_hiddens", "fcnet_activation", "conv_filters", "use_lstm", "lstm_cell_size",
                   "vf_share_layers")


def import_huggingface_hub() -> Any:
    """The `huggingface_hub` module; an ImportError with the install command when it is missing."""
    try:
        import huggingface_hub
    except ImportError as err:
        raise ImportError("Sharing checkpoints on the Hugging Face Hub needs the `huggingface_hub` package: "
                          f"{install_hint('hub')}.") from err
    return huggingface_hub


def _summary(root: Path) -> dict[str, Any]:
    """What the model card says about the checkpoint at `root`: algorithm, env, return, config."""
    meta = read_metadata(root)
    config = read_json(root / "config.json") if (root / "config.json").is_file() else {}
    state = read_json(root / "algorithm_state.json") if (root / "algorithm_state.json").is_file() else {}
    algorithm = str(meta.get("algorithm_class", "?")).rsplit(":", 1)[-1]
    env = meta.get("env") or (config.get("env") if isinstance(config.get("env"), str) else None) or "custom env"
    returns = [float(e[0]) for e in (state.get("episodes_window") or [])
               if isinstance(e, (list, tuple)) and e and isinstance(e[0], (int, float))]
    mean = sum(returns) / len(returns) if returns else math.nan
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / len(returns)) if returns else math.nan
    settings = {k: config[k] for k in CARD_CONFIG_KEYS if isinstance(config, dict) and config.get(k) is not None}
    model: dict[str, Any] = config["model"] if isinstance(config, dict) and isinstance(config.get("model"), dict) \
        else {}
    settings.update({f"model.{k}": model[k] for k in CARD_MODEL_KEYS if model.get(k) not in (None, False, [])
                     and (k != "lstm_cell_size" or model.get("use_lstm"))})
    counters = state.get("counters") or {}
    return {"algorithm": algorithm, "env": str(env), "mean_return": mean, "std_return": std,
            "num_episodes": len(returns), "iteration": meta.get("training_iteration"),
            "env_steps": counters.get("num_env_steps_sampled_lifetime"), "rlx_version": meta.get("rlx_version"),
            "policy_ids": meta.get("policy_ids") or ["default_policy"], "config": settings}


def model_card(checkpoint: Any, repo_id: str) -> str:
    """The README.md (Hugging Face model card) of a checkpoint pushed to `repo_id`: metadata for
    the Hub (library, tags, the mean return as a model-index result), the algorithm, env,
    return over the last episodes, training progress, key config settings and how to load it."""
    info = _summary(checkpoint_dir(checkpoint))
    algorithm, env = info["algorithm"], info["env"]
    returned = "n/a (no finished episodes)" if info["num_episodes"] == 0 else \
        f"{info['mean_return']:.2f} +/- {info['std_return']:.2f} (last {info['num_episodes']} training episodes)"
    front = [
        "---",
        "library_name: rlx",
        "tags:",
        "- reinforcement-learning",
        "- rlx",
        f"- {json.dumps(algorithm)}",
        f"- {json.dumps(env)}",
        "model-index:",
        f"- name: {json.dumps(f'{algorithm} on {env}')}",
        "  results:",
        "  - task:",
        "      type: reinforcement-learning",
        "      name: reinforcement-learning",
        "    dataset:",
        f"      name: {json.dumps(env)}",
        f"      type: {json.dumps(env)}",
        "    metrics:",
        "    - type: mean_reward",
        f"      value: {json.dumps(returned)}",
        "      name: mean_reward",
        "---",
    ]
    config_rows = [f"| `{k}` | `{json.dumps(v)}` |" for k, v in info["config"].items()]
    body = [
        "",
        f"# {algorithm} on {env}",
        "",
        f"An [rlx](https://pypi.org/project/rlx-torch/) checkpoint of {algorithm} trained on `{env}`.",
        "",
        "| | |",
        "| --- | --- |",
        f"| Algorithm | {algorithm} |",
        f"| Environment | `{env}` |",
        f"| Episode return | {returned} |",
        f"| Training iterations | {info['iteration']} |",
        f"| Env steps sampled | {info['env_steps']} |",
        f"| Policies | {', '.join(info['policy_ids'])} |",
        f"| rlx version | {info['rlx_version']} |",
        "",
        "## Configuration",
        "",
        "| setting | value |",
        "| --- | --- |",
        *config_rows,
        "",
        "The full configuration is in `config.json`.",
        "",
        "## Usage",
        "",
        "```python",
        "from rlx.algorithms.algorithm import Algorithm",
        "",
        f"algo = Algorithm.from_hub({json.dumps(repo_id)})",
        "action = algo.compute_single_action(observation, explore=False)",
        "```",
        "",
        "Exported models (`policies/<policy_id>/model/`, when the checkpoint was written with",
        "`checkpointing(export_native_model_files=True)`) run without rlx: `model.pt` with",
        "`torch.jit.load`, `model.onnx` with onnxruntime; `export_info.json` names their inputs and outputs.",
        "",
    ]
    return "\n".join(front + body)


def push_checkpoint(checkpoint: Any, repo_id: str, *, token: str | None = None, private: bool | None = None,
                    commit_message: str | None = None, revision: str | None = None) -> str:
    """Upload a checkpoint directory to the Hub repository `repo_id` (created when missing),
    with a generated model card as README.md; returns the repository's URL. The checkpoint
    itself is not changed: the upload is staged in a temporary copy."""
    hub = import_huggingface_hub()
    root = checkpoint_dir(checkpoint)
    read_metadata(root)  # an rlx checkpoint, with no links out of it
    api = hub.HfApi(token=token)
    url = api.create_repo(repo_id, token=token, private=private, repo_type="model", exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rlx-hub-") as tmp:
        staged = Path(tmp) / "checkpoint"
        shutil.copytree(root, staged)
        (staged / MODEL_CARD_FILE).write_text(model_card(root, repo_id), encoding="utf-8")
        api.upload_folder(repo_id=repo_id, folder_path=str(staged), repo_type="model", token=token,
                          revision=revision,
                          commit_message=commit_message or f"Upload rlx checkpoint {root.name}")
    return str(url)


def download_checkpoint(repo_id: str, *, revision: str | None = None, token: str | None = None,
                        local_dir: str | os.PathLike | None = None) -> Path:
    """Download the checkpoint in Hub repository `repo_id` into `local_dir` (default
    ~/.cache/rlx/hub/<owner>--<name>) as plain files, and return that folder; a CheckpointError
    when the repository holds no rlx checkpoint."""
    hub = import_huggingface_hub()
    target = Path(local_dir) if local_dir is not None else \
        Path(DEFAULT_HUB_DIR).expanduser() / repo_id.replace("/", "--")
    # local_dir: real files, not the Hub cache's links into its blob store (a checkpoint may not
    # link outside itself).
    folder = Path(hub.snapshot_download(repo_id=repo_id, repo_type="model", revision=revision, token=token,
                                        local_dir=str(target), library_name="rlx"))
    if not (folder / METADATA_FILE).is_file():
        raise CheckpointError(f"The Hub repository {repo_id!r} holds no rlx checkpoint (no {METADATA_FILE} at its "
                              "top level); push one with `rlx hub push CHECKPOINT REPO_ID`.")
    return folder

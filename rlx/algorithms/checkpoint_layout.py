"""The layout of an Algorithm checkpoint directory (as DESIGN.md maps it), and the names shared
by its writer (rlx.algorithms.checkpoint_writer) and reader (rlx.algorithms.checkpointing):

    rlx_checkpoint.json       format name/version, rlx version, algorithm class, file list
    config.json               the config (classes and functions as import paths; what rlx's
                              factories made at run time as the call that made it, see
                              rlx.utils.checkpoint_recipes; an env without an import path
                              as its registered name; a lambda policy_mapping_fn as the
                              table of the policy it picks for each of the env's agents)
    algorithm_state.json      counters, metrics window, learner extras, env-runner state
    policies/<policy_id>/module.safetensors      module weights (one folder per policy;
                                                 single-agent: policies/default_policy)
    policies/<policy_id>/optimizer.safetensors   optimizer tensors (+ optimizer.json); extra
                                                 optimizers as optimizer_<name>.safetensors/.json
    policies/<policy_id>/learner.safetensors     learner tensors outside the module (target
                                                 networks, SAC's log-alpha), when there are any
    replay_buffer.safetensors (+ replay_buffer.json) only with store_buffer_in_checkpoints
    policies/<policy_id>/model.pt                only with export_native_model_files (the state_dict)
    policies/<policy_id>/model/                  only with export_native_model_files: the policy
                                                 exported to run without rlx (model.pt, TorchScript;
                                                 model.onnx when `onnx` is installed; export_info.json)

rlx_checkpoint.json lists the stored policies in `policy_ids` (and `trainable_policies_only`
when only the trainable ones were written); a config with fewer policies restores just those.

`checkpoint_version` 1.1 (format version 1 still) adds `env_source` to rlx_checkpoint.json:
what rebuilds the env besides config.json, as plain JSON (no code is stored):

    "env_source": {
        "imports": [{"module": "my_envs", "path": "/home/me/project"}, ...],
        "experiment_file": "/home/me/project/my_exp.py"      # or null
    }

`imports` are the modules to import before the env is resolved, in order: those the user
named (`rlx train --import`), then the module defining the env (its class or creator, the
module of an import path, or the package that registered a Gymnasium id); `path` is the
sys.path entry it was imported from, tried when it is not importable otherwise.
`experiment_file` is the `rlx train file` Python file that defined the config. Checkpoints
of version 1.0 have no `env_source` and load as before.

`checkpoint_version` 1.2 adds `checksums` to rlx_checkpoint.json ({file: "sha256:<hex>"} for
every listed binary file, checked on load; the JSON files stay editable by hand) and an `algorithm_class` key to algorithm_state.json.
Loading reads and checks every file first and then applies all of it, or nothing.
"""
from __future__ import annotations

from rlx.utils.checkpoints import FORMAT_VERSION
from rlx.utils.errors import CheckpointError

#: Key of algorithm_state.json naming the Algorithm class that wrote it.
STATE_CLASS_KEY = "algorithm_class"
#: Version of what rlx_checkpoint.json holds within FORMAT_VERSION (1.1: `env_source`; 1.2:
#: `checksums`, and algorithm_state.json names its algorithm class).
CHECKPOINT_VERSION = f"{FORMAT_VERSION}.2"


def policy_dir(module_id: str) -> str:
    """The checkpoint directory of one module: policies/<module_id>."""
    if not isinstance(module_id, str) or not module_id or module_id in (".", "..") or "/" in module_id \
            or "\\" in module_id or "\0" in module_id:
        raise CheckpointError(f"Policy id {module_id!r} cannot name a checkpoint directory; use ids without "
                              "path separators.")
    return f"policies/{module_id}"


def optimizer_stem(name: str) -> str:
    """The file stem of one named optimizer's state: optimizer for "default", optimizer_<name> otherwise."""
    return "optimizer" if name == "default" else f"optimizer_{name}"

"""A checkpoint never runs code: the attacks a tampered checkpoint can try, through
`Algorithm.from_checkpoint` and `rlx evaluate`, and a fuzz of decoded config values.

The trust model (docs/checkpoints.md): loading imports the modules a checkpoint names
(never standard-library ones) and calls nothing that is not of the kind its field expects.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

from cli_helpers import run_rlx
from conftest import save_trained_checkpoint
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.utils.checkpoint_trust import check_kind, kind_of
from rlx.utils.checkpoints import decode_value
from rlx.utils.errors import CheckpointError


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small PPO CartPole checkpoint (tests copy it before tampering with it)."""
    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1))
    return save_trained_checkpoint(config, tmp_path_factory.mktemp("security") / "pristine")


def tampered(checkpoint: Path, tmp_path: Path, edit) -> Path:
    """A copy of `checkpoint` whose config.json went through `edit(dict)`."""
    import shutil

    copy = tmp_path / "tampered"
    shutil.copytree(checkpoint, copy)
    config = json.loads((copy / "config.json").read_text())
    edit(config)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def popen_attack(marker: Path):
    def edit(config: dict) -> None:
        config["zzz"] = {"__dataclass__": "subprocess:Popen",
                         "fields": {"args": f"touch {marker}", "shell": True}}
    return edit


def env_attack(marker: Path):
    def edit(config: dict) -> None:
        config["env"] = "subprocess:run"
        config["env_config"] = {"args": f"touch {marker}", "shell": True}
    return edit


@pytest.mark.parametrize("attack", [popen_attack, env_attack], ids=["dataclass-popen", "env-subprocess-run"])
def test_from_checkpoint_refuses_a_tampered_config_without_running_it(checkpoint, tmp_path, attack):
    marker = tmp_path / "PWNED"
    path = tampered(checkpoint, tmp_path, attack(marker))
    with pytest.raises(CheckpointError) as info:
        Algorithm.from_checkpoint(path)
    assert "config.json" in str(info.value)
    assert ("'zzz'" in str(info.value)) or ("'env'" in str(info.value))
    assert not marker.exists()


@pytest.mark.parametrize("attack", [popen_attack, env_attack], ids=["dataclass-popen", "env-subprocess-run"])
def test_rlx_evaluate_refuses_a_tampered_config_without_running_it(checkpoint, tmp_path, attack):
    marker = tmp_path / "PWNED"
    path = tampered(checkpoint, tmp_path, attack(marker))
    proc = run_rlx("evaluate", str(path), "--episodes", "1", results_dir=tmp_path / "results")
    assert proc.returncode != 0
    assert "config.json" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("field, value", [
    ("callbacks_class", {"__import__": "subprocess:Popen"}),
    ("callbacks_class", {"__import__": "rlx.algorithms.ppo:PPOConfig"}),  # a class, but not a callback
    ("callbacks_on_train_result", {"__import__": "os:system"}),
    ("callbacks_on_train_result", {"__import__": "shutil:rmtree"}),
    ("env_task_fn", {"__import__": "builtins:eval"}),
    ("exploration_config", {"type": {"__import__": "subprocess:Popen"}}),
    ("exploration_config", {"type": "subprocess.Popen"}),
    ("replay_buffer_config", {"type": "os:system"}),
    ("logger_config", {"type": "subprocess.Popen"}),
    ("learner_class", "rlx.algorithms.ppo:PPOConfig"),
    ("env_runner_cls", {"__import__": "rlx.core.learner:Learner"}),
    ("evaluation_config", {"env": "os:system"}),
    ("env_config", {"anything": {"__import__": "os:system"}}),
    ("env_config", {"anything": {"__dataclass__": "pathlib:Path", "fields": {}}}),
    ("env", {"__import__": "antigravity:geohash"}),  # importing it would open a browser
])
def test_every_import_path_field_refuses_objects_of_the_wrong_kind(checkpoint, tmp_path, field, value):
    def edit(config: dict) -> None:
        config[field] = value

    path = tampered(checkpoint, tmp_path, edit)
    before = set(sys.modules)
    with pytest.raises(CheckpointError, match=field):
        Algorithm.from_checkpoint(path)
    assert "antigravity" not in set(sys.modules) - before


def test_the_algorithm_class_in_the_metadata_must_be_an_algorithm(checkpoint, tmp_path):
    import shutil

    copy = tmp_path / "ckpt"
    shutil.copytree(checkpoint, copy)
    meta = json.loads((copy / "rlx_checkpoint.json").read_text())
    meta["algorithm_class"] = "subprocess:Popen"
    (copy / "rlx_checkpoint.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="algorithm_class"):
        Algorithm.from_checkpoint(copy)
    proc = run_rlx("evaluate", str(copy), "--episodes", "1", results_dir=tmp_path / "results")
    assert proc.returncode != 0 and "algorithm_class" in proc.stderr


def test_env_source_cannot_bring_code_inside_the_checkpoint(checkpoint, tmp_path):
    import shutil

    copy = tmp_path / "ckpt"
    shutil.copytree(checkpoint, copy)
    marker = tmp_path / "PWNED"
    (copy / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    meta = json.loads((copy / "rlx_checkpoint.json").read_text())
    for source in ({"imports": [], "experiment_file": str(copy / "evil.py")},
                   {"imports": [{"module": "evil", "path": str(copy)}], "experiment_file": None},
                   {"imports": [{"module": "antigravity", "path": None}], "experiment_file": None}):
        meta["env_source"] = source
        (copy / "rlx_checkpoint.json").write_text(json.dumps(meta))
        proc = run_rlx("evaluate", str(copy), "--episodes", "1", results_dir=tmp_path / "results")
        assert proc.returncode != 0
        assert "env_source" in proc.stderr, proc.stderr
        assert not marker.exists()


def test_the_pristine_checkpoint_still_loads(checkpoint):
    algo = Algorithm.from_checkpoint(checkpoint)
    try:
        assert algo.iteration == 1
    finally:
        algo.stop()


# ------------------------------------------------------------------ fuzz of decoded values

#: A module of traps: every class and function records that it was called.
TRAPS = types.ModuleType("rlx_security_traps")
CALLS: list[str] = []


class _TrapClass:
    def __init__(self, *args, **kwargs):
        CALLS.append("TrapClass")


def _trap_function(*args, **kwargs):
    CALLS.append("trap_function")


_TrapClass.__module__ = _trap_function.__module__ = TRAPS.__name__
_TrapClass.__qualname__, _trap_function.__qualname__ = "TrapClass", "trap_function"
TRAPS.TrapClass, TRAPS.trap_function = _TrapClass, _trap_function

IMPORT_PATHS = [
    "os:system", "subprocess:Popen", "subprocess.run", "builtins:eval", "builtins.exec", "shutil:rmtree",
    "pickle:loads", "posix:system", "importlib:import_module", "antigravity:geohash", "this:s",
    "rlx_security_traps:TrapClass", "rlx_security_traps:trap_function", "rlx_security_traps.TrapClass",
    "rlx.algorithms.ppo:PPO", "rlx.algorithms.ppo:PPOConfig", "rlx.core.learner:Learner",
    "rlx.callbacks.callbacks:RLlibCallback", "gymnasium:Env", "gymnasium.envs.classic_control:CartPoleEnv",
    "numpy:load", "torch:load", "no_such_module:X", "", ":", "a:b:c", "os", "../etc/passwd", "x y:z",
    "rlx.utils.checkpoint_trust:Kind", "rlx.core.rl_module:RLModuleSpec", "pathlib:Path",
]
FIELDS = ["env", "callbacks_class", "callbacks_on_train_result", "env_config", "env_task_fn", "learner_class",
          "env_runner_cls", "exploration_config", "replay_buffer_config", "logger_config", "rl_module_spec",
          "evaluation_config", "policy_mapping_fn", "model", "zzz"]


def random_value(rng: random.Random, depth: int = 0):
    """A random JSON value, with rlx's decoding markers mixed in."""
    choice = rng.randrange(12 if depth < 3 else 4)
    if choice == 0:
        return rng.choice([None, True, 0, -1, 1e308, float("nan"), "x", "CartPole-v1", 2**70])
    if choice == 1:
        return rng.choice(IMPORT_PATHS)
    if choice == 2:
        return {"__import__": rng.choice(IMPORT_PATHS + [5, None, ["os:system"]])}
    if choice == 3:
        return {"__unserializable__": rng.choice(["<lambda>", 5, None])}
    if choice == 4:
        return {"__dataclass__": rng.choice(IMPORT_PATHS + [None, 3]),
                "fields": rng.choice([{}, {"args": "touch x", "shell": True}, {"module_class": random_value(rng, depth + 1)},
                                      None, [1]])}
    if choice == 5:
        return {"__tuple__": rng.choice([[random_value(rng, depth + 1)], 5, None, "ab"])}
    if choice == 6:
        return {"__ndarray__": rng.choice([[1, 2], [[1], [2, 3]], "x", [2**70]]),
                "dtype": rng.choice(["float32", "object", "O", "int64", "V8", None, "<U5"])}
    if choice == 7:
        return {"__space__": rng.choice([{"type": "Box", "low": 0, "high": 1, "shape": [10**9], "dtype": "float32"},
                                         {"type": "Discrete", "n": "x"}, {"type": "Nope"}, None, [1],
                                         {"type": "Dict", "spaces": {"a": {"type": "Discrete", "n": 3}}}])}
    if choice == 8:
        return {"type": rng.choice(IMPORT_PATHS), "x": random_value(rng, depth + 1)}
    if choice == 9:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(FIELDS + ["type", "env"]): random_value(rng, depth + 1) for _ in range(rng.randrange(1, 3))}


def callables_in(value, field: str):
    """(field, object) for every class or function in a decoded value."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from callables_in(item, field)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from callables_in(item, f"{field}.{key}")
    elif isinstance(value, type) or callable(value):
        yield field, value


def test_fuzzed_config_values_decode_or_fail_clearly_and_never_call_anything(monkeypatch):
    monkeypatch.setitem(sys.modules, TRAPS.__name__, TRAPS)
    called: list[str] = []
    monkeypatch.setattr(subprocess.Popen, "__init__", lambda self, *a, **k: called.append("Popen"))
    monkeypatch.setattr("os.system", lambda *a, **k: called.append("system"))
    before = set(sys.modules)
    rng = random.Random(0)
    decoded_ok = refused = 0
    for _ in range(1500):
        field = rng.choice(FIELDS)
        value = random_value(rng)
        try:
            decoded = decode_value(json.loads(json.dumps(value)), field)
        except CheckpointError as err:
            refused += 1
            assert "config.json" in str(err) or field.split(".")[0] in str(err), str(err)
            continue
        decoded_ok += 1
        # What decoded is only objects of the kinds their fields take.
        for where, obj in callables_in(decoded, field):
            if type(obj).__module__.startswith("rlx"):
                continue  # an rlx dataclass built from plain data
            check_kind(obj, where, "config.json")
    assert CALLS == [] and called == []
    assert not {"antigravity", "this"} & (set(sys.modules) - before)
    assert decoded_ok > 100 and refused > 100, (decoded_ok, refused)
    assert kind_of("evaluation_config.exploration_config.type").description.startswith("an Exploration")

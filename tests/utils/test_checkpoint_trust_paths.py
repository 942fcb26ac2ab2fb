"""A checkpoint runs no code and reads nothing outside itself, from any working directory.

The attacks of issue 33 (items 1 and 2), through every route that loads a checkpoint:
`Algorithm.from_checkpoint`, `Policy.from_checkpoint`, `RLModule.from_checkpoint`,
`RLModuleSpec(load_state_path=...)`, `algo.restore_from_path` (what Ray Tune's restore calls),
`rlx evaluate` and `rlx serve`, with the loading process's working directory inside the
checkpoint (a notebook or `python -c` started there has `''` first on sys.path).
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_rlx
from conftest import save_trained_checkpoint
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import CheckpointError, EnvError

MODULE_DIR = "learner_group/learner/rl_module/default_policy"
WEIGHTS = "policies/default_policy/module.safetensors"


def small_config() -> PPOConfig:
    """The config of the checkpoints here: PPO on CartPole, no remote runners."""
    return (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
            .training(train_batch_size=64, minibatch_size=32, num_epochs=1))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained checkpoint that tests copy before tampering with it."""
    return save_trained_checkpoint(small_config(), tmp_path_factory.mktemp("trust") / "pristine")


@pytest.fixture
def ckpt(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of the pristine checkpoint, with an `evil.py` beside its files."""
    copy = tmp_path / "ckpt"
    shutil.copytree(pristine, copy)
    (copy / "evil.py").write_text(
        f"open({str(tmp_path / 'PWNED')!r}, 'w').close()\n"
        "import gymnasium as gym\n\n"
        "class EvilEnv(gym.Env):\n    pass\n\n"
        "def Mod(*args, **kwargs):\n    pass\n")
    return copy


@pytest.fixture
def inside(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test with the working directory in the checkpoint and `''` first on sys.path,
    as `python -c` or a notebook started there has it."""
    monkeypatch.chdir(ckpt)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    monkeypatch.delitem(sys.modules, "evil", raising=False)
    return ckpt


def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def assert_nothing_ran(ckpt: Path) -> None:
    assert not (ckpt.parent / "PWNED").exists(), "a module of the checkpoint ran"
    assert "evil" not in sys.modules


# ------------------------------------------------------------------ item 1: code from the checkpoint


@pytest.mark.parametrize("env", ["evil:EvilEnv", "evil.EvilEnv", "evil:NS/Foo-v0"])
def test_from_checkpoint_imports_nothing_from_the_checkpoint_it_runs_in(inside, env):
    edit_json(inside / "config.json", lambda c: c.__setitem__("env", env))
    with pytest.raises(CheckpointError, match="inside the checkpoint") as info:
        Algorithm.from_checkpoint(".")
    assert "'env'" in str(info.value)
    assert_nothing_ran(inside)


def test_policy_from_checkpoint_imports_nothing_from_the_checkpoint(inside):
    from rlx.policy.policy import Policy

    edit_json(inside / "config.json", lambda c: c.__setitem__("env", "evil:EvilEnv"))
    with pytest.raises(CheckpointError, match="inside the checkpoint"):
        Policy.from_checkpoint(".")
    assert_nothing_ran(inside)


def test_rlmodule_from_checkpoint_imports_nothing_from_the_checkpoint(inside):
    from rlx.core.rl_module.rl_module import RLModule

    edit_json(inside / MODULE_DIR / "rlx_module.json",
              lambda m: m.__setitem__("module_class", {"__import__": "evil:Mod"}))
    with pytest.raises(CheckpointError, match="inside the checkpoint"):
        RLModule.from_checkpoint(MODULE_DIR)
    assert_nothing_ran(inside)


def test_loading_takes_the_checkpoint_off_sys_path_and_puts_it_back(inside):
    """The pristine checkpoint loads from inside itself; meanwhile no sys.path entry points
    into it, afterwards the caller's sys.path is as it was."""
    before = list(sys.path)
    algo = Algorithm.from_checkpoint(".")
    try:
        assert algo.iteration == 1
    finally:
        algo.stop()
    assert sys.path == before


@pytest.mark.parametrize("field, value", [
    ("env", "rlx.__main__:main"),                                  # re-runs the CLI, exits 2
    ("callbacks_class", {"__import__": "numpy.f2py.__main__:X"}),  # exits 0
    ("env", "pygments.__main__:main"),
    ("env", {"__import__": "PIL.__main__:X"}),                     # prints Pillow's report
    ("zzz", {"__dataclass__": "rlx.__main__:X", "fields": {}}),
])
def test_main_modules_are_refused_before_they_are_imported(ckpt, field, value):
    edit_json(ckpt / "config.json", lambda c: c.__setitem__(field, value))
    before = set(sys.modules)
    with pytest.raises(CheckpointError, match="__main__"):
        Algorithm.from_checkpoint(ckpt)
    assert not {m for m in set(sys.modules) - before if m.endswith("__main__")}


@pytest.mark.parametrize("env", ["this:NS/Foo-v0", "antigravity:NS/Foo-v0", "rlx.__main__:NS/Foo-v0"])
def test_the_gymnasium_plugin_form_imports_no_standard_library_or_main_module(ckpt, env, capsys):
    edit_json(ckpt / "config.json", lambda c: c.__setitem__("env", env))
    before = set(sys.modules)
    with pytest.raises(CheckpointError, match="'env'"):
        Algorithm.from_checkpoint(ckpt)
    assert not {"this", "antigravity", "rlx.__main__"} & (set(sys.modules) - before)
    assert "Beautiful is better than ugly" not in capsys.readouterr().out


def test_user_code_gets_the_same_refusal_for_the_plugin_form():
    config = small_config().environment("this:NS/Foo-v0")
    with pytest.raises(EnvError, match="standard-library"):
        config.build()


def test_recorded_env_source_modules_are_checked_before_they_are_imported(ckpt):
    """`cd ckpt && rlx evaluate .` with env_source naming a module that lies in the checkpoint."""
    edit_json(ckpt / "rlx_checkpoint.json", lambda m: m.__setitem__(
        "env_source", {"imports": [{"module": "evil", "path": None}], "experiment_file": None}))
    proc = run_rlx("evaluate", ".", "--episodes", "1", cwd=ckpt, results_dir=ckpt.parent / "results", timeout=120,
                   fresh_interpreter=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "env_source" in proc.stderr and "inside the checkpoint" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (ckpt.parent / "PWNED").exists()


def test_rlx_evaluate_in_the_checkpoint_does_not_import_its_modules(ckpt):
    edit_json(ckpt / "config.json", lambda c: c.__setitem__("env", "evil:EvilEnv"))
    proc = run_rlx("evaluate", ".", "--episodes", "1", cwd=ckpt, results_dir=ckpt.parent / "results", timeout=120,
                   fresh_interpreter=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "inside the checkpoint" in proc.stderr
    assert not (ckpt.parent / "PWNED").exists()


def test_rlx_serve_in_the_checkpoint_does_not_import_its_modules(ckpt):
    edit_json(ckpt / "config.json", lambda c: c.__setitem__("env", "evil:EvilEnv"))
    proc = run_rlx("serve", ".", "--port", "0", cwd=ckpt, results_dir=ckpt.parent / "results", timeout=120,
                   fresh_interpreter=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "inside the checkpoint" in proc.stderr
    assert not (ckpt.parent / "PWNED").exists()


def test_modules_of_the_working_directory_still_load_when_it_is_not_the_checkpoint(ckpt, tmp_path, monkeypatch):
    """The documented use stays: run from your project, whose module defines the env."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_trust_envs.py").write_text(
        "import gymnasium as gym\n\n"
        "class Cart(gym.Wrapper):\n"
        "    def __init__(self, config=None):\n"
        "        super().__init__(gym.make('CartPole-v1'))\n")
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    edit_json(ckpt / "config.json", lambda c: c.__setitem__("env", "my_trust_envs:Cart"))
    algo = Algorithm.from_checkpoint(ckpt)
    try:
        assert algo.iteration == 1
    finally:
        algo.stop()
        sys.modules.pop("my_trust_envs", None)


# ------------------------------------------------------------------ item 2: reads outside the checkpoint


@pytest.fixture
def secret(pristine: Path, tmp_path: Path) -> Path:
    """A policy folder outside the checkpoint, with weights that are all 0.123."""
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "secret" / "default_policy"
    shutil.copytree(pristine / "policies/default_policy", folder)
    tensors = load_file(str(folder / "module.safetensors"))
    save_file({k: np.full_like(v, 0.123) for k, v in tensors.items()}, str(folder / "module.safetensors"))
    shutil.copy(pristine / "algorithm_state.json", folder.parent / "algorithm_state.json")
    shutil.copy(pristine / "config.json", folder.parent / "config.json")
    return folder


def fix_checksums(ckpt: Path) -> None:
    """Record the checksums of what the files now are, as an attacker would."""
    edit_json(ckpt / "rlx_checkpoint.json", lambda m: m.__setitem__(
        "checksums", {f: sha256(ckpt / f) for f in m["files"] if not f.endswith(".json")}))


def link_weights(ckpt: Path, secret: Path) -> None:
    (ckpt / WEIGHTS).unlink()
    (ckpt / WEIGHTS).symlink_to(secret / "module.safetensors")
    fix_checksums(ckpt)


def link_policy_folder(ckpt: Path, secret: Path) -> None:
    shutil.rmtree(ckpt / "policies/default_policy")
    (ckpt / "policies/default_policy").symlink_to(secret)
    fix_checksums(ckpt)


def link_policies(ckpt: Path, secret: Path) -> None:
    shutil.rmtree(ckpt / "policies")
    (ckpt / "policies").symlink_to(secret.parent)
    fix_checksums(ckpt)


def link_state(ckpt: Path, secret: Path) -> None:
    (ckpt / "algorithm_state.json").unlink()
    (ckpt / "algorithm_state.json").symlink_to(secret.parent / "algorithm_state.json")


def link_config(ckpt: Path, secret: Path) -> None:
    (ckpt / "config.json").unlink()
    (ckpt / "config.json").symlink_to(secret.parent / "config.json")


LINKS = [link_weights, link_policy_folder, link_policies, link_state, link_config]


@pytest.mark.parametrize("tamper", LINKS, ids=[t.__name__ for t in LINKS])
def test_from_checkpoint_follows_no_link_out_of_the_checkpoint(ckpt, secret, tamper):
    tamper(ckpt, secret)
    with pytest.raises(CheckpointError, match="symbolic link") as info:
        Algorithm.from_checkpoint(ckpt)
    assert str(ckpt) in str(info.value)


def test_restore_from_path_follows_no_link_out_of_the_checkpoint(ckpt, secret):
    """What Ray Tune's restore calls (AlgorithmTrainable.load_checkpoint)."""
    link_weights(ckpt, secret)
    algo = small_config().build()
    try:
        before = {k: v.copy() for k, v in algo.get_module().get_state().items()}
        with pytest.raises(CheckpointError, match="symbolic link"):
            algo.restore_from_path(ckpt)
        after = algo.get_module().get_state()
        assert all(np.array_equal(before[k], after[k]) for k in before)
    finally:
        algo.stop()


def test_policy_from_checkpoint_follows_no_link_out_of_the_checkpoint(ckpt, secret):
    from rlx.policy.policy import Policy

    link_weights(ckpt, secret)
    with pytest.raises(CheckpointError, match="symbolic link"):
        Policy.from_checkpoint(ckpt)


def module_weights_outside(ckpt: Path, secret: Path) -> None:
    """rlx_module.json's weights climb out of the checkpoint with `..` (checksum matching)."""
    folder = ckpt / MODULE_DIR
    relative = Path(*[".."] * (len(Path(MODULE_DIR).parts) + 1)) / secret.relative_to(ckpt.parent) / "module.safetensors"
    assert (folder / relative).resolve() == (secret / "module.safetensors").resolve()
    edit_json(folder / "rlx_module.json", lambda m: m.update(weights=relative.as_posix(),
                                                            checksum=sha256(secret / "module.safetensors")))


def module_weights_linked(ckpt: Path, secret: Path) -> None:
    (ckpt / MODULE_DIR / "w.safetensors").symlink_to(secret / "module.safetensors")
    edit_json(ckpt / MODULE_DIR / "rlx_module.json", lambda m: m.update(weights="w.safetensors", checksum=None))


@pytest.mark.parametrize("tamper", [module_weights_outside, module_weights_linked])
def test_rlmodule_from_checkpoint_reads_no_weights_outside_the_checkpoint(ckpt, secret, tamper):
    from rlx.core.rl_module.rl_module import RLModule

    tamper(ckpt, secret)
    with pytest.raises(CheckpointError, match="outside the checkpoint"):
        RLModule.from_checkpoint(ckpt / MODULE_DIR)


def test_a_load_state_path_set_in_code_still_reads_no_weights_outside_its_checkpoint(ckpt, secret):
    from rlx.core.rl_module.module_checkpoint import module_spec_args
    from rlx.core.rl_module.rl_module import RLModuleSpec

    spec_args = module_spec_args(ckpt / MODULE_DIR)
    module_weights_outside(ckpt, secret)
    with pytest.raises(CheckpointError, match="'weights'"):
        RLModuleSpec(**spec_args).build()  # load_state_path is the module directory, set here in code


def test_a_load_state_path_set_in_code_outside_any_checkpoint_loads(pristine, tmp_path):
    """The user's own explicit path stays allowed: a module directory saved anywhere."""
    from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec

    module = RLModule.from_checkpoint(pristine / MODULE_DIR)
    path = module.save_to_path(tmp_path / "elsewhere" / "my_module")
    spec = RLModuleSpec(module_class=type(module), observation_space=module.observation_space,
                        action_space=module.action_space, model_config=dict(module.model_config),
                        load_state_path=path)
    rebuilt = spec.build()
    assert all(np.array_equal(a, b) for a, b in zip(module.get_state().values(), rebuilt.get_state().values()))


def test_a_load_state_path_stored_in_config_json_is_not_read(ckpt, secret, caplog):
    """A tampered config.json cannot point the module's initial weights outside."""
    edit_json(ckpt / "config.json", lambda c: c.__setitem__("rl_module_spec", {
        "__dataclass__": "rlx.core.rl_module.rl_module:RLModuleSpec",
        "fields": {"load_state_path": str(secret)}}))
    with caplog.at_level(logging.WARNING, logger="rlx"):
        algo = Algorithm.from_checkpoint(ckpt)
    try:
        assert algo.config.rl_module_spec.load_state_path is None
        weights = next(iter(algo.get_module().get_state().values()))
        assert not np.allclose(weights, 0.123)
    finally:
        algo.stop()
    assert "load_state_path" in caplog.text and "outside the checkpoint" in caplog.text


def test_deleting_the_checksums_loads_with_a_warning(ckpt, caplog):
    edit_json(ckpt / "rlx_checkpoint.json", lambda m: m.pop("checksums"))
    with caplog.at_level(logging.WARNING, logger="rlx"):
        algo = Algorithm.from_checkpoint(ckpt)
    algo.stop()
    assert "no checksum" in caplog.text and WEIGHTS in caplog.text


def test_a_weights_file_left_out_of_the_manifest_is_still_named_unverified(ckpt, caplog):
    def drop(meta: dict) -> None:
        meta["files"].remove(WEIGHTS)
        meta["checksums"].pop(WEIGHTS)

    edit_json(ckpt / "rlx_checkpoint.json", drop)
    with caplog.at_level(logging.WARNING, logger="rlx"):
        Algorithm.from_checkpoint(ckpt).stop()
    assert "no checksum" in caplog.text and WEIGHTS in caplog.text


def test_the_pristine_checkpoint_loads_without_a_checksum_warning(pristine, caplog):
    with caplog.at_level(logging.WARNING, logger="rlx"):
        Algorithm.from_checkpoint(pristine).stop()
    assert "checksum" not in caplog.text


def test_links_inside_the_checkpoint_are_fine(ckpt):
    """A link that stays inside (e.g. made by a copy tool) is no escape."""
    (ckpt / "policies/default_policy/module.safetensors").rename(ckpt / "weights.bin.safetensors")
    (ckpt / WEIGHTS).symlink_to(ckpt / "weights.bin.safetensors")
    algo = Algorithm.from_checkpoint(ckpt)
    algo.stop()


def test_rlx_evaluate_and_serve_refuse_weights_linked_from_outside(ckpt, secret):
    """`rlx serve` would otherwise publish the foreign weights at GET /weights."""
    link_weights(ckpt, secret)
    for command in (["evaluate", ".", "--episodes", "1"], ["serve", ".", "--port", "0"]):
        proc = run_rlx(*command, cwd=ckpt, results_dir=ckpt.parent / "results", timeout=120,
                   fresh_interpreter=True)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr


def test_worker_processes_started_in_the_checkpoint_do_not_import_its_packages(tmp_path, monkeypatch):
    """A spawned child starts as `python -c ...`, whose sys.path begins with its working
    directory until multiprocessing hands it the parent's: a `multiprocessing/` package of a
    checkpoint the process runs in would be imported there."""
    from rlx.utils.spawn import start_process

    shadow = tmp_path / "ckpt" / "multiprocessing"
    shadow.mkdir(parents=True)
    marker = tmp_path / "PWNED"
    (shadow / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(shadow.parent)
    import time

    process = start_process(time.sleep, (0,), name="rlx-trust-test")
    process.join(60)
    assert process.exitcode == 0
    assert not marker.exists()


def test_the_running_scripts_own_main_module_still_resolves(monkeypatch, tmp_path):
    """`__main__:fn` (a script that saved a checkpoint naming its own function) is already
    imported: resolving it runs nothing, so it is allowed; `X.__main__` modules are not."""
    from rlx.utils.checkpoint_trust import import_checked

    def mapping_fn(agent_id, episode, **kwargs):
        return "default_policy"

    mapping_fn.__module__ = "__main__"
    monkeypatch.setattr(sys.modules["__main__"], "trust_test_mapping_fn", mapping_fn, raising=False)
    assert import_checked("__main__:trust_test_mapping_fn", "policy_mapping_fn", tmp_path / "config.json") \
        is mapping_fn
    with pytest.raises(CheckpointError, match="__main__"):
        import_checked("pygments.__main__:main", "policy_mapping_fn", tmp_path / "config.json")

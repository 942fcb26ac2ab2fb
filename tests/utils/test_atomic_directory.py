"""AtomicDirectory and the recovery of checkpoint saves killed between their two renames.

The crash states are built by hand: a save of `dir/name` leaves `dir/.name.tmp-{pid}-XXXX`
(the new checkpoint, complete once `rlx_checkpoint.json` is written) and `dir/.name.old-{pid}`
(the previous checkpoint) when killed after moving the target aside.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlx.utils.atomic_directory import METADATA_FILE, AtomicDirectory, recover_interrupted_save


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid():
    """The pid of a running process other than this one."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


def make_checkpoint(path: Path, content: str, complete: bool = True) -> Path:
    """A checkpoint-like directory holding data.txt with `content`; without a file its
    metadata lists unless `complete`."""
    path.mkdir(parents=True)
    (path / "data.txt").write_text(content)
    files = ["data.txt"] if complete else ["data.txt", "missing.bin"]
    (path / METADATA_FILE).write_text(json.dumps({"format": "rlx-checkpoint", "files": files}))
    return path


def hidden(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


# ------------------------------------------------------------------ target missing


def test_target_missing_complete_tmp_is_restored_and_old_removed(tmp_path, dead_pid, caplog):
    target = tmp_path / "ckpt"
    make_checkpoint(tmp_path / f".ckpt.old-{dead_pid}", "previous")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-abcd1234", "newer")
    with caplog.at_level(logging.WARNING, logger="rlx"):
        assert recover_interrupted_save(target) is True
    assert (target / "data.txt").read_text() == "newer"
    assert hidden(tmp_path) == []
    messages = [r.getMessage() for r in caplog.records if r.name == "rlx"]
    assert len(messages) == 2
    assert any("Restored" in m and f".ckpt.tmp-{dead_pid}-abcd1234" in m for m in messages)
    assert any("Removed" in m and f".ckpt.old-{dead_pid}" in m for m in messages)


def test_target_missing_newest_complete_tmp_wins(tmp_path, dead_pid):
    older = make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-aaaa", "older")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-bbbb", "newer")
    past = time.time() - 100
    os.utime(older / METADATA_FILE, (past, past))
    assert recover_interrupted_save(tmp_path / "ckpt") is True
    assert (tmp_path / "ckpt" / "data.txt").read_text() == "newer"
    assert hidden(tmp_path) == []


@pytest.mark.parametrize("tmp_state", ["no_metadata", "listed_file_missing", "corrupt_metadata"])
def test_target_missing_incomplete_tmp_restores_old(tmp_path, dead_pid, tmp_state):
    make_checkpoint(tmp_path / f".ckpt.old-{dead_pid}", "previous")
    tmp = make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-abcd", "partial",
                          complete=tmp_state != "listed_file_missing")
    if tmp_state == "no_metadata":
        (tmp / METADATA_FILE).unlink()
    elif tmp_state == "corrupt_metadata":
        (tmp / METADATA_FILE).write_text("{not json")
    assert recover_interrupted_save(tmp_path / "ckpt") is True
    assert (tmp_path / "ckpt" / "data.txt").read_text() == "previous"
    assert hidden(tmp_path) == []


def test_target_missing_nothing_restorable_removes_partial_tmp_only(tmp_path, dead_pid):
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-abcd", "partial", complete=False)
    (tmp_path / f".ckpt.old-{dead_pid}").mkdir()  # an old dir that is no checkpoint
    assert recover_interrupted_save(tmp_path / "ckpt") is False
    assert not (tmp_path / "ckpt").exists()
    assert hidden(tmp_path) == [f".ckpt.old-{dead_pid}"]


# ------------------------------------------------------------------ target present


def test_target_present_leftovers_removed_and_target_untouched(tmp_path, dead_pid):
    target = make_checkpoint(tmp_path / "ckpt", "current")
    make_checkpoint(tmp_path / f".ckpt.old-{dead_pid}", "previous")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-abcd", "complete but superseded")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-efgh", "partial", complete=False)
    assert recover_interrupted_save(target) is False
    assert (target / "data.txt").read_text() == "current"
    assert sorted(p.name for p in target.iterdir()) == ["data.txt", METADATA_FILE]
    assert hidden(tmp_path) == []


def test_target_that_is_no_checkpoint_keeps_everything(tmp_path, dead_pid):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "notes.txt").write_text("user file")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-abcd", "newer")
    assert recover_interrupted_save(tmp_path / "ckpt") is False
    assert hidden(tmp_path) == [f".ckpt.tmp-{dead_pid}-abcd"]
    assert (tmp_path / "ckpt" / "notes.txt").read_text() == "user file"


# ------------------------------------------------------------------ what is never touched


def test_live_writer_dirs_are_left_alone(tmp_path, live_pid):
    target = make_checkpoint(tmp_path / "ckpt", "current")
    make_checkpoint(tmp_path / f".ckpt.tmp-{live_pid}-abcd", "being written", complete=False)
    make_checkpoint(tmp_path / f".ckpt.old-{live_pid}", "previous")
    assert recover_interrupted_save(target) is False
    assert hidden(tmp_path) == [f".ckpt.old-{live_pid}", f".ckpt.tmp-{live_pid}-abcd"]


def test_live_writer_between_renames_is_left_alone(tmp_path, live_pid, dead_pid):
    # The live save has moved the target aside and is about to rename its tmp into place.
    make_checkpoint(tmp_path / f".ckpt.old-{live_pid}", "previous")
    make_checkpoint(tmp_path / f".ckpt.tmp-{live_pid}-abcd", "live newer")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-efgh", "dead newer")
    before = hidden(tmp_path)
    assert recover_interrupted_save(tmp_path / "ckpt") is False
    assert not (tmp_path / "ckpt").exists()
    assert hidden(tmp_path) == before


def test_save_in_progress_in_this_process_is_left_alone(tmp_path):
    target = make_checkpoint(tmp_path / "ckpt", "current")
    with AtomicDirectory(target) as tmp:
        assert tmp.name.startswith(f".ckpt.tmp-{os.getpid()}-")
        (tmp / "data.txt").write_text("being written")
        assert recover_interrupted_save(target) is False
        assert tmp.is_dir() and (tmp / "data.txt").read_text() == "being written"
        (tmp / METADATA_FILE).write_text(json.dumps({"files": ["data.txt"]}))
    assert (target / "data.txt").read_text() == "being written"
    assert hidden(tmp_path) == []


def test_own_pid_leftover_outside_a_save_is_recovered(tmp_path):
    # A crashed process whose pid this one reuses (common in containers): not a save in progress.
    make_checkpoint(tmp_path / f".ckpt.old-{os.getpid()}", "previous")
    make_checkpoint(tmp_path / f".ckpt.tmp-{os.getpid()}-abcd", "newer")
    assert recover_interrupted_save(tmp_path / "ckpt") is True
    assert (tmp_path / "ckpt" / "data.txt").read_text() == "newer"
    assert hidden(tmp_path) == []


def test_unrelated_dotfiles_are_left_alone(tmp_path, dead_pid):
    target = make_checkpoint(tmp_path / "ckpt", "current")
    unrelated = [
        f".ckpt.tmp-{dead_pid}-abcd.bak",
        f".ckpt.old-{dead_pid}x",
        f".ckpt.old-{dead_pid}-abcd",
        f".ckpt.tmp-{dead_pid}-ABCD",
        f".ckpt2.tmp-{dead_pid}-abcd",
        f".other.old-{dead_pid}",
        f"ckpt.tmp-{dead_pid}-abcd",
        f".ckpt.tmp-{dead_pid}-",
        ".ckpt.old-",
        ".git",
    ]
    for name in unrelated:
        make_checkpoint(tmp_path / name, name)
    (tmp_path / f".ckpt.tmp-{dead_pid}-file").write_text("a file, not a directory")
    os.symlink(tmp_path / "ckpt", tmp_path / f".ckpt.old-{dead_pid}")
    recover_interrupted_save(target)
    assert hidden(tmp_path) == sorted([n for n in unrelated if n.startswith(".")]
                                      + [f".ckpt.old-{dead_pid}", f".ckpt.tmp-{dead_pid}-file"])
    assert (target / "data.txt").read_text() == "current"


def test_legacy_tmp_without_pid_is_removed_only_when_an_hour_old(tmp_path):
    target = make_checkpoint(tmp_path / "ckpt", "current")
    stale = make_checkpoint(tmp_path / ".ckpt.tmp-k3j_x9qz", "stale", complete=False)
    make_checkpoint(tmp_path / ".ckpt.tmp-a1b2c3d4", "maybe still written", complete=False)
    past = time.time() - 2 * 3600
    os.utime(stale, (past, past))
    recover_interrupted_save(target)
    assert hidden(tmp_path) == [".ckpt.tmp-a1b2c3d4"]


def test_stale_legacy_tmp_can_be_restored(tmp_path):
    tmp = make_checkpoint(tmp_path / ".ckpt.tmp-k3j_x9qz", "newer")
    past = time.time() - 2 * 3600
    os.utime(tmp, (past, past))
    assert recover_interrupted_save(tmp_path / "ckpt") is True
    assert (tmp_path / "ckpt" / "data.txt").read_text() == "newer"


def test_missing_parent_directory_is_no_error(tmp_path):
    assert recover_interrupted_save(tmp_path / "nowhere" / "ckpt") is False


# ------------------------------------------------------------------ AtomicDirectory


def test_save_after_a_crash_recovers_first_and_leaves_no_hidden_dirs(tmp_path, dead_pid, caplog):
    make_checkpoint(tmp_path / f".ckpt.old-{dead_pid}", "previous")
    make_checkpoint(tmp_path / f".ckpt.tmp-{dead_pid}-abcd", "interrupted save")
    with caplog.at_level(logging.WARNING, logger="rlx"):
        with AtomicDirectory(tmp_path / "ckpt") as tmp:
            # The interrupted save was restored before this one started.
            assert (tmp_path / "ckpt" / "data.txt").read_text() == "interrupted save"
            (tmp / "data.txt").write_text("third save")
            (tmp / METADATA_FILE).write_text(json.dumps({"files": ["data.txt"]}))
    assert (tmp_path / "ckpt" / "data.txt").read_text() == "third save"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert any("Restored" in r.getMessage() for r in caplog.records)


def test_failed_save_removes_its_tmp_and_keeps_target(tmp_path):
    target = make_checkpoint(tmp_path / "ckpt", "current")
    with pytest.raises(RuntimeError):
        with AtomicDirectory(target) as tmp:
            (tmp / "data.txt").write_text("half")
            raise RuntimeError("boom")
    assert (target / "data.txt").read_text() == "current"
    assert hidden(tmp_path) == []
    # The failed save is no longer registered as in progress: a leftover of it would be recovered.
    make_checkpoint(tmp, "leftover", complete=False)
    recover_interrupted_save(target)
    assert hidden(tmp_path) == []


def test_interrupted_rename_in_this_process_is_recovered_by_the_next_save(tmp_path, monkeypatch):
    target = make_checkpoint(tmp_path / "ckpt", "first")
    real_replace = os.replace
    calls = []

    def replace_failing_second(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:
            raise OSError("killed between the renames")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_failing_second)
    with pytest.raises(OSError):
        with AtomicDirectory(target) as tmp:
            (tmp / "data.txt").write_text("second")
            (tmp / METADATA_FILE).write_text(json.dumps({"files": ["data.txt"]}))
    monkeypatch.setattr(os, "replace", real_replace)
    assert not target.exists()
    assert recover_interrupted_save(target) is True
    assert (target / "data.txt").read_text() == "second"
    assert hidden(tmp_path) == []


def test_refuses_a_directory_with_other_files(tmp_path):
    from rlx.utils.errors import CheckpointError

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "notes.txt").write_text("user file")
    with pytest.raises(CheckpointError, match="holds other files"):
        with AtomicDirectory(tmp_path / "ckpt"):
            pass
    assert (tmp_path / "ckpt" / "notes.txt").read_text() == "user file"
    assert hidden(tmp_path) == []


# ------------------------------------------------------------------ end to end with a real checkpoint


@pytest.mark.skipif(sys.platform == "win32", reason="pid liveness checks are POSIX-only")
def test_real_checkpoint_interrupted_second_save_is_recovered_and_loads(tmp_path, dead_pid):
    from rlx.algorithms.algorithm import Algorithm
    from rlx.algorithms.ppo import PPOConfig

    path = tmp_path / "ckpt"
    config = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0).training(
        train_batch_size=64, minibatch_size=32, num_epochs=1)
    algo = config.build()
    restored = None
    try:
        algo.train()
        algo.save(str(path))
        algo.train()
        second = tmp_path / "second"
        algo.save(str(second))
        iteration = algo.iteration
        assert iteration == 2
        # The second save to `path` was killed after moving `path` aside, before renaming its tmp.
        os.replace(path, tmp_path / f".ckpt.old-{dead_pid}")
        os.replace(second, tmp_path / f".ckpt.tmp-{dead_pid}-abcd")
        assert recover_interrupted_save(path) is True
        assert sorted(p.name for p in tmp_path.iterdir() if p.name != "rlx_results") == ["ckpt"]
        restored = Algorithm.from_checkpoint(path)
        assert restored.iteration == iteration
    finally:
        algo.stop()
        if restored is not None:
            restored.stop()


def test_real_checkpoint_save_over_crash_leftovers(tmp_path, dead_pid):
    from rlx.algorithms.algorithm import Algorithm
    from rlx.algorithms.ppo import PPOConfig

    path = tmp_path / "ckpt"
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0).training(
        train_batch_size=64, minibatch_size=32, num_epochs=1).build()
    restored = None
    try:
        algo.save(str(path))
        shutil.copytree(path, tmp_path / f".ckpt.tmp-{dead_pid}-abcd")
        os.replace(path, tmp_path / f".ckpt.old-{dead_pid}")
        algo.train()
        algo.save(str(path))
        assert sorted(p.name for p in tmp_path.iterdir() if p.name != "rlx_results") == ["ckpt"]
        restored = Algorithm.from_checkpoint(path)
        assert restored.iteration == 1
    finally:
        algo.stop()
        if restored is not None:
            restored.stop()


# ------------------------------------------------------------------ leftovers of saves to other paths


def test_a_save_removes_the_partial_temp_dirs_of_every_name_in_the_directory(tmp_path, dead_pid):
    """A save killed while writing a new checkpoint_000003 leaves `.checkpoint_000003.tmp-PID-*`;
    later saves go to other paths, and each cleans the whole parent directory."""
    partial = [tmp_path / f".checkpoint_00000{i}.tmp-{dead_pid}-abcd123{i}" for i in (3, 4)]
    for path in partial:
        path.mkdir()
        (path / "config.json").write_text("{}")  # written before the kill, no metadata yet
    with AtomicDirectory(tmp_path / "checkpoint_000005") as tmp:
        (tmp / METADATA_FILE).write_text(json.dumps({"files": []}))
    assert not any(p.exists() for p in partial)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_000005"]


def test_a_load_removes_the_partial_temp_dirs_beside_the_checkpoint(tmp_path, dead_pid):
    from rlx.utils.checkpoints import read_metadata
    from rlx.utils.errors import CheckpointError

    make_checkpoint(tmp_path / "checkpoint_000001", "one")
    leftover = tmp_path / f".checkpoint_000002.tmp-{dead_pid}-abcd1234"
    leftover.mkdir()
    with pytest.raises(CheckpointError, match="format version"):  # a hand-made checkpoint; the sweep ran first
        read_metadata(tmp_path / "checkpoint_000001")
    assert not leftover.exists()


def test_the_sweep_leaves_running_saves_and_other_dotfiles_alone(tmp_path, live_pid, dead_pid):
    running = tmp_path / f".checkpoint_000002.tmp-{live_pid}-abcd1234"
    running.mkdir()
    mine = tmp_path / ".notes.txt"
    mine.write_text("mine")
    other = tmp_path / f".cache.tmp-{dead_pid}"  # not a checkpoint save's name
    other.mkdir()
    with AtomicDirectory(tmp_path / "checkpoint_000003") as tmp:
        (tmp / METADATA_FILE).write_text(json.dumps({"files": []}))
    assert running.exists() and mine.exists() and other.exists()


def test_the_sweep_keeps_a_directory_named_like_a_leftover_that_holds_no_save(tmp_path, dead_pid):
    """Only what a save writes is swept: someone else's `.x.tmp-PID-XXXX` directory stays."""
    foreign = tmp_path / f".notes.tmp-{dead_pid}-abcd1234"
    foreign.mkdir()
    (foreign / "draft.txt").write_text("mine")
    with AtomicDirectory(tmp_path / "checkpoint_000001") as tmp:
        (tmp / METADATA_FILE).write_text(json.dumps({"files": []}))
    assert (foreign / "draft.txt").read_text() == "mine"

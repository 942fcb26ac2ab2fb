"""rlx._tune_autoregister: run code right after a module finishes importing, which is how
`import rlx.algorithms` registers rlx with Ray Tune without importing Ray. The end-to-end
cases (both import orders, a Tune trial in a fresh driver) are in tests/tune/test_tune.py;
these use throw-away modules and need no Ray.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from rlx import _tune_autoregister as autoregister


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path for throw-away modules, with nothing else being watched (the
    session's own watch for ray.tune is put back afterwards)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(autoregister, "_pending", {})
    saved_meta_path = list(sys.meta_path)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, autoregister._ImportWatcher)]
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]
    sys.meta_path[:] = saved_meta_path


def watchers() -> list:
    return [f for f in sys.meta_path if isinstance(f, autoregister._ImportWatcher)]


def test_callback_runs_right_after_the_watched_module_finished_importing(module_dir):
    (module_dir / "watched_mod.py").write_text("VALUE = 42\n")
    seen = []
    autoregister.when_imported("watched_mod", lambda: seen.append(sys.modules["watched_mod"].VALUE))
    assert seen == [] and len(watchers()) == 1
    import watched_mod  # noqa: F401

    assert seen == [42]
    assert watchers() == []  # nothing left to watch: the finder is gone
    assert "exec_module" not in vars(watched_mod.__loader__)  # the loader is left as it was


def test_callback_runs_at_once_when_the_module_is_already_imported(module_dir):
    (module_dir / "already_mod.py").write_text("")
    import already_mod  # noqa: F401

    seen = []
    autoregister.when_imported("already_mod", lambda: seen.append(True))
    assert seen == [True] and watchers() == []


def test_a_failing_callback_warns_and_never_breaks_the_import(module_dir, caplog):
    (module_dir / "fragile_mod.py").write_text("VALUE = 1\n")

    def fail() -> None:
        raise RuntimeError("registration failed")

    autoregister.when_imported("fragile_mod", fail)
    with caplog.at_level(logging.WARNING, logger="rlx"):
        import fragile_mod

    assert fragile_mod.VALUE == 1
    assert "could not register itself with Ray Tune" in caplog.text
    assert "registration failed" in caplog.text

"""Worker processes start from a fork server that imported torch once, and still get what the
driver has when each one starts (environment variables, env registrations, its parent pid)."""
from __future__ import annotations

import os
import sys

import pytest

from rlx.utils.errors import RLXError
from rlx.utils.spawn import START_METHOD_ENV_VAR, spawn_pipe, start_method, start_process


def _report(conn, names):
    """Worker body: send back what the worker sees at its start."""
    conn.send({"torch_imported": "torch" in sys.modules,
               "environ": {name: os.environ.get(name) for name in names},
               "pid": os.getpid()})
    conn.close()


def _ask_a_worker(names=()):
    parent, child = spawn_pipe()
    process = start_process(_report, (child, list(names)), name="rlx-worker-test")
    child.close()
    if not parent.poll(120):
        process.kill()
        raise AssertionError("the worker did not answer within 120 s")
    answer = parent.recv()
    process.join(30)
    assert process.exitcode == 0
    return answer


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="rlx uses a fork server on Linux only")
def test_workers_start_with_torch_already_imported(monkeypatch):
    monkeypatch.delenv(START_METHOD_ENV_VAR, raising=False)
    assert start_method() == "forkserver"
    assert _ask_a_worker()["torch_imported"]


def test_a_variable_set_after_the_first_worker_reaches_the_next_one(monkeypatch):
    _ask_a_worker()  # the fork server (if any) is running now, with the variables of that time
    name = "RLX_TEST_SPAWN_VARIABLE"
    monkeypatch.setenv(name, "set later")
    monkeypatch.delenv("HOME", raising=False)  # removed ones are removed in the worker too
    answer = _ask_a_worker([name, "HOME"])
    assert answer["environ"] == {name: "set later", "HOME": None}
    assert answer["pid"] != os.getpid()


def test_spawn_can_be_chosen(monkeypatch):
    monkeypatch.setenv(START_METHOD_ENV_VAR, "spawn")
    assert start_method() == "spawn"
    assert not _ask_a_worker()["torch_imported"]  # a fresh interpreter imports only what it needs


def test_an_unknown_start_method_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(START_METHOD_ENV_VAR, "fork")
    with pytest.raises(RLXError, match="RLX_START_METHOD='fork'.*'forkserver' or 'spawn'"):
        start_method()

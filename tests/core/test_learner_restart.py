"""A LearnerGroup whose learner process died restarts from the driver's state.

The driver keeps rank 0's weights (after every update) and a mirror of its extra state
(update counts, PPO's kl_coeff, RNG state): after a learner death, `algo.save()` restarts
the learner processes from them and saves; training then goes on with the new processes.
"""
from __future__ import annotations

import logging
import os
import signal
import time

import numpy as np
import pytest

from rlx.algorithms.algorithm import Algorithm
from rlx.core.learner_group import LearnerDiedError, LearnerGroup, LearnerGroupError

from conftest import small_config
from process_helpers import child_processes, open_fds, process_gone


def _wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _learner_children() -> list[int]:
    """Spawned worker children of this process, alive or zombie (the tests start no
    EnvRunner processes, so these are learners)."""
    return child_processes(spawned_only=True)


def _config():
    return (small_config(train_batch_size=256, minibatch_size=64, num_epochs=1)
            .env_runners(num_env_runners=0)
            .learners(num_learners=2))


def _assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture
def warnings_of_rlx(caplog):
    caplog.set_level(logging.WARNING, logger="rlx")
    return lambda: [r for r in caplog.records if r.name == "rlx" and "restarted" in r.getMessage()]


@pytest.mark.slow
@pytest.mark.parametrize("rank", [0, 1])
def test_save_after_a_learner_death_saves_the_driver_state_and_training_goes_on(tmp_path, rank, warnings_of_rlx):
    algo = _config().build()
    restored = None
    pids = []
    try:
        group = algo.learner
        assert isinstance(group, LearnerGroup)
        for _ in range(2):
            algo.train()
        pids += group.pids
        weights = {k: v.copy() for k, v in group.module.get_state().items()}
        kl_coeff = group.get_extra_state()["kl_coeff"]
        assert kl_coeff != algo.config.kl_coeff  # PPO moved it: the test checks a real change
        num_grad_updates = group.get_extra_state()["num_grad_updates"]
        assert num_grad_updates > 0

        os.kill(group.pids[rank], signal.SIGKILL)
        _wait_until(lambda: not group.is_healthy)
        path = algo.save(str(tmp_path / "ckpt"))

        assert group.is_healthy and set(group.pids).isdisjoint(pids)  # new processes
        assert len(warnings_of_rlx()) == 1
        message = warnings_of_rlx()[0].getMessage()
        assert "driver's weights" in message and "SIGKILL" in message and "optimizer state" in message
        assert all(process_gone(pid) for pid in pids)  # the survivor was stopped and reaped
        _assert_same_weights(group.module.get_state(), weights)
        for learner_weights in group.foreach_learner(lambda learner: learner.get_weights()):
            _assert_same_weights(learner_weights, weights)

        restored = Algorithm.from_checkpoint(path)
        assert restored.iteration == 2
        _assert_same_weights(restored.learner.module.get_state(), weights)
        state = restored.learner.get_extra_state()
        assert state["kl_coeff"] == kl_coeff and state["num_grad_updates"] == num_grad_updates
        pids += restored.learner.pids
        restored.stop()

        pids += group.pids
        result = algo.train()
        assert result["training_iteration"] == 3
        assert np.isfinite(result["learners"]["default_policy"]["total_loss"])
        assert group.get_extra_state()["num_grad_updates"] > num_grad_updates
    finally:
        algo.stop()
        if restored is not None:
            restored.stop()
    assert all(process_gone(pid) for pid in pids)
    assert _learner_children() == []


@pytest.mark.slow
def test_a_death_during_train_is_raised_once_then_save_and_train_work(tmp_path, warnings_of_rlx):
    algo = _config().build()
    try:
        group = algo.learner
        for _ in range(2):
            algo.train()
        weights = {k: v.copy() for k, v in group.module.get_state().items()}
        state = group.get_extra_state()
        old_pids = list(group.pids)

        os.kill(group.pids[1], signal.SIGKILL)
        # (How it died, "killed by SIGKILL", is known only once the process is reaped.)
        with pytest.raises(LearnerDiedError, match=r"Learner 1 \(process \d+\)"):
            algo.train()  # the update that met the death is lost
        assert not group.is_healthy
        _assert_same_weights(group.module.get_state(), weights)  # the sampled-with weights, unchanged

        path = algo.save(str(tmp_path / "ckpt"))
        assert len(warnings_of_rlx()) == 1
        restored = Algorithm.from_checkpoint(path)
        try:
            _assert_same_weights(restored.learner.module.get_state(), weights)
            assert restored.learner.get_extra_state()["kl_coeff"] == state["kl_coeff"]
        finally:
            restored.stop()
        assert algo.train()["training_iteration"] >= 3
        assert all(process_gone(pid) for pid in old_pids)
    finally:
        algo.stop()
    assert _learner_children() == []


def test_update_after_a_reported_death_restarts_the_group():
    algo = _config().build()
    try:
        group = algo.learner
        algo.train()
        state = group.get_extra_state()
        os.kill(group.pids[0], signal.SIGKILL)
        _wait_until(lambda: not group.is_healthy)
        with pytest.raises(LearnerDiedError, match="Learner 0"):
            algo.train()
        result = algo.train()  # restarts, then updates
        assert group.is_healthy
        assert result["learners"]["default_policy"]["num_minibatch_updates"] > 0
        assert group.get_extra_state()["num_grad_updates"] > state["num_grad_updates"]
    finally:
        algo.stop()


def test_restart_of_a_healthy_group_keeps_weights_and_extra_state_and_leaks_nothing(warnings_of_rlx):
    algo = _config().build()
    try:
        group = algo.learner
        for _ in range(2):
            algo.train()
        weights = {k: v.copy() for k, v in group.module.get_state().items()}
        state = group.get_extra_state()
        target = group.foreach_learner(lambda learner: float(learner.kl_coeff))[0]
        assert target == state["kl_coeff"]
        fds = open_fds()
        old_pids = list(group.pids)

        group.restart()
        group.restart()

        assert len(warnings_of_rlx()) == 2  # one per restart
        assert group.is_healthy and set(group.pids).isdisjoint(old_pids)
        assert all(process_gone(pid) for pid in old_pids)
        assert open_fds() == fds  # the old pipes and sentinels are closed
        assert sorted(_learner_children()) == sorted(group.pids)
        _assert_same_weights(group.get_weights(), weights)
        for learner_weights, extra in group.foreach_learner(lambda l: (l.get_weights(), l.get_extra_state())):
            _assert_same_weights(learner_weights, weights)
            assert extra == state  # counts, kl_coeff and the shuffling RNG, on every rank
        # Optimizer state starts over, as in a freshly built Learner.
        for param_state in group.optimizer.state_dict()["state"].values():
            assert float(param_state["step"]) == 0 and not np.any(np.asarray(param_state["exp_avg"]))
        assert algo.train()["training_iteration"] == 3
    finally:
        algo.stop()
    assert _learner_children() == []
    with pytest.raises(LearnerGroupError, match="stopped"):
        group.restart()
    group.stop()  # idempotent


@pytest.mark.slow
def test_a_failure_that_is_no_death_still_stops_the_group_until_restart_is_called():
    algo = _config().build()
    try:
        group = algo.learner
        algo.train()
        weights = {k: v.copy() for k, v in group.module.get_state().items()}
        with pytest.raises(KeyError):
            group.update_from_batch({"rewards": np.zeros((4, 2), np.float32)}, timestep=0)  # no "obs"
        # Not a death: the learners' error may recur, so nothing restarts by itself.
        with pytest.raises(LearnerGroupError, match="earlier failure"):
            group.get_extra_state()
        _assert_same_weights(group.get_weights(), weights)  # the driver's copy is still there
        group.restart()
        assert group.is_healthy
        assert algo.train()["training_iteration"] == 2
    finally:
        algo.stop()

"""The Learner's torch thread count comes from measured update times (rlx.core.learner.threads):
with a busy process beside it, its updates are never slower than with one thread."""
from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest
import torch

from rlx.algorithms.sac import SACConfig
from rlx.core.learner import threads
from rlx.core.learner.threads import UpdateThreads


class _FakeClock:
    """A clock whose update durations the test dictates per thread count."""

    def __init__(self, seconds_per_thread_count):
        self.now = 0.0
        self.seconds = seconds_per_thread_count

    def __call__(self):
        return self.now

    def run(self, chooser):
        with chooser.applied():
            self.now += self.seconds[torch.get_num_threads()]


def test_the_chooser_keeps_one_thread_when_two_measure_slower():
    clock = _FakeClock({1: 0.010, 2: 0.200})
    chooser = UpdateThreads(candidates=(1, 2), expected=torch.get_num_threads(), clock=clock)
    before = torch.get_num_threads()
    for _ in range(20):
        clock.run(chooser)
    assert chooser.chosen == 1
    assert torch.get_num_threads() == before
    # The comparison stopped timing 2 threads once they were twice as slow: one slow update only.
    assert chooser.history[0][1] == 1


def test_the_chooser_takes_two_threads_only_when_clearly_faster_and_rechecks_on_drift():
    clock = _FakeClock({1: 0.010, 2: 0.006})
    chooser = UpdateThreads(candidates=(1, 2), expected=torch.get_num_threads(), clock=clock)
    for _ in range(10):
        clock.run(chooser)
    assert chooser.chosen == 2
    clock.seconds = {1: 0.010, 2: 0.0098}  # within the noise: fewer threads win
    fresh = UpdateThreads(candidates=(1, 2), expected=torch.get_num_threads(), clock=clock)
    for _ in range(10):
        clock.run(fresh)
    assert fresh.chosen == 1
    # A busy process starts: two threads get slow, the drift triggers a new comparison.
    clock.seconds = {1: 0.012, 2: 0.150}
    for _ in range(15):
        clock.run(chooser)
    assert chooser.chosen == 1
    assert len(chooser.history) == 2


def test_the_chooser_rechecks_now_and_then():
    clock = _FakeClock({1: 0.010, 2: 0.200})
    chooser = UpdateThreads(candidates=(1, 2), expected=torch.get_num_threads(), recheck_every=10, clock=clock)
    for _ in range(20):
        clock.run(chooser)
    assert chooser.chosen == 1
    clock.seconds = {1: 0.010, 2: 0.004}  # the other process ended
    for _ in range(30):
        clock.run(chooser)
    assert chooser.chosen == 2


def test_a_users_torch_thread_count_wins():
    previous = torch.get_num_threads()
    clock = _FakeClock({1: 0.010, 2: 0.004, 3: 0.004})
    chooser = UpdateThreads(candidates=(1, 2), expected=1, clock=clock)
    torch.set_num_threads(3)  # the user's torch.set_num_threads after building the Algorithm
    try:
        for _ in range(10):
            clock.run(chooser)
        assert chooser.chosen is None and not chooser.history
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(previous)
    fixed = threads.update_thread_chooser(SACConfig().learners(num_cpus_per_learner=3), 10)
    assert not fixed.automatic and fixed.next_threads() == 3
    assert threads.update_thread_chooser(SACConfig().framework(torch_num_threads=1), 200_000).next_threads() is None


@pytest.fixture
def busy_core():
    """A process burning one core beside the learner, for the duration of the test."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.2)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_updates_beside_a_busy_process_are_not_slower_than_one_thread(busy_core, monkeypatch):
    monkeypatch.setattr(threads, "_available_cores", lambda: 2)  # a 2-core box, as the issue's
    algo = (SACConfig().environment("Pendulum-v1").debugging(seed=0)
            .training(num_steps_sampled_before_learning_starts=64)
            .reporting(min_sample_timesteps_per_iteration=80).build())
    try:
        learner = algo.learner
        update = learner.update_from_batch
        batches = []

        def recording(batch, timestep):
            batches.append((batch, timestep))
            return update(batch, timestep)

        learner.update_from_batch = recording
        algo.train()  # about 16 real updates: the warm-up and the comparison
        assert learner._update_threads.automatic
        assert learner._update_threads.chosen is not None
        batch, timestep = batches[-1]

        def seconds_per_update(run, n=6):
            times = []
            for _ in range(n):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
            return statistics.median(times)

        chosen = seconds_per_update(lambda: learner.run_update(batch, timestep))
        torch.set_num_threads(1)
        one = seconds_per_update(lambda: update(batch, timestep))
        # Generous: a loaded shared box is noisy, but two threads beside a busy core are 5-25x slower.
        assert chosen <= 2.0 * one + 0.005, (chosen, one, learner._update_threads.history)
    finally:
        algo.stop()

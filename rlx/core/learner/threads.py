"""How many torch intra-op threads the driver's Learner updates with.

rlx samples and acts with one torch thread (`torch_num_threads=1`): small batches of
observations run fastest that way. A Learner whose gradient steps are large (parameters times
rows per step, e.g. SAC's [256, 256] networks on batches of 256) may compute faster with a
second thread, but only when a second core is really free: with one busy process beside the
Learner on 2 cores, a second thread made SAC's updates 5-25x slower. So the thread count is
chosen from measured update times, never from the core count alone:

- with `num_cpus_per_learner` set, the update runs with that many threads (as learner processes do);
- with `torch_num_threads` set by the user, set to None, or torch's thread count changed by the
  user (`torch.set_num_threads`) to something other than `torch_num_threads` after the
  Algorithm was built, rlx leaves torch's setting alone;
- otherwise, when no remote EnvRunners run on the other cores, the Learner is on the CPU and in
  the driver, this process may use at least 2 cores and the update is at least
  AUTO_WORK_THRESHOLD parameter-rows per gradient step, `UpdateThreads` times real updates with
  1 and 2 threads (interleaved, after a warm-up update), keeps the faster (2 only when clearly
  faster), and times both again every `recheck_every` updates (the interval doubles while the
  choice stands) and whenever the chosen setting's update time drifts above what it measured.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Callable, Iterator

import torch

from rlx.core.config_view import ResolvedConfig

__all__ = ["AUTO_WORK_THRESHOLD", "UpdateThreads", "update_threads", "update_thread_chooser"]

#: Trainable parameters x rows per gradient step from which a second thread may pay off (SAC's
#: default networks on batches of 256: about 50M; PPO's [64, 64] on 512 rows: about 5M).
AUTO_WORK_THRESHOLD = 20_000_000


def update_threads(config: ResolvedConfig, num_params: int, device_type: str = "cpu") -> int | None:
    """The most torch threads the Learner's updates may use (None: leave torch's setting alone).

    A count the user set (`num_cpus_per_learner`) is used as is; an automatic 2 is only a
    candidate, which `UpdateThreads` keeps only if measured updates are faster with it."""
    if device_type != "cpu" or int(getattr(config, "num_learners", 0) or 0) > 0:
        return None
    user_set = getattr(config, "is_user_set", lambda key: False)
    if user_set("num_cpus_per_learner"):
        return max(1, int(config.num_cpus_per_learner))
    if user_set("torch_num_threads") or config.torch_num_threads is None:
        return None
    if int(config.num_env_runners) > 0 or _available_cores() < 2:
        return None
    rows = getattr(config, "minibatch_size", None) or config.train_batch_size
    return 2 if num_params * int(rows) >= AUTO_WORK_THRESHOLD else None


def update_thread_chooser(config: ResolvedConfig, num_params: int, device_type: str = "cpu") -> "UpdateThreads":
    """The `UpdateThreads` a Learner with `num_params` trainable parameters updates under."""
    most = update_threads(config, num_params, device_type)
    user_set = getattr(config, "is_user_set", lambda key: False)
    if most is None or user_set("num_cpus_per_learner"):
        return UpdateThreads(fixed=most)
    return UpdateThreads(candidates=(1, most), expected=config.torch_num_threads)


class UpdateThreads:
    """Runs each Learner update with a torch thread count and, in automatic mode, picks that
    count from the measured times of real updates.

    Args:
        fixed: run every update with this many threads (None with no candidates: leave torch alone).
        candidates: the thread counts to time against each other (automatic mode).
        expected: the thread count rlx set for the driver (`torch_num_threads`); if torch's count
            differs at an update, the user changed it, and that update runs with it untouched.
        trials: timed updates per candidate in one comparison.
        recheck_every: updates between two comparisons (doubles each time the choice stands).
        max_recheck_every: the longest interval between two comparisons.
        drift: compare again when the chosen setting's recent update time exceeds this factor
            times its time in the last comparison (the machine's load changed).
        gain: a larger count is kept only when its update time is below this factor times the
            smaller count's (more threads share cores with everything else).
        clock: the timer (seconds).
    """

    def __init__(self, fixed: int | None = None, candidates: tuple[int, ...] = (), *,
                 expected: int | None = None, trials: int = 3, recheck_every: int = 200,
                 max_recheck_every: int = 5000, drift: float = 1.5, gain: float = 0.9,
                 clock: Callable[[], float] = time.perf_counter):
        self.fixed = fixed
        self.candidates = tuple(dict.fromkeys(int(c) for c in candidates))
        self.expected = expected
        self.trials = int(trials)
        self.recheck_every = int(recheck_every)
        self.max_recheck_every = int(max_recheck_every)
        self.drift = float(drift)
        self.gain = float(gain)
        self._clock = clock
        #: The thread count updates run with between comparisons (None until the first comparison).
        self.chosen: int | None = fixed if not self.candidates else None
        self._times: dict[int, list[float]] = {}
        self._plan: list[int] = []  # counts of the timed updates of the comparison in progress
        self._warmed_up = False
        self._since_check = 0
        self._reference = 0.0  # chosen count's median update time at the last comparison
        self._recent: list[float] = []
        #: Completed comparisons: (median seconds per candidate, chosen count), for inspection.
        self.history: list[tuple[dict[int, float], int]] = []

    @property
    def automatic(self) -> bool:
        """Whether the count is chosen from measurements (else it is fixed or left to torch)."""
        return len(self.candidates) > 1

    def next_threads(self) -> int | None:
        """The thread count for the next update (None: leave torch's setting)."""
        if not self.automatic:
            return self.fixed
        if not self._warmed_up:
            return self.candidates[0]  # the first update allocates and builds: not timed
        if not self._plan and self.chosen is None:
            self._start_comparison()
        return self._plan[0] if self._plan else self.chosen

    def record(self, threads: int | None, seconds: float) -> None:
        """Note that an update ran with `threads` threads in `seconds`."""
        if not self.automatic or threads is None:
            return
        if not self._warmed_up:
            self._warmed_up = True
            return
        if self._plan:
            if threads == self._plan[0]:
                self._plan.pop(0)
                self._times.setdefault(threads, []).append(seconds)
                self._maybe_cut_short()
                if not self._plan:
                    self._finish_comparison()
            return
        self._since_check += 1
        self._recent = (self._recent + [seconds])[-self.trials:]
        drifted = (len(self._recent) == self.trials
                   and statistics.median(self._recent) > self.drift * self._reference)
        if drifted or self._since_check >= self.recheck_every:
            self._start_comparison()

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Run the block (one update) with the chosen thread count, time it, and restore torch's
        count afterwards; an update that raises is not timed."""
        current = torch.get_num_threads()
        if self.automatic and self.expected is not None and current != self.expected:
            yield  # the user set torch's thread count themselves: theirs wins
            return
        threads = self.next_threads()
        if threads is not None and threads != current:
            torch.set_num_threads(threads)
        start = self._clock()
        try:
            yield
        finally:
            if threads is not None and threads != current:
                torch.set_num_threads(current)
        self.record(threads, self._clock() - start)

    # -- comparisons

    def _start_comparison(self) -> None:
        self._times = {}
        # Interleaved, so that a change of load in between weighs on every candidate alike.
        self._plan = [c for _ in range(self.trials) for c in self.candidates]
        self._recent = []
        self._since_check = 0

    def _maybe_cut_short(self) -> None:
        """Stop timing a count that is already twice as slow as the fastest (each more update
        with it costs that much)."""
        if any(len(self._times.get(c, ())) == 0 for c in self.candidates):
            return
        firsts = {c: min(times) for c, times in self._times.items()}
        best = min(firsts.values())
        slow = {c for c, t in firsts.items() if t > 2.0 * best}
        if slow:
            self._plan = [c for c in self._plan if c not in slow]

    def _finish_comparison(self) -> None:
        medians = {c: statistics.median(t) for c, t in self._times.items() if t}
        chosen = min(self.candidates)
        for count in sorted(medians):
            if count != chosen and medians[count] < self.gain * medians[chosen]:
                chosen = count
        if chosen == self.chosen:
            self.recheck_every = min(self.max_recheck_every, self.recheck_every * 2)
        self.chosen = chosen
        self._reference = medians[chosen]
        self.history.append((medians, chosen))

    def __repr__(self) -> str:
        if not self.automatic:
            return f"UpdateThreads(fixed={self.fixed})"
        return f"UpdateThreads(candidates={self.candidates}, chosen={self.chosen})"


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1

"""Fuzz the config surface end to end and count what does not end cleanly (issue 33, items 4, 6, 7).

For each algorithm and each option it accepts, bad values (wrong types, NaN, infinities,
negatives, huge values) are set through the option's section method and validated in this
process; a config that is accepted is then built and trained for one tiny iteration in a
forked child (its own process group, killed with any processes it started) with a time bound.
Options in RUN_LENGTH_OPTIONS ask for long iterations by design and are only validated.
Each case ends as one of:

* ``error``: an error whose message names the key (a ConfigError at best): the wanted outcome;
* ``diverged``: a NonFiniteUpdateError (training diverged on an extreme value RLlib accepts,
  e.g. lr=1e12; its message names lr, grad_clip, clip_rewards);
* ``ran``: the config built and trained one iteration (fine for values RLlib accepts);
* ``raw``: any other exception (one that does not name the key);
* ``hang``: the child did not finish within the bound (killed).

Usage: python benchmarks/config_fuzz_probe.py [--algos PPO,DQN] [--timeout 40] [--sample N]
prints a JSON summary (counts per outcome, the cases that were not ``error`` or ``ran``, and the
accepted ones, to judge by hand).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback

NAN, INF = float("nan"), float("inf")

#: Values tried on every option (the brief: wrong types, NaN/inf, negatives, huge values).
BAD_VALUES: list = ["fast", [1, "x"], {"v": 1}, NAN, INF, -INF, -1, -1e308, 1e308, 2 ** 70, 10 ** 12, 10 ** 4]

#: The tiny settings each algorithm trains one iteration with (set before the fuzzed key).
BASES: dict[str, dict] = {
    "PPO": {"env": "CartPole-v1", "train_batch_size": 64, "minibatch_size": 32, "num_epochs": 1},
    "DQN": {"env": "CartPole-v1", "train_batch_size": 16, "num_steps_sampled_before_learning_starts": 32,
            "min_sample_timesteps_per_iteration": 32},
    "SAC": {"env": "Pendulum-v1", "train_batch_size": 16, "num_steps_sampled_before_learning_starts": 32,
            "min_sample_timesteps_per_iteration": 32},
    "IMPALA": {"env": "CartPole-v1", "train_batch_size": 64},
    "APPO": {"env": "CartPole-v1", "train_batch_size": 64},
    "A2C": {"env": "CartPole-v1", "train_batch_size": 64},
    "DDPG": {"env": "Pendulum-v1", "train_batch_size": 16, "num_steps_sampled_before_learning_starts": 32,
             "min_sample_timesteps_per_iteration": 32},
}

#: Algorithms without tiny settings above (offline ones need data) are only set and validated.

#: Options that make an iteration last as long as asked (a request, not a hang): huge values
#: of these are expected to run long, and the probe gives them no stage 2.
RUN_LENGTH_OPTIONS = {"min_time_s_per_iteration", "min_sample_timesteps_per_iteration",
                      "min_train_timesteps_per_iteration", "num_steps_sampled_before_learning_starts",
                      "evaluation_duration", "evaluation_interval"}


def show_value(value) -> str:
    """A case's value for a report line."""
    return repr(value) if not isinstance(value, int) or abs(value) < 10 ** 30 else f"<int of {value.bit_length()} bits>"


def config_class(algo: str):
    """The config class of algorithm `algo`."""
    from rlx.algorithms.registry import get_algorithm_class

    return get_algorithm_class(algo).get_default_config().__class__


def cases(algos: list[str]) -> list[tuple[str, str, object]]:
    """(algo, option, value) for every option with a section and every bad value."""
    out = []
    for algo in algos:
        cls = config_class(algo)
        for opt in cls._table.options.values():
            if not opt.sections or opt.later or opt.tf_only or opt.name.startswith("callbacks_"):
                continue
            for value in BAD_VALUES:
                out.append((algo, opt.name, value))
    return out


def _configure(algo: str, name: str, value):
    """A config of `algo` with the base settings and then `name=value` through its section."""
    from rlx.algorithms.config_options import Option  # noqa: F401  (imports rlx)

    cls = config_class(algo)
    config = cls()
    for key, base in BASES.get(algo, {"env": "CartPole-v1"}).items():
        if key != name:
            config.update_from_dict({key: base})
    section = cls._table.options[name].sections[0]
    getattr(config, section)(**{name: value})
    return config


def _run_case(algo: str, name: str, value, stage: int, queue, workdir: str) -> None:
    """Child: configure (and with stage 2 build and train); put (outcome, detail) on `queue`."""
    os.setpgrp()  # its own process group, so a hang's runner processes are killed with it
    os.chdir(workdir)  # where values such as output='fast' write

    try:
        import torch

        torch.set_num_threads(1)
        config = _configure(algo, name, value)
        config.validate()
        if stage == 2 and name not in RUN_LENGTH_OPTIONS:
            algo_obj = config.build()
            try:
                algo_obj.train()
            finally:
                algo_obj.stop()
        queue.put(("ran", ""))
    except BaseException as err:  # noqa: BLE001 - every ending is what the probe counts
        tb = traceback.format_exc().strip().splitlines()[-3:]
        queue.put((classify(name, err), f"{type(err).__name__}: {err}"[:300] + " | " + " / ".join(tb)[:300]))


def classify(name: str, err: BaseException) -> str:
    """'error' for an error whose message names the key (`input_` as 'input'), 'diverged' for
    a NonFiniteUpdateError (training diverged on an extreme but valid value; its message names
    lr, grad_clip, ...), else 'raw'."""
    if name.rstrip("_") in str(err):
        return "error"
    return "diverged" if type(err).__name__ == "NonFiniteUpdateError" else "raw"


def probe(case: tuple[str, str, object], stage: int, timeout: float) -> tuple[str, str, float]:
    """Run one case in a forked child bounded by `timeout` seconds."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="config-fuzz-")
    proc = ctx.Process(target=_run_case, args=(*case, stage, queue, workdir))
    proc.start()
    try:
        outcome, detail = queue.get(timeout=timeout)
    except Exception:  # noqa: BLE001 - queue.Empty: no answer in time
        outcome, detail = ("hang", f"no answer within {timeout:.0f} s") if proc.is_alive() else \
            ("raw", f"child died (exit code {proc.exitcode})")
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and any runner processes it started
    except ProcessLookupError:
        pass
    proc.join(5)
    shutil.rmtree(workdir, ignore_errors=True)
    return outcome, detail, time.monotonic() - start


def configure_only(case: tuple[str, str, object]) -> tuple[str, str]:
    """Stage 1, in this process: set the value and validate; ('ran', '') when accepted."""
    try:
        _configure(*case).validate()
        return "ran", ""
    except Exception as err:  # noqa: BLE001 - what the probe counts
        return classify(case[1], err), f"{type(err).__name__}: {err}"[:300]


def main() -> None:
    """Run the probe and print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--algos", default="PPO,DQN,SAC")
    parser.add_argument("--timeout", type=float, default=40.0)
    parser.add_argument("--sample", type=int, default=0, help="a fixed-seed sample of this many cases (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import rlx.algorithms  # noqa: F401  (import before forking so each child starts warm)
    import torch  # noqa: F401

    all_cases = cases(args.algos.split(","))
    if args.sample:
        all_cases = random.Random(args.seed).sample(all_cases, min(args.sample, len(all_cases)))
    counts: dict[str, int] = {}
    bad: list[dict] = []
    accepted: list[str] = []
    for case in all_cases:
        outcome, detail = configure_only(case)
        if outcome == "ran":
            outcome, detail, _ = probe(case, 2, args.timeout)
            if outcome == "ran":
                accepted.append(f"{case[0]}.{case[1]}={case[2]!r}")
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome in ("raw", "hang"):
            bad.append({"case": f"{case[0]}.{case[1]}={case[2]!r}", "outcome": outcome, "detail": detail})
        print(f"{outcome:6s} {case[0]}.{case[1]}={case[2]!r} {detail[:160]}", file=sys.stderr, flush=True)
    print(json.dumps({"cases": len(all_cases), "counts": counts, "problems": bad, "accepted": accepted}))


if __name__ == "__main__":
    main()

"""Training throughput while remote EnvRunners are killed, as a ratio to no kills.

PPO on CartPole-v1 with remote EnvRunner processes and restart_failed_env_runners=True trains
for SECONDS twice: once undisturbed, once while a thread SIGKILLs one runner process every
KILL_EVERY_S seconds (round robin over the runners in service). Failed runners
are restarted beside training; the healthy ones keep sampling. Prints one JSON object: env
steps/s of both runs, their ratio (goal >= 0.6), the slowest train() of each run, the kills
made and the restarts the results reported.

Usage: python benchmarks/runner_kill_throughput.py [SECONDS] [KILL_EVERY_S] [NUM_ENV_RUNNERS]
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any


def _build(num_env_runners: int) -> Any:
    from rlx.algorithms.ppo import PPOConfig

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=4, rollout_fragment_length="auto",
                     env_runner_backend="process")
        .training(train_batch_size=2000, minibatch_size=500, num_epochs=1)
        .fault_tolerance(restart_failed_env_runners=True)
        .debugging(seed=0)
    )
    return config.build()


def _killer(algo: Any, every_s: float, stop: threading.Event, kills: list[float]) -> None:
    """SIGKILL one runner process in service every `every_s` seconds (round robin)."""
    turn = 0
    group = algo.env_runner_group
    while not stop.wait(every_s):
        # Runners in service only: one still being restarted has not sampled yet.
        up = set(group.healthy_worker_ids())
        live = [h for h in group.remote_workers() if h.index in up and getattr(h, "pid", None) and _alive(h.pid)]
        if not live:
            continue
        victim = live[turn % len(live)]
        turn += 1
        try:
            os.kill(victim.pid, signal.SIGKILL)
            kills.append(time.monotonic())
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run(seconds: float, kill_every_s: float | None, num_env_runners: int) -> dict[str, Any]:
    """Train for `seconds` (killing a runner every `kill_every_s` s when set); the figures."""
    algo = _build(num_env_runners)
    try:
        algo.train()  # warm-up: runners built and sampling, torch warmed
        stop, kills = threading.Event(), []
        killer = None
        if kill_every_s:
            killer = threading.Thread(target=_killer, args=(algo, kill_every_s, stop, kills), daemon=True)
        steps, slowest, iterations, restarts = 0, 0.0, 0, 0
        start = time.perf_counter()
        if killer is not None:
            killer.start()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            result = algo.train()
            slowest = max(slowest, time.perf_counter() - t0)
            steps += int(result["num_env_steps_sampled_this_iter"])
            iterations += 1
            restarts = int(result.get("fault_tolerance", {}).get("num_remote_worker_restarts", 0))
        elapsed = time.perf_counter() - start
        stop.set()
        if killer is not None:
            killer.join(timeout=kill_every_s or 1)
        return {"env_steps_per_s": steps / elapsed, "iterations": iterations, "slowest_train_s": slowest,
                "kills": len(kills), "restarts_reported": restarts}
    finally:
        algo.stop()


def main() -> None:
    import torch

    torch.set_num_threads(1)
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    kill_every = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    runners = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    load_before = os.getloadavg()
    calm = run(seconds, None, runners)
    killed = run(seconds, kill_every, runners)
    print(json.dumps({
        "benchmark": "runner_kill_throughput", "env": "CartPole-v1", "num_env_runners": runners,
        "seconds": seconds, "kill_every_s": kill_every,
        "no_kills_env_steps_per_s": round(calm["env_steps_per_s"]),
        "with_kills_env_steps_per_s": round(killed["env_steps_per_s"]),
        "ratio": round(killed["env_steps_per_s"] / calm["env_steps_per_s"], 3),
        "no_kills_slowest_train_s": round(calm["slowest_train_s"], 2),
        "with_kills_slowest_train_s": round(killed["slowest_train_s"], 2),
        "kills": killed["kills"], "restarts_reported": killed["restarts_reported"],
        "iterations": {"no_kills": calm["iterations"], "with_kills": killed["iterations"]},
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }), flush=True)


if __name__ == "__main__":
    main()

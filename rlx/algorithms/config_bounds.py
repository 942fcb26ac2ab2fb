"""Limits a config's sizes must respect on this machine (issue 33, item 4).

A count of processes or rows that the machine cannot hold can pass the per-option checks (any
int is a valid `num_env_runners` to RLlib) and then make `build()` start processes one by one
or allocate terabytes. AlgorithmConfig.validate() calls `check_machine_bounds`, which refuses:

* more worker processes (or threads) than `MAX_PROCESSES_PER_CPU` times the CPUs for rlx's own
  backends: EnvRunners on the "process" and "thread" backends, learner processes, sub-envs in
  processes (remote_worker_envs, gym_env_vectorize_mode="async"), and the torch thread counts
  rlx sets from torch_num_threads / num_cpus_per_learner / num_cpus_per_env_runner. Counts
  placed by Ray (the "ray" backend) are left to Ray, which refuses what its cluster cannot place;
* buffers of rows (train batches, sampled fragments, replay capacity) that cannot fit in this
  machine's memory even at `MIN_ROW_BYTES` a row, and more sub-envs than fit at
  `MIN_ENV_BYTES` each.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Mapping

from rlx.algorithms.config_options import integer
from rlx.utils.errors import ConfigError

#: rlx's own backends start at most this many processes (or threads) per CPU.
MAX_PROCESSES_PER_CPU = 64
#: A row of a batch takes at least this much memory (an observation, a reward, flags, ids).
MIN_ROW_BYTES = 16
#: A sub-env takes at least this much memory (the env object, its spaces and buffers).
MIN_ENV_BYTES = 64 * 1024


def machine_memory_bytes() -> int | None:
    """This machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def max_local_processes() -> int:
    """The most worker processes rlx's own backends start on this machine."""
    return MAX_PROCESSES_PER_CPU * (os.cpu_count() or 1)


def runners_placed_by_ray(backend: str) -> bool:
    """Whether EnvRunners of `env_runner_backend=backend` are Ray actors ('auto': when Ray is
    initialised; Ray is never imported here)."""
    if backend == "ray":
        return True
    ray = sys.modules.get("ray")
    return backend == "auto" and ray is not None and bool(getattr(ray, "is_initialized", lambda: False)())


_RAY_HINT = (", or run the EnvRunners as Ray actors on a cluster (ray.init(...) and "
             "env_runners(env_runner_backend='ray')), where Ray decides what it can place")


def check_process_count(key: str, count: int, what: str, hint: str = _RAY_HINT) -> None:
    """Refuse `count` processes (or threads) for `key` beyond what this machine holds; `hint`
    ends the message's advice."""
    limit = max_local_processes()
    if count > limit:
        raise ConfigError(
            f"'{key}'={count} asks for {count} {what}, more than this machine can hold: rlx starts at most "
            f"{limit} ({MAX_PROCESSES_PER_CPU} per CPU, {os.cpu_count() or 1} CPUs) on its own backends. Use a "
            f"value <= {limit}{hint}."
        )


def check_rows(key: str, rows: int, what: str = "rows", per_unit: int = 1, row_bytes: int = MIN_ROW_BYTES) -> None:
    """Refuse a buffer of `rows` rows for `key` that cannot fit in this machine's memory at
    `row_bytes` each (a lower bound); the key's value is `rows / per_unit` (e.g. a fragment
    length times the sub-envs)."""
    memory = machine_memory_bytes()
    if memory is None or rows * row_bytes <= memory:
        return
    raise ConfigError(
        f"'{key}' asks for a buffer of {rows} {what}, which needs at least {_bytes(rows * row_bytes)} "
        f"({row_bytes} bytes each at the very least), more than this machine's {_bytes(memory)} of memory. "
        f"Use a value <= {memory // row_bytes // max(1, per_unit)}."
    )


def rows_option(min_value: int = 1, what: str = "rows", row_bytes: int = MIN_ROW_BYTES) -> Callable[[str, Any], int]:
    """An option check for an integer that sizes a buffer of `what`: at least `min_value`, and
    no more than fit in this machine's memory at `row_bytes` each (see check_rows)."""
    as_int = integer(min_value)

    def check(name: str, value: Any) -> int:
        rows = as_int(name, value)
        check_rows(name, rows, what, row_bytes=row_bytes)
        return rows

    return check


def check_machine_bounds(values: Mapping[str, Any], total_train_batch_size: int, sub_envs_in_processes: bool) -> None:
    """Refuse the process counts and buffer sizes of config `values` this machine cannot hold
    (see the module docstring)."""
    if not runners_placed_by_ray(str(values["env_runner_backend"])):
        for key in ("num_env_runners", "evaluation_num_env_runners"):
            check_process_count(key, int(values[key]), "EnvRunner workers")
    check_process_count("num_learners", int(values["num_learners"]), "learner processes",
                        hint=" (rlx's learner processes run on this machine)")
    # torch threads: rlx sets each of these as a process's torch thread count.
    threads = [("torch_num_threads", values["torch_num_threads"]), ("num_cpus_per_learner", values["num_cpus_per_learner"])]
    if int(values["num_env_runners"]) > 0 and not runners_placed_by_ray(str(values["env_runner_backend"])):
        threads.append(("num_cpus_per_env_runner", values["num_cpus_per_env_runner"]))
    for key, value in threads:
        if value is not None:
            check_process_count(key, int(value), "torch threads per process",
                                hint=" (rlx makes it the torch thread count of a process on this machine)")
    num_envs = int(values["num_envs_per_env_runner"])
    if sub_envs_in_processes:
        check_process_count("num_envs_per_env_runner", num_envs,
                            "sub-env processes per EnvRunner (remote_worker_envs or gym_env_vectorize_mode='async')",
                            hint=", or spread the sub-envs over more EnvRunners")
    memory = machine_memory_bytes()
    if memory is not None and num_envs * MIN_ENV_BYTES > memory:
        raise ConfigError(
            f"'num_envs_per_env_runner'={num_envs} sub-envs need at least {_bytes(num_envs * MIN_ENV_BYTES)} "
            f"({MIN_ENV_BYTES // 1024} KiB each at the very least), more than this machine's {_bytes(memory)} of "
            f"memory. Use a value <= {memory // MIN_ENV_BYTES}, or spread the sub-envs over more EnvRunners."
        )
    fragment = values["rollout_fragment_length"]
    if fragment != "auto":  # checked first: some algorithms (DD-PPO) derive the train batch from it
        check_rows("rollout_fragment_length", int(fragment) * num_envs,
                   f"rows per sample() (rollout_fragment_length x {num_envs} sub-envs)", per_unit=num_envs)
    batch_key = "train_batch_size_per_learner" if values["train_batch_size_per_learner"] is not None \
        else "train_batch_size"
    check_rows(batch_key, int(total_train_batch_size), "rows (the train batch)")
    capacity = (values.get("replay_buffer_config") or {}).get("capacity")
    if isinstance(capacity, int) and not isinstance(capacity, bool):
        check_rows("replay_buffer_config['capacity']", capacity, "rows (the replay buffer)")


def _bytes(n: int) -> str:
    """`n` bytes in the largest binary unit that keeps the number >= 1, e.g. '14.6 TiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} EiB"  # pragma: no cover - the loop returns

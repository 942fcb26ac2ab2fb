"""Weight sync to Ray EnvRunner actors: one ray.put per sync (what EnvRunnerGroup does) against a
copy of the weights per runner (what it did before), for 1, 4 and 16 runners and 8 MB of weights.

Each runner is a RayEnvRunner actor (rlx.env.ray_env_runner) holding a stand-in runner whose
set_weights reads every array (so the transfer is complete); the calls are the group's own
SetWeightsCall. Per runner count and method, REPEATS syncs are timed: `driver_s` is the time the
driver spends sending (until every call is submitted), `total_s` until every runner has applied
the weights; medians are printed as one JSON object, with the load. On one machine the object
store is shared memory, so per-runner copies cost the driver serialising N x 8 MB; on a cluster
they also cross the network N times from the driver, where one put crosses once per node.

Usage: python benchmarks/weight_sync.py [MEGABYTES] [REPEATS] [RUNNER_COUNTS...]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from concurrent.futures import wait
from types import SimpleNamespace

import numpy as np


class WeightSink:
    """A stand-in EnvRunner: set_weights reads every array it gets."""

    def __init__(self, config, worker_index, num_workers, module_spec):
        self.checksum = 0.0

    def set_weights(self, weights, global_vars=None, weights_seq_no=None):
        self.checksum = float(sum(float(w[::4096].sum()) for w in weights.values()))

    def stop(self):
        pass


def _sync(handles, weights, one_put: bool, seq_no: int) -> tuple[float, float]:
    import ray

    from rlx.env.runner_group.calls import SetWeightsCall

    started = time.perf_counter()
    payload = ray.put(weights) if one_put else weights
    futures = [h.submit(SetWeightsCall(payload, None, seq_no)) for h in handles]
    sent = time.perf_counter()
    wait(futures)
    for future in futures:
        future.result()
    return sent - started, time.perf_counter() - started


def main(megabytes: float = 8.0, repeats: int = 5, counts: tuple[int, ...] = (1, 4, 16)) -> dict:
    import ray

    from rlx.env.ray_env_runner import RayEnvRunner

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    n = int(megabytes * 2**20 / 4 / 2)
    weights = {"layer0": np.random.rand(n).astype(np.float32), "layer1": np.random.rand(n).astype(np.float32)}
    config = SimpleNamespace(num_cpus_per_env_runner=0, num_gpus_per_env_runner=0, custom_resources_per_env_runner={},
                             placement_strategy="PACK")
    started = time.perf_counter()
    handles = [RayEnvRunner(WeightSink, config, i, max(counts)) for i in range(1, max(counts) + 1)]
    for handle in handles:
        handle.wait_ready()
    out = {"benchmark": "weight_sync", "megabytes": megabytes, "repeats": repeats,
           "actors_started_s": round(time.perf_counter() - started, 1), "results": []}
    try:
        seq_no = 0
        for count in counts:
            for one_put in (False, True):
                _sync(handles[:count], weights, one_put, seq_no)  # warm-up
                driver, total = [], []
                for _ in range(repeats):
                    seq_no += 1
                    d, t = _sync(handles[:count], weights, one_put, seq_no)
                    driver.append(d)
                    total.append(t)
                out["results"].append({"runners": count, "method": "one ray.put" if one_put else "copy per runner",
                                       "driver_ms": round(1000 * statistics.median(driver), 1),
                                       "total_ms": round(1000 * statistics.median(total), 1),
                                       "driver_serialises_mb": megabytes * (1 if one_put else count)})
    finally:
        for handle in handles:
            handle.stop()
        ray.shutdown()
    out["loadavg"] = open("/proc/loadavg").read().split()[:3]
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    mb = float(args[0]) if args else 8.0
    reps = int(args[1]) if len(args) > 1 else 5
    runner_counts = tuple(int(a) for a in args[2:]) or (1, 4, 16)
    print(json.dumps(main(mb, reps, runner_counts)))

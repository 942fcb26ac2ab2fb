"""IMPALA/APPO's aggregator actors start Ray when it is not running (issue 35).

RLlib 2.60 creates its aggregator actors (`num_aggregator_actors_per_learner > 0`) as Ray actors,
which starts a local Ray instance through Ray's auto-init when none runs (RLlib's
`algorithms/appo_custom_algorithm_w_shared_data_actor.py` runs so without Tune). rlx's
AggregatorPool does the same instead of refusing. Ray is replaced by a recording stand-in here
(no Ray start).
"""
from __future__ import annotations

import sys
import types

from rlx.algorithms.impala.aggregators import AggregatorPool


def fake_ray(initialized: bool) -> types.ModuleType:
    """A stand-in for the `ray` module that records init() calls and the actors made."""
    ray = types.ModuleType("ray")
    ray.calls = []
    ray.state = {"initialized": initialized}

    def init(*args, **kwargs):
        ray.calls.append("init")
        ray.state["initialized"] = True

    class Handle:
        def __init__(self, index):
            self.where = types.SimpleNamespace(remote=lambda: {"actor": index})

    class ActorClass:
        def options(self, **kwargs):
            ray.calls.append(("options", kwargs["num_cpus"]))
            return self

        def remote(self):
            assert ray.state["initialized"], "an actor was made before Ray was started"
            ray.calls.append("actor")
            return Handle(len([c for c in ray.calls if c == "actor"]))

    ray.init = init
    ray.is_initialized = lambda: ray.state["initialized"]
    ray.remote = lambda cls: ActorClass()
    ray.get = lambda refs, timeout=None: list(refs)
    ray.kill = lambda actor, no_restart=True: ray.calls.append("kill")
    ray.exceptions = types.SimpleNamespace(GetTimeoutError=TimeoutError)
    return ray


def test_the_pool_starts_ray_before_its_actors_when_ray_is_not_running(monkeypatch):
    ray = fake_ray(initialized=False)
    monkeypatch.setitem(sys.modules, "ray", ray)
    pool = AggregatorPool(2)
    assert ray.calls[0] == "init" and ray.calls.count("actor") == 2
    assert len(pool) == 2 and pool.locations == [{"actor": 1}, {"actor": 2}]
    pool.stop()
    assert ray.calls.count("kill") == 2 and len(pool) == 0


def test_the_pool_uses_the_running_ray_instance(monkeypatch):
    ray = fake_ray(initialized=True)
    monkeypatch.setitem(sys.modules, "ray", ray)
    AggregatorPool(1, num_cpus=0.5)
    assert "init" not in ray.calls and ("options", 0.5) in ray.calls

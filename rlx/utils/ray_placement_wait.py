"""Waiting for a Ray placement group to be placed, with a bound and a message that says why not.

Ray keeps a placement group pending for as long as its cluster cannot hold it (forever on a
fixed cluster that is too small, until new nodes come up on an autoscaling one). rlx waits as
RLlib does, but says early what it waits for (a warning naming the request and what the
cluster has) and gives up after a bound with an error that names the settings to change.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from rlx.utils.errors import RLXError

logger = logging.getLogger("rlx")

#: Seconds before the warning that a placement group is still pending.
WARN_AFTER_S = 10.0


class PlacementTimeoutError(RLXError, TimeoutError):
    """A placement group was not placed within its bound: the cluster lacks the resources."""


def _totals(bundles: Sequence[dict[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for bundle in bundles:
        for name, amount in bundle.items():
            totals[name] = totals.get(name, 0.0) + float(amount)
    return totals


def _describe(resources: dict[str, float]) -> str:
    return ", ".join(f"{amount:g} {name}" for name, amount in sorted(resources.items())) or "nothing"


def wait_until_placed(pg: Any, bundles: Sequence[dict[str, float]], what: str, settings: str,
                      timeout_s: float) -> None:
    """Block until Ray has placed `pg` (made of `bundles`, for `what`, e.g. "the 2 learner
    actors"); warn after WARN_AFTER_S and raise PlacementTimeoutError after `timeout_s`, naming
    `settings` (the options that size the request) and what the cluster has."""
    import ray

    ready = pg.ready()
    try:
        ray.get(ready, timeout=min(WARN_AFTER_S, timeout_s))
        return
    except ray.exceptions.GetTimeoutError:
        pass
    needed = _totals(bundles)
    total, free = ray.cluster_resources(), ray.available_resources()
    short = {k: v for k, v in needed.items() if v > float(total.get(k, 0.0)) + 1e-9}
    situation = (f"asks for {_describe(needed)} in {len(bundles)} bundle(s), but the Ray cluster has "
                 f"{_describe({k: float(total.get(k, 0.0)) for k in needed})} in all"
                 + (" (it can never hold this request unless nodes are added)" if short else
                    f", of which {_describe({k: float(free.get(k, 0.0)) for k in needed})} are free now "
                    "(other actors hold the rest)"))
    logger.warning("Waiting up to %g s for Ray to place %s: the request %s.", timeout_s, what, situation)
    try:
        ray.get(ready, timeout=max(0.0, timeout_s - WARN_AFTER_S))
    except ray.exceptions.GetTimeoutError:
        raise PlacementTimeoutError(
            f"Ray did not place {what} within {timeout_s:g} s: the request {situation}. Ask for less "
            f"({settings}), start Ray with more logical CPUs on this machine (ray.init(num_cpus=N): Ray only "
            "counts them), or add nodes to the cluster."
        ) from None

"""Placement groups for the Ray EnvRunners of one EnvRunnerGroup (rlx.env.ray_env_runner).

The remote runners of a group share one placement group with a bundle per runner and the
config's placement_strategy, so their resources are reserved together and a restarted runner
gets its predecessor's bundle back; inside a Ray Tune trial the trial's own placement group is
used instead. Ray is imported only when a placement group is made or looked up.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from rlx.env.config_view import EnvConfig

logger = logging.getLogger("rlx")


class SharedPlacementGroup:
    """One placement group for the remote runners of one EnvRunnerGroup: bundle i-1 holds
    runner i, so a restarted runner takes its predecessor's place. Removed once the last
    runner placed in it has stopped."""

    def __init__(self, pg: Any, num_bundles: int):
        self.pg = pg
        self.num_bundles = num_bundles
        self.occupied: set[int] = set()


#: id(config) -> the placement groups of the runners built from that config object. A group
#: holds each runner index once; a second group built from the same config gets its own.
_placement_groups: dict[int, list[SharedPlacementGroup]] = {}
_placement_groups_lock = threading.Lock()


def runner_bundle(config: EnvConfig) -> dict[str, float]:
    """The resources one runner asks for (CPUs, GPUs, custom resources; none that are 0)."""
    bundle = {"CPU": float(config.num_cpus_per_env_runner or 0), "GPU": float(config.num_gpus_per_env_runner or 0)}
    bundle.update({k: float(v) for k, v in (config.custom_resources_per_env_runner or {}).items()})
    return {k: v for k, v in bundle.items() if v > 0}


def acquire_placement_group(config: EnvConfig, index: int, num_workers: int) -> SharedPlacementGroup | None:
    """The placement group for runner `index` built from `config` (created on first use), or
    None when the runners ask for no resources (Ray refuses empty bundles)."""
    bundle = runner_bundle(config)
    if not bundle or not 1 <= index <= num_workers:
        return None
    from ray.util.placement_group import placement_group

    with _placement_groups_lock:
        shared_list = _placement_groups.setdefault(id(config), [])
        for shared in shared_list:
            if index <= shared.num_bundles and index not in shared.occupied:
                break
        else:
            strategy = str(config.placement_strategy or "PACK")
            pg = placement_group([dict(bundle) for _ in range(num_workers)], strategy=strategy)
            logger.info("Reserved a %s placement group of %d bundle(s) %s for the Ray EnvRunners.",
                        strategy, num_workers, bundle)
            shared = SharedPlacementGroup(pg, num_workers)
            shared_list.append(shared)
        shared.occupied.add(index)
        return shared


def enclosing_placement_group(bundle_index: int) -> Any:
    """The placement group this process runs in (a Tune trial's), when it has bundle
    `bundle_index` (bundle 0 being the trial's own, then the training runners', then the
    evaluation runners', see rlx.algorithms.resources.trial_bundles); else None."""
    from ray.util import get_current_placement_group

    pg = get_current_placement_group()
    if pg is None or len(pg.bundle_specs) <= bundle_index:
        return None
    return pg


def release_placement_group(config: EnvConfig, index: int, shared: SharedPlacementGroup) -> None:
    """Runner `index` has stopped: free its bundle, and remove the placement group once it
    holds no runner."""
    with _placement_groups_lock:
        shared.occupied.discard(index)
        if shared.occupied:
            return
        shared_list = _placement_groups.get(id(config), [])
        if shared in shared_list:
            shared_list.remove(shared)
        if not shared_list:
            _placement_groups.pop(id(config), None)
    try:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(shared.pg)
    except Exception:  # Ray already shut down: the placement group went with it
        pass

"""The resources a config asks for: checked against what this machine (or Ray cluster) has,
and as the Ray placement bundles of one Tune trial.

Seed 003: "If you specify num_gpus and your machine does not have the required number of
GPUs available, a RuntimeError will be thrown". Fractional requests (0.2) need one GPU to
share. `_fake_gpus=True` simulates the GPUs on the CPU, for debugging GPU set-ups. Which device a
Learner then uses is `rlx.core.learner.device.learner_device`.
"""
from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlx.algorithms.algorithm_config import AlgorithmConfig


def trial_bundles(config: AlgorithmConfig) -> list[dict[str, float]] | None:
    """The Ray placement bundles of one trial of `config` (an AlgorithmConfig), in RLlib's order:

    - the Algorithm's own process: CPUs `num_cpus_for_main_process`, GPUs `num_gpus` (or
      `num_gpus_per_learner` for its own Learner when num_learners=0), and
      `custom_resources_for_main_process`;
    - one per remote training EnvRunner (`num_cpus_per_env_runner`, `num_gpus_per_env_runner`,
      `custom_resources_per_env_runner`);
    - one per evaluation EnvRunner, with the same settings as `evaluation_config` resolves them
      (e.g. evaluation runners that need another custom resource);
    - one per Learner (`num_cpus_per_learner` plus one CPU per aggregator actor,
      `num_gpus_per_learner`, `custom_resources_per_learner`), or with num_learners=0 one CPU
      per aggregator actor (`num_aggregator_actors_per_learner`).

    Ray runners and learners inside the trial take these bundles (rlx.env.ray_placement). Place
    them with `config.placement_strategy`. None when the config asks for no more than Tune's
    default (1 CPU).
    """
    c = config
    learners, aggregators = int(c.num_learners or 0), int(c.num_aggregator_actors_per_learner or 0)
    main_gpus = float(c.num_gpus or 0)
    if learners == 0:
        # The driver's own Learner trains on the main process's GPU(s).
        main_gpus = max(main_gpus, float(c.num_gpus_per_learner or 0))
    head = _nonzero({"CPU": float(c.num_cpus_for_main_process), "GPU": main_gpus,
                     **dict(c.custom_resources_for_main_process or {})})
    bundles = [head] + _runner_bundles(c, int(c.num_env_runners or 0))
    num_eval = int(c.evaluation_num_env_runners or 0)
    if num_eval:
        bundles += _runner_bundles(c.get_evaluation_config_object(), num_eval)
    if learners:
        learner = _nonzero({"CPU": float(c.num_cpus_per_learner) + aggregators,
                            "GPU": float(c.num_gpus_per_learner or 0), **dict(c.custom_resources_per_learner or {})})
        bundles += [learner] * learners if learner else []
    else:
        bundles += [{"CPU": 1.0}] * aggregators
    if len(bundles) == 1 and head == {"CPU": 1.0}:
        return None
    return bundles


def _runner_bundles(config: AlgorithmConfig, count: int) -> list[dict[str, float]]:
    """`count` bundles of one remote EnvRunner of `config` (none when a runner asks for nothing)."""
    runner = _nonzero({"CPU": float(config.num_cpus_per_env_runner), "GPU": float(config.num_gpus_per_env_runner or 0),
                       **dict(config.custom_resources_per_env_runner or {})})
    return [runner] * count if runner else []


def _nonzero(bundle: dict[str, float]) -> dict[str, float]:
    """The bundle without its zero amounts (Tune accepts an empty head bundle: a trial needing no CPU)."""
    return {k: float(v) for k, v in bundle.items() if v}


def available_gpus(backend: str = "process") -> float:
    """GPUs visible to torch here, or the Ray cluster's GPUs for the "ray" backend."""
    ray = sys.modules.get("ray")
    if backend == "ray" and ray is not None and ray.is_initialized():
        return float(ray.cluster_resources().get("GPU", 0.0))
    import torch

    return float(torch.cuda.device_count()) if torch.cuda.is_available() else 0.0


def check_gpu_request(config: AlgorithmConfig, backend: str = "process") -> None:
    """Raise RuntimeError, naming the setting, when the config asks for more GPUs than exist;
    with `_fake_gpus` nothing is checked and everything runs on the CPU."""
    if config._fake_gpus:
        return
    runners = int(config.num_env_runners)
    requests = [("num_gpus", float(config.num_gpus), 1),
                ("num_gpus_per_learner", float(config.num_gpus_per_learner), max(1, int(config.num_learners)))]
    if runners:
        requests.append(("num_gpus_per_env_runner", float(config.num_gpus_per_env_runner), runners))
    wanted = [(name, amount, count) for name, amount, count in requests if amount > 0]
    if not wanted:
        return
    have = available_gpus(backend)
    total = sum(amount * count for _, amount, count in wanted)
    if have < math.ceil(total - 1e-9):
        asked = " and ".join(f"{name}={amount:g}" + (f" x {count} runners" if count > 1 else "")
                             for name, amount, count in wanted)
        raise RuntimeError(
            f"{asked} asks for {total:g} GPU(s), but {'the Ray cluster' if backend == 'ray' else 'this machine'} "
            f"has {have:g}. Set num_gpus=0 (and num_gpus_per_env_runner=0) to run on the CPU, or "
            "_fake_gpus=True to simulate GPUs on the CPU for debugging."
        )

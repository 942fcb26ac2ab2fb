"""`Policy.learn_on_batch`: one update of a Policy's module by the Algorithm that trains it.

A Policy is a view of an EnvRunner's module; the weights it shows are trained by the
Algorithm's Learner. Every Algorithm registers itself here once it is built (weakly: a dropped
Algorithm is forgotten), so a Policy taken from `algo.get_policy()`, `worker.get_policy()` or
`worker.policy_map` finds the Algorithm whose local EnvRunner holds its module and updates
through that Algorithm's Learner, as RLlib's old-API custom training workflows do:

    batch = algo.workers.local_worker().sample()
    stats = algo.get_policy().learn_on_batch(batch)  # batch: a SampleBatch (rlx.env.runner.worker_view)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.sample_batch import MultiAgentBatch
from rlx.env.runner.flat_rows import is_flat, to_time_major, training_columns
from rlx.utils.errors import RLXError
from rlx.utils.registry import LIVE_ALGORITHMS

__all__ = ["register_algorithm", "learn_on_batch"]

#: LEARNER_STATS_KEY of RLlib: the learner's metrics in what learn_on_batch returns.
LEARNER_STATS_KEY = "learner_stats"

# The Algorithm registers every one built; this module only reads (and, for old callers, adds to) the set.
_ALGORITHMS = LIVE_ALGORITHMS


def register_algorithm(algorithm: Any) -> None:
    """Make `algorithm`'s Policies able to `learn_on_batch` (called once it is built)."""
    _ALGORITHMS.add(algorithm)


def _owner(module: Any) -> tuple[Any, str] | None:
    """(Algorithm, policy id) whose local EnvRunner runs `module`, or None."""
    for algo in list(_ALGORITHMS):
        runner = getattr(getattr(algo, "env_runner_group", None), "local_env_runner", None)
        if runner is None:
            continue
        learners = algo.learners
        for pid in learners:
            try:
                if learners.module_in(runner.module, pid) is module:
                    return algo, pid
            except KeyError:  # a module the runner does not hold (yet)
                continue
    return None


def learn_on_batch(policy: Any, samples: Any) -> dict[str, Any]:
    """Update `policy`'s module on `samples` with its Algorithm's Learner; return RLlib's
    fetches: {"learner_stats": the learner's metrics, "num_agent_steps_trained": rows}.

    `samples` is a batch from `worker.sample()`, or for off-policy algorithms (DQN, SAC, ...)
    a replayed one (`algo.local_replay_buffer.sample(n)`); off-policy Learners train on a
    sampled [T, B] batch as its one-step transitions, as RLlib's old-stack DQN policy does. A
    MultiAgentBatch contributes this policy's part. The old-API `on_learn_on_batch` callbacks
    run first, and the new weights reach the EnvRunners, as after a training step.
    """
    found = _owner(policy.module)
    if found is None:
        raise RLXError(
            "learn_on_batch() needs the Policy of a built Algorithm's local EnvRunner (algo.get_policy() or "
            "algo.workers.local_worker().get_policy()); this Policy's module is not trained by any live "
            "Algorithm (e.g. an evaluation runner's Policy, or a Policy over a copy of the module).")
    algo, policy_id = found
    batch = samples
    if hasattr(batch, "policy_batches"):
        if policy_id not in batch.policy_batches:
            raise KeyError(f"The MultiAgentBatch has no data for policy {policy_id!r} (it has "
                           f"{sorted(batch.policy_batches)}).")
        batch = batch.policy_batches[policy_id]
    if not isinstance(batch, dict) or not batch:
        raise TypeError(f"learn_on_batch() takes a SampleBatch or a dict of column arrays (e.g. from "
                        f"worker.sample()); got {type(samples).__name__}.")
    if not algo.learners.is_trainable(policy_id):
        raise RLXError(f"Policy {policy_id!r} is not in policies_to_train, so its Learner does not update it; "
                       "add it to config.multi_agent(policies_to_train=[...]).")
    if is_flat(batch):  # RLlib's flat rows (a RolloutWorker view's sample(), concat_samples of them)
        batch = training_columns(batch) if hasattr(algo, "local_replay_buffer") else to_time_major(batch)
    elif hasattr(algo, "local_replay_buffer") and _time_major(batch):
        batch = _transitions(batch, algo, policy_id)
    timestep = int(algo._counters.get("num_env_steps_sampled_lifetime", 0))
    rows = _num_rows(batch)
    metrics = algo.module_results(algo.learn_on_batch(MultiAgentBatch({policy_id: batch}, rows), timestep=timestep))
    metrics = metrics.get(policy_id, {})
    algo.sync_env_runner_weights()
    return {LEARNER_STATS_KEY: _plain(metrics), "num_agent_steps_trained": rows}


def _time_major(batch: dict) -> bool:
    """Whether `batch` is a sampled [T, B] batch (its rewards are 2-d)."""
    rewards = batch.get("rewards")
    return rewards is not None and np.ndim(rewards) == 2


def _transitions(batch: dict, algo: Any, policy_id: str) -> dict:
    """A sampled [T, B] batch as the one-step transitions [N] an off-policy Learner trains on
    (what a replayed batch with n_step=1 holds), without the rows no step was collected for."""
    module = algo.learners.module_in(algo.env_runner.module, policy_id)
    if getattr(module, "is_stateful", lambda: False)():
        raise RLXError("learn_on_batch() of a recurrent off-policy module takes replayed sequences: add the "
                       "sampled batch with algo.local_replay_buffer.add(batch, time_major=True) and pass "
                       "algo.local_replay_buffer.sample(algo.config.train_batch_size).")
    lead = np.shape(batch["rewards"])
    valid = np.asarray(batch["valid"], bool).reshape(-1) if batch.get("valid") is not None else None
    flat = {}
    for key, value in batch.items():
        if key == "valid" or np.shape(value)[:2] != lead:
            continue
        rows = np.asarray(value).reshape((-1,) + np.shape(value)[2:])
        flat[key] = rows[valid] if valid is not None else rows
    return flat


def _num_rows(batch: dict) -> int:
    """Rows the batch trains on: the valid cells of a sampled [T, B] batch, else its length."""
    if batch.get("valid") is not None:
        return int(np.asarray(batch["valid"]).sum())
    if _time_major(batch):
        return int(np.prod(np.shape(batch["rewards"])))
    return next((len(v) for v in batch.values() if np.ndim(v) >= 1), 0)


def _plain(metrics: dict) -> dict:
    """Metric values as Python floats where they are scalar tensors or arrays."""
    out = {}
    for key, value in metrics.items():
        is_scalar = getattr(value, "ndim", None) == 0 and hasattr(value, "item")
        out[key] = float(value.item()) if is_scalar else value
    return out

"""The calls an EnvRunnerGroup ships to its remote runners.

Module-level classes and functions, so they pickle by reference to worker processes and Ray
actors (the names stay importable from rlx.env.env_runner_group too). Each is called with the
runner on the runner's own process or thread.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from rlx.core.remote_fragment import RemoteFragment
from rlx.env.batch_compression import compress_observations


class SampleCall:
    """One synchronous sample(): the batch (observations compressed when asked) and the
    runner's reset count."""

    def __init__(self, num_timesteps: int | None, explore: bool | None, compress: bool = False):
        self.num_timesteps = num_timesteps
        self.explore = explore
        self.compress = compress

    def __call__(self, runner: Any) -> tuple[dict[str, np.ndarray], int]:
        batch = runner.sample(num_timesteps=self.num_timesteps, explore=self.explore)
        return (compress_observations(batch) if self.compress else batch), runner.num_resets


class AsyncSampleCall:
    """One asynchronous sample(): the fragment with the weight version that produced it, the
    runner's reset count and metrics, and (when asked) its observation filter's new statistics."""

    def __init__(self, explore: bool | None, with_filter_delta: bool, compress: bool = False):
        self.explore = explore
        self.with_filter_delta = with_filter_delta
        self.compress = compress

    def __call__(self, runner: Any) -> tuple[Any, int, int, dict[str, Any], Any]:
        batch = runner.sample(explore=self.explore)
        # The algorithm may handle the fragment here, on the runner (e.g. IMPALA puts it in Ray's
        # object store, A3C computes its gradients): the driver then gets the hook's RemoteFragment.
        hook = getattr(runner.config, "runner_fragment_hook", None)
        if hook is not None:
            batch = hook(runner, batch)
        if self.compress and not isinstance(batch, RemoteFragment):
            batch = compress_observations(batch)
        delta = runner.filter.pop_delta() if self.with_filter_delta else None
        return batch, getattr(runner, "weights_seq_no", 0), runner.num_resets, runner.get_metrics(), delta


def shared_value(value: Any) -> Any:
    """`value` itself, or what it refers to when it is a Ray ObjectRef: the group puts what
    every Ray runner gets (weights) into the object store once, and each runner reads it there."""
    ray = sys.modules.get("ray")
    if ray is not None and isinstance(value, ray.ObjectRef):
        return ray.get(value)
    return value


class SetWeightsCall:
    """Set the runner's weights (and global vars), tagged with their version `seq_no`. The
    weights may be a Ray ObjectRef (see `shared_value`)."""

    def __init__(self, weights: Any, global_vars: dict | None, seq_no: int | None):
        self.weights, self.global_vars, self.seq_no = weights, global_vars, seq_no

    def __call__(self, runner: Any) -> None:
        runner.set_weights(shared_value(self.weights), global_vars=self.global_vars, weights_seq_no=self.seq_no)


class RestoreCall:
    """Give a new runner the local runner's weights and state (filter, exploration); the
    weights may be a Ray ObjectRef (see `shared_value`)."""

    def __init__(self, weights: Any, state: dict[str, Any], seq_no: int | None = None):
        self.weights, self.state, self.seq_no = weights, state, seq_no

    def __call__(self, runner: Any) -> None:
        runner.set_weights(shared_value(self.weights), weights_seq_no=self.seq_no)
        runner.set_state(self.state)


class SetFilterCall:
    """Set the runner's observation filter state."""

    def __init__(self, state: dict[str, Any]):
        self.state = state

    def __call__(self, runner: Any) -> None:
        runner.filter.set_state(self.state)


def env_info(runner: Any) -> Any:
    """The runner's EnvInfo (spaces and number of sub-envs)."""
    return runner.env_info()


def get_metrics(runner: Any) -> dict[str, Any]:
    """The runner's metrics since the last call."""
    return runner.get_metrics()


def pop_filter_delta(runner: Any) -> dict[str, Any]:
    """The observation statistics the runner's filter gathered since the last call."""
    return runner.filter.pop_delta()

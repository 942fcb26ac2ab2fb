"""The old-API worker view of an EnvRunner: what `algo.workers.local_worker()` returns.

RLlib's old API stack samples with a RolloutWorker whose `sample()` returns a flat
`SampleBatch` (a `MultiAgentBatch` of them when several policies act), which
`policy.learn_on_batch()` trains on (seed 000, "custom training workflows"). rlx has one
EnvRunner: the Algorithm reads its fast time-major array batch, a custom `training_step`
reads episodes, and this view turns the same array batch into RLlib's flat rows
(rlx.env.runner.flat_rows) for old-API code. Every other attribute is the runner's own.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rlx.core.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch
from rlx.env.runner.flat_rows import EpisodeTracker, to_sample_batch

__all__ = ["RolloutWorkerView", "worker_view", "with_worker_view"]


class RolloutWorkerView:
    """An EnvRunner seen as RLlib's old-API RolloutWorker.

    `sample()` returns a `SampleBatch` with RLlib's column names (`obs`, `new_obs`, `actions`,
    `rewards`, `terminateds`, `truncateds`, `action_logp`, `action_prob`,
    `action_dist_inputs`, `eps_id`, `t`, `agent_index`, `unroll_id`), each episode's rows
    together; a runner of several policies returns a `MultiAgentBatch` of them. Attributes the
    view does not define (`get_policy`, `policy_map`, `filters`, `foreach_env`, `set_weights`,
    ...) are the runner's. Two views of the same runner are equal.
    """

    def __init__(self, env_runner: Any):
        self.env_runner = env_runner
        seed = getattr(env_runner.config, "seed", None)
        self._tracker = EpisodeTracker(None if seed is None else int(seed) + 1009 * int(env_runner.worker_index))
        self._steps_seen = -1  # the runner's lifetime step count after this view's last sample()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["env_runner"], name)

    def __eq__(self, other: object) -> bool:
        other_runner = other.env_runner if isinstance(other, RolloutWorkerView) else other
        return other_runner is self.env_runner

    def __hash__(self) -> int:
        return hash(id(self.env_runner))

    def __repr__(self) -> str:
        return f"RolloutWorkerView({self.env_runner!r})"

    def sample(self, **kwargs: Any) -> Any:
        """Sample one fragment (or what `kwargs` ask for, as `EnvRunner.sample` takes them) as
        flat rows: a SampleBatch, or a MultiAgentBatch of SampleBatches for several policies.

        An episode the runner continues from this view's previous call keeps its `eps_id`; when
        the runner sampled for someone else in between (the Algorithm's `train()`), episodes
        under way get new ids (a single-agent runner's keep counting `t` from their reset; a
        multi-agent runner's count it from this call's first row).
        """
        runner = self.env_runner
        num_episodes, force_reset = kwargs.pop("num_episodes", None), bool(kwargs.pop("force_reset", False))
        if runner.num_env_steps_sampled_lifetime != self._steps_seen:
            self._tracker.reset()
            if num_episodes is None and not force_reset:
                self._track_open_episodes(runner)
        batch = runner._sample_call(kwargs.pop("num_timesteps", None), num_episodes, kwargs.pop("explore", None),
                                    bool(kwargs.pop("random_actions", False)), force_reset, episodes=False)
        if kwargs:
            raise TypeError(f"sample() got unexpected arguments {sorted(kwargs)}; it takes num_timesteps, "
                            "num_episodes, explore, random_actions and force_reset.")
        self._steps_seen = runner.num_env_steps_sampled_lifetime
        return _wrap_as_needed(to_sample_batch(batch, self._tracker))

    def _track_open_episodes(self, runner: Any) -> None:
        """Start tracking a single-agent runner's episodes under way at their current step (the
        runner counts each sub-env's episode length), so `t` stays right; they get new ids."""
        lengths, at_boundary = getattr(runner, "_ep_len", None), getattr(runner, "_at_boundary", None)
        if lengths is None or at_boundary is None or getattr(runner, "_needs_reset", True) or \
                getattr(runner.config, "batch_mode", None) == "complete_episodes":
            return
        eps_id, t_open, has_open = self._tracker.columns(DEFAULT_POLICY_ID, len(lengths))
        open_now = ~np.asarray(at_boundary, bool)
        has_open[:] = open_now
        t_open[:] = lengths
        eps_id[open_now] = self._tracker.new_ids(int(open_now.sum())) + np.arange(int(open_now.sum()))

    def sample_with_count(self) -> tuple[Any, int]:
        """(sample(), the number of env steps it holds), as RLlib's RolloutWorker returns them."""
        batch = self.sample()
        return batch, int(batch.env_steps())

    def learn_on_batch(self, samples: Any) -> dict[str, Any]:
        """Train every policy the batch holds data for with `policy.learn_on_batch`;
        {policy_id: its fetches}, as RLlib's RolloutWorker returns."""
        batch = samples if isinstance(samples, MultiAgentBatch) else MultiAgentBatch(
            {DEFAULT_POLICY_ID: samples}, len(samples))
        return {pid: self.env_runner.get_policy(pid).learn_on_batch(part)
                for pid, part in batch.policy_batches.items() if self.env_runner.is_policy_to_train(pid)}


def _wrap_as_needed(batch: Any) -> Any:
    """A MultiAgentBatch holding only default_policy's rows as that SampleBatch (RLlib's
    `MultiAgentBatch.wrap_as_needed`); anything else as it is."""
    if isinstance(batch, MultiAgentBatch) and list(batch.policy_batches) == [DEFAULT_POLICY_ID]:
        return batch.policy_batches[DEFAULT_POLICY_ID]
    return batch


def worker_view(env_runner: Any) -> Any:
    """The RolloutWorkerView of `env_runner` (one per runner, kept on it); None stays None."""
    if env_runner is None or isinstance(env_runner, RolloutWorkerView):
        return env_runner
    view = env_runner.__dict__.get("_old_api_worker_view")
    if view is None:
        view = env_runner.__dict__["_old_api_worker_view"] = RolloutWorkerView(env_runner)
    return view


class with_worker_view:  # noqa: N801 (used like a function: foreach_worker(with_worker_view(func)))
    """`func` called with the worker view of the runner it is given (first argument, or the
    argument at `position`): what the old `foreach_worker*` names pass. Picklable when `func` is."""

    def __init__(self, func: Callable[..., Any], position: int = 0):
        self.func = func
        self.position = position

    def __call__(self, *args: Any) -> Any:
        args_list = list(args)
        args_list[self.position] = worker_view(args_list[self.position])
        return self.func(*args_list)


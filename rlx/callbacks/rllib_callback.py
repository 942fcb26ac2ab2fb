"""RLlibCallback, the base class of user callbacks (old name DefaultCallbacks): one method per event."""
from __future__ import annotations

from typing import Any


class RLlibCallback:
    """Base class of user callbacks: override the event methods you need; the rest cost nothing."""

    def on_algorithm_init(self, *, algorithm: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        """Called once at the end of Algorithm setup."""

    def on_train_result(self, *, algorithm: Any, metrics_logger: Any = None, result: dict, **kwargs: Any) -> None:
        """Called after each train() iteration with its result dict (which may be modified)."""

    def on_evaluate_start(self, *, algorithm: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        """Called before an evaluation round starts."""

    def on_evaluate_end(
        self, *, algorithm: Any, metrics_logger: Any = None, evaluation_metrics: dict, **kwargs: Any
    ) -> None:
        """Called after an evaluation round with its metrics dict."""

    def on_env_runners_recreated(
        self,
        *,
        algorithm: Any,
        env_runner_group: Any,
        env_runner_indices: list,
        is_evaluation: bool,
        **kwargs: Any,
    ) -> None:
        """Called after failed EnvRunners were recreated (also passed worker_set= and worker_ids=)."""

    def on_checkpoint_loaded(self, *, algorithm: Any, **kwargs: Any) -> None:
        """Called after an Algorithm restored its state from a checkpoint."""

    def on_environment_created(
        self, *, env_runner: Any, metrics_logger: Any = None, env: Any, env_context: Any, **kwargs: Any
    ) -> None:
        """Called when an EnvRunner has created its (vectorized) environment."""

    def on_sub_environment_created(
        self, *, worker: Any, sub_environment: Any, env_context: Any, env_index: int | None = None, **kwargs: Any
    ) -> None:
        """Old API: called for each sub-environment an EnvRunner created."""

    def on_episode_created(
        self,
        *,
        episode: Any,
        env_runner: Any = None,
        metrics_logger: Any = None,
        env: Any = None,
        env_index: int,
        rl_module: Any = None,
        worker: Any = None,
        base_env: Any = None,
        policies: Any = None,
        **kwargs: Any,
    ) -> None:
        """Called when a new episode object is created, before the env reset."""

    def on_episode_start(
        self,
        *,
        episode: Any,
        env_runner: Any = None,
        metrics_logger: Any = None,
        env: Any = None,
        env_index: int,
        rl_module: Any = None,
        worker: Any = None,
        base_env: Any = None,
        policies: Any = None,
        **kwargs: Any,
    ) -> None:
        """Called right after the env reset, with the first observation in the episode."""

    def on_episode_step(
        self,
        *,
        episode: Any,
        env_runner: Any = None,
        metrics_logger: Any = None,
        env: Any = None,
        env_index: int,
        rl_module: Any = None,
        worker: Any = None,
        base_env: Any = None,
        policies: Any = None,
        **kwargs: Any,
    ) -> None:
        """Called after each env step of an episode (the step is logged), the last one included."""

    def on_episode_end(
        self,
        *,
        episode: Any,
        prev_episode_chunks: Any = None,
        env_runner: Any = None,
        metrics_logger: Any = None,
        env: Any = None,
        env_index: int,
        rl_module: Any = None,
        worker: Any = None,
        base_env: Any = None,
        policies: Any = None,
        **kwargs: Any,
    ) -> None:
        """Called when an episode terminated or was truncated. ``prev_episode_chunks``: the chunks
        of this episode that earlier ``sample()`` calls returned (None where the runner keeps none)."""

    def on_sample_end(
        self, *, env_runner: Any = None, metrics_logger: Any = None, samples: Any, worker: Any = None, **kwargs: Any
    ) -> None:
        """Called at the end of EnvRunner.sample() with the collected samples."""

    def on_postprocess_trajectory(
        self,
        *,
        worker: Any = None,
        episode: Any,
        agent_id: Any,
        policy_id: Any,
        policies: Any,
        postprocessed_batch: Any,
        original_batches: Any,
        env_runner: Any = None,
        metrics_logger: Any = None,
        **kwargs: Any,
    ) -> None:
        """Old API: called after a trajectory was postprocessed (the batch may be modified)."""

    def on_learn_on_batch(self, *, policy: Any, train_batch: Any, result: dict, **kwargs: Any) -> None:
        """Old API: called before a policy learns on a train batch."""


#: Old name of RLlibCallback.
DefaultCallbacks = RLlibCallback

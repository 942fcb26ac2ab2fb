"""What the parts of an EnvRunner share: the attributes `EnvRunner._setup` and the concrete
runners set, and the members each kind of runner provides.

An EnvRunner is assembled from parts with one job each (sub-envs, episode events, a sampling
loop, ...), all subclasses of `RunnerParts`, so that each part (and a type checker) knows what
the others offer.
"""
from __future__ import annotations

import abc
from typing import Any, Callable

import numpy as np

from rlx.env.config_view import EnvConfig
from rlx.env.env_context import EnvContext
from rlx.env.runner.module_slot import ModuleSlot
from rlx.utils.errors import EnvError
from rlx.utils.metrics.metrics_logger import MetricsLogger


class RunnerParts(abc.ABC):
    """The state every part of an EnvRunner reads, and the members every runner provides."""

    config: EnvConfig
    worker_index: int
    num_workers: int
    metrics: MetricsLogger
    env_name: str
    #: Sub-envs stepped together.
    num_envs: int
    num_env_steps_sampled_lifetime: int
    num_agent_steps_sampled_lifetime: int
    num_resets: int
    num_sub_env_restarts: int
    _seed: int | None
    _smoothing: int
    _callbacks: Any
    _make_env: Callable[[EnvContext], Any]
    _connectors: Any
    _slots: dict[str, ModuleSlot]
    _episodes: list[Any]
    _at_boundary: np.ndarray
    _needs_reset: bool
    _needs_seed: bool
    _progress: Any
    _on_episode_created: Callable[..., Any] | None
    _on_episode_start: Callable[..., Any] | None
    _on_episode_step: Callable[..., Any] | None
    _on_episode_end: Callable[..., Any] | None
    _on_sample_end: Callable[..., Any] | None
    _on_postprocess_trajectory: Callable[..., Any] | None
    _track_episodes: bool
    _returns_episodes: bool  # sample() returns episodes (EnvRunner.returns_episodes)
    _done_episodes: list[Any]  # episodes finished in the current sample() call (when returning episodes)
    _prev_chunks: dict[str, list[Any]]  # {episode id: its chunks sample() returned} (on_episode_end)

    @property
    @abc.abstractmethod
    def env(self) -> Any:
        """The sub-environments as the callbacks get them (`base_env`)."""

    @property
    @abc.abstractmethod
    def sub_envs(self) -> list[Any]:
        """The list of sub-environments."""

    @property
    @abc.abstractmethod
    def has_envs(self) -> bool:
        """Whether this runner has built its sub-environments."""

    @property
    @abc.abstractmethod
    def module(self) -> Any:
        """The module (a MultiRLModule with one module per policy) this runner acts with."""

    @property
    @abc.abstractmethod
    def filter(self) -> Any:
        """The observation filter(s), as one object with get_state/set_state."""

    @property
    @abc.abstractmethod
    def exploration(self) -> Any:
        """The exploration(s), as one object with get_state/set_state."""

    @property
    @abc.abstractmethod
    def policy_map(self) -> dict[str, Any]:
        """{policy_id: Policy view}."""

    @abc.abstractmethod
    def _episode_env(self, i: int) -> Any:
        """The env the episode events of sub-env `i` get as `env`."""

    @abc.abstractmethod
    def _reset_all(self) -> None:
        """Start a fresh episode in every sub-env."""

    @abc.abstractmethod
    def _target(self, num_timesteps: int | None) -> int:
        """What a sample() call of `num_timesteps` (None: the rollout fragment) collects, in the
        sampling loop's unit."""

    @abc.abstractmethod
    def _run(self, target: int | None, num_episodes: int | None, explore: bool, random_actions: bool,
             complete: bool) -> Any:
        """The sampling loop: step until `target` or `num_episodes`; the batch."""

    @abc.abstractmethod
    def _with_partial_fragment(self, err: EnvError, complete: bool) -> BaseException:
        """`err` with the rows sampled before it (rlx.env.partial_fragment)."""

    @abc.abstractmethod
    def _step_counts(self, batch: Any) -> dict[str, int]:
        """{metric: steps} a sampled batch adds to num_env_steps_sampled (and agent steps)."""

    @abc.abstractmethod
    def _agent_step_counts(self, batch: Any, env_steps: int) -> dict[Any, int]:
        """{agent id: steps it took} in a sampled batch (NUM_AGENT_STEPS_SAMPLED_LIFETIME)."""

    @abc.abstractmethod
    def _module_step_counts(self, batch: Any, env_steps: int) -> dict[str, int]:
        """{module id: steps its agents took} in a sampled batch (NUM_MODULE_STEPS_SAMPLED_LIFETIME)."""

    @abc.abstractmethod
    def _load_weights(self, weights: dict[str, Any]) -> None:
        """Load module weights as get_weights() returns them."""

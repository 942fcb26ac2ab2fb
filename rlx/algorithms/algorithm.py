"""Algorithm: trains, reports, checkpoints and serves actions for one configured algorithm.

Subclasses (PPO, ...) implement `training_step()` and name their config class, default
RLModule and Learner. Everything else (the train() loop with its reporting minimums, the
result dict, checkpoints, compute_single_action, the old-API accessors) lives here.
"""
from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.utils.errors import CheckpointError, ConfigError

logger = logging.getLogger("rlx")

DEFAULT_POLICY_ID = "default_policy"


class SaveResult(str):
    """The path of a saved checkpoint (a str), also offering `.checkpoint.path` as RLlib 2.x does."""

    class _Checkpoint:
        def __init__(self, path: str):
            self.path = path

        def __repr__(self) -> str:
            return f"Checkpoint(path={self.path!r})"

    def __new__(cls, path: str, metrics: dict | None = None) -> "SaveResult":
        obj = super().__new__(cls, path)
        obj.checkpoint = cls._Checkpoint(path)
        obj.metrics = metrics or {}
        return obj


def _results_root() -> Path:
    return Path(os.environ.get("RLX_RESULTS_DIR", "~/rlx_results")).expanduser()


class Algorithm:
    """Base class of rlx algorithms (RLlib's `Algorithm`, formerly `Trainer`).

    Build one from a config (`PPOConfig().environment(...).build()`) or the old way,
    `PPO(config={...}, env="CartPole-v1")`.
    """

    _config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    _learner_class: ClassVar[Any] = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        """A fresh config of this algorithm with its defaults."""
        return cls._config_class(algo_class=cls)

    def __init__(self, config: AlgorithmConfig | dict | None = None, env: Any = None,
                 logger_creator: Any = None, **kwargs: Any):
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected arguments: {', '.join(kwargs)}.")
        if logger_creator is not None:
            from rlx.utils.errors import NotSupportedYetError

            raise NotSupportedYetError("logger_creator", "result loggers come with the CLI")
        self.config = self._coerce_config(config, env)
        self.config.validate()
        self.config.freeze()
        self._setup_process()
        self._counters = {
            "num_env_steps_sampled_lifetime": 0,
            "num_env_steps_trained_lifetime": 0,
            "num_episodes_lifetime": 0,
        }
        self.iteration = 0
        self._time_total_s = 0.0
        self._iterations_since_restore = 0
        self._time_since_restore = 0.0
        self._episodes_window: deque[tuple[float, int]] = deque(maxlen=self.config.metrics_num_episodes_for_smoothing)
        self._logdir: Path | None = None
        self.setup(self.config)

    def _coerce_config(self, config: Any, env: Any) -> AlgorithmConfig:
        if config is None:
            config = self.get_default_config()
        elif isinstance(config, dict):
            config = self.get_default_config().update_from_dict(config)
        elif isinstance(config, AlgorithmConfig):
            if not isinstance(config, self._config_class):
                raise ConfigError(
                    f"{type(self).__name__} needs a {self._config_class.__name__}, got a {type(config).__name__}."
                )
            config = config.copy(copy_frozen=False)
        else:
            raise ConfigError(f"config must be an AlgorithmConfig or a dict, got {config!r}.")
        if env is not None:
            config.environment(env)
        config.algo_class = type(self)
        return config

    def _setup_process(self) -> None:
        import torch

        level = {"WARN": logging.WARNING}.get(self.config.log_level, getattr(logging, self.config.log_level))
        logger.setLevel(level)
        if self.config.torch_num_threads is not None and torch.get_num_threads() != self.config.torch_num_threads:
            torch.set_num_threads(int(self.config.torch_num_threads))

    def setup(self, config: AlgorithmConfig) -> None:
        """Create the EnvRunnerGroup and the Learner (they share the local module)."""
        from rlx.env.env_runner_group import EnvRunnerGroup

        self.env_runner_group = EnvRunnerGroup(config, module_spec=self._module_spec())
        module = self.env_runner_group.local_env_runner.module
        learner_cls = config.learner_class or self._learner_class
        if isinstance(learner_cls, str):
            from rlx.env.registry import import_object

            learner_cls = import_object(learner_cls)
        self.learner = learner_cls(config, module)

    def get_default_rl_module_spec(self) -> Any:
        """The RLModuleSpec of this algorithm's default module."""
        from rlx.core.models import ActorCriticModule
        from rlx.core.rl_module import RLModuleSpec

        return RLModuleSpec(module_class=ActorCriticModule)

    def _module_spec(self) -> Any:
        from rlx.core.rl_module import RLModuleSpec

        spec = self.get_default_rl_module_spec()
        user = self.config.rl_module_spec
        if user is None:
            return spec
        if isinstance(user, type):
            user = RLModuleSpec(module_class=user)
        if not isinstance(user, RLModuleSpec):
            raise ConfigError(f"rl_module_spec must be an RLModuleSpec or an RLModule class, got {user!r}.")
        return RLModuleSpec(
            module_class=user.module_class or spec.module_class,
            observation_space=user.observation_space,
            action_space=user.action_space,
            model_config=None if user.model_config is None else {**self.config.model, **user.model_config},
            inference_only=user.inference_only,
        )

    # ------------------------------------------------------------------ accessors

    @property
    def workers(self) -> Any:
        """Old name of `env_runner_group`."""
        return self.env_runner_group

    @property
    def env_runner(self) -> Any:
        """The local EnvRunner."""
        return self.env_runner_group.local_env_runner

    @property
    def training_iteration(self) -> int:
        """Number of completed train() calls."""
        return self.iteration

    @property
    def logdir(self) -> str:
        """Directory for this run's checkpoints (created on first use)."""
        if self._logdir is None:
            env = str(self.config.env).replace("/", "_") if isinstance(self.config.env, str) else "env"
            stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            self._logdir = _results_root() / f"{type(self).__name__}_{env}_{stamp}_{uuid.uuid4().hex[:6]}"
            self._logdir.mkdir(parents=True, exist_ok=True)
        return str(self._logdir)

    def get_module(self, module_id: str = DEFAULT_POLICY_ID) -> Any:
        """The RLModule being trained."""
        self._check_policy_id(module_id)
        return self.learner.module

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """The Policy view (old API) of the local EnvRunner's module."""
        self._check_policy_id(policy_id)
        return self.env_runner.get_policy(policy_id)

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{policy_id: weights} of the trained module."""
        for pid in policies or []:
            self._check_policy_id(pid)
        return {DEFAULT_POLICY_ID: self.learner.get_weights()}

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load weights given as {policy_id: weights} (or plain weights) and sync the runners."""
        if DEFAULT_POLICY_ID in weights and isinstance(weights[DEFAULT_POLICY_ID], dict):
            weights = weights[DEFAULT_POLICY_ID]
        self.learner.set_weights(weights)
        self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner)

    @staticmethod
    def _check_policy_id(policy_id: str) -> None:
        if policy_id != DEFAULT_POLICY_ID:
            raise KeyError(f"Unknown policy/module id '{policy_id}': single-agent algorithms have only '{DEFAULT_POLICY_ID}'.")

    # ------------------------------------------------------------------ training

    def training_step(self) -> dict[str, Any]:
        """One round of sampling and learning; returns {module_id: learner metrics}."""
        raise TypeError(f"{type(self).__name__} must implement training_step()")

    def train(self) -> dict[str, Any]:
        """Run training_step() until the reporting minimums are met; return the result dict."""
        cfg = self.config
        start = time.perf_counter()
        sampled_before = self._counters["num_env_steps_sampled_lifetime"]
        trained_before = self._counters["num_env_steps_trained_lifetime"]
        returns: list[float] = []
        lengths: list[int] = []
        learner_results: dict[str, Any] = {}
        while True:
            learner_results = self.training_step() or learner_results
            for m in self.env_runner_group.get_metrics():
                returns.extend(m["episode_returns"])
                lengths.extend(m["episode_lengths"])
            sampled = self._counters["num_env_steps_sampled_lifetime"] - sampled_before
            trained = self._counters["num_env_steps_trained_lifetime"] - trained_before
            if (cfg.min_time_s_per_iteration or 0) > time.perf_counter() - start:
                continue
            if (cfg.min_sample_timesteps_per_iteration or 0) > sampled:
                continue
            if (cfg.min_train_timesteps_per_iteration or 0) > trained:
                continue
            break
        self.iteration += 1
        self._iterations_since_restore += 1
        elapsed = time.perf_counter() - start
        self._time_total_s += elapsed
        self._time_since_restore += elapsed
        self._counters["num_episodes_lifetime"] += len(returns)
        return self._build_result(returns, lengths, learner_results, sampled, trained, elapsed)

    def _episode_stats(self, returns: list[float], lengths: list[int]) -> tuple[list[float], list[int]]:
        self._episodes_window.extend(zip(returns, lengths))
        if len(returns) >= self.config.metrics_num_episodes_for_smoothing:
            return returns, lengths
        window = list(self._episodes_window)
        return [r for r, _ in window], [n for _, n in window]

    def _build_result(self, returns: list[float], lengths: list[int], learner_results: dict[str, Any],
                      sampled: int, trained: int, elapsed: float) -> dict[str, Any]:
        win_returns, win_lengths = self._episode_stats(returns, lengths)
        nan = float("nan")

        def stat(values: list, fn: Any) -> float:
            return float(fn(values)) if values else nan

        env_runners = {
            "episode_return_mean": stat(win_returns, np.mean),
            "episode_return_min": stat(win_returns, np.min),
            "episode_return_max": stat(win_returns, np.max),
            "episode_len_mean": stat(win_lengths, np.mean),
            "episode_len_min": stat(win_lengths, np.min),
            "episode_len_max": stat(win_lengths, np.max),
            "num_episodes": len(returns),
            "num_episodes_lifetime": self._counters["num_episodes_lifetime"],
            "num_env_steps_sampled": sampled,
            "num_env_steps_sampled_lifetime": self._counters["num_env_steps_sampled_lifetime"],
            "hist_stats": {"episode_reward": list(win_returns), "episode_lengths": list(win_lengths)},
        }
        learners = {mid: dict(m) for mid, m in learner_results.items()}
        now = time.time()
        result = {
            "training_iteration": self.iteration,
            "time_this_iter_s": elapsed,
            "time_total_s": self._time_total_s,
            "timestamp": int(now),
            "date": datetime.fromtimestamp(now).strftime("%Y-%m-%d_%H-%M-%S"),
            "done": False,
            "num_env_steps_sampled_lifetime": self._counters["num_env_steps_sampled_lifetime"],
            "num_env_steps_trained_lifetime": self._counters["num_env_steps_trained_lifetime"],
            "num_env_steps_sampled_this_iter": sampled,
            "num_env_steps_trained_this_iter": trained,
            "env_runners": env_runners,
            "learners": learners,
            "fault_tolerance": {"num_healthy_workers": self.env_runner_group.num_healthy_remote_workers(),
                                "num_remote_worker_restarts": 0},
            "iterations_since_restore": self._iterations_since_restore,
            "time_since_restore": self._time_since_restore,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            # Legacy names of the same values.
            "episode_reward_mean": env_runners["episode_return_mean"],
            "episode_reward_min": env_runners["episode_return_min"],
            "episode_reward_max": env_runners["episode_return_max"],
            "episode_len_mean": env_runners["episode_len_mean"],
            "episodes_this_iter": len(returns),
            "episodes_total": self._counters["num_episodes_lifetime"],
            "timesteps_total": self._counters["num_env_steps_sampled_lifetime"],
            "timesteps_this_iter": sampled,
            "num_env_steps_sampled": self._counters["num_env_steps_sampled_lifetime"],
            "num_env_steps_trained": self._counters["num_env_steps_trained_lifetime"],
            "custom_metrics": {},
            "hist_stats": env_runners["hist_stats"],
            "info": {
                "learner": {mid: {"learner_stats": dict(m)} for mid, m in learner_results.items()},
                "num_env_steps_sampled": self._counters["num_env_steps_sampled_lifetime"],
                "num_env_steps_trained": self._counters["num_env_steps_trained_lifetime"],
            },
        }
        return result

    # ------------------------------------------------------------------ acting

    def compute_single_action(
        self,
        observation: Any = None,
        state: list | None = None,
        *,
        prev_action: Any = None,
        prev_reward: float | None = None,
        info: dict | None = None,
        input_dict: dict | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        unsquash_action: bool | None = None,
        clip_action: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Action for one observation (preprocessed and filtered as during sampling).

        Returns the action, or `(action, state_out, extra_fetches)` when `full_fetch=True`
        or a `state` is given.
        """
        if kwargs:
            raise TypeError(f"compute_single_action() got unexpected arguments: {', '.join(kwargs)}.")
        if observation is None and input_dict is not None:
            observation = input_dict.get("obs")
        if observation is None:
            raise ValueError("compute_single_action() needs an observation.")
        policy = self.get_policy(policy_id)
        action, state_out, extra = policy.compute_single_action(
            observation, state, explore=explore, timestep=timestep, unsquash_action=unsquash_action,
            clip_action=clip_action,
        )
        if full_fetch or state:
            return action, state_out, extra
        return action

    compute_action = compute_single_action

    def compute_actions(
        self,
        observations: Any,
        state: list | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Actions for several observations: a dict {key: obs} gives a dict, a batch gives an array."""
        if kwargs:
            raise TypeError(f"compute_actions() got unexpected arguments: {', '.join(kwargs)}.")
        policy = self.get_policy(policy_id)
        if isinstance(observations, dict):
            keys = list(observations)
            actions, state_out, extra = policy.compute_actions(
                [observations[k] for k in keys], explore=explore, timestep=timestep,
                unsquash_actions=unsquash_actions, clip_actions=clip_actions,
            )
            out = {k: actions[i] for i, k in enumerate(keys)}
        else:
            out, state_out, extra = policy.compute_actions(
                observations, explore=explore, timestep=timestep, unsquash_actions=unsquash_actions,
                clip_actions=clip_actions,
            )
        if full_fetch or state:
            return out, state_out, extra
        return out

    # ------------------------------------------------------------------ checkpoints

    def save(self, checkpoint_dir: str | None = None, prevent_upload: bool = False) -> SaveResult:
        """Save a checkpoint (into `checkpoint_dir`, or a new dir under the run's logdir)."""
        if checkpoint_dir is None:
            checkpoint_dir = os.path.join(self.logdir, f"checkpoint_{self.iteration:06d}")
        path = self.save_to_path(checkpoint_dir)
        return SaveResult(path, metrics={"training_iteration": self.iteration})

    save_checkpoint = save

    def save_to_path(self, path: str | os.PathLike | None = None, *, state: dict | None = None) -> str:
        """Write a checkpoint directory at `path` and return the path."""
        from rlx.algorithms.checkpointing import write_algorithm_checkpoint

        if path is None:
            path = os.path.join(self.logdir, f"checkpoint_{self.iteration:06d}")
        return write_algorithm_checkpoint(self, Path(path))

    def restore(self, checkpoint_path: str | os.PathLike) -> None:
        """Load a checkpoint of the same algorithm and config into this Algorithm."""
        self.restore_from_path(checkpoint_path)

    def restore_from_path(self, path: str | os.PathLike) -> None:
        """Load weights, optimizer state, counters and filters from a checkpoint directory."""
        from rlx.algorithms.checkpointing import read_algorithm_checkpoint

        read_algorithm_checkpoint(self, Path(str(path)))

    load_checkpoint = restore_from_path

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, config_overrides: dict | None = None, **kwargs: Any) -> "Algorithm":
        """Rebuild an Algorithm (class, config, weights, state) from a checkpoint directory alone."""
        from rlx.algorithms.checkpointing import algorithm_from_checkpoint

        if hasattr(path, "path") and not isinstance(path, (str, os.PathLike)):
            path = path.path
        if kwargs:
            raise TypeError(f"from_checkpoint() got unexpected arguments: {', '.join(kwargs)}.")
        algo = algorithm_from_checkpoint(Path(str(path)), config_overrides or {})
        if cls is not Algorithm and not isinstance(algo, cls):
            raise CheckpointError(f"Checkpoint {path} holds a {type(algo).__name__}, not a {cls.__name__}.")
        return algo

    def write_checkpoint_extras(self, directory: Path) -> list[str]:
        """Write algorithm-specific checkpoint files (e.g. the replay buffer) into `directory`.

        Returns their paths relative to `directory`; the base Algorithm has none.
        """
        return []

    def read_checkpoint_extras(self, directory: Path) -> None:
        """Load what `write_checkpoint_extras` wrote; the base Algorithm has nothing to load."""
        return None

    def get_state(self) -> dict[str, Any]:
        """JSON-safe algorithm state (counters, metrics window, learner and runner extras)."""
        return {
            "iteration": self.iteration,
            "time_total_s": self._time_total_s,
            "counters": dict(self._counters),
            "episodes_window": [[float(r), int(n)] for r, n in self._episodes_window],
            "learner": self.learner.get_extra_state(),
            "env_runner": self.env_runner.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state()."""
        self.iteration = int(state["iteration"])
        self._time_total_s = float(state["time_total_s"])
        self._counters.update({k: int(v) for k, v in state["counters"].items()})
        self._episodes_window.clear()
        self._episodes_window.extend((float(r), int(n)) for r, n in state["episodes_window"])
        self.learner.set_extra_state(state["learner"])
        self.env_runner.set_state(state["env_runner"])
        self._iterations_since_restore = 0
        self._time_since_restore = 0.0

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Release the envs and runners."""
        group = getattr(self, "env_runner_group", None)
        if group is not None:
            group.stop()

    cleanup = stop

    def __enter__(self) -> "Algorithm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.config.env!r}, iteration={self.iteration})"

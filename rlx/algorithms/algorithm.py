"""Algorithm: trains, reports, checkpoints and serves actions for one configured algorithm.

Subclasses (PPO, ...) implement `training_step()` and name their config class, default
RLModule and Learner. Everything else (the train() loop with its reporting minimums, the
result dict, checkpoints, compute_single_action, the old-API accessors) lives here.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.results import (deep_update, env_runner_section, fault_tolerance_section, legacy_episode_keys,
                                    policy_reward_stats)
from rlx.loggers.creation import results_root, trial_dir_name
from rlx.utils.errors import CheckpointError, ConfigError, NotSupportedYetError
from rlx.utils.metrics.metrics_logger import MetricsLogger

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


class LocalLearnerGroup:
    """RLlib's local LearnerGroup: the driver's Learner as `_learner`, its methods forwarded."""

    is_local = True

    def __init__(self, learner: Any):
        self._learner = learner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_learner":
            raise AttributeError(name)
        return getattr(self._learner, name)


class Algorithm:
    """Base class of rlx algorithms (RLlib's `Algorithm`, formerly `Trainer`).

    Build one from a config (`PPOConfig().environment(...).build()`) or the old way,
    `PPO(config={...}, env="CartPole-v1")`.
    """

    _config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    _learner_class: ClassVar[Any] = None
    #: Whether this Algorithm trains several policies on a multi-agent env (set by setup()).
    is_multi_agent: bool = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        """A fresh config of this algorithm with its defaults."""
        return cls._config_class(algo_class=cls)

    @classmethod
    def default_resource_request(cls, config: AlgorithmConfig | dict) -> Any:
        """The Ray Tune resources (a PlacementGroupFactory) a trial of this algorithm with `config`
        needs: a bundle for the Algorithm and one per remote EnvRunner, as rlx's Tune Trainables
        request (for `tune.with_resources(fn, resources=...)`). Imports Ray Tune."""
        from ray.tune import PlacementGroupFactory

        from rlx.tune.trainable import trainable

        config_dict = config.to_dict() if isinstance(config, AlgorithmConfig) else dict(config)
        request = trainable(cls).default_resource_request(config_dict)
        if request is None:
            cpus = float(config_dict.get("num_cpus_for_main_process") or 1)
            request = PlacementGroupFactory([{"CPU": cpus}])
        return request

    def __init__(self, config: AlgorithmConfig | dict | None = None, env: Any = None,
                 logger_creator: Any = None, **kwargs: Any):
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected arguments: {', '.join(kwargs)}.")
        self.config = self._coerce_config(config, env)
        self.config.validate()
        self.config.freeze()
        from rlx.algorithms.resources import check_gpu_request
        from rlx.env.env_runner_group import resolve_backend

        check_gpu_request(self.config, resolve_backend(self.config.env_runner_backend))
        from rlx.utils.stack_dump import install as install_stack_dumps

        install_stack_dumps("driver")  # `rlx stack` finds this process and can ask for its stacks
        self._setup_process()
        self._counters = {
            "num_env_steps_sampled_lifetime": 0,
            "num_env_steps_trained_lifetime": 0,
            "num_episodes_lifetime": 0,
            # Actions of all agents; the same as env steps in single-agent runs.
            "num_agent_steps_sampled_lifetime": 0,
            "num_agent_steps_trained_lifetime": 0,
        }
        self.iteration = 0
        self._time_total_s = 0.0
        self._iterations_since_restore = 0
        self._time_since_restore = 0.0
        self._logdir: Path | None = None
        #: Counts learner updates; remote EnvRunners get weights only when it has moved on.
        self.weights_version = 0
        self._logger_creator = logger_creator if logger_creator is not None else self.config.logger_creator
        self._result_logger: Any = None  # created on first use: build() alone writes no files
        #: (return, length, ((policy_id, agent return), ...)) of the latest episodes.
        self._episodes_window: deque[tuple[float, int, tuple]] = \
            deque(maxlen=self.config.metrics_num_episodes_for_smoothing)
        #: Algorithm-side metrics: merged EnvRunner metrics under "env_runners", plus whatever
        #: Algorithm callbacks log (reported at the top level of the result).
        self.metrics = MetricsLogger()
        self.callbacks = self.config.make_callback_dispatcher()
        self.eval_env_runner_group: Any = None
        self._last_eval_results: dict[str, Any] | None = None
        self._offline_io: Any = None
        from rlx.utils.sys_usage import sys_usage_monitor

        self._sys_usage = sys_usage_monitor(self.config)  # log_sys_usage: result["perf"]
        try:
            self.setup(self.config)
            from rlx.policy.policy_learning import register_algorithm

            register_algorithm(self)  # its Policies' learn_on_batch() updates through its Learner
            from rlx.offline.offline_io import attach_offline_io

            self._offline_io = attach_offline_io(self)  # input_ / output (offline data)
            self._on_learn_on_batch = self.callbacks.get("on_learn_on_batch")
            if self.config.evaluation_interval is not None:
                self._make_eval_env_runner_group()
            if self.config.env_task_fn is not None:
                self.env_runner_group.foreach_env_runner(_check_task_settable)
            if self.config.render_env:
                self._start_video_recording()
            self.callbacks.fire("on_algorithm_init", algorithm=self, metrics_logger=self.metrics)
        except BaseException:
            # Worker processes, learner processes and envs built so far must not outlive a
            # build that failed.
            self.stop()
            raise
        logger.info("Built %s on %s: %d sub-environment(s) per runner, %d remote runner(s), seed %s.",
                    type(self).__name__, self.config.env, self.config.num_envs_per_env_runner,
                    self.config.num_env_runners, self.config.seed)

    def _start_video_recording(self) -> None:
        """render_env (or the old `monitor`): record episode videos of one training runner,
        the local one or, with remote runners, runner 1, into `<logdir>/videos`."""
        video_dir = os.path.join(self.logdir, "videos")
        record_on = 0 if self.config.num_env_runners == 0 else 1

        def start(runner: Any) -> None:
            if runner.worker_index != record_on:
                return
            method = getattr(runner, "start_video_recording", None)
            if method is None:
                raise ConfigError(
                    f"render_env=True, but the EnvRunner class {type(runner).__name__} has no "
                    "start_video_recording(video_dir) method; use SingleAgentEnvRunner or add one."
                )
            method(video_dir)

        self.env_runner_group.foreach_env_runner(start)

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
        if level < logging.WARNING and not logger.handlers and not logging.getLogger().handlers:
            # Without any logging configured, Python prints only warnings; a user who asked for
            # INFO/DEBUG lines should see them (as "INFO -- message", RLlib's format).
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s -- %(message)s"))
            logger.addHandler(handler)
        if self.config.torch_num_threads is not None and torch.get_num_threads() != self.config.torch_num_threads:
            torch.set_num_threads(int(self.config.torch_num_threads))

    def setup(self, config: AlgorithmConfig) -> None:
        """Create the EnvRunnerGroup and the Learner (they share the local module)."""
        from rlx.env.env_runner_group import EnvRunnerGroup

        from rlx.env.env_runner import MultiAgentEnvFoundError

        self.is_multi_agent = self._detect_multi_agent(config)
        try:
            self.env_runner_group = EnvRunnerGroup(config, module_spec=self._module_spec(), remote_backend=None,
                                                   runner_cls=self._env_runner_cls())
        except MultiAgentEnvFoundError:
            # An env creator returned a MultiAgentEnv: known only once one was built.
            if self.is_multi_agent or config.env_runner_cls is not None:
                raise
            self.is_multi_agent = True
            self.env_runner_group = EnvRunnerGroup(config, module_spec=self._module_spec(), remote_backend=None,
                                                   runner_cls=self._env_runner_cls())
        # The runners resolved rlx's adaptive sub-env default (AlgorithmConfig.
        # resolve_num_envs_per_env_runner); the frozen config reports what they use.
        config._values["num_envs_per_env_runner"] = self.env_runner_group.num_envs_per_env_runner
        module = self.env_runner_group.local_env_runner.module
        learner_cls = self._resolved_learner_class()
        self._check_recurrent_support(module, learner_cls)
        if config.num_learners == 0:
            from rlx.core.learner.device import learner_trains_a_copy

            if learner_trains_a_copy(config):
                # A GPU Learner trains its own copy; the local EnvRunner keeps acting on the CPU and
                # gets the new weights after each update (sync_weights copies them when modules differ).
                module = copy.deepcopy(module)
        if self.is_multi_agent:
            from rlx.core.multi_agent_learner import MultiAgentLearner

            if config.num_learners > 0:
                from rlx.utils.errors import NotSupportedYetError

                raise NotSupportedYetError("num_learners > 0 with multi-agent training",
                                           "learner processes train one module",
                                           fix="Set config.learners(num_learners=0) for multi-agent runs.")
            self.learner = MultiAgentLearner(config, learner_cls, module)
        elif config.num_learners > 0:
            from rlx.core.learner_group import LearnerGroup

            self.learner = LearnerGroup(config, learner_cls, module)
        else:
            self.learner = learner_cls(config, module)
        self._learner_connector = self._build_learner_connector()

    def _build_learner_connector(self) -> Any:
        """The config's learner connector pipeline (None when unset), built with the spaces of the
        train batches (what the module sees)."""
        if self.config.learner_connector is None:
            return None
        from rlx.connectors.learner.learner_connector_pipeline import build_learner_connector

        runner = self.env_runner
        if self.is_multi_agent:
            import gymnasium as gym

            obs_space = gym.spaces.Dict({pid: s.module_observation_space for pid, s in runner.slots.items()})
            act_space = gym.spaces.Dict({pid: s.action_space for pid, s in runner.slots.items()})
        else:
            obs_space, act_space = runner.module_observation_space, runner.action_space
        return build_learner_connector(self.config, obs_space, act_space)

    def _run_learner_connector(self, batch: Any) -> Any:
        """The train batch after the learner connector pipeline (per module in multi-agent runs)."""
        from rlx.connectors.learner.learner_connector_pipeline import run_learner_connector

        if self.is_multi_agent:
            batches = getattr(batch, "policy_batches", batch)
            for pid in list(batches):
                batches[pid] = run_learner_connector(self._learner_connector, dict(batches[pid]),
                                                     self.env_runner.module[pid], module_id=pid, metrics=self.metrics)
            return batch
        return run_learner_connector(self._learner_connector, dict(batch), self.env_runner.module,
                                     metrics=self.metrics)

    def _check_recurrent_support(self, module: Any, learner_cls: Any) -> None:
        """NotSupportedYetError when a recurrent (stateful) module meets a part that cannot train it."""
        modules = [module[mid] for mid in module.keys()] if self.is_multi_agent and hasattr(module, "keys") else [module]
        if not any(getattr(m, "is_stateful", lambda: False)() for m in modules):
            return
        if not getattr(learner_cls, "supports_recurrent_modules", False):
            raise NotSupportedYetError(f"a recurrent (stateful) RLModule with {learner_cls.__name__}",
                                       "recurrent modules train with the Learners of PPO, IMPALA and APPO (and "
                                       "others that set supports_recurrent_modules = True)")

    def _resolved_learner_class(self) -> Any:
        learner_cls = self.config.learner_class or self._learner_class
        if isinstance(learner_cls, str):
            from rlx.env.registry import import_object

            learner_cls = import_object(learner_cls)
        return learner_cls

    @staticmethod
    def _detect_multi_agent(config: AlgorithmConfig) -> bool:
        """Whether the config or its env's class says multi-agent; an env creator that returns a
        MultiAgentEnv is found when the first runner builds its env (see setup)."""
        if config.is_multi_agent:
            return True
        from rlx.env.multi_agent_env import env_class_is_multi_agent

        return env_class_is_multi_agent(config.env)

    def _env_runner_cls(self) -> Any:
        """The EnvRunner class: the config's env_runner_cls, else the multi- or single-agent runner."""
        if self.config.env_runner_cls is not None:
            return self.config.env_runner_cls
        if getattr(self, "is_multi_agent", False):
            from rlx.env.multi_agent_env_runner import MultiAgentEnvRunner

            return MultiAgentEnvRunner
        from rlx.env.env_runner import SingleAgentEnvRunner

        return SingleAgentEnvRunner

    def learner_by_module(self) -> dict[str, Any]:
        """{module_id: the Learner (or LearnerGroup) of that module}; one entry when single-agent."""
        if self.is_multi_agent:
            return self.learner.by_module()
        return {DEFAULT_POLICY_ID: self.learner}

    def get_default_rl_module_spec(self) -> Any:
        """The RLModuleSpec of this algorithm's default module: the actor-critic MLP, or a
        ModelV2RLModule running model['custom_model'] (an old-API ModelV2) when set."""
        from rlx.core.rl_module import RLModuleSpec

        if self.config.model.get("custom_model"):
            from rlx.models.modelv2_rl_module import ModelV2RLModule

            return RLModuleSpec(module_class=ModelV2RLModule)
        if self.config.model.get("use_lstm") and self.config.model.get("use_attention"):
            raise ConfigError("model['use_lstm'] and model['use_attention'] are both True; a default model has one "
                              "memory: set only one of them.")
        if self.config.model.get("use_lstm"):
            from rlx.core.lstm_models import LSTMActorCriticModule

            return RLModuleSpec(module_class=LSTMActorCriticModule)
        if self.config.model.get("use_attention"):
            from rlx.core.attention_models import AttentionActorCriticModule

            return RLModuleSpec(module_class=AttentionActorCriticModule)
        from rlx.core.models import ActorCriticModule

        return RLModuleSpec(module_class=ActorCriticModule)

    def _module_spec(self) -> Any:
        """The RLModuleSpec every module is built from, or (for a MultiRLModuleSpec in the config)
        a MultiRLModuleSpec of one completed spec per module id, with the default for others."""
        from rlx.core.rl_module import MultiRLModuleSpec, RLModuleSpec

        user = self.config.rl_module_spec
        if isinstance(user, MultiRLModuleSpec):
            if not self.is_multi_agent:
                raise ConfigError("rl_module_spec is a MultiRLModuleSpec, but the env and config are single-agent; "
                                  "give an RLModuleSpec, or configure policies with config.multi_agent(...).")
            specs = user.rl_module_specs
            if isinstance(specs, RLModuleSpec):
                return self._completed_spec(specs)
            return MultiRLModuleSpec(rl_module_specs={mid: self._completed_spec(s) for mid, s in (specs or {}).items()},
                                     default_spec=self._completed_spec(None))
        from rlx.core.action_masking import with_action_mask_key

        return with_action_mask_key(self._completed_spec(user), self.config, self.is_multi_agent)

    def _completed_spec(self, user: Any) -> Any:
        """The user's RLModuleSpec (or RLModule class) with the algorithm's defaults filled in."""
        from rlx.core.rl_module import RLModuleSpec
        from rlx.models.model_defaults import merge_model_config

        spec = self.get_default_rl_module_spec()
        memory_key = next((k for k in ("use_lstm", "use_attention") if self.config.model.get(k)), None)
        if memory_key and (user is None or getattr(user, "module_class", None) is None):
            from rlx.core.attention_models import AttentionActorCriticModule
            from rlx.core.lstm_models import LSTMActorCriticModule

            from rlx.algorithms.dqn.recurrent_dqn_rl_module import RecurrentDQNRLModule
            from rlx.models.modelv2_rl_module import ModelV2RLModule

            # A custom_model with use_lstm runs in an LSTMWrapper inside ModelV2RLModule.
            recurrent = (LSTMActorCriticModule, AttentionActorCriticModule) + (
                (ModelV2RLModule, RecurrentDQNRLModule) if memory_key == "use_lstm" else ())
            # Other default modules built for use_lstm say so (e.g. recurrent SAC's, DDPG's).
            if spec.module_class not in recurrent and not (
                    memory_key == "use_lstm" and getattr(spec.module_class, "builds_use_lstm", False)):
                raise NotSupportedYetError(
                    f"model['{memory_key}'] with {type(self).__name__}",
                    "recurrent models train with PPO (and use_lstm with DQN, SAC, DDPG and TD3)",
                    fix=f"Use PPO (or DQN) for recurrent policies, or leave {memory_key}=False.")
        if self.config.model.get("custom_model") and (user is None or
                                                      (isinstance(user, RLModuleSpec) and user.module_class is None)):
            from rlx.models.modelv2_rl_module import ModelV2RLModule

            if spec.module_class is not ModelV2RLModule:
                raise NotSupportedYetError(
                    f"model['custom_model'] with {type(self).__name__}",
                    "old-API ModelV2 custom models run in the actor-critic module of policy-gradient algorithms (PPO)",
                    fix="Remove custom_model, or give a custom RLModule with config.rl_module(rl_module_spec=...).")
        if user is None:
            return spec
        if isinstance(user, type):
            user = RLModuleSpec(module_class=user)
        if not isinstance(user, RLModuleSpec):
            raise ConfigError(f"rl_module_spec must be an RLModuleSpec, a MultiRLModuleSpec or an RLModule class, "
                              f"got {user!r}.")
        model = user.model_config
        if model is not None and not isinstance(model, dict):
            from rlx.core.rl_module.default_model_config import DefaultModelConfig, model_dict

            if not isinstance(model, DefaultModelConfig):
                raise ConfigError(f"RLModuleSpec.model_config must be a dict or a DefaultModelConfig, got {model!r:.80}.")
            model = model_dict(model)
        return RLModuleSpec(
            module_class=user.module_class or spec.module_class,
            observation_space=user.observation_space,
            action_space=user.action_space,
            model_config=None if model is None else merge_model_config(
                self.config.model, model, custom_keys=user.module_class not in (None, spec.module_class)),
            inference_only=user.inference_only,
            learner_only=self._refuse_learner_only(user),
            catalog_class=user.catalog_class,
            load_state_path=user.load_state_path,
        )

    @staticmethod
    def _refuse_learner_only(spec: Any) -> bool:
        """NotSupportedYetError for RLModuleSpec(learner_only=True) in an Algorithm (its EnvRunners
        build every module); False otherwise."""
        if getattr(spec, "learner_only", False):
            raise NotSupportedYetError(
                "RLModuleSpec(learner_only=True) in an Algorithm",
                "rlx's EnvRunners build every module of the MultiRLModuleSpec",
                fix="Leave learner_only=False (a module no agent maps to is built on the EnvRunners but never run).")
        return False

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
        """This trial's directory: results, TensorBoard files and checkpoints (created on first use)."""
        if self._logdir is None:
            logdir = getattr(self.result_logger, "logdir", None)
            if logdir is None:  # a logger that writes no files (NoopLogger) still needs a checkpoint home
                logdir = results_root() / trial_dir_name(type(self).__name__, self.config.env)
            self._logdir = Path(str(logdir))
            self._logdir.mkdir(parents=True, exist_ok=True)
        return str(self._logdir)

    @property
    def result_logger(self) -> Any:
        """The logger every train() result goes to (created on first use; see rlx.loggers)."""
        if self._result_logger is None:
            from rlx.loggers.creation import create_result_logger

            self._result_logger = create_result_logger(self.config, type(self).__name__, self._logger_creator)
            logdir = getattr(self._result_logger, "logdir", None)
            if self._logdir is None and logdir is not None:
                # Kept after stop() closes the logger: algo.logdir still names this trial.
                self._logdir = Path(str(logdir))
        return self._result_logger

    def get_module(self, module_id: str = DEFAULT_POLICY_ID) -> Any:
        """The RLModule of `module_id` being trained."""
        self._check_policy_id(module_id)
        if self.is_multi_agent:
            return self.learner.module[module_id]
        return getattr(self.learner.module, "unwrapped_module", self.learner.module)

    @property
    def learner_group(self) -> Any:
        """RLlib's LearnerGroup: rlx's LearnerGroup with num_learners > 0, else a view of the local
        Learner (its `_learner`, as RLlib's local group has, and the Learner's methods)."""
        from rlx.core.learner_group import LearnerGroup

        if isinstance(self.learner, LearnerGroup):
            return self.learner
        return LocalLearnerGroup(self.learner)

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """The Policy view (old API) of the local EnvRunner's module of `policy_id`."""
        self._check_policy_id(policy_id)
        return self.env_runner.get_policy(policy_id)

    def import_model(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Load weights trained outside rlx (an .h5 file, or a torch state dict in a .pt/.pth file)
        into the policy's model and use them from now on; see rlx.algorithms.model_import."""
        from rlx.algorithms.model_import import import_model

        import_model(self, import_file, policy_id)

    def import_policy_model_from_h5(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """`import_model` for an h5 file (RLlib's name)."""
        self.import_model(import_file, policy_id)

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{policy_id: weights} of the trained modules (all, or those in `policies`)."""
        for pid in policies or []:
            self._check_policy_id(pid)
        if self.is_multi_agent:
            return self.learner.get_weights(list(policies) if policies else None)
        return {DEFAULT_POLICY_ID: self.learner.get_weights()}

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load weights given as {policy_id: weights} (or plain weights, single-agent) and sync the runners."""
        if self.is_multi_agent:
            for pid in weights:
                self._check_policy_id(pid)
            self.learner.set_weights(weights)
        else:
            if DEFAULT_POLICY_ID in weights and isinstance(weights[DEFAULT_POLICY_ID], dict):
                weights = weights[DEFAULT_POLICY_ID]
            self.learner.set_weights(weights)
        self.weights_version += 1
        self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner,
                                           weights_seq_no=self.weights_version)

    def add_policy(self, policy_id: str, policy_cls: Any = None, policy: Any = None, *,
                   observation_space: Any = None, action_space: Any = None, config: Any = None,
                   policy_state: dict | None = None, policy_mapping_fn: Any = None, policies_to_train: Any = None,
                   evaluation_workers: bool = True, module_spec: Any = None, **kwargs: Any) -> Any:
        """Add a policy to this (multi-agent) Algorithm and all its EnvRunners; return its Policy view.

        Its weights come from `policy` (an existing Policy), `policy_state` (a Policy's get_state()
        or plain weights), or a fresh initialisation. `policy_mapping_fn` and `policies_to_train`
        replace the current ones when given.
        """
        from rlx.algorithms.policy_management import add_policy, policy_spec_from

        if kwargs:
            raise TypeError(f"add_policy() got unexpected arguments: {', '.join(kwargs)}.")
        if module_spec is not None and observation_space is None and action_space is None:
            from rlx.algorithms.policy_management import env_spaces_like

            observation_space, action_space = env_spaces_like(self, module_spec)
        spec = policy_spec_from(policy_cls, observation_space, action_space, config, module_spec)
        weights = None
        if policy is not None:
            weights = policy.get_weights()
        elif policy_state is not None:
            weights = policy_state.get("weights", policy_state) if isinstance(policy_state, dict) else policy_state
        return add_policy(self, policy_id, spec, weights, policy_mapping_fn, policies_to_train, evaluation_workers)

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, *, policy_mapping_fn: Any = None,
                      policies_to_train: Any = None, evaluation_workers: bool = True, **kwargs: Any) -> None:
        """Remove a policy from this Algorithm and all its EnvRunners."""
        from rlx.algorithms.policy_management import remove_policy

        if kwargs:
            raise TypeError(f"remove_policy() got unexpected arguments: {', '.join(kwargs)}.")
        remove_policy(self, policy_id, policy_mapping_fn, policies_to_train, evaluation_workers)

    def add_module(self, module_id: str, module_spec: Any = None, *, config_overrides: dict | None = None,
                   new_agent_to_module_mapping_fn: Any = None, new_should_module_be_updated: Any = None,
                   add_to_env_runners: bool = True, add_to_eval_env_runners: bool = True) -> Any:
        """Add a module (new API name of add_policy): built from `module_spec`'s spaces and model
        config; returns the new RLModule."""
        from rlx.algorithms.policy_management import add_policy, env_spaces_like, policy_spec_from

        if not add_to_env_runners:
            raise ConfigError("add_module(add_to_env_runners=False): rlx's driver EnvRunner shares its modules with "
                              "the learner, so a module is always added to the EnvRunners.")
        spec = policy_spec_from(None, *env_spaces_like(self, module_spec), config_overrides, module_spec)
        add_policy(self, module_id, spec, None, new_agent_to_module_mapping_fn, new_should_module_be_updated,
                   add_to_eval_env_runners)
        return self.get_module(module_id)

    def remove_module(self, module_id: str, *, new_agent_to_module_mapping_fn: Any = None,
                      new_should_module_be_updated: Any = None, remove_from_env_runners: bool = True,
                      remove_from_eval_env_runners: bool = True) -> None:
        """Remove a module (new API name of remove_policy)."""
        self.remove_policy(module_id, policy_mapping_fn=new_agent_to_module_mapping_fn,
                           policies_to_train=new_should_module_be_updated,
                           evaluation_workers=remove_from_eval_env_runners)

    @property
    def policy_ids(self) -> list[str]:
        """The ids of the policies (modules) this Algorithm holds."""
        return list(self.learner.module.keys()) if self.is_multi_agent else [DEFAULT_POLICY_ID]

    def _check_policy_id(self, policy_id: str) -> None:
        ids = self.policy_ids
        if policy_id not in ids:
            from rlx.utils.errors import did_you_mean

            raise KeyError(f"Unknown policy/module id {policy_id!r}; this Algorithm has {', '.join(ids)}."
                           f"{did_you_mean(str(policy_id), ids)}")

    # ------------------------------------------------------------------ training

    def training_step(self) -> dict[str, Any]:
        """One round of sampling and learning; returns {module_id: learner metrics}."""
        raise TypeError(f"{type(self).__name__} must implement training_step()")

    def train(self) -> dict[str, Any]:
        """One training iteration: run training_step() until the reporting minimums are met,
        evaluate when due (after the training step, or concurrently with it when
        `evaluation_parallel_to_training`), and return the result dict."""
        cfg = self.config
        start = time.perf_counter()
        sampled_before = self._counters["num_env_steps_sampled_lifetime"]
        trained_before = self._counters["num_env_steps_trained_lifetime"]
        agent_counts_before = (self._counters["num_agent_steps_sampled_lifetime"],
                               self._counters["num_agent_steps_trained_lifetime"])
        evaluate_now = self._evaluation_due()
        parallel_eval: Future | None = None
        training_done = threading.Event()
        if evaluate_now and cfg.evaluation_parallel_to_training:
            # Weights are copied to the evaluation runners now, so they evaluate the weights
            # from before this training step (the seed's "train(1->2) + eval(1)").
            parallel_eval = self._start_parallel_evaluation(training_done)
        learner_results: dict[str, Any] = {}
        try:
            while True:
                learner_results = self.training_step() or learner_results
                self._report_restarted_runners()
                self.metrics.merge_and_log_n_dicts(self.env_runner_group.get_metrics(), key="env_runners")
                sampled = self._counters["num_env_steps_sampled_lifetime"] - sampled_before
                trained = self._counters["num_env_steps_trained_lifetime"] - trained_before
                if (cfg.min_time_s_per_iteration or 0) > time.perf_counter() - start:
                    continue
                if (cfg.min_sample_timesteps_per_iteration or 0) > sampled:
                    continue
                if (cfg.min_train_timesteps_per_iteration or 0) > trained:
                    continue
                break
        finally:
            training_done.set()
        self.iteration += 1
        self._iterations_since_restore += 1
        eval_results = None
        if parallel_eval is not None:
            eval_results = self._finish_evaluation(*parallel_eval.result())
        elif evaluate_now:
            eval_results = self.evaluate()
        elapsed = time.perf_counter() - start
        self._time_total_s += elapsed
        self._time_since_restore += elapsed
        result = self._build_result(learner_results, sampled, trained, elapsed)
        if self._sys_usage is not None:
            result["perf"] = self._sys_usage.read()
        result["num_agent_steps_sampled_this_iter"] = \
            self._counters["num_agent_steps_sampled_lifetime"] - agent_counts_before[0]
        result["num_agent_steps_trained_this_iter"] = \
            self._counters["num_agent_steps_trained_lifetime"] - agent_counts_before[1]
        if eval_results is None and cfg.always_attach_evaluation_results and cfg.evaluation_interval is not None:
            eval_results = self._last_eval_results if self._last_eval_results is not None else self._empty_eval_results()
        if eval_results is not None:
            result["evaluation"] = eval_results
        if self._offline_io is not None and not self._offline_io.samples_envs:
            from rlx.offline.results import report_evaluation_returns

            report_evaluation_returns(result, self._last_eval_results)
        self.callbacks.fire("on_train_result", algorithm=self, metrics_logger=self.metrics, result=result)
        self._add_algorithm_metrics(result)
        if cfg.env_task_fn is not None:
            self._apply_env_task_fn(result)
        self.result_logger.on_result(result)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("Iteration %d: %d env steps sampled, %d trained in %.3f s; learner stats: %s",
                         self.iteration, sampled, trained, elapsed,
                         {mid: {k: round(float(v), 4) for k, v in m.items() if isinstance(v, (int, float))}
                          for mid, m in result["learners"].items()})
        return result

    def _build_result(self, learner_results: dict[str, Any], sampled: int, trained: int,
                      elapsed: float) -> dict[str, Any]:
        # Peek (not reduce) so that values logged by on_train_result are reduced together with
        # these in _add_algorithm_metrics; the peeked values are what reduce() would give.
        peeked = self.metrics.peek("env_runners") if "env_runners" in self.metrics else {}
        hist = peeked.get("hist_stats", {})
        episodes = self._smoothed_episodes(hist.get("episode_reward", []), hist.get("episode_lengths", []),
                                           hist.get("episode_policy_returns"))
        returns, lengths = [e[0] for e in episodes], [e[1] for e in episodes]
        env_runners = env_runner_section(peeked, self.config.keep_per_episode_custom_metrics, returns, lengths)
        _add_policy_hist_stats(env_runners["hist_stats"], episodes)
        self._counters["num_episodes_lifetime"] += int(env_runners["num_episodes"])
        env_runners["num_episodes_lifetime"] = self._counters["num_episodes_lifetime"]
        env_runners["num_env_steps_sampled"] = sampled
        env_runners["num_env_steps_sampled_lifetime"] = self._counters["num_env_steps_sampled_lifetime"]
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
            "fault_tolerance": fault_tolerance_section(self.env_runner_group),
            "iterations_since_restore": self._iterations_since_restore,
            "time_since_restore": self._time_since_restore,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            # Legacy names of the same values.
            **legacy_episode_keys(env_runners),
            "episodes_total": self._counters["num_episodes_lifetime"],
            "timesteps_total": self._counters["num_env_steps_sampled_lifetime"],
            "timesteps_this_iter": sampled,
            "num_env_steps_sampled": self._counters["num_env_steps_sampled_lifetime"],
            "num_env_steps_trained": self._counters["num_env_steps_trained_lifetime"],
            "info": {
                "learner": {mid: {"learner_stats": dict(m)} for mid, m in learner_results.items()},
                "num_env_steps_sampled": self._counters["num_env_steps_sampled_lifetime"],
                "num_env_steps_trained": self._counters["num_env_steps_trained_lifetime"],
            },
        }
        for key in ("num_agent_steps_sampled_lifetime", "num_agent_steps_trained_lifetime"):
            result[key] = self._counters[key]
        result.update(policy_reward_stats(env_runners["hist_stats"], self.is_multi_agent))
        return result

    def _smoothed_episodes(self, returns: list[float], lengths: list[int],
                           policy_returns: list[tuple] | None = None) -> list[tuple[float, int, tuple]]:
        """The episodes to report: the last metrics_num_episodes_for_smoothing ones, or all of
        this iteration's when there are more (seed 003: excess episodes are never cut)."""
        if policy_returns is None or len(policy_returns) != len(returns):
            policy_returns = [()] * len(returns)
        this_iteration = list(zip(returns, lengths, (tuple(p) for p in policy_returns)))
        self._episodes_window.extend(this_iteration)
        if len(returns) >= self._episodes_window.maxlen:
            return this_iteration
        return list(self._episodes_window)

    def _add_algorithm_metrics(self, result: dict[str, Any]) -> None:
        """Reduce the Algorithm's MetricsLogger (clearing per-iteration stats) and put what
        Algorithm callbacks logged at the top level of `result`."""
        reduced = self.metrics.reduce()
        env_runner_values = reduced.pop("env_runners", {})
        # Keys logged under env_runners by Algorithm callbacks (not by the runners) are added too.
        for key, value in env_runner_values.items():
            if key not in ("custom_metrics", "hist_stats"):
                result["env_runners"].setdefault(key, value)
        deep_update(result, reduced)

    def sample_and_learn(self) -> dict[str, Any]:
        """The synchronous on-policy training step (PPO, PG, A2C, MARWIL): sample (or read)
        `train_batch_size` steps, update on them, push the new weights, return the module results."""
        batch = self.env_runner_group.sample(num_timesteps=self.config.total_train_batch_size)
        steps = self.count_sampled(batch)
        metrics = self.learn_on_batch(batch, timestep=self._counters["num_env_steps_sampled_lifetime"])
        self.count_trained(batch, steps)
        self.sync_env_runner_weights()
        return self.module_results(metrics)

    def learn_on_batch(self, batch: Any, timestep: int) -> dict[str, Any]:
        """Update the learner on `batch`, after the old-API `on_learn_on_batch` callbacks saw it.

        The callbacks get the batch as a SampleBatch (the same arrays, so in-place changes reach
        the loss; once per policy in multi-agent runs) and a `result` dict whose entries are added
        to the returned learner metrics. Returns the learner's metrics: {module_id: metrics} in
        multi-agent runs.
        """
        extra: dict[str, Any] = {}
        if getattr(self, "_learner_connector", None) is not None:
            batch = self._run_learner_connector(batch)
        if self._on_learn_on_batch is not None:
            from rlx.policy.sample_batch import SampleBatch

            if self.is_multi_agent:
                batches = getattr(batch, "policy_batches", batch)
                for pid in list(batches):
                    batches[pid] = SampleBatch(batches[pid])
                    self._on_learn_on_batch(policy=self.get_policy(pid), train_batch=batches[pid], result=extra)
            else:
                batch = SampleBatch(batch)
                self._on_learn_on_batch(policy=self.get_policy(), train_batch=batch, result=extra)
        metrics = self.learner.run_update(batch, timestep=timestep)
        self.weights_version += 1
        if extra:
            metrics = {mid: {**m, **extra} for mid, m in metrics.items()} if self.is_multi_agent else \
                {**metrics, **extra}
        return metrics

    def module_results(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Learner metrics as {module_id: metrics}: a single-agent learner's metrics under
        'default_policy', a multi-agent learner's as they are."""
        return metrics if self.is_multi_agent else {DEFAULT_POLICY_ID: metrics}

    def count_sampled(self, batch: Any) -> int:
        """Add a sampled batch to the lifetime counters; return its step count for train-batch
        and reporting purposes (agent steps with count_steps_by='agent_steps')."""
        from rlx.env.env_runner_group import num_sampled_steps

        env_steps = num_sampled_steps(batch)
        self._counters["num_env_steps_sampled_lifetime"] += env_steps
        agent_steps = batch.agent_steps() if self.is_multi_agent else env_steps
        self._counters["num_agent_steps_sampled_lifetime"] += agent_steps
        if self.is_multi_agent and self.config.count_steps_by == "agent_steps":
            return agent_steps
        return env_steps

    def count_trained(self, batch: Any, steps: int) -> None:
        """Add a trained batch (`steps` as count_sampled returned) to the lifetime counters."""
        multi = self.is_multi_agent and hasattr(batch, "env_steps")
        self._counters["num_env_steps_trained_lifetime"] += batch.env_steps() if multi else steps
        self._counters["num_agent_steps_trained_lifetime"] += batch.agent_steps() if multi else steps

    # ------------------------------------------------------------------ evaluation

    @property
    def evaluation_workers(self) -> Any:
        """Old name of `eval_env_runner_group`."""
        return self.eval_env_runner_group

    @property
    def evaluation_config(self) -> AlgorithmConfig:
        """The frozen config of the evaluation EnvRunners (`evaluation_config` applied to this
        Algorithm's config, `in_evaluation=True`); available before any evaluation ran."""
        if getattr(self, "_evaluation_config", None) is None:
            eval_config = self.config.get_evaluation_config_object()
            eval_config.validate()
            eval_config.freeze()
            self._evaluation_config = eval_config
        return self._evaluation_config

    def _evaluation_due(self) -> bool:
        interval = self.config.evaluation_interval
        return interval is not None and (self.iteration + 1) % interval == 0

    def _make_eval_env_runner_group(self) -> Any:
        from rlx.env.env_runner_group import EnvRunnerGroup

        if self.eval_env_runner_group is None:
            eval_config = self.evaluation_config
            self.eval_env_runner_group = EnvRunnerGroup(
                eval_config, module_spec=self._module_spec(),
                local_env_runner=eval_config.num_env_runners == 0, runner_cls=self._env_runner_cls(),
            )
        return self.eval_env_runner_group

    def _sync_evaluation_runners(self) -> list[Any]:
        """Give every idle evaluation runner the current weights (version = iteration),
        observation filter and exploration state of the training runners; return the handles
        of the runners synced.

        A runner still busy (stuck in an earlier, timed-out evaluation; the driver's own
        evaluation runner included) is left alone: its weights must not change under a
        running episode. It is synced again once it is free, at the next evaluation.
        """
        group = self._make_eval_env_runner_group()
        handles = [h for h in group.runner_handles() if h.healthy and not h.busy]
        if not handles:
            return []
        weights = self.learner.get_weights()
        source = self.env_runner
        filter_state = source.filter.get_state()
        exploration_state = source.exploration.get_state()
        for handle in handles:
            runner = handle.runner
            runner.set_weights(weights, weights_seq_no=self.iteration)
            runner.filter.set_state(filter_state)
            if type(runner.exploration) is type(source.exploration):
                runner.exploration.set_state(exploration_state)
        return handles

    def _start_parallel_evaluation(self, training_done: threading.Event) -> Future:
        """Sync the evaluation runners now (so they evaluate the weights from before the training
        step) and run the evaluation on a thread; the Future holds `_run_evaluation`'s result.

        Callbacks stay on the caller's thread (on_evaluate_end fires in `_finish_evaluation`),
        so they can use the Algorithm's MetricsLogger while nothing else does.
        """
        self.callbacks.fire("on_evaluate_start", algorithm=self, metrics_logger=self.metrics)
        synced = self._sync_evaluation_runners()
        future: Future = Future()

        def run() -> None:
            try:
                future.set_result(self._run_evaluation(synced, training_done))
            except BaseException as err:  # re-raised in train() by future.result()
                future.set_exception(err)

        threading.Thread(target=run, name="rlx-parallel-evaluation", daemon=True).start()
        return future

    def evaluate(self) -> dict[str, Any]:
        """Evaluate the current weights on the evaluation EnvRunners; return the evaluation results.

        Runs `custom_evaluation_function(algorithm, eval_env_runner_group)` instead when one is
        configured. The dict is what train() reports under `result["evaluation"]`:
        `env_runners` (episode statistics of the evaluation episodes) and the old top-level names.
        Creates the evaluation runners on first use, so it also works without evaluation_interval.
        """
        self.callbacks.fire("on_evaluate_start", algorithm=self, metrics_logger=self.metrics)
        synced = self._sync_evaluation_runners()
        return self._finish_evaluation(*self._run_evaluation(synced))

    def _run_evaluation(self, synced: list[Any],
                        training_done: threading.Event | None = None) -> tuple[dict[str, Any], list[int]]:
        """(results, indices of runners that failed) of one evaluation on the `synced` runners."""
        from rlx.algorithms.evaluation import EvaluationPlan, add_off_policy_estimates, run_evaluation

        cfg = self.config
        group = self._make_eval_env_runner_group()
        custom = cfg.custom_evaluation_function
        if custom is not None:
            logger.info("Running custom eval function %s", custom)
            results = custom(self, group)
            if not isinstance(results, dict):
                raise TypeError(
                    f"custom_evaluation_function {getattr(custom, '__qualname__', custom)} returned "
                    f"{type(results).__name__}; it must return a dict of metrics."
                )
            return results, []
        eval_cfg = self.evaluation_config
        plan = EvaluationPlan(
            duration=cfg.evaluation_duration,
            unit=cfg.evaluation_duration_unit,
            num_envs_per_runner=int(eval_cfg.num_envs_per_env_runner),
            auto_timesteps_per_unit=int(eval_cfg.get_rollout_fragment_length()) * int(eval_cfg.num_envs_per_env_runner),
            timeout_s=float(cfg.evaluation_sample_timeout_s),
            asynchronous=bool(cfg.enable_async_evaluation),
            tolerate_failures=bool(cfg.ignore_env_runner_failures or cfg.restart_failed_env_runners),
            stop_event=training_done,
        )
        outcome = run_evaluation(synced, plan)
        results = self._compile_eval_results(outcome.metrics)
        add_off_policy_estimates(self, results)
        return results, outcome.failed_runner_indices

    def _finish_evaluation(self, results: dict[str, Any], failed_runner_indices: list[int]) -> dict[str, Any]:
        """Restart failed runners (if configured), fire on_evaluate_end and remember the results."""
        if failed_runner_indices and self.config.restart_failed_env_runners:
            self._restart_eval_runners(failed_runner_indices)
        self.callbacks.fire("on_evaluate_end", algorithm=self, metrics_logger=self.metrics,
                            evaluation_metrics=results)
        self._last_eval_results = results
        return results

    def _compile_eval_results(self, runner_metrics: list[dict]) -> dict[str, Any]:
        from rlx.evaluation.metrics import summarize_runner_metrics

        results = summarize_runner_metrics(runner_metrics, self.config.keep_per_episode_custom_metrics)
        results["num_healthy_workers"] = self.eval_env_runner_group.num_healthy_remote_workers()
        return results

    def _empty_eval_results(self) -> dict[str, Any]:
        return self._compile_eval_results([])

    def sync_env_runner_weights(self) -> None:
        """Send the learner's weights (if they changed) and the global env-step count (for
        exploration schedules) to the training EnvRunners."""
        self.env_runner_group.sync_weights(
            from_worker_or_learner_group=self.learner, weights_seq_no=self.weights_version,
            global_vars={"timestep": self._counters["num_env_steps_sampled_lifetime"]},
        )

    def _report_restarted_runners(self) -> None:
        restarted = self.env_runner_group.take_restarted_indices()
        if restarted:
            group = self.env_runner_group
            self.callbacks.fire(
                "on_env_runners_recreated", algorithm=self, env_runner_group=group, env_runner_indices=restarted,
                is_evaluation=False, worker_set=group, worker_ids=restarted,
            )

    def _restart_eval_runners(self, indices: list[int]) -> None:
        group = self.eval_env_runner_group
        for index in indices:
            group.recreate_runner(index)
        self.callbacks.fire(
            "on_env_runners_recreated", algorithm=self, env_runner_group=group, env_runner_indices=list(indices),
            is_evaluation=True, worker_set=group, worker_ids=list(indices),
        )

    # ------------------------------------------------------------------ curriculum

    def _apply_env_task_fn(self, result: dict[str, Any]) -> None:
        """Set every training sub-env to the task env_task_fn(result, env, env_context) returns."""
        fn = self.config.env_task_fn

        def set_task(env: Any, ctx: Any) -> None:
            target = _task_settable(env)
            target.set_task(fn(result, target, ctx))

        self.env_runner_group.foreach_env_runner(lambda runner: runner.foreach_env_with_context(set_task))

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
        # The Policy takes filtered observations (RLlib's recipe: preprocess, filter, then the policy).
        action, state_out, extra = policy.compute_single_action(
            policy.filter_observation(observation), state, explore=explore, timestep=timestep,
            unsquash_action=unsquash_action, clip_action=clip_action,
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
                policy.filter_observations([observations[k] for k in keys]), explore=explore,
                timestep=timestep, unsquash_actions=unsquash_actions, clip_actions=clip_actions,
            )
            out = {k: actions[i] for i, k in enumerate(keys)}
        else:
            out, state_out, extra = policy.compute_actions(
                policy.filter_observations(observations), explore=explore, timestep=timestep,
                unsquash_actions=unsquash_actions, clip_actions=clip_actions,
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

    def restore(self, checkpoint_path: Any) -> None:
        """Load a checkpoint of the same algorithm and config into this Algorithm.

        `checkpoint_path` is the checkpoint directory or a checkpoint object: Ray Tune's
        `result.checkpoint`, a Tune `Result`, or what `algo.save()` returned.
        """
        self.restore_from_path(checkpoint_path)

    def restore_from_path(self, path: Any) -> None:
        """Load weights, optimizer state, counters and filters from a checkpoint (a directory
        or a checkpoint object, as for `restore`)."""
        from rlx.algorithms.checkpointing import read_algorithm_checkpoint
        from rlx.utils.checkpoints import checkpoint_dir

        read_algorithm_checkpoint(self, checkpoint_dir(path))
        self.callbacks.fire("on_checkpoint_loaded", algorithm=self)

    load_checkpoint = restore_from_path

    @classmethod
    def from_checkpoint(cls, path: Any, config_overrides: dict | None = None, *, env: Any = None,
                        policy_mapping_fn: Any = None, **kwargs: Any) -> "Algorithm":
        """Rebuild an Algorithm (class, config, weights, state) from a checkpoint alone: its
        directory or a checkpoint object (Ray Tune's `result.checkpoint`, a Tune `Result`,
        what `algo.save()` returned).

        `env` and `policy_mapping_fn` replace the stored ones (as `config_overrides` does):
        give them when the checkpoint could not store them (a class defined inside a
        function, a creator lambda; the error says which)."""
        from rlx.algorithms.checkpointing import algorithm_from_checkpoint
        from rlx.utils.checkpoints import checkpoint_dir

        root = checkpoint_dir(path)
        if kwargs:
            raise TypeError(f"from_checkpoint() got unexpected arguments: {', '.join(kwargs)}.")
        overrides = dict(config_overrides or {})
        for key, value in (("env", env), ("policy_mapping_fn", policy_mapping_fn)):
            if value is not None:
                overrides[key] = value
        algo = algorithm_from_checkpoint(root, overrides)
        try:
            algo.callbacks.fire("on_checkpoint_loaded", algorithm=algo)
            if cls is not Algorithm and not isinstance(algo, cls):
                raise CheckpointError(f"Checkpoint {root} holds a {type(algo).__name__}, not a {cls.__name__}.")
        except BaseException:
            algo.stop()  # its runner and learner processes must not outlive the failed load
            raise
        return algo

    def write_checkpoint_extras(self, directory: Path) -> list[str]:
        """Write algorithm-specific checkpoint files (e.g. the replay buffer) into `directory`.

        Returns their paths relative to `directory`; the base Algorithm has none.
        """
        return []

    def load_checkpoint_extras(self, directory: Path) -> Any:
        """Read and check what `write_checkpoint_extras` wrote, without applying it (None when
        there is nothing; the base Algorithm has nothing)."""
        return None

    def apply_checkpoint_extras(self, loaded: Any) -> None:
        """Apply what `load_checkpoint_extras` returned (the base Algorithm has nothing to apply)."""
        return None

    def read_checkpoint_extras(self, directory: Path) -> None:
        """Load what `write_checkpoint_extras` wrote into this Algorithm."""
        self.apply_checkpoint_extras(self.load_checkpoint_extras(directory))

    def get_state(self) -> dict[str, Any]:
        """JSON-safe algorithm state (counters, metrics, learner and runner extras)."""
        return {
            "iteration": self.iteration,
            "time_total_s": self._time_total_s,
            "counters": dict(self._counters),
            "episodes_window": [[float(r), int(n), [[str(pid), float(v)] for pid, v in p]]
                                for r, n, p in self._episodes_window],
            "metrics": self.metrics.get_state(),
            "learner": self.learner.get_extra_state(),
            "env_runner": self.env_runner.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state(). A field that does not fit raises StateFieldError naming it; the
        numbers are checked before anything changes.

        RLlib's partial form `{"learner_group": {"learner": {"rl_module": {module_id: weights}}}}`
        sets just those modules' weights (and syncs the EnvRunners).
        """
        if "learner_group" in state and "iteration" not in state:
            with state_field("learner_group.learner.rl_module"):
                weights = state["learner_group"]["learner"]["rl_module"]
                if not self.is_multi_agent and DEFAULT_POLICY_ID not in weights:
                    weights = {DEFAULT_POLICY_ID: weights}
            self.set_weights(dict(weights))
            return
        iteration = state_count(state, "iteration")
        with state_field("time_total_s"):
            time_total = float(state["time_total_s"])
            if not math.isfinite(time_total) or time_total < 0:
                raise ValueError(f"{time_total} is not a duration")
        with state_field("counters"):
            counters = {str(k): state_count(state["counters"], k) for k in dict(state["counters"])}
        with state_field("episodes_window"):
            window = [(float(e[0]), int(e[1]), tuple((str(pid), float(v)) for pid, v in (e[2] if len(e) > 2 else ())))
                      for e in state["episodes_window"]]
        self.iteration = iteration
        self._time_total_s = time_total
        self._counters.update(counters)
        self._episodes_window.clear()
        self._episodes_window.extend(window)
        if "metrics" in state:
            with state_field("metrics"):
                self.metrics.set_state(state["metrics"])
        with state_field("learner"):
            self.learner.set_extra_state(state["learner"])
        with state_field("env_runner"):
            self.env_runner.set_state(state["env_runner"])
        self._iterations_since_restore = 0
        self._time_since_restore = 0.0

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Release the envs, runners and learner processes and close the result logger. Every
        part is stopped even when another fails to; the first such error is raised afterwards."""
        from rlx.env.env_runner_group import run_all

        steps = []
        offline_io = getattr(self, "_offline_io", None)
        if offline_io is not None:
            steps.append(offline_io.close)  # completes the output files
        learner_stop = getattr(getattr(self, "learner", None), "stop", None)
        if learner_stop is not None:
            steps.append(learner_stop)
        for name in ("env_runner_group", "eval_env_runner_group"):
            group = getattr(self, name, None)
            if group is not None:
                steps.append(group.stop)
        steps.append(self._close_result_logger)
        run_all(steps)

    def _close_result_logger(self) -> None:
        result_logger = getattr(self, "_result_logger", None)
        if result_logger is not None:
            self._result_logger = None
            result_logger.close()

    cleanup = stop

    def __enter__(self) -> "Algorithm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.config.env!r}, iteration={self.iteration})"


def _add_policy_hist_stats(hist_stats: dict[str, Any], episodes: list[tuple[float, int, tuple]]) -> None:
    """hist_stats["policy_<id>_reward"]: the returns of each agent that used policy <id> in the
    reported episodes (the old API's per-policy statistics), replacing the raw per-episode entries."""
    hist_stats.pop("episode_policy_returns", None)
    for _, _, policy_returns in episodes:
        for policy_id, value in policy_returns:
            hist_stats.setdefault(f"policy_{policy_id}_reward", []).append(value)


def _task_settable(env: Any) -> Any:
    """The object with get_task/set_task: the env itself or, under Gymnasium wrappers, the
    unwrapped env; raises ConfigError when neither has them."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        if candidate is not None and callable(getattr(candidate, "set_task", None)) \
                and callable(getattr(candidate, "get_task", None)):
            return candidate
    raise ConfigError(
        f"env_task_fn is set, but the env {type(getattr(env, 'unwrapped', env)).__name__} is not task-settable: "
        "it needs get_task() and set_task(task) methods. Subclass "
        "rlx.env.apis.task_settable_env.TaskSettableEnv, or remove env_task_fn."
    )


def _check_task_settable(runner: Any) -> None:
    runner.foreach_env(_task_settable)


class StateFieldError(ValueError):
    """A field of an algorithm state (`Algorithm.set_state`) does not fit; `field` names it
    (dot-separated), `reason` says why."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"state field '{field}': {reason}")
        self.field = field
        self.reason = reason


@contextlib.contextmanager
def state_field(name: str) -> Iterator[None]:
    """Report an error while restoring state field `name` as a StateFieldError naming it."""
    try:
        yield
    except StateFieldError as err:
        raise StateFieldError(f"{name}.{err.field}", err.reason) from err
    except Exception as err:
        raise StateFieldError(name, f"{type(err).__name__}: {err}") from err


def state_count(state: Any, name: str) -> int:
    """`state[name]` as a non-negative integer count, or a StateFieldError naming it."""
    with state_field(name):
        value = state[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or value != int(value) or value > 2**62:
            raise ValueError(f"{value!r:.40} is not a count")
        return int(value)


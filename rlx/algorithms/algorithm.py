"""Algorithm: the lifecycle and the train loop of one configured algorithm.

Subclasses (PPO, ...) implement `training_step()`, or inherit a loop that does
(`rlx.algorithms.on_policy.OnPolicyAlgorithm`, `rlx.algorithms.off_policy.OffPolicyAlgorithm`),
and name their config class, default RLModule and Learner. This class builds the parts, runs
train() with its reporting minimums and stops; the rest of RLlib's Algorithm API is here as
methods that hand their work to one module per job:

    components, module_specs   the EnvRunnerGroups, the learner container, the module specs
    results                    the result dict of train()
    learning                   learn_on_batch: learner connector, on_learn_on_batch, update
    evaluation_runs            evaluate() and evaluation during training (schedule: evaluation)
    policy_management          get_module, get/set_weights, add/remove_policy and _module
    inference                  compute_single_action / compute_actions
    algorithm_checkpoints      save/restore/from_checkpoint/get_state (IO: checkpointing)
    algorithm_logging          the result logger, logdir and videos (curriculum: env_task_fn)

The modules that load torch (runner groups, learners, RLModules, offline IO) or checkpoint IO are
imported where they are used, so that importing an algorithm's config stays cheap.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rlx.algorithms import algorithm_logging, evaluation_runs, inference, learning, policy_management
from rlx.algorithms.algorithm_config import AlgorithmConfig
# StateFieldError, state_field and state_count lived here; they stay importable from this module.
from rlx.algorithms.algorithm_state import StateFieldError, state_count, state_field  # noqa: F401
# SaveResult lived here; it stays importable from this module.
from rlx.algorithms.algorithm_checkpoints import AlgorithmCheckpoints, SaveResult  # noqa: F401
from rlx.algorithms.curriculum import apply_env_task_fn, check_task_settable
from rlx.algorithms.image_env_advice import advise_on_image_settings
from rlx.algorithms.resources import check_gpu_request, trial_bundles
from rlx.algorithms.results import Episode, add_algorithm_metrics, train_result
from rlx.algorithms.throughput import add_throughput
from rlx.core import DEFAULT_POLICY_ID
from rlx.core.sample_batch import as_multi_agent
from rlx.offline.results import report_evaluation_returns
from rlx.utils.errors import ConfigError
from rlx.utils.metrics.metrics_logger import MetricsLogger
from rlx.utils.metrics.result_keys import (LEARNER_UPDATE_TIMER, SYNCH_WORKER_WEIGHTS_TIMER, TIMERS,
                                           TRAINING_ITERATION_TIMER, TRAINING_STEP_TIMER)
from rlx.utils.progress import IterationProgress
from rlx.utils.registry import LIVE_ALGORITHMS, import_object
from rlx.utils.stack_dump import install as install_stack_dumps
from rlx.utils.sys_usage import sys_usage_monitor

logger = logging.getLogger("rlx")

class Algorithm(AlgorithmCheckpoints):
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

    @classmethod
    def default_resource_request(cls, config: AlgorithmConfig | dict) -> Any:
        """The Ray Tune resources (a PlacementGroupFactory) a trial of this algorithm with `config`
        needs: a bundle for the Algorithm and one per remote EnvRunner and Learner process, as
        rlx's Tune Trainables request (for `tune.with_resources(fn, resources=...)`). Imports Ray Tune."""
        from ray.tune import PlacementGroupFactory

        config_dict = config.to_dict() if isinstance(config, AlgorithmConfig) else dict(config)
        trial_config = cls.get_default_config()
        try:
            trial_config.update_from_dict(config_dict)
            valid = True
        except Exception:  # noqa: BLE001 - building the Algorithm reports what is wrong with it
            valid = False
        bundles = trial_bundles(trial_config) if valid else None
        if bundles is None:
            return PlacementGroupFactory([{"CPU": float(config_dict.get("num_cpus_for_main_process") or 1)}])
        return PlacementGroupFactory(bundles, strategy=trial_config.placement_strategy)

    def __init__(self, config: AlgorithmConfig | dict | None = None, env: Any = None,
                 logger_creator: Any = None, **kwargs: Any):
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected arguments: {', '.join(kwargs)}.")
        self.config = self._coerce_config(config, env)
        self.config.validate()
        self.config.freeze()
        from rlx.env.env_runner_group import resolve_backend  # the runner layer loads torch

        check_gpu_request(self.config, resolve_backend(self.config.env_runner_backend))
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
        self._episodes_window: deque[Episode] = \
            deque(maxlen=self.config.metrics_num_episodes_for_smoothing)
        #: Algorithm-side metrics: merged EnvRunner metrics under "env_runners", plus whatever
        #: Algorithm callbacks log (reported at the top level of the result). The root logger:
        #: reduce="lifetime_sum" values add up over the whole run here.
        self.metrics = MetricsLogger(root=True)
        self.callbacks = self.config.make_callback_dispatcher()
        self.eval_env_runner_group: Any = None
        self._last_eval_results: dict[str, Any] | None = None
        self._offline_io: Any = None
        self._sys_usage = sys_usage_monitor(self.config)  # log_sys_usage: result["perf"]
        try:
            self.setup(self.config)
            advise_on_image_settings(self)  # a warning when an image env gets CartPole's settings
            LIVE_ALGORITHMS.add(self)  # its Policies' learn_on_batch() updates through its Learner
            from rlx.offline.offline_io import attach_offline_io  # offline IO loads torch

            self._offline_io = attach_offline_io(self)  # input_ / output (offline data)
            self._on_learn_on_batch = self.callbacks.get("on_learn_on_batch")
            if self.config.evaluation_interval is not None:
                evaluation_runs.eval_env_runner_group(self)
            if self.config.env_task_fn is not None:
                self.env_runner_group.foreach_env_runner(check_task_settable)
            if self.config.render_env:
                algorithm_logging.start_video_recording(self)
            self.callbacks.fire("on_algorithm_init", algorithm=self, metrics_logger=self.metrics)
        except BaseException:
            # Worker processes, learner processes and envs built so far must not outlive a
            # build that failed.
            self.stop()
            raise
        logger.info("Built %s on %s: %d sub-environment(s) per runner, %d remote runner(s), seed %s.",
                    type(self).__name__, self.config.env, self.config.num_envs_per_env_runner,
                    self.config.num_env_runners, self.config.seed)

    def _coerce_config(self, config: AlgorithmConfig | dict | None, env: Any) -> AlgorithmConfig:
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
        """Create the EnvRunnerGroup and the learner container (they share the local module) and
        the learner connector pipeline."""
        from rlx.algorithms import components  # runner groups and learners load torch

        self.env_runner_group = components.build_env_runner_group(self, config)
        self.learner = components.build_learner_container(self, config)
        self._learner_connector = components.build_learner_connector(self)

    def _resolved_learner_class(self) -> Any:
        """The Learner class: the config's learner_class (a class or an import path), else the one a
        custom config's get_default_learner_class() names (as in RLlib), else the algorithm's."""
        learner_cls = self.config.get("learner_class")
        if learner_cls is None and \
                type(self.config).get_default_learner_class is not AlgorithmConfig.get_default_learner_class:
            learner_cls = self.config.get_default_learner_class()
        learner_cls = learner_cls or self._learner_class
        return import_object(learner_cls) if isinstance(learner_cls, str) else learner_cls

    def get_default_rl_module_spec(self) -> Any:
        """The RLModuleSpec of this algorithm's default module: the actor-critic MLP (with the
        memory model['use_lstm'] or ['use_attention'] asks for), or a ModelV2RLModule running
        model['custom_model'] (an old-API ModelV2) when set. Algorithms override it."""
        from rlx.algorithms.module_specs import default_rl_module_spec  # RLModules load torch

        if type(self.config).get_default_rl_module_spec is not AlgorithmConfig.get_default_rl_module_spec:
            return self.config.get_default_rl_module_spec()  # a custom config names its module (RLlib)
        return default_rl_module_spec(self)

    def _module_spec(self) -> Any:
        """The RLModuleSpec every module is built from (the default completed with the config's
        rl_module_spec), or a MultiRLModuleSpec of one per module id; see rlx.algorithms.module_specs."""
        from rlx.algorithms.module_specs import module_spec  # RLModules load torch

        return module_spec(self)

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
        return algorithm_logging.trial_logdir(self)

    @property
    def result_logger(self) -> Any:
        """The logger every train() result goes to (created on first use; see rlx.loggers)."""
        return algorithm_logging.result_logger(self)

    @property
    def learner_group(self) -> Any:
        """RLlib's LearnerGroup: a view of the Algorithm's learners (the local Learner, as its
        `_learner`, or the learner processes) whose `update()` answers RLlib's list of results."""
        from rlx.algorithms.components import LearnerGroupView  # (loaded with the learners)

        return LearnerGroupView(self.learner)

    @property
    def learners(self) -> Any:
        """The learner container every core-path function goes through: {module_id: Learner or
        group}. It is `learner` itself in multi-agent runs; a single-agent run's `learner` is its
        one module's Learner (as RLlib code expects), viewed here as a one-module container."""
        from rlx.core.learner.container import module_learners  # learners load torch

        learner = self.learner
        cached = self.__dict__.get("_learners_view")
        if cached is None or cached[0] is not learner:  # (a subclass's setup may replace `learner`)
            cached = self.__dict__["_learners_view"] = (learner, module_learners(learner))
        return cached[1]

    def learner_by_module(self) -> dict[str, Any]:
        """{module_id: the Learner (or LearnerGroup) of that module}; one entry when single-agent."""
        return self.learners.by_module()

    # ------------------------------------------------------------------ modules and policies

    def get_module(self, module_id: str = DEFAULT_POLICY_ID) -> Any:
        """The RLModule of `module_id` being trained."""
        return policy_management.get_module(self, module_id)

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """The Policy view (old API) of the local EnvRunner's module of `policy_id`."""
        self._check_policy_id(policy_id)
        return self.env_runner.get_policy(policy_id)

    @property
    def policy_ids(self) -> list[str]:
        """The ids of the policies (modules) this Algorithm holds."""
        return policy_management.policy_ids(self)

    def _check_policy_id(self, policy_id: str) -> None:
        policy_management.check_policy_id(self, policy_id)

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{policy_id: weights} of the trained modules (all, or those in `policies`)."""
        return policy_management.get_weights(self, policies)

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load weights given as {policy_id: weights} (or plain weights, single-agent) and sync the runners."""
        policy_management.set_weights(self, weights)

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID,
                            onnx: int | None = None) -> None:
        """Export the model of `policy_id` into `export_dir` for serving without rlx: TorchScript
        (`model.pt`), or ONNX (`model.onnx`) with `onnx=<opset>`; see `Policy.export_model`."""
        self.get_policy(policy_id).export_model(export_dir, onnx)

    def import_model(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Load weights trained outside rlx (an .h5 file, or a torch state dict in a .pt/.pth file)
        into the policy's model and use them from now on; see rlx.algorithms.model_import."""
        from rlx.algorithms.model_import import import_model  # torch

        import_model(self, import_file, policy_id)

    def import_policy_model_from_h5(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """`import_model` for an h5 file (RLlib's name)."""
        self.import_model(import_file, policy_id)

    def add_policy(self, policy_id: str, policy_cls: Any = None, policy: Any = None, *,
                   observation_space: Any = None, action_space: Any = None,
                   config: AlgorithmConfig | dict | None = None,
                   policy_state: dict | None = None, policy_mapping_fn: Any = None, policies_to_train: Any = None,
                   evaluation_workers: bool = True, module_spec: Any = None, **kwargs: Any) -> Any:
        """Add a policy to this (multi-agent) Algorithm and all its EnvRunners; return its Policy view.

        Its weights come from `policy` (an existing Policy), `policy_state` (a Policy's get_state()
        or plain weights), or a fresh initialisation. `policy_mapping_fn` and `policies_to_train`
        replace the current ones when given.
        """
        if kwargs:
            raise TypeError(f"add_policy() got unexpected arguments: {', '.join(kwargs)}.")
        return policy_management.add_policy_from(
            self, policy_id, policy_cls, policy, observation_space, action_space, config, policy_state,
            policy_mapping_fn, policies_to_train, evaluation_workers, module_spec)

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, *, policy_mapping_fn: Any = None,
                      policies_to_train: Any = None, evaluation_workers: bool = True, **kwargs: Any) -> None:
        """Remove a policy from this Algorithm and all its EnvRunners."""
        if kwargs:
            raise TypeError(f"remove_policy() got unexpected arguments: {', '.join(kwargs)}.")
        policy_management.remove_policy(self, policy_id, policy_mapping_fn, policies_to_train, evaluation_workers)

    def add_module(self, module_id: str, module_spec: Any = None, *, config_overrides: dict | None = None,
                   new_agent_to_module_mapping_fn: Any = None, new_should_module_be_updated: Any = None,
                   add_to_env_runners: bool = True, add_to_eval_env_runners: bool = True) -> Any:
        """Add a module (new API name of add_policy): built from `module_spec`'s spaces and model
        config; returns the new RLModule."""
        return policy_management.add_module(self, module_id, module_spec, config_overrides,
                                            new_agent_to_module_mapping_fn, new_should_module_be_updated,
                                            add_to_env_runners, add_to_eval_env_runners)

    def remove_module(self, module_id: str, *, new_agent_to_module_mapping_fn: Any = None,
                      new_should_module_be_updated: Any = None, remove_from_env_runners: bool = True,
                      remove_from_eval_env_runners: bool = True) -> None:
        """Remove a module (new API name of remove_policy)."""
        self.remove_policy(module_id, policy_mapping_fn=new_agent_to_module_mapping_fn,
                           policies_to_train=new_should_module_be_updated,
                           evaluation_workers=remove_from_eval_env_runners)

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
        weights_version_before = self.weights_version
        evaluate_now = self._evaluation_due()
        parallel_eval: Future | None = None
        training_done = threading.Event()
        if evaluate_now and cfg.evaluation_parallel_to_training:
            # Weights are copied to the evaluation runners now, so they evaluate the weights
            # from before this training step (the seed's "train(1->2) + eval(1)").
            parallel_eval = evaluation_runs.start_parallel_evaluation(self, training_done)
        learner_results: dict[str, Any] = {}
        progress = IterationProgress.begin(cfg, self.iteration + 1, sampled_before, self._time_total_s)
        try:
            while True:
                with self.metrics.log_time((TIMERS, TRAINING_STEP_TIMER)):
                    learner_results = self.training_step() or learner_results
                self._report_restarted_runners()
                self.metrics.merge_and_log_n_dicts(self.env_runner_group.get_metrics(), key="env_runners")
                if getattr(getattr(self.env_runner_group, "local_env_runner", None), "returns_episodes", False):
                    # A training_step of the user's samples through the runners: their lifetime count is the Algorithm's.
                    self._counters["num_env_steps_sampled_lifetime"] = max(
                        self._counters["num_env_steps_sampled_lifetime"],
                        int(self.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"), default=0)))
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
            progress.end()
        self.iteration += 1
        self._iterations_since_restore += 1
        eval_results = None
        if parallel_eval is not None:
            eval_results = evaluation_runs.finish_evaluation(self, *parallel_eval.result())
        elif evaluate_now:
            eval_results = self.evaluate()
        elapsed = time.perf_counter() - start
        self._time_total_s += elapsed
        self._time_since_restore += elapsed
        self.metrics.log_value((TIMERS, TRAINING_ITERATION_TIMER), elapsed)
        result = self._build_result(learner_results, sampled, trained, elapsed)
        add_throughput(result, sampled, trained, self.weights_version - weights_version_before, elapsed)
        if self._sys_usage is not None:
            result["perf"] = self._sys_usage.read()
        result["num_agent_steps_sampled_this_iter"] = \
            self._counters["num_agent_steps_sampled_lifetime"] - agent_counts_before[0]
        result["num_agent_steps_trained_this_iter"] = \
            self._counters["num_agent_steps_trained_lifetime"] - agent_counts_before[1]
        if eval_results is None and cfg.always_attach_evaluation_results and cfg.evaluation_interval is not None:
            eval_results = self._last_eval_results if self._last_eval_results is not None else \
                evaluation_runs.compile_eval_results(self, [])
        if eval_results is not None:
            result["evaluation"] = eval_results
        if self._offline_io is not None and not self._offline_io.samples_envs:
            report_evaluation_returns(result, self._last_eval_results)
        self.callbacks.fire("on_train_result", algorithm=self, metrics_logger=self.metrics, result=result)
        add_algorithm_metrics(self.metrics, result)
        if cfg.env_task_fn is not None:
            apply_env_task_fn(self, result)
        self.result_logger.on_result(result)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("Iteration %d: %d env steps sampled, %d trained in %.3f s; learner stats: %s",
                         self.iteration, sampled, trained, elapsed,
                         {mid: {k: round(float(v), 4) for k, v in m.items() if isinstance(v, (int, float))}
                          for mid, m in result["learners"].items()})
        return result

    def _build_result(self, learner_results: dict[str, Any], sampled: int, trained: int,
                      elapsed: float) -> dict[str, Any]:
        """The result dict of this iteration (subclasses add their own entries)."""
        return train_result(self, learner_results, sampled, trained, elapsed)

    def learn_on_batch(self, batch: Any, timestep: int) -> dict[str, Any]:
        """Update the learner on `batch`, after the learner connector pipeline and the old-API
        `on_learn_on_batch` callbacks saw it.

        The callbacks get the batch as a SampleBatch (the same arrays, so in-place changes reach
        the loss; once per policy in multi-agent runs) and a `result` dict whose entries are added
        to the returned learner metrics. Returns the learner's metrics: {module_id: metrics} in
        multi-agent runs.
        """
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            return learning.learn_on_batch(self, batch, timestep)

    def module_results(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """What `learn_on_batch` returned as {module_id: metrics}: a single-agent learner's
        metrics under 'default_policy', a multi-agent learner's as they are."""
        return self.learners.per_module(metrics)

    def count_sampled(self, batch: Any) -> int:
        """Add a sampled batch (any batch type: it carries its env and agent step counts) to the
        lifetime counters; return its step count for train-batch and reporting purposes (agent
        steps with count_steps_by='agent_steps')."""
        batch = as_multi_agent(batch)
        env_steps, agent_steps = batch.env_steps(), batch.agent_steps()
        self._counters["num_env_steps_sampled_lifetime"] += env_steps
        self._counters["num_agent_steps_sampled_lifetime"] += agent_steps
        return agent_steps if self.config.count_steps_by == "agent_steps" else env_steps

    def count_trained(self, batch: Any, steps: int | None = None) -> None:
        """Add a trained batch's env and agent steps to the lifetime counters (`steps`, what
        count_sampled returned, is not needed: the batch carries its counts)."""
        batch = as_multi_agent(batch)
        self._counters["num_env_steps_trained_lifetime"] += batch.env_steps()
        self._counters["num_agent_steps_trained_lifetime"] += batch.agent_steps()

    def sync_env_runner_weights(self) -> None:
        """Send the learner's weights (if they changed) and the global env-step count (for
        exploration schedules) to the training EnvRunners."""
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
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

    # ------------------------------------------------------------------ evaluation

    @property
    def evaluation_workers(self) -> Any:
        """Old name of `eval_env_runner_group`."""
        return self.eval_env_runner_group

    @property
    def evaluation_config(self) -> AlgorithmConfig:
        """The frozen config of the evaluation EnvRunners (`evaluation_config` applied to this
        Algorithm's config, `in_evaluation=True`); available before any evaluation ran."""
        return evaluation_runs.evaluation_config(self)

    def _evaluation_due(self) -> bool:
        interval = self.config.evaluation_interval
        return interval is not None and (self.iteration + 1) % interval == 0

    def evaluate(self) -> dict[str, Any]:
        """Evaluate the current weights on the evaluation EnvRunners; return the evaluation results.

        Runs `custom_evaluation_function(algorithm, eval_env_runner_group)` instead when one is
        configured. The dict is what train() reports under `result["evaluation"]`:
        `env_runners` (episode statistics of the evaluation episodes) and the old top-level names.
        Creates the evaluation runners on first use, so it also works without evaluation_interval.
        """
        return evaluation_runs.evaluate(self)

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
        return inference.compute_single_action(
            self, observation, state, input_dict=input_dict, policy_id=policy_id, full_fetch=full_fetch,
            explore=explore, timestep=timestep, unsquash_action=unsquash_action, clip_action=clip_action)

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
        return inference.compute_actions(
            self, observations, state, policy_id=policy_id, full_fetch=full_fetch, explore=explore,
            timestep=timestep, unsquash_actions=unsquash_actions, clip_actions=clip_actions)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Release the envs, runners and learner processes and close the result logger. Every
        part is stopped even when another fails to; the first such error is raised afterwards."""
        from rlx.env.env_runner_group import run_all  # the runner layer loads torch

        steps = []
        offline_io = getattr(self, "_offline_io", None)
        if offline_io is not None:
            steps.append(offline_io.close)  # completes the output files
        if getattr(self, "eval_env_runner_group", None) is not None:
            steps.append(lambda: evaluation_runs.close_evaluation_output(self))  # and the evaluation runners'
        learner_stop = getattr(getattr(self, "learner", None), "stop", None)
        if learner_stop is not None:
            steps.append(learner_stop)
        for name in ("env_runner_group", "eval_env_runner_group"):
            group = getattr(self, name, None)
            if group is not None:
                steps.append(group.stop)
        steps.append(lambda: algorithm_logging.close_result_logger(self))
        run_all(steps)

    cleanup = stop

    def __enter__(self) -> "Algorithm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self.config.env!r}, iteration={self.iteration})"

"""The options every AlgorithmConfig has (seed 003 "Configuring RLlib Algorithms" and DESIGN.md).

Options whose feature is not built yet carry `later="<feature>"`: they accept only their
default, and any other value raises "not supported yet: <option>".
"""
from __future__ import annotations

from rlx.algorithms.common_option_checks import (
    callbacks_class,
    compress_observations,
    dynamo_backend,
    evaluation_config,
    evaluation_interval,
    event_callables,
    exploration_config,
    framework,
    log_level,
    must_be_true,
    ope_methods,
    replay_mode,
    rl_module_spec,
    torch_device,
    torch_lr_scheduler_classes,
    vectorize_mode,
    what_to_compile,
    worker_dynamo_backend,
)
from rlx.algorithms.config_options import (
    Option,
    any_value,
    boolean,
    callable_only,
    callable_or_none,
    choice,
    class_or_none,
    clip_rewards_check,
    count,
    dictionary,
    env_spec,
    int_or_literal,
    integer,
    number,
    resource_amounts,
    schedule_or_number,
    seconds,
    space_or_none,
    string,
)
from rlx.algorithms.multi_agent_options import check_overrides_per_module, check_policies, check_policies_to_train
from rlx.callbacks.callbacks import CALLBACK_EVENTS
from rlx.algorithms.offline_data_options import OFFLINE_DATA_OPTIONS

EVAL = "evaluation during training (evaluation_interval and friends)"
ONE_STACK = "a switch between RLlib's API stacks, and rlx has one"


T = ("training",)
E = ("environment",)
F = ("framework",)
R = ("env_runners",)
EV = ("evaluation",)
X = ("exploration",)
M = ("multi_agent",)
REP = ("reporting",)
CK = ("checkpointing",)
D = ("debugging",)
CB = ("callbacks",)
RES = ("resources",)
L = ("learners", "resources")
FT = ("fault_tolerance", "env_runners")
RM = ("rl_module",)
EXP = ("experimental",)
API = ("api_stack",)

COMMON_OPTIONS: list[Option] = [
    # --- training
    Option("gamma", 0.99, T, number(0.0, 1.0), doc="Discount factor."),
    Option("lr", 0.001, T, schedule_or_number(0.0), aliases=("lr_schedule",),
           doc="Learning rate: a float or a piecewise schedule [[timestep, lr], ...]."),
    Option("grad_clip", None, T, number(0.0, allow_none=True, exclusive_min=True),
           doc="Clip gradients at this value (see grad_clip_by); None for no clipping."),
    Option("grad_clip_by", "global_norm", T, choice("value", "norm", "global_norm")),
    Option("skip_nonfinite_updates", False, T, boolean,
           doc="Skip an optimizer step whose loss or gradient norm is NaN or infinite, counting it in the learner "
               "results' num_nonfinite_updates_skipped, instead of raising NonFiniteUpdateError (rlx only)."),
    Option("train_batch_size", 4000, T, integer(1), doc="Env steps per training batch."),
    Option("train_batch_size_per_learner", None, T, integer(1, allow_none=True),
           doc="Batch size per Learner; overrides train_batch_size when set."),
    Option("model", None, T + RM, dictionary(allow_none=True), aliases=("model_config",),
           doc="Model settings (see rlx.models.MODEL_DEFAULTS)."),
    Option("optimizer", {}, T, dictionary(),
           doc="Optimizer settings: {'type': 'adam'|'adamw'|'sgd'|'rmsprop', plus its keyword args}."),
    Option("max_requests_in_flight_per_env_runner", 2, T + R, integer(1),
           aliases=("max_requests_in_flight_per_sampler_worker",),
           doc="Asynchronous algorithms (IMPALA, APPO): sample() requests each remote EnvRunner may have queued; "
               "synchronous algorithms send one request per runner at a time."),
    # RLlib's base config has these three; PPO, IMPALA and APPO redefine them with their own defaults.
    Option("num_epochs", 1, T, count(1), aliases=("num_sgd_iter",),
           doc="Passes over each train batch; read by the algorithms that train in minibatches (PPO, IMPALA, "
               "APPO), accepted and unused by the others, as in RLlib."),
    Option("minibatch_size", None, T, integer(1, allow_none=True),
           doc="Rows per minibatch; read by the algorithms that train in minibatches (PPO, IMPALA, APPO), "
               "accepted and unused by the others, as in RLlib."),
    Option("shuffle_batch_per_epoch", False, T, boolean,
           doc="Shuffle the train batch before each pass; read by the algorithms that train in minibatches "
               "(PPO, IMPALA, APPO), accepted and unused by the others, as in RLlib."),
    Option("learner_class", None, T, class_or_none, doc="Learner subclass to use."),
    Option("learner_config_dict", {}, T, dictionary(),
           doc="Settings of your own for a custom Learner class, read there as "
               "self.config.learner_config_dict[...]."),
    Option("learner_connector", None, T, callable_only,
           doc="Callable (input_observation_space, input_action_space) -> ConnectorV2 piece(s) run on each "
               "train batch (with episode views over it) before the update; see docs/connectors.md."),
    Option("add_default_connectors_to_learner_pipeline", True, T, boolean,
           doc="Whether a Learner adds its default pieces to the learner pipeline: custom Learners read it "
               "in build() (as RLlib's VPG example does); rlx's own Learners build their train batches "
               "themselves, after your learner pieces."),
    Option("_enable_learner_api", True, T + EXP, must_be_true("rlx always uses the Learner API.")),
    # --- environment
    Option("env", None, E, env_spec, doc="Env name, Gymnasium id, import path or class."),
    Option("env_config", {}, E, dictionary(), doc="Passed to the env creator as an EnvContext."),
    Option("observation_space", None, E, space_or_none),
    Option("action_space", None, E, space_or_none),
    Option("env_task_fn", None, E, callable_only,
           doc="Curriculum: fn(train_results, task_settable_env, env_ctx) -> new task, called after every train()."),
    Option("render_env", False, E, boolean),
    Option("clip_rewards", None, E, clip_rewards_check),
    Option("normalize_rewards", False, E, boolean,
           doc="rlx: divide the rewards the learner sees by the running standard deviation of the discounted "
               "return (the algorithm's gamma) and clip them to +-10, as Stable-Baselines3's "
               "VecNormalize(norm_reward=True) does; the statistics are synced across EnvRunners and "
               "checkpointed like observation_filter's. Episode returns in the results stay raw."),
    Option("normalize_actions", True, E, boolean),
    Option("clip_actions", False, E, boolean),
    Option("disable_env_checking", False, E, boolean),
    Option("is_atari", None, E, lambda n, v: None if v is None else boolean(n, v)),
    Option("auto_wrap_old_gym_envs", True, E, boolean),
    Option("action_mask_key", "action_mask", E, string()),
    # --- framework
    Option("framework", "torch", F, framework, aliases=("framework_str",)),
    Option("torch_num_threads", 1, F, integer(1, allow_none=True),
           doc="torch intra-op threads for the driver (None keeps torch's default)."),
    Option("eager_tracing", False, F, boolean, tf_only=True),
    Option("eager_max_retraces", 20, F, integer(0, allow_none=True), tf_only=True),
    Option("tf_session_args", {}, F, dictionary(), tf_only=True),
    Option("local_tf_session_args", {}, F, dictionary(), tf_only=True),
    Option("torch_compile_learner", False, F, boolean,
           doc="Compile the Learner's networks with torch.compile (the Learner then trains its own copy of the "
               "module; EnvRunners keep the eager one). Compiling costs seconds at the first update."),
    Option("torch_compile_learner_what_to_compile", "forward_train", F, what_to_compile,
           doc="'forward_train' (the networks' forward passes) or 'complete_update' (the whole update: losses, "
               "backward passes and optimizer steps, compiled after the first update)."),
    Option("torch_compile_learner_dynamo_mode", None, F, choice(None, "default", "reduce-overhead", "max-autotune",
                                                                "max-autotune-no-cudagraphs")),
    Option("torch_compile_learner_dynamo_backend", "inductor", F, dynamo_backend,
           doc="The torch.compile backend ('inductor', 'aot_eager', 'eager', ...) or a callable backend."),
    Option("torch_compile_worker", False, F, boolean,
           doc="Act on the EnvRunners through torch.compile'd forward_exploration/forward_inference (instead of "
               "the eager module or rlx's NumPy forward pass). Compiling costs seconds (inductor's first compile "
               "in a process up to a minute) at the first sample()."),
    Option("torch_compile_worker_dynamo_backend", "onnxrt", F, worker_dynamo_backend,
           doc="The torch.compile backend on the EnvRunners, or a callable backend. Where RLlib's default "
               "'onnxrt' is not available (it needs onnxruntime and a torch that still has it; torch 2.11 and "
               "2.13 have none), the EnvRunners use 'inductor' and warn once."),
    Option("torch_compile_worker_dynamo_mode", None, F, choice(None, "default", "reduce-overhead", "max-autotune",
                                                               "max-autotune-no-cudagraphs"),
           doc="The torch.compile mode on the EnvRunners (None: torch's default)."),
    # --- env runners (old name: rollouts)
    Option("env_runner_cls", None, R, class_or_none),
    Option("num_env_runners", 0, R, integer(0), aliases=("num_workers", "num_rollout_workers")),
    Option("env_runner_backend", "auto", R, choice("auto", "process", "ray", "thread"), aliases=("backend",),
           doc="Where remote EnvRunners run: 'process' (worker processes), 'ray' (Ray actors), 'thread', or "
               "'auto' (Ray when ray.is_initialized(), else processes)."),
    Option("num_envs_per_env_runner", 1, R, integer(1), aliases=("num_envs_per_worker",)),
    Option("create_env_on_local_worker", False, R, boolean, aliases=("create_env_on_driver",)),
    Option("sample_collector", None, R, class_or_none, later="custom SampleCollectors (old API stack)"),
    Option("enable_connectors", True, R, boolean, no_effect=ONE_STACK),
    Option("env_to_module_connector", None, R, callable_only,
           doc="Callable (env, spaces, device) -> ConnectorV2 piece(s) that process each sub-env's observations "
               "before the module sees them; see docs/connectors.md."),
    Option("module_to_env_connector", None, R, callable_only,
           doc="Callable (env, spaces) -> ConnectorV2 piece(s) that process the module's actions before the env "
               "steps with them; see docs/connectors.md."),
    Option("add_default_connectors_to_env_to_module_pipeline", True, R, boolean,
           doc="Whether RLlib appends its default pieces to the env-to-module pipeline.",
           no_effect="rlx's EnvRunner batches the observations your pieces leave and converts them to tensors "
                     "itself; pieces that do it themselves (AddObservationsFromEpisodesToBatch, "
                     "BatchIndividualItems, NumpyToTensor) work too"),
    Option("add_default_connectors_to_module_to_env_pipeline", True, R, boolean,
           doc="Whether RLlib appends its default pieces to the module-to-env pipeline.",
           no_effect="rlx's EnvRunner samples, unsquashes and clips actions itself before your pieces see them"),
    Option("episode_lookback_horizon", 1, R, integer(1),
           doc="How many past steps an episode chunk that sample() returns (RLlib's episodes, see "
               "docs/environments.md) keeps to look back on when the next chunk continues it. The episodes "
               "rlx's connector pieces see keep all their steps (up to 10,000)."),
    Option("use_worker_filter_stats", True, R, boolean),
    Option("update_worker_filter_stats", True, R, boolean),
    Option("rollout_fragment_length", "auto", R, int_or_literal("auto")),
    Option("batch_mode", "truncate_episodes", R, choice("truncate_episodes", "complete_episodes")),
    Option("sample_timeout_s", 60.0, R, seconds(allow_none=True),
           doc="Seconds an EnvRunner may take to answer sample(): a remote one that takes longer counts as failed "
               "(and is restarted as fault_tolerance() says); the local one's sample() raises once no env step or "
               "reset has returned for this long. None: no bound."),
    Option("remote_worker_envs", False, R, boolean),
    Option("gym_env_vectorize_mode", "sync", R, vectorize_mode,
           doc="'sync' steps the sub-envs one after the other in the EnvRunner; 'async' steps each in its own "
               "process, at the same time (as remote_worker_envs=True). A gymnasium.VectorizeMode is accepted."),
    Option("remote_env_batch_wait_ms", 0.0, R, seconds(unit=0.001),
           doc="With remote_worker_envs=True: each step waits at most this long for the sub-envs' answers and "
               "acts for those that answered (at least one); the others are collected later, so a slow sub-env "
               "no longer holds up the fast ones. 0: every step waits for every sub-env (RLlib's 0 acts for "
               "whatever answered). See docs/scaling.md."),
    Option("validate_env_runners_after_construction", True, R, boolean,
           aliases=("validate_workers_after_construction",)),
    Option("preprocessor_pref", "deepmind", R, choice("deepmind", "rllib", None)),
    Option("observation_filter", "NoFilter", R,
           choice("NoFilter", "MeanStdFilter", "ConcurrentMeanStdFilter")),
    Option("synchronize_filters", True, R, boolean, aliases=("synchronize_filter",)),
    Option("compress_observations", False, R, compress_observations,
           doc="Remote EnvRunners send their batches' observations compressed (LZ4 when the lz4 package is "
               "installed, else zlib); the driver decompresses them before learning. True or 'bulk' (the same "
               "in rlx: one compressed block per column)."),
    Option("enable_tf1_exec_eagerly", False, R, boolean, tf_only=True),
    Option("sampler_perf_stats_ema_coef", None, R, number(0.0, 1.0, allow_none=True),
           later="sampler performance statistics"),
    Option("sample_async", False, R, boolean, later="asynchronous sampling (removed in RLlib's new stack)"),
    # --- evaluation
    Option("evaluation_interval", None, EV, evaluation_interval,
           doc="Evaluate every N train() calls; None (or 0) never evaluates during training."),
    Option("evaluation_duration", 10, EV, int_or_literal("auto", min_value=1),
           doc="Episodes or timesteps per evaluation; 'auto' (parallel evaluation only) lasts as long as the training step."),
    Option("evaluation_duration_unit", "episodes", EV, choice("episodes", "timesteps")),
    Option("evaluation_sample_timeout_s", 120.0, EV, seconds(),
           doc="Stop waiting for evaluation runners after this many seconds (with a warning)."),
    Option("evaluation_parallel_to_training", False, EV, boolean,
           doc="Run evaluation in a thread at the same time as the training step, on the previous weights."),
    Option("evaluation_config", None, EV, evaluation_config,
           doc="Settings that override the main config on evaluation EnvRunners, e.g. {'explore': False}."),
    Option("off_policy_estimation_methods", {}, EV, ope_methods,
           doc="Off-policy estimators run at each evaluation on the evaluation input_'s offline data: {name: "
               "{'type': ImportanceSampling, ...}}; results under evaluation/off_policy_estimator/<name>."),
    Option("ope_split_batch_by_episode", True, EV, boolean,
           doc="Estimate per episode (True) or treat every offline row as a one-step episode (bandits)."),
    Option("evaluation_num_env_runners", 0, EV, integer(0), aliases=("evaluation_num_workers",),
           doc="Evaluation EnvRunners; 0 evaluates in the driver on its own envs."),
    Option("custom_evaluation_function", None, EV, callable_only, aliases=("custom_eval_function",),
           doc="fn(algorithm, eval_env_runner_group) -> metrics dict, replacing the built-in evaluation."),
    Option("always_attach_evaluation_results", False, EV, boolean,
           doc="Repeat the last evaluation results in iterations that do not evaluate."),
    Option("enable_async_evaluation", False, EV, boolean,
           doc="Let idle evaluation runners take over the work of slow or failed ones."),
    Option("in_evaluation", False, (), boolean, doc="True on evaluation EnvRunners only."),
    # --- exploration
    Option("explore", True, X + R, boolean, doc="Default of compute_single_action(explore=None)."),
    Option("exploration_config", {"type": "StochasticSampling"}, X + R, exploration_config),
    # --- offline data (rlx.algorithms.offline_data_options)
    *OFFLINE_DATA_OPTIONS,
    # --- multi-agent
    Option("policies", None, M, check_policies,
           doc="Policy ids (a set) or {policy_id: PolicySpec(policy_class, observation_space, action_space, "
               "config)}; None: one 'default_policy' for every agent."),
    Option("algorithm_config_overrides_per_module", {}, M, check_overrides_per_module,
           doc="{module_id: {config key: value}}: per-policy lr, gamma, ... for the learner of that module."),
    Option("policy_map_capacity", 100, M, integer(1),
           doc="Policies whose modules each EnvRunner and the Learner keep in memory; with more policies, the "
               "least recently used ones are swapped out to disk (module weights, and on the Learner optimizer "
               "state and target networks) and come back when an agent maps to them or they train."),
    Option("policy_mapping_fn", None, M, callable_or_none,
           doc="fn(agent_id, episode, worker=None, **kwargs) -> policy_id, called once per agent per episode."),
    Option("policies_to_train", None, M, check_policies_to_train,
           doc="Policy ids to train (None: all), or a callable (policy_id, batch) -> bool."),
    Option("policy_states_are_swappable", False, M, boolean,
           doc="All policies have the same networks and optimizers: a policy swapped back in takes over the memory "
               "of the one swapped out instead of allocating (checked when policies are added)."),
    Option("observation_fn", None, M, callable_or_none,
           doc="fn(agent_obs, worker, base_env, policies, episode) -> agent_obs: rewrites each step's observation "
               "dict before the policies see it."),
    Option("count_steps_by", "env_steps", M, choice("env_steps", "agent_steps"),
           doc="What train_batch_size, rollout_fragment_length and the step counters count in multi-agent runs."),
    Option("replay_mode", "independent", M, replay_mode,
           doc="Multi-agent replay (replay-based algorithms): 'independent' (one buffer and train batch per policy) "
               "or 'lockstep' (env steps stored and sampled with every policy's rows at once, so all policies "
               "train on the same timesteps; uniform replay only). RLlib 2.x also reads "
               "replay_buffer_config['replay_mode']."),
    Option("policy_map_cache", None, M, any_value,
           later="choosing the directory of swapped-out policies (policy_map_capacity swaps them to a temporary one)"),
    # --- reporting
    Option("keep_per_episode_custom_metrics", False, REP, boolean,
           doc="Report episode.custom_metrics as per-episode lists instead of _mean/_min/_max."),
    Option("metrics_episode_collection_timeout_s", 60.0, REP, seconds()),
    Option("metrics_num_episodes_for_smoothing", 100, REP, integer(1),
           aliases=("metrics_smoothing_episodes",)),
    Option("min_time_s_per_iteration", None, REP, seconds(allow_none=True), aliases=("min_iter_time_s",)),
    Option("min_train_timesteps_per_iteration", 0, REP, integer(0, allow_none=True)),
    Option("min_sample_timesteps_per_iteration", 0, REP, integer(0, allow_none=True),
           aliases=("timesteps_per_iteration",)),
    Option("progress_bar", False, REP, boolean,
           doc="rlx only: draw a progress bar (env steps, updates, %, rate, ETA) while train() runs; "
               "RLX_PROGRESS_BAR=1 does the same. See docs/results.md."),
    # --- checkpointing
    Option("export_native_model_files", False, CK, boolean),
    Option("checkpoint_trainable_policies_only", False, CK, boolean,
           doc="Write only the policies in policies_to_train into checkpoints (the others keep their weights "
               "when restored)."),
    # --- debugging
    Option("logger_creator", None, D, callable_only),
    Option("logger_config", None, D, dictionary(allow_none=True)),
    Option("log_level", "WARN", D, log_level),
    Option("log_sys_usage", True, D, boolean,
           doc="Put the machine's CPU and RAM use (and GPU use where available) over each iteration into "
               "result['perf'] (cpu_util_percent, ram_util_percent, gpu_util_percent<i>, vram_util_percent<i>). "
               "Needs psutil (Ray ships one); left at its default without psutil, it is skipped."),
    Option("fake_sampler", False, D, boolean,
           doc="Benchmark learning: each training EnvRunner samples once and then returns a copy of that batch "
               "every time (evaluation EnvRunners sample as usual)."),
    Option("seed", None, D, integer(0, allow_none=True)),
    # --- callbacks
    Option("callbacks_class", None, CB, callbacks_class, aliases=("callbacks",),
           doc="An RLlibCallback subclass (or its import path 'package.module.Name', as experiment files "
               "give it), a list of them, or the old dict form {'on_train_result': fn}."),
    *[Option(f"callbacks_{event}", None, CB, event_callables(event), doc=f"Callables run on {event}.")
      for event in CALLBACK_EVENTS],
    # --- resources
    Option("num_gpus", 0, RES, number(0.0)),
    Option("_fake_gpus", False, RES, boolean),
    Option("num_cpus_per_env_runner", 1, RES + R, number(0.0), aliases=("num_cpus_per_worker",)),
    Option("num_gpus_per_env_runner", 0, RES + R, number(0.0), aliases=("num_gpus_per_worker",),
           doc="GPUs reserved for each remote EnvRunner (for envs that need one); may be fractional."),
    Option("custom_resources_per_env_runner", {}, RES + R, resource_amounts(),
           aliases=("custom_resources_per_worker",)),
    Option("num_cpus_for_main_process", 1, RES, number(0.0),
           aliases=("num_cpus_for_local_worker", "num_cpus_for_driver")),
    Option("custom_resources_for_main_process", {}, RES, resource_amounts(),
           doc="Custom Ray resources of the Algorithm's own process: part of its Tune trial's first bundle."),
    Option("placement_strategy", "PACK", RES, choice("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")),
    # --- learners
    Option("num_learners", 0, L, integer(0), aliases=("num_learner_workers",)),
    Option("learner_backend", "auto", L, choice("auto", "process", "ray"),
           doc="rlx: where the learners of num_learners > 0 (and DD-PPO's workers) run: 'process' (worker "
               "processes on this machine), 'ray' (Ray actors in one placement group, on any node of the "
               "cluster), or 'auto' (Ray when ray.is_initialized(), else processes)."),
    Option("num_cpus_per_learner", 1, L, number(0.0), aliases=("num_cpus_per_learner_worker",)),
    Option("custom_resources_per_learner", {}, L, resource_amounts(),
           doc="Custom Ray resources per Learner (num_learners > 0): in its bundle of a Tune trial's placement "
               "group; use num_cpus_per_learner / num_gpus_per_learner for CPUs and GPUs."),
    Option("num_gpus_per_learner", 0, L, number(0.0), aliases=("num_gpus_per_learner_worker",),
           doc="GPUs per Learner: > 0 trains on CUDA (the driver's Learner on local_gpu_idx, learner processes "
               "one device per rank); fractions share a device."),
    Option("local_gpu_idx", 0, L, integer(0), doc="The CUDA device of the driver's Learner (num_learners=0)."),
    Option("num_aggregator_actors_per_learner", 0, ("learners",), integer(0),
           doc="Episode-aggregator actors per Learner (RLlib's IMPALA and APPO).",
           no_effect="only IMPALA and APPO use aggregator actors, as in RLlib"),
    Option("mixed_precision", None, L, choice(None, "bf16", "fp16"),
           doc="rlx: run every Learner update under torch.autocast with bfloat16 ('bf16') or float16 ('fp16', "
               "with torch's GradScaler unless _torch_grad_scaler_class names another); weights and optimizer "
               "state stay float32."),
    Option("learner_device", None, L, torch_device,
           doc="rlx: the torch device of the Learner, e.g. 'cuda:1', 'mps' or 'cpu' (None: from num_gpus_per_learner "
               "/ num_gpus). Set, the Learner trains a copy of the module and the EnvRunners keep theirs on the CPU."),
    # --- fault tolerance
    Option("restart_failed_env_runners", False, FT, boolean, aliases=("recreate_failed_workers", "recreate_failed_env_runners")),
    Option("ignore_env_runner_failures", False, FT, boolean, aliases=("ignore_worker_failures",)),
    Option("max_num_env_runner_restarts", 1000, FT, integer(0)),
    Option("delay_between_env_runner_restarts_s", 60.0, FT, seconds()),
    Option("restart_failed_sub_environments", False, FT, boolean),
    Option("num_consecutive_env_runner_failures_tolerance", 100, FT, integer(0),
           aliases=("num_consecutive_worker_failures_tolerance",)),
    Option("env_runner_health_probe_timeout_s", 30.0, FT, seconds(), aliases=("worker_health_probe_timeout_s",)),
    Option("env_runner_restore_timeout_s", 1800.0, FT, seconds(), aliases=("worker_restore_timeout_s",)),
    # --- RLModule
    Option("rl_module_spec", None, RM, rl_module_spec, doc="An RLModuleSpec for a custom RLModule."),
    # --- experimental / API stack switches (rlx has one stack)
    Option("_enable_new_api_stack", True, EXP, boolean, no_effect=ONE_STACK),
    Option("_tf_policy_handles_more_than_one_loss", False, EXP, boolean, tf_only=True),
    Option("_disable_preprocessor_api", False, EXP, boolean),
    Option("_disable_action_flattening", False, EXP, boolean, no_effect=ONE_STACK),
    Option("_disable_initialize_loss_from_dummy_batch", False, EXP, boolean, no_effect=ONE_STACK),
    Option("_disable_execution_plan_api", True, EXP, boolean, no_effect=ONE_STACK),
    Option("_torch_grad_scaler_class", None, EXP, callable_only,
           doc="A loss scaler class for mixed precision (e.g. torch.amp.GradScaler): losses are scaled before "
               "backward, gradients unscaled before clipping, and overflowing steps skipped."),
    Option("_torch_lr_scheduler_classes", None, EXP, torch_lr_scheduler_classes,
           doc="torch lr schedulers for every optimizer: a list of fn(optimizer) -> LRScheduler (e.g. "
               "functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=0.99)), or {module_id: list}. "
               "They are applied in order and stepped after every Learner update (once per PPO iteration); "
               "the lr option then only sets the starting learning rate."),
    Option("enable_rl_module_and_learner", True, API, boolean,
           doc="RLlib's switch between its new (RLModule/Learner) and old (Policy/ModelV2) API stacks. rlx has one "
               "stack and runs old-API code (Policy, ModelV2, callbacks) on it too: False is said once in the log "
               "(and RLlib's example scripts then take --num-gpus as the old stack does)."),
    Option("enable_env_runner_and_connector_v2", True, API, boolean,
           doc="RLlib's switch between its new (EnvRunner/connectors) and old (RolloutWorker) API stacks. rlx has "
               "one stack and runs old-API code (RolloutWorker views, SampleBatch) on it too: False is said once "
               "in the log."),
]

# Legacy keys without a current equivalent: accepted only at the value that means "off".
LEGACY_NOOP_KEYS = {
    "simple_optimizer": None,
    "_use_trajectory_view_api": None,
    "collect_metrics_timeout": None,
    "use_pytorch": None,
    "eager": False,
    "horizon": None,
    "soft_horizon": False,
    "no_done_at_end": False,
    "monitor": False,
    "multiagent": None,
    "evaluation_num_episodes": None,
}

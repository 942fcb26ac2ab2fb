"""Generate the option reference in docs/configuration.md from rlx's option tables.

    python tools/gen_config_reference.py           # rewrite the generated part in place
    python tools/gen_config_reference.py --check   # exit 1 if the file is out of date

Everything between the markers `<!-- BEGIN GENERATED OPTIONS -->` and
`<!-- END GENERATED OPTIONS -->` is produced here from:

- `rlx.algorithms.common_options.COMMON_OPTIONS` (every AlgorithmConfig option),
- every algorithm in `rlx.algorithms.registry.ALGORITHMS`: the options its config class
  adds (those of a shared base such as `OffPolicyConfig` once, for all its users) and the
  defaults it changes,
- `rlx.core.model_defaults.MODEL_DEFAULTS` (the `model` dict),
- `rlx.core.optimizers` / `rlx.core.learner` (the `optimizer` dict),
- `LEGACY_NOOP_KEYS` and `CALLBACK_EVENTS` (old keys and callback events).

Names, defaults, sections, aliases and statuses come from the code. The "meaning"
column uses an option's `doc=` when it has one, otherwise the MEANINGS entry below;
`tests/test_docs.py` fails when a PPO option has neither, and this script warns about any
registered algorithm's option that has neither, so a new option cannot ship undocumented.
STATUS_OVERRIDES covers options whose check (not `later=`) restricts them; each entry
carries a probe value that the generator verifies is still rejected.
The prose around the markers is written by hand.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlx.algorithms.algorithm_config import AlgorithmConfig  # noqa: E402
from rlx.algorithms.common_options import CALLBACK_EVENTS, COMMON_OPTIONS, LEGACY_NOOP_KEYS  # noqa: E402
from rlx.algorithms.config_options import Option  # noqa: E402
from rlx.algorithms.ppo import PPOConfig  # noqa: E402
from rlx.algorithms.registry import ALGORITHMS  # noqa: E402
from rlx.core import model_defaults  # noqa: E402
from rlx.core.model_defaults import MODEL_DEFAULTS  # noqa: E402
from rlx.utils.errors import ConfigError  # noqa: E402

DOC_PATH = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- BEGIN GENERATED OPTIONS -->"
END = "<!-- END GENERATED OPTIONS -->"

# Section methods in the order the docs present them (RLlib's order, then the newer ones).
SECTIONS = [
    "training", "environment", "framework", "env_runners", "evaluation", "exploration",
    "offline_data", "multi_agent", "reporting", "checkpointing", "debugging", "callbacks",
    "resources", "learners", "fault_tolerance", "rl_module", "experimental", "api_stack",
]
SECTION_ALIASES = {"env_runners": "rollouts"}

SUPPORTED = "supported"
TF_ONLY = "TensorFlow only: rejected"

# Meanings of options that carry no `doc=` in the code. Whether an option has an effect is
# not written here: the status column comes from the Option row (`later=`, `no_effect=`,
# `tf_only=`), and tests/test_docs.py checks it against the code that reads each option.
MEANINGS: dict[str, str] = {
    # training
    "grad_clip_by": "How grad_clip applies: 'value' clamps each gradient element, 'norm' rescales each "
                    "tensor to L2 norm <= grad_clip, 'global_norm' rescales all gradients together.",
    "max_requests_in_flight_per_env_runner": "Max in-flight sample requests per remote EnvRunner.",
    "learner_connector": "Callable building a learner ConnectorV2 pipeline.",
    "_enable_learner_api": "Old switch for the Learner API; rlx always uses it, so only True is accepted.",
    # environment
    "observation_space": "Observation space to use instead of the env's (the preprocessor is built from it).",
    "action_space": "Action space to use instead of the env's.",
    "env_task_fn": "Curriculum callable (train_results, env, env_context) -> new task for a TaskSettableEnv.",
    "render_env": "Render the env while sampling.",
    "clip_rewards": "None: clip only when is_atari (r = sign(r)); True: r = sign(r); False: never; "
                    "a number v: clip to [-v, v]; a (low, high) pair: clip to it. Applied to the training "
                    "batch; reported episode returns stay unclipped.",
    "normalize_actions": "Learn in [-1, 1] for Box actions and unsquash to the env's bounds (then clip). "
                         "Only for Box spaces with finite bounds.",
    "clip_actions": "Clip Box actions to the env's bounds before env.step().",
    "disable_env_checking": "Skip the env checker that runs on the first sub-env.",
    "is_atari": "Mark the env as Atari (True/False); with clip_rewards=None this turns on sign clipping. "
                "None: detect it from the env's Gymnasium id (ALE/...) or module (ale_py).",
    "auto_wrap_old_gym_envs": "Wrap envs with the pre-0.26 gym API (reset() -> obs, step() -> 4-tuple); "
                              "False raises an error that explains the upgrade.",
    "action_mask_key": "Key of the action mask in Dict observations.",
    # framework
    "framework": "Deep-learning framework. Only 'torch'; 'tf', 'tf2', 'tfe' and 'jax' raise an error "
                 "that says rlx is PyTorch-only.",
    "eager_tracing": "TensorFlow eager tracing.",
    "eager_max_retraces": "TensorFlow retrace limit.",
    "tf_session_args": "TensorFlow session arguments.",
    "local_tf_session_args": "TensorFlow session arguments of the local worker.",
    "torch_compile_learner": "torch.compile the Learner's forward_train.",
    "torch_compile_learner_what_to_compile": "What torch.compile compiles on the Learner.",
    "torch_compile_learner_dynamo_mode": "torch dynamo mode on the Learner.",
    "torch_compile_learner_dynamo_backend": "torch dynamo backend on the Learner.",
    "torch_compile_worker": "torch.compile the EnvRunners' forward passes.",
    "torch_compile_worker_dynamo_backend": "torch dynamo backend on the EnvRunners.",
    "torch_compile_worker_dynamo_mode": "torch dynamo mode on the EnvRunners.",
    # env runners
    "env_runner_cls": "EnvRunner class (or import path) to use instead of SingleAgentEnvRunner.",
    "num_env_runners": "Number of remote EnvRunners. 0 samples in the driver process.",
    "num_envs_per_env_runner": "Sub-envs each EnvRunner steps in lockstep, with one batched forward pass "
                               "per step.",
    "create_env_on_local_worker": "Give the driver's EnvRunner sub-envs of its own when remote EnvRunners "
                                  "exist. False (default): it takes the spaces from remote runner 1 and "
                                  "builds sub-envs only if something samples on it.",
    "sample_collector": "Custom SampleCollector class (old API stack).",
    "enable_connectors": "Connector-based sampling switch.",
    "env_to_module_connector": "Callable building an env-to-module ConnectorV2 pipeline.",
    "module_to_env_connector": "Callable building a module-to-env ConnectorV2 pipeline.",
    "episode_lookback_horizon": "Timesteps kept from the previous episode chunk for connectors.",
    "use_worker_filter_stats": "Merge remote EnvRunners' filter statistics into the central filter.",
    "update_worker_filter_stats": "Push the central filter to remote EnvRunners.",
    "rollout_fragment_length": "Steps per sub-env per sample() call. 'auto': "
                               "ceil(train_batch_size / (max(1, num_env_runners) * num_envs_per_env_runner)).",
    "batch_mode": "'truncate_episodes': fixed-size fragments, cut episodes are bootstrapped with V(s'); "
                  "'complete_episodes': sub-envs run on until their episodes end.",
    "remote_worker_envs": "Step each sub-env in its own process.",
    "remote_env_batch_wait_ms": "Polling timeout for remote sub-envs.",
    "validate_env_runners_after_construction": "Health-check remote EnvRunners after creation.",
    "preprocessor_pref": "'deepmind' or 'rllib': one-hot Discrete, flatten Dict/Tuple observations, "
                         "downsample image frames; None: no preprocessing (Box observations only). On an "
                         "Atari env, 'deepmind' wraps each sub-env in DeepMind's preprocessing (no-op and fire "
                         "resets, frame skip, episodic life, dim x dim grayscale, 4 frames stacked); 'rllib' "
                         "uses the generic pixel preprocessor.",
    "observation_filter": "'NoFilter' or 'MeanStdFilter' (running mean/std normalization, clipped to +-10); "
                          "'ConcurrentMeanStdFilter' is the same as MeanStdFilter in one process.",
    "synchronize_filters": "Synchronize observation filters across EnvRunners each iteration.",
    "compress_observations": "LZ4-compress observations in sample batches.",
    "enable_tf1_exec_eagerly": "TensorFlow 1 eager execution on EnvRunners.",
    "sampler_perf_stats_ema_coef": "EMA coefficient of sampler performance statistics.",
    "sample_async": "Sample in a background thread (removed from RLlib's new stack).",
    # evaluation
    "evaluation_interval": "Evaluate every this many train() calls (None or 0: never).",
    "evaluation_duration": "Length of one evaluation, in evaluation_duration_unit; 'auto' needs "
                           "evaluation_parallel_to_training=True.",
    "evaluation_duration_unit": "'episodes' or 'timesteps'.",
    "evaluation_sample_timeout_s": "Timeout for one evaluation sample() call.",
    "evaluation_parallel_to_training": "Evaluate while training_step() runs.",
    "evaluation_config": "Config overrides for the evaluation EnvRunners (e.g. explore=False).",
    "off_policy_estimation_methods": "Off-policy estimators for offline evaluation.",
    "ope_split_batch_by_episode": "Split offline batches by episode before off-policy estimation.",
    "evaluation_num_env_runners": "Number of remote evaluation EnvRunners.",
    "custom_evaluation_function": "Function (algo, eval_workers) -> metrics replacing evaluate().",
    "always_attach_evaluation_results": "Attach the latest evaluation results to every result dict.",
    "enable_async_evaluation": "Send evaluation requests asynchronously.",
    # exploration
    "exploration_config": "Exploration object config: {'type': a built-in name, a class or an import path, "
                          "plus constructor arguments}; a dict without 'type' updates the current one (see "
                          "docs/exploration.md). Each algorithm's default is in the defaults table below.",
    # offline data
    "input_": "Where experiences come from: 'sampler' (the env) or offline files.",
    "input_config": "Settings for reading the input.",
    "actions_in_input_normalized": "Offline actions are already normalized to [-1, 1].",
    "input_evaluation": "Old name of off-policy estimation settings.",
    "postprocess_inputs": "Run postprocessing on offline fragments.",
    "shuffle_buffer_size": "Shuffle offline batches through a buffer of this many batches.",
    "output": "Where to write sampled experiences (None: nowhere).",
    "output_config": "Settings for writing output.",
    "output_compress_columns": "Columns to compress (zlib, base64) in the JSON output.",
    "output_max_file_size": "Roll over to a new output file after this many bytes.",
    "offline_sampling": "Sampling reads offline data.",
    # multi-agent
    "policies": "Policy ids and specs. Only the single 'default_policy' (None, {'default_policy'} or "
                "['default_policy']) is accepted.",
    "algorithm_config_overrides_per_module": "Per-module config overrides (see AlgorithmConfig.overrides).",
    "policy_map_capacity": "Policies kept in memory.",
    "policy_mapping_fn": "Function mapping agent ids to policy ids.",
    "policies_to_train": "Policies to update (None: all).",
    "policy_states_are_swappable": "Policies share one architecture and can swap states.",
    "observation_fn": "Function enhancing per-agent observations.",
    "replay_mode": "'independent' or 'lockstep' replay of multi-agent batches (old API stack).",
    "policy_map_cache": "Old disk cache of the policy map (deprecated in RLlib).",
    "count_steps_by": "'env_steps' or 'agent_steps': what train_batch_size and the step counters count.",
    # reporting
    "keep_per_episode_custom_metrics": "Keep raw per-episode custom metrics instead of mean/min/max.",
    "metrics_episode_collection_timeout_s": "Wait this long for remote metrics.",
    "metrics_num_episodes_for_smoothing": "episode_return_mean/min/max and episode_len_* are computed over "
                                          "the last this many completed episodes (all of this iteration's "
                                          "episodes when there are more).",
    "min_time_s_per_iteration": "train() repeats training_step() until this many seconds passed.",
    "min_train_timesteps_per_iteration": "train() repeats training_step() until this many env steps "
                                         "were trained on.",
    "min_sample_timesteps_per_iteration": "train() repeats training_step() until this many env steps "
                                          "were sampled.",
    # checkpointing
    "export_native_model_files": "Also write policies/<id>/model.pt (torch.save of the module's state_dict) "
                                 "and policies/<id>/model/ (the policy exported as TorchScript and ONNX, to run "
                                 "without rlx; see export.md) into each checkpoint.",
    "checkpoint_trainable_policies_only": "Store only trainable policies.",
    # debugging
    "logger_creator": "Callable creating the result logger.",
    "logger_config": "Logger settings.",
    "log_level": "Level of the 'rlx' logger: DEBUG, INFO, WARN (or WARNING), ERROR, CRITICAL; "
                 "case-insensitive.",
    "log_sys_usage": "Log system resource usage into results.",
    "fake_sampler": "Infinitely fast fake sampler (testing).",
    "seed": "Seeds module initialization, action sampling, minibatch shuffling and env resets "
            "(sub-env i of EnvRunner w resets with seed + 1000*w + i). None: not reproducible.",
    # callbacks
    "callbacks_class": "Callbacks class (or list of classes) whose methods run during training.",
    # resources
    "num_gpus": "GPUs for the Algorithm process.",
    "_fake_gpus": "Simulate GPUs on CPU (debugging).",
    "num_cpus_per_env_runner": "CPUs requested per remote EnvRunner.",
    "num_gpus_per_env_runner": "GPUs per remote EnvRunner.",
    "custom_resources_per_env_runner": "Custom Ray resources per remote EnvRunner.",
    "num_cpus_for_main_process": "CPUs requested for the Algorithm process under Tune.",
    "placement_strategy": "Ray placement-group strategy: PACK, SPREAD, STRICT_PACK, STRICT_SPREAD.",
    # learners
    "num_learners": "Number of Learner workers. 0 trains in the driver process.",
    "num_cpus_per_learner": "CPUs per Learner worker.",
    "num_gpus_per_learner": "GPUs per Learner worker.",
    "local_gpu_idx": "CUDA device index of a local GPU Learner.",
    # fault tolerance
    "restart_failed_env_runners": "Recreate remote EnvRunners that fail. Mutually exclusive with "
                                  "ignore_env_runner_failures (validate() raises).",
    "ignore_env_runner_failures": "Continue without remote EnvRunners that fail. Mutually exclusive with "
                                  "restart_failed_env_runners (validate() raises).",
    "max_num_env_runner_restarts": "Restarts allowed per remote EnvRunner.",
    "delay_between_env_runner_restarts_s": "Longest wait before restarting a runner that keeps failing without "
                                           "sampling (1/8, 1/4, 1/2, then all of it); one that failed after it "
                                           "had sampled restarts at once.",
    "restart_failed_sub_environments": "Recreate a crashed sub-env instead of the whole EnvRunner.",
    "num_consecutive_env_runner_failures_tolerance": "Failures in a row without a sampled step that one remote "
                                                     "EnvRunner may have (at most 5) before train() raises its "
                                                     "error.",
    "env_runner_health_probe_timeout_s": "Seconds a restarted EnvRunner may take to be built.",
    "env_runner_restore_timeout_s": "Seconds a restarted EnvRunner may take to load the current weights and state.",
    # experimental / API stack
    "_enable_new_api_stack": "Old switch for the RLModule/Learner stack.",
    "_tf_policy_handles_more_than_one_loss": "TensorFlow multi-loss policies.",
    "_disable_preprocessor_api": "True: no observation preprocessing (Box observations only), as "
                                 "preprocessor_pref=None.",
    "_disable_action_flattening": "Keep nested actions unflattened.",
    "_disable_initialize_loss_from_dummy_batch": "Skip the old stack's dummy-batch loss initialization.",
    "_disable_execution_plan_api": "Old execution-plan switch.",
    # SAC, DDPG
    "_deterministic_loss": "SAC: use the policy's deterministic action instead of samples in the losses "
                           "(debugging).",
    "_use_beta_distribution": "SAC: a Beta distribution instead of the squashed Gaussian for Box actions.",
    "use_state_preprocessor": "DDPG: run observations through the model's encoder before the actor and "
                              "critic layers.",
    # PPO
    "shuffle_batch_per_epoch": "Reshuffle the train batch before each epoch.",
    "vf_loss_coeff": "Weight of the value loss in the total loss.",
    "clip_param": "PPO's clip range: the ratio is clipped to [1 - clip_param, 1 + clip_param].",
}

# rlx-specific remarks appended to an option's meaning (whether it comes from doc= or MEANINGS).
NOTES: dict[str, str] = {
    "explore": "EnvRunners sample with it too, so keep True while training.",
    "train_batch_size": "Sampling stops at the first rollout-fragment boundary at or past it, so a batch "
                        "can be slightly larger.",
    "torch_num_threads": "Applied with torch.set_num_threads() when the Algorithm is built.",
    "env_config": "The EnvContext adds worker_index, vector_index, num_workers and remote.",
    "in_evaluation": "Set by rlx on evaluation EnvRunners' configs; do not set it yourself.",
    "lr": "SAC, DDPG and TD3 train with their own actor_lr / critic_lr (/ alpha_lr) and do not read it.",
}

# How the tables name the users of a config base class that several algorithms share.
SHARED_BASE_LABELS: dict[str, str] = {
    "OffPolicyConfig": "Replay-based algorithms",
}
DEFAULTS_ANCHOR = "defaults-each-algorithm-changes"

# Options restricted by their check rather than by `later=`: (a value that must still be
# rejected, the status to print). The generator fails if a probe value becomes accepted.
STATUS_OVERRIDES: dict[str, tuple[Any, str]] = {
    "framework": ("tf2", "supported ('torch' only)"),
    "_enable_learner_api": (False, "only True"),
}

# Values tried on each legacy key to show what rlx does with it.
LEGACY_PROBES: dict[str, Any] = {
    "simple_optimizer": True,
    "_use_trajectory_view_api": True,
    "collect_metrics_timeout": 180,
    "use_pytorch": True,
    "eager": True,
    "horizon": 200,
    "soft_horizon": True,
    "no_done_at_end": True,
    "monitor": True,
    "multiagent": {"policies": {"p0": None, "p1": None}},
    "evaluation_num_episodes": 5,
}

MODEL_MEANINGS: dict[str, str] = {
    "fcnet_hiddens": "Hidden layer sizes of the MLP (policy and value nets each get one unless vf_share_layers).",
    "fcnet_activation": "Activation of the hidden layers: tanh, relu, swish/silu, elu, linear or None.",
    "post_fcnet_hiddens": "Extra layers after fcnet_hiddens.",
    "fcnet_kernel_initializer": "Initializer of the hidden layers' weights: a torch.nn.init function or its name "
                                "(default: orthogonal with gain sqrt(2); SAC's networks: PyTorch's default).",
    "fcnet_kernel_initializer_kwargs": "Keyword arguments of fcnet_kernel_initializer.",
    "fcnet_bias_initializer": "Initializer of the hidden layers' biases (default: zeros; SAC's networks: "
                              "PyTorch's default).",
    "fcnet_bias_initializer_kwargs": "Keyword arguments of fcnet_bias_initializer.",
    "post_fcnet_activation": "Activation of the post_fcnet layers.",
    "free_log_std": "Box actions: the log std is a free parameter instead of a network output.",
    "log_std_init": "rlx: the free log std's initial value (needs free_log_std=True), as Stable-Baselines3's "
                    "log_std_init.",
    "log_std_clip_param": "Clamp of the Gaussian log std to [-v, v].",
    "vf_share_layers": "Policy and value heads share one MLP trunk.",
    "no_final_linear": "Drop the final linear layer.",
    "conv_filters": "CNN layers [[out_channels, kernel, stride(, 'same'|'valid')], ...] for image observations "
                    "([H, W, C] boxes; [H, W] ones too when set). None: RLlib's default filters for 96x96, 84x84, "
                    "64x64, 42x42 and 10x10 images.",
    "conv_activation": "Activation after each CNN layer.",
    "use_lstm": "Wrap the model in an LSTM.",
    "max_seq_len": "Max sequence length for recurrent models.",
    "lstm_cell_size": "LSTM cell size.",
    "lstm_use_prev_action": "Feed the previous action (one-hot for Discrete spaces) to the LSTM with the "
                            "observation (a PrevActionsPrevRewards connector piece).",
    "lstm_use_prev_reward": "Feed the previous reward to the LSTM with the observation.",
    "use_attention": "Wrap the model in an attention net: a GTrXL (gated Transformer-XL) after the MLP or CNN (PPO).",
    "attention_num_transformer_units": "Number of GTrXL transformer units.",
    "attention_dim": "Width of the GTrXL's inputs, outputs and memory.",
    "attention_num_heads": "Attention heads per unit.",
    "attention_head_dim": "Width of each attention head.",
    "attention_memory_inference": "Past steps a unit attends to while acting (the memory the state carries).",
    "attention_memory_training": "Past steps a unit attends to in the train pass (at most attention_memory_inference).",
    "attention_position_wise_mlp_dim": "Hidden width of each unit's position-wise MLP.",
    "attention_init_gru_gate_bias": "Initial bias of the GRU gates (larger: units start closer to the identity).",
    "attention_use_n_prev_actions": "Feed the last n actions to the attention net with the observation.",
    "attention_use_n_prev_rewards": "Feed the last n rewards to the attention net with the observation.",
    "dim": "Side length of resized Atari frames (GenericPixelPreprocessor).",
    "grayscale": "Convert Atari frames to grayscale.",
    "zero_mean": "Scale Atari frames to [-1, 1) instead of [0, 1].",
    "framestack": "Stack the last 4 frames in DeepMind's Atari preprocessing (preprocessor_pref='deepmind').",
    "custom_model": "Custom ModelV2 class (old API).",
    "custom_model_config": "Keyword arguments for a custom model.",
    "custom_action_dist": "A TorchDistributionWrapper subclass, or its name in ModelCatalog.register_custom_action_dist: "
                          "the default networks output what it reads and actions are sampled from it.",
    "custom_preprocessor": "Custom preprocessor class.",
}



# ----------------------------------------------------------------------------- helpers


def _fmt(value: Any) -> str:
    text = repr(value)
    return f"`{text}`".replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def meaning_of(opt: Option) -> str:
    """The meaning text of an option ('' when it has neither doc= nor a MEANINGS entry)."""
    text = opt.doc or MEANINGS.get(opt.name, "")
    if opt.name in NOTES:
        text = f"{text} {NOTES[opt.name]}".strip()
    return text


def status_of(opt: Option) -> str:
    """supported / not supported yet: <feature> / TensorFlow only: rejected (or an override)."""
    if opt.name in STATUS_OVERRIDES:
        return STATUS_OVERRIDES[opt.name][1]
    if opt.tf_only:
        return TF_ONLY
    if opt.later:
        return f"not supported yet: {opt.later}"
    if opt.no_effect:
        return f"accepted, no effect: {opt.no_effect}"
    return SUPPORTED


def check_status_overrides() -> None:
    """Fail loudly when an option in STATUS_OVERRIDES starts accepting its probe value."""
    for name, (probe, _) in STATUS_OVERRIDES.items():
        config = PPOConfig()
        try:
            config._set(name, probe)
        except ConfigError:
            continue
        raise RuntimeError(
            f"{name}={probe!r} is accepted now: update STATUS_OVERRIDES in {Path(__file__).name}."
        )


def _option_cell(opt: Option) -> str:
    cell = f"`{opt.name}`"
    if opt.aliases:
        cell += "<br>old: " + ", ".join(f"`{a}`" for a in opt.aliases)
    return cell


def _default_cell(opt: Option, declared_by: type) -> str:
    """The option's default where it is declared, plus which algorithms change it."""
    notes = ["see below"] if opt.name == "model" else []
    changed = changed_by(opt, declared_by)
    if changed:
        notes.append(f"changed by {', '.join(changed)}: see [the defaults table](#{DEFAULTS_ANCHOR})")
    cell = "`MODEL_DEFAULTS`" if opt.name == "model" else _fmt(opt.default)
    return cell + (f" ({'; '.join(notes)})" if notes else "")


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return a is b


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


# ----------------------------------------------------------------------------- algorithms


def algorithm_configs() -> list[tuple[str, type]]:
    """(name, config class) of every registered algorithm, in the registry's order."""
    out = []
    for name, (module, _, config_name, _) in ALGORITHMS.items():
        out.append((name, getattr(importlib.import_module(module), config_name)))
    return out


def _declared(cls: type) -> list[Option]:
    """The options `cls` itself declares (not those of its bases)."""
    return list(cls.__dict__.get("_extra_options", []))


def _base_chain(cls: type) -> list[type]:
    """Config classes between AlgorithmConfig and `cls` (exclusive), nearest to AlgorithmConfig first."""
    return [k for k in reversed(cls.__mro__)
            if issubclass(k, AlgorithmConfig) and k is not AlgorithmConfig and k is not cls]


def option_groups() -> list[tuple[type, list[str], str | None]]:
    """Config classes that declare options, each once, in the order the reference presents them.

    Each entry is (class, names of the algorithms that use its options, name of the
    registered algorithm whose config it is, or None for a shared base such as OffPolicyConfig).
    """
    algos = algorithm_configs()
    registered = {cls: name for name, cls in algos}
    groups: list[tuple[type, list[str], str | None]] = []
    seen: set[type] = set()
    for name, cls in algos:
        for klass in _base_chain(cls) + [cls]:
            if klass in seen:
                continue
            seen.add(klass)
            users = [n for n, c in algos if issubclass(c, klass)]
            groups.append((klass, users, registered.get(klass)))
    return groups


def changed_by(opt: Option, declared_by: type) -> list[str]:
    """Registered algorithms built on `declared_by` whose default of `opt` differs from the declared one."""
    out = []
    for name, cls in algorithm_configs():
        mine = cls._table.options.get(opt.name)
        if issubclass(cls, declared_by) and mine is not None and not _same(mine.default, opt.default):
            out.append(name)
    return out


def _group_title(klass: type, users: list[str], algo: str | None) -> str:
    """'DQN' for an algorithm's config, 'Replay-based algorithms (DQN, SAC, ...)' for a shared base."""
    if algo is not None:
        return algo
    label = SHARED_BASE_LABELS.get(klass.__name__, f"Algorithms built on `{klass.__name__}`")
    return f"{label} ({', '.join(users)})"


def _option_table(opts: list[Option], declared_by: type = AlgorithmConfig) -> list[str]:
    rows = [[_option_cell(o), _default_cell(o, declared_by), _cell(meaning_of(o)), _cell(status_of(o))]
            for o in opts]
    return _table(rows, ["option", "default", "meaning", "status"]) + [""]


def algorithm_option_tables(section: str) -> list[str]:
    """The options each algorithm (or shared base) adds whose home is `section()`."""
    lines: list[str] = []
    registered = {cls: name for name, cls in algorithm_configs()}
    for klass, users, algo in option_groups():
        home = [o for o in _declared(klass) if o.sections and o.sections[0] == section]
        # The nearest registered algorithm this config extends (TD3Config -> DDPGConfig), if any.
        parent = next((k for k in reversed(_base_chain(klass)) if k in registered), None)
        title = _group_title(klass, users, algo)
        if algo is not None and parent is not None and not _declared(klass):
            if section == "training":
                name = klass.__name__
                lines += [f"{title} (`{name}`) has {registered[parent]}'s options: `{name}` subclasses "
                          f"`{parent.__name__}` and changes only defaults (see "
                          f"[the defaults table](#{DEFAULTS_ANCHOR})).", ""]
            continue
        if not home:
            continue
        verb = "adds" if algo is not None else "add"
        extra = f", on top of {registered[parent]}'s," if parent is not None else ""
        lines += [f"{title} {verb}{extra} these `{section}()` options (`{klass.__name__}`):", ""]
        lines += _option_table(home, klass)
    for klass, users, algo in option_groups():
        also = [o for o in _declared(klass) if section in o.sections[1:]]
        if also:
            refs = ", ".join(f"`{o.name}` (see `{o.sections[0]}()`)" for o in also)
            who = _group_title(klass, users, algo)
            lines += [f"Also accepted by `{section}()` of {who[:1].lower() + who[1:]}: {refs}.", ""]
    return lines


def legacy_replay_keys_note() -> list[str]:
    """The old flat replay-buffer keys that OffPolicyConfig maps into replay_buffer_config."""
    from rlx.algorithms import off_policy

    keys = getattr(off_policy, "_LEGACY_REPLAY_KEYS", ())
    if not keys:
        return []
    names = ", ".join(f"`{k}`" for k in keys)
    return [f"The flat replay keys of Trainer-era config dicts ({names}) are accepted by `update_from_dict` "
            "and the old dict API of the replay-based algorithms and map into `replay_buffer_config` "
            "(`buffer_size` to `capacity`, `prioritized_replay` to the buffer type, the others to "
            "`alpha`, `beta`, `eps`).", ""]


# ----------------------------------------------------------------------------- sections


def section_tables() -> list[str]:
    """One table per section method; options shared by several methods are listed in full once."""
    lines: list[str] = []
    for section in SECTIONS:
        home = [opt for opt in COMMON_OPTIONS if opt.sections and opt.sections[0] == section]
        also = [opt for opt in COMMON_OPTIONS if section in opt.sections[1:]]
        title = f"`{section}()`"
        if section in SECTION_ALIASES:
            title += f" (old name: `{SECTION_ALIASES[section]}()`)"
        lines += [f"### {title}", ""]
        if home:
            lines += _option_table(home)
        if also:
            refs = ", ".join(f"`{opt.name}` (see `{opt.sections[0]}()`)" for opt in also)
            lines += [f"Also accepted by `{section}()`: {refs}.", ""]
        lines += algorithm_option_tables(section)
        if section == "training":
            lines += legacy_replay_keys_note()
        if section == "callbacks":
            events = ", ".join(f"`{e}`" for e in CALLBACK_EVENTS)
            lines += [f"`callbacks()` also takes a callable, or a list of callables, per event ({events}); "
                      "they run after the callbacks classes' methods, in list order.", ""]
        if section == "evaluation":
            lines += ["`evaluation(evaluation_num_episodes=N)` (old) sets `evaluation_duration=N` with "
                      "`evaluation_duration_unit='episodes'`.", ""]
    return lines


def unsectioned_table() -> list[str]:
    """Options that no section method accepts (set by rlx itself, or via a dict)."""
    opts = [opt for opt in COMMON_OPTIONS if not opt.sections]
    if not opts:
        return []
    lines = ["### Options outside the section methods", "",
             "Set by rlx itself; a dict (`update_from_dict`) can still carry them.", ""]
    rows = [[_option_cell(o), _fmt(o.default), _cell(meaning_of(o)), _cell(status_of(o))] for o in opts]
    return lines + _table(rows, ["option", "default", "meaning", "status"]) + [""]


def defaults_table() -> list[str]:
    """Defaults each registered algorithm changes, relative to AlgorithmConfig (or, for an option an
    algorithm adds, relative to the class that declares it)."""
    algos = algorithm_configs()
    declared: list[tuple[Option, type]] = [(opt, AlgorithmConfig) for opt in COMMON_OPTIONS]
    for klass, _, _ in option_groups():
        declared += [(opt, klass) for opt in _declared(klass)]
    rows = []
    for opt, owner in declared:
        cells = []
        for _, cls in algos:
            mine = cls._table.options.get(opt.name)
            if mine is None or not issubclass(cls, owner):
                cells.append("—")
            elif _same(mine.default, opt.default):
                cells.append("")
            else:
                cells.append(_fmt(mine.default))
        if not any(c not in ("", "—") for c in cells):
            continue
        base = "`MODEL_DEFAULTS`" if opt.name == "model" else _fmt(opt.default)
        if owner is not AlgorithmConfig:
            base += f" (`{owner.__name__}`)"
        rows.append([f"`{opt.name}`", base] + cells)
    header = ["option", "AlgorithmConfig"] + [name for name, _ in algos]
    lines = ["### Defaults each algorithm changes", "",
             "A blank cell keeps the default on its left; — marks an algorithm without that option (or with "
             "its own option of the same name, listed with its own default). For an option an algorithm "
             "adds, the AlgorithmConfig column gives the default of the class that declares it. A `model` "
             "entry is merged into `MODEL_DEFAULTS` (keys not named keep their defaults).", ""]
    return lines + _table(rows, header) + [""]


def model_table() -> list[str]:
    """The `model` dict (`training(model={...})`, alias `model_config`)."""
    later = getattr(model_defaults, "_LATER", {})
    rows = []
    for key, default in MODEL_DEFAULTS.items():
        if key in later:
            status = f"not supported yet: {later[key]}"
        elif key in model_defaults.ONLY_WITH:
            needs = model_defaults.ONLY_WITH[key]
            status = f"used only with {needs}" + (" (not supported yet)" if needs in later else "")
        else:
            status = SUPPORTED
        rows.append([f"`{key}`", _fmt(default), _cell(MODEL_MEANINGS.get(key, "")), _cell(status)])
    lines = ["### The `model` dict", "",
             "`training(model={...})` (or `rl_module(model_config={...})`) merges the given keys into "
             "`rlx.models.MODEL_DEFAULTS`; unknown keys raise a ConfigError with a \"Did you mean\" hint "
             "and the list of known keys.", ""]
    return lines + _table(rows, ["key", "default", "meaning", "status"]) + [""]


def optimizer_table() -> list[str]:
    """The `optimizer` dict: types and their keyword arguments."""
    from rlx.core import optimizers

    def kwargs_of(cls: Any) -> str:
        params = inspect.signature(cls.__init__).parameters
        parts = [f"`{n}={p.default!r}`" for n, p in params.items()
                 if n not in ("self", "params", "lr", "decoupled") and p.default is not inspect.Parameter.empty]
        return ", ".join(parts)

    rows = [
        ["`'adam'` (default)", "rlx.core.optimizers.Adam", kwargs_of(optimizers.Adam)],
        ["`'adamw'`", "rlx.core.optimizers.Adam(decoupled=True)",
         kwargs_of(optimizers.Adam).replace("`weight_decay=0.0`", "`weight_decay=0.01`")],
        ["`'sgd'`", "rlx.core.optimizers.SGD", kwargs_of(optimizers.SGD)],
        ["any other name", "the torch.optim class of that name, case-insensitive (e.g. `'rmsprop'`)",
         "that class's keyword arguments"],
    ]
    lines = ["### The `optimizer` dict", "",
             "`training(optimizer={'type': ..., **kwargs})`. The learning rate always comes from `lr` "
             "(a float or a schedule). Unknown types and keyword arguments raise a ConfigError with a "
             "\"Did you mean\" hint when the Algorithm is built.", ""]
    return lines + _table(rows, ["type", "class", "keyword arguments (defaults)"]) + [""]


def alias_table() -> list[str]:
    """Every legacy name and the current name it maps to."""
    algos = algorithm_configs()
    names: dict[str, str] = {}
    for _, cls in algos:
        names.update(cls._table.alias_to_name)
    rows = []
    for alias, name in sorted(names.items()):
        users = [n for n, cls in algos if cls._table.alias_to_name.get(alias) == name]
        cell = f"`{name}`" + ("" if len(users) == len(algos) else f" ({', '.join(users)})")
        rows.append([f"`{alias}`", cell])
    lines = ["### Legacy names", "",
             "Accepted everywhere a current name is (section methods, dicts, `config[...]`, attribute "
             "access) and stored under the current name. Names that only some algorithms accept say which.", ""]
    lines += _table(rows, ["old name", "current name"])
    lines += ["", "`to_dict()` writes `lambda_` as `lambda` and `input_` as `input`, as RLlib does; "
              "`config.rollouts(...)` is `config.env_runners(...)`.", ""]
    return lines


def _legacy_outcome(config: Any) -> str:
    """What a legacy key did to a fresh PPOConfig: the settings it changed, or "accepted, no effect"."""
    default, changed = PPOConfig().to_dict(), config.to_dict()
    diffs = [f"sets `{k}={changed[k]!r}`" for k in sorted(changed) if k in default and changed[k] != default[k]]
    return "accepted: " + ", ".join(diffs) if diffs else "accepted, no effect"


def legacy_keys_table() -> list[str]:
    """Old keys without a current equivalent, and what rlx does with them."""
    rows = []
    for key, off in LEGACY_NOOP_KEYS.items():
        probe = LEGACY_PROBES.get(key, True)
        try:
            outcome = _legacy_outcome(PPOConfig().update_from_dict({key: probe}))
        except ConfigError as err:
            outcome = str(err)
        rows.append([f"`{key}`", _fmt(off), f"`{key}={probe!r}`".replace("|", "\\|"), _cell(outcome)])
    lines = ["### Removed keys of old config dicts", "",
             "These keys have no current option. Their \"off\" value (and None/False) is accepted and "
             "ignored; other values behave as shown (the settings they change on a PPOConfig).", ""]
    return lines + _table(rows, ["key", "off value", "example", "result"]) + [""]


def generate() -> str:
    """The text that belongs between the markers (without the markers)."""
    check_status_overrides()
    lines = ["", "<!-- Generated by tools/gen_config_reference.py; edit that script, not this section. -->", ""]
    lines += section_tables()
    lines += unsectioned_table()
    lines += defaults_table()
    lines += model_table()
    lines += optimizer_table()
    lines += alias_table()
    lines += legacy_keys_table()
    return "\n".join(lines)


def render(doc_text: str) -> str:
    """`doc_text` with the generated section replaced by a fresh one."""
    start = doc_text.find(BEGIN)
    end = doc_text.find(END)
    if start < 0 or end < 0 or end < start:
        raise ValueError(f"{DOC_PATH} needs the markers {BEGIN} and {END}, in that order.")
    return doc_text[: start + len(BEGIN)] + "\n" + generate() + "\n" + doc_text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is out of date")
    args = parser.parse_args(argv)
    undocumented = sorted({o.name for _, cls in algorithm_configs() for o in cls._table.options.values()
                           if not meaning_of(o)})
    if undocumented:
        print(f"warning: options without a meaning (give them doc= or a MEANINGS entry): {undocumented}",
              file=sys.stderr)
    current = DOC_PATH.read_text()
    fresh = render(current)
    if args.check:
        if fresh != current:
            print(f"{DOC_PATH} is out of date: run python tools/gen_config_reference.py", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        DOC_PATH.write_text(fresh)
        print(f"updated {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""AlgorithmConfig: the chained builder that configures and builds an Algorithm.

Each section method (`training`, `environment`, `env_runners`, ...) validates its keyword
arguments against the option table in `common_options.py` (plus an algorithm's own
options) and returns `self`. Legacy flat dict keys (`num_workers`, `sgd_minibatch_size`,
`lambda`, ...) are mapped to their current names by `update_from_dict`.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
from typing import Any, ClassVar, Iterable

from rlx.algorithms import config_defaults
from rlx.algorithms.common_options import CALLBACK_EVENTS, COMMON_OPTIONS, LEGACY_NOOP_KEYS
from rlx.algorithms.config_bounds import check_machine_bounds
from rlx.algorithms.config_module_spec import rl_module_spec_of
from rlx.algorithms.config_options import Option, OptionTable
from rlx.algorithms.registry import get_algorithm_class
from rlx.callbacks.callbacks import CallbackDispatcher, normalize_event_callables
from rlx.core.compile_options import check_compile_settings
from rlx.core.model_defaults import MODEL_DEFAULTS, merge_model_config
from rlx.core.rl_module.agent_mapping import AgentMapper
from rlx.core.rl_module.default_model_config import DefaultModelConfig, model_dict
from rlx.env.multi_agent_env import MultiAgentEnv, names_multi_agent_env_class
from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean
from rlx.utils.registry import import_object

logger = logging.getLogger(__name__)
_old_api_stack_logged = False


def _log_old_api_stack_once() -> None:
    """Say once per process that RLlib's old API stack runs on rlx's one stack."""
    global _old_api_stack_logged
    if not _old_api_stack_logged:
        _old_api_stack_logged = True
        logger.warning("RLlib's old API stack was asked for (enable_rl_module_and_learner=False or "
                       "enable_env_runner_and_connector_v2=False): rlx has one API stack and runs old-API code "
                       "(Policy, ModelV2, SampleBatch, RolloutWorker) on it through its old-API views.")


class _NotProvided:
    """Marker for a section-method argument the caller did not pass."""

    def __repr__(self) -> str:
        return "NotProvided"


NotProvided = _NotProvided()

# Old schedule keys: a set schedule replaces the plain value whatever the key order; None means "none".
_MERGED_DICT_OPTIONS = ("exploration_config", "replay_buffer_config")
_LEGACY_SCHEDULES = {"lr_schedule": "lr", "entropy_coeff_schedule": "entropy_coeff"}

# Keys whose to_dict() name drops the trailing underscore, as RLlib's does.
_DICT_NAMES = {"lambda_": "lambda", "input_": "input"}


class AlgorithmConfig:
    """Builds an Algorithm from validated settings grouped in sections.

    Example:
        >>> from rlx.algorithms.ppo import PPOConfig
        >>> config = PPOConfig().environment("CartPole-v1").training(lr=3e-4)
        >>> algo = config.build()
    """

    #: Options the class adds on top of COMMON_OPTIONS (subclasses extend this).
    _extra_options: ClassVar[list[Option]] = []
    #: Defaults the class changes, by canonical option name.
    _default_overrides: ClassVar[dict[str, Any]] = {}
    #: The Algorithm class a plain `build()` creates.
    _default_algo_class: ClassVar[Any] = None
    _table: ClassVar[OptionTable]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._table = cls._build_table()
        if "__init__" in cls.__dict__ and config_defaults.declares_settings_in_init(cls):
            # setattr: mypy forbids assigning to a method, and wrapping the class's own __init__ is the point.
            setattr(cls, "__init__", config_defaults.declaring_init(cls.__dict__["__init__"]))

    @classmethod
    def _build_table(cls) -> OptionTable:
        options: list[Option] = list(COMMON_OPTIONS)
        overrides: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            options.extend(klass.__dict__.get("_extra_options", []))
            overrides.update(klass.__dict__.get("_default_overrides", {}))
        table = OptionTable.build(options)
        for name, default in overrides.items():
            if name not in table.options:
                raise ConfigError(f"{cls.__name__} overrides the default of unknown option '{name}'.")
            table.options[name] = dataclasses.replace(table.options[name], default=default)
        return table

    def __init__(self, algo_class: Any = None):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_user_set", set())
        object.__setattr__(self, "_frozen", False)
        object.__setattr__(self, "algo_class", algo_class or self._default_algo_class)
        for name, opt in self._table.options.items():
            self._values[name] = copy.deepcopy(opt.default)
        self._values["model"] = copy.deepcopy(MODEL_DEFAULTS)
        if "model" in self._default_overrides and self._default_overrides["model"]:
            self._values["model"] = merge_model_config(None, self._default_overrides["model"])

    # ------------------------------------------------------------ attribute access

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is None:
            raise AttributeError(name)
        canonical = self._table.resolve(name)
        if canonical is not None:
            return values[canonical]
        if name in values:  # declared by a config subclass's __init__ in another process (unpickled)
            return values[name]
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{type(self).__name__} has no setting '{name}'.{did_you_mean(name, self._table.all_names())}"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("algo_class",) or name.startswith("_"):
            if self._table.resolve(name) is None:
                object.__setattr__(self, name, value)
                return
        if self.__dict__.get("_declaring"):
            # Inside a user config subclass's __init__ (RLlib style): a new name declares a
            # setting of that class, a known one sets the class's default.
            if self._table.resolve(name) is None:
                config_defaults.declare_setting(type(self), name, value)
            self._set(name, value)
            self._user_set.discard(self._table.resolve(name))
            return
        self._set(name, value)

    def __getitem__(self, key: str) -> Any:
        """Old dict-style read access: `config["lr"]`, `config["num_workers"]`."""
        canonical = self._table.resolve(key)
        if canonical is None:
            raise KeyError(f"Unknown config key '{key}'.{did_you_mean(key, self._table.all_names())}")
        return self._values[canonical]

    def __setitem__(self, key: str, value: Any) -> None:
        """Old dict-style write access: `config["lr"] = 0.01` (validated like `training(lr=...)`)."""
        self.update_from_dict({key: value})

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._table.resolve(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        """Dict-style `get` over current and legacy names."""
        canonical = self._table.resolve(key)
        return self._values[canonical] if canonical is not None else default

    def keys(self) -> Iterable[str]:
        """The names `to_dict()` uses."""
        return self.to_dict().keys()

    def items(self) -> Iterable[tuple[str, Any]]:
        """The (name, value) pairs of `to_dict()`."""
        return self.to_dict().items()

    # ------------------------------------------------------------ setting values

    def _set(self, key: str, value: Any, section: str | None = None, explicit: bool = True) -> None:
        """Validate and store one setting. `explicit=False` (values read from a dict, such as a
        to_dict() round trip) counts the key as set by the user only when it differs from the
        default, so rlx's adaptive defaults keep adapting (see `is_user_set`)."""
        if self._frozen:
            raise ConfigError(
                "This config is frozen because an Algorithm was built from it. "
                "Change a copy instead: config = algo.config.copy(copy_frozen=False)."
            )
        if key in _LEGACY_SCHEDULES and value is None:
            return  # old configs spell "no schedule" as None
        canonical = self._table.resolve(key)
        if canonical is None and key in self._values:
            # Declared by this config subclass's __init__ in another process (an unpickled copy).
            config_defaults.declare_setting(type(self), key, self._values[key])
            canonical = key
        if canonical is None:
            where = f" in {section}()" if section else ""
            raise ConfigError(
                f"Unknown config key '{key}'{where}.{did_you_mean(key, self._table.all_names())}"
            )
        opt = self._table.options[canonical]
        if section is not None and section not in opt.sections:
            home = opt.sections[0] if opt.sections else None
            hint = f" It belongs to {home}(): config.{home}({key}=...)." if home else ""
            raise ConfigError(f"'{key}' is not an option of {section}().{hint}")
        if explicit or not _same(value, opt.default):
            self._user_set.add(canonical)
        if contains_search_space(value):
            # A Ray Tune search space (tune.grid_search, tune.uniform, ...), here or nested in a
            # dict such as model or env_config: Tune resolves it into plain values per trial,
            # and each trial's config validates them then. build()/validate() refuse it.
            self._values[canonical] = self._merge_searched(canonical, value)
            return
        if canonical == "model":
            value = self._merge_model(value)
        elif canonical in _MERGED_DICT_OPTIONS and isinstance(value, dict):
            # RLlib semantics: a dict without "type" updates the current one, a dict with
            # a different "type" replaces it.
            current = self._values.get(canonical) or {}
            if "type" not in value or value.get("type") == current.get("type"):
                value = {**current, **value}
            if opt.check is not None:
                value = opt.check(key, value)
        elif opt.check is not None:
            value = opt.check(key, value)
        if value != opt.default and not _same(value, opt.default):
            if opt.tf_only:
                raise ConfigError(
                    f"'{key}' is a TensorFlow setting and rlx is PyTorch-only; remove it from your config."
                )
            if opt.later:
                raise NotSupportedYetError(key, opt.later)
        self._values[canonical] = value

    def _merge_searched(self, canonical: str, value: Any) -> Any:
        """A value holding search spaces, stored unvalidated; dict options still merge (the
        plain keys of `model` are checked, its keys must exist) so to_dict() stays complete."""
        if not isinstance(value, dict) or is_search_space(value):
            return value
        if canonical == "model":
            plain = {k: v for k, v in value.items() if not contains_search_space(v)}
            merged = self._merge_model(plain)
            for key, searched in value.items():
                if key not in plain:
                    if key not in MODEL_DEFAULTS:
                        merge_model_config(None, {key: searched})  # raises the unknown-key error
                    merged[key] = searched
            return merged
        if canonical in _MERGED_DICT_OPTIONS:
            current = self._values.get(canonical) or {}
            if "type" not in value or value.get("type") == current.get("type"):
                return {**current, **value}
        return value

    def _merge_model(self, value: Any) -> dict:
        if value is None:
            return copy.deepcopy(MODEL_DEFAULTS)
        if isinstance(value, DefaultModelConfig):
            value = model_dict(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
        if not isinstance(value, dict):
            raise ConfigError(f"'model' must be a dict of model settings, got {value!r}.")
        return merge_model_config(self._values.get("model"), value)

    def _update_section(self, section: str, kwargs: dict[str, Any]) -> "AlgorithmConfig":
        for key, value in kwargs.items():
            if value is NotProvided:
                continue
            self._set(key, value, section=section)
        return self

    # ------------------------------------------------------------ section methods

    def training(self, **kwargs: Any) -> "AlgorithmConfig":
        """Training settings: gamma, lr, grad_clip, grad_clip_by, train_batch_size,
        train_batch_size_per_learner, model, optimizer, learner_class, plus the
        algorithm's own options (e.g. PPO's clip_param)."""
        return self._update_section("training", kwargs)

    def environment(self, env: Any = NotProvided, **kwargs: Any) -> "AlgorithmConfig":
        """Environment settings: env, env_config, observation_space, action_space,
        clip_rewards, normalize_rewards (rlx), normalize_actions, clip_actions, disable_env_checking,
        is_atari, auto_wrap_old_gym_envs, env_task_fn, render_env, action_mask_key."""
        if env is not NotProvided:
            kwargs = {"env": env, **kwargs}
        return self._update_section("environment", kwargs)

    def framework(self, framework: Any = NotProvided, **kwargs: Any) -> "AlgorithmConfig":
        """Framework settings. rlx is PyTorch-only; `torch_num_threads` sets torch's
        intra-op threads (1 is fastest for small models on few cores)."""
        if framework is not NotProvided:
            kwargs = {"framework": framework, **kwargs}
        return self._update_section("framework", kwargs)

    def env_runners(self, **kwargs: Any) -> "AlgorithmConfig":
        """EnvRunner (sampling) settings: num_env_runners, num_envs_per_env_runner,
        rollout_fragment_length, batch_mode, observation_filter, explore, ..."""
        return self._update_section("env_runners", kwargs)

    def rollouts(self, **kwargs: Any) -> "AlgorithmConfig":
        """Old name of `env_runners()`."""
        return self.env_runners(**kwargs)

    def evaluation(self, **kwargs: Any) -> "AlgorithmConfig":
        """Evaluation settings (evaluation_interval, evaluation_duration, ...)."""
        if "evaluation_num_episodes" in kwargs:
            kwargs = dict(kwargs)
            n = kwargs.pop("evaluation_num_episodes")
            if n not in (None, -1):
                kwargs.setdefault("evaluation_duration", n)
                kwargs.setdefault("evaluation_duration_unit", "episodes")
        return self._update_section("evaluation", kwargs)

    def exploration(self, **kwargs: Any) -> "AlgorithmConfig":
        """Exploration settings: explore, exploration_config."""
        return self._update_section("exploration", kwargs)

    def offline_data(self, **kwargs: Any) -> "AlgorithmConfig":
        """Offline data settings (input_, output, ...)."""
        return self._update_section("offline_data", kwargs)

    def multi_agent(self, **kwargs: Any) -> "AlgorithmConfig":
        """Multi-agent settings (policies, policy_mapping_fn, ...)."""
        return self._update_section("multi_agent", kwargs)

    def reporting(self, **kwargs: Any) -> "AlgorithmConfig":
        """Reporting settings: metrics_num_episodes_for_smoothing and the per-iteration minimums."""
        return self._update_section("reporting", kwargs)

    def checkpointing(self, **kwargs: Any) -> "AlgorithmConfig":
        """Checkpoint settings: export_native_model_files, checkpoint_trainable_policies_only."""
        return self._update_section("checkpointing", kwargs)

    def debugging(self, **kwargs: Any) -> "AlgorithmConfig":
        """Debugging settings: seed, log_level, logger_creator, logger_config, ..."""
        return self._update_section("debugging", kwargs)

    def callbacks(self, callbacks_class: Any = NotProvided, **kwargs: Any) -> "AlgorithmConfig":
        """Callback settings: an RLlibCallback subclass (or a list of them) and, per event,
        a callable or list of callables: `callbacks(MyCallbacks, on_train_result=fn)`.

        For each event, subclasses run first (in list order), then the callables (in list order).
        """
        if callbacks_class is not NotProvided:
            kwargs = {"callbacks_class": callbacks_class, **kwargs}
        translated = {}
        for key, value in kwargs.items():
            if key.startswith("on_"):
                if key not in CALLBACK_EVENTS:
                    normalize_event_callables(key, value)  # explains renamed events
                    raise ConfigError(
                        f"Unknown callback event '{key}' in callbacks().{did_you_mean(key, CALLBACK_EVENTS)} "
                        f"Events: {', '.join(CALLBACK_EVENTS)}."
                    )
                key = f"callbacks_{key}"
            translated[key] = value
        return self._update_section("callbacks", translated)

    def resources(self, **kwargs: Any) -> "AlgorithmConfig":
        """Resource settings: num_gpus, num_cpus_per_env_runner, ..."""
        return self._update_section("resources", kwargs)

    def learners(self, **kwargs: Any) -> "AlgorithmConfig":
        """Learner settings: num_learners, num_cpus_per_learner, num_gpus_per_learner."""
        return self._update_section("learners", kwargs)

    def fault_tolerance(self, **kwargs: Any) -> "AlgorithmConfig":
        """Fault-tolerance settings for EnvRunners."""
        return self._update_section("fault_tolerance", kwargs)

    def rl_module(self, **kwargs: Any) -> "AlgorithmConfig":
        """RLModule settings: rl_module_spec, model_config."""
        return self._update_section("rl_module", kwargs)

    def experimental(self, **kwargs: Any) -> "AlgorithmConfig":
        """Experimental switches kept for compatibility."""
        return self._update_section("experimental", kwargs)

    def api_stack(self, **kwargs: Any) -> "AlgorithmConfig":
        """RLlib's switches between its old and new API stacks. rlx has one stack, which runs old-API
        code (Policy, ModelV2, SampleBatch, RolloutWorker views) too, so turning the new stack off is
        accepted: it is said once in the log and changes nothing else."""
        if any(kwargs.get(k) is False for k in ("enable_rl_module_and_learner", "enable_env_runner_and_connector_v2")):
            _log_old_api_stack_once()
        return self._update_section("api_stack", kwargs)

    # ------------------------------------------------------------ dict conversion

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of every setting under its current name (old-style config dict)."""
        out = {}
        for name, value in self._values.items():
            out[_DICT_NAMES.get(name, name)] = copy.deepcopy(value)
        return out

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> "AlgorithmConfig":
        """Build a config of this class from a (possibly legacy) flat dict."""
        return cls().update_from_dict(config_dict)

    def update_from_dict(self, config_dict: dict[str, Any]) -> "AlgorithmConfig":
        """Apply a flat dict of settings; legacy names are mapped to current ones."""
        if not isinstance(config_dict, dict):
            raise ConfigError(f"Expected a dict of settings, got {config_dict!r}.")
        deferred: list[tuple[str, Any]] = []
        for key, value in config_dict.items():
            target = _LEGACY_SCHEDULES.get(key)
            if target is not None and self._table.resolve(target) is not None:
                if value is not None:
                    deferred.append((target, value))
                continue
            if key in LEGACY_NOOP_KEYS and self._table.resolve(key) is None:
                self._apply_legacy(key, value)
                continue
            if key.startswith("on_") and self._table.resolve(key) is None:
                self.callbacks(**{key: value})
                continue
            self._set(key, value, explicit=False)
        for target, value in deferred:
            self._set(target, value, explicit=False)
        return self

    def is_user_set(self, key: str) -> bool:
        """Whether the user chose this setting: through a section method, an attribute or item
        assignment, or a dict value that differs from the default. Defaults that rlx picks for
        speed adapt to the settings the user chose (docs/configuration.md, "rlx defaults and
        why"); an explicit value never changes."""
        canonical = self._table.resolve(key)
        return canonical is not None and canonical in self._user_set

    def _apply_legacy(self, key: str, value: Any) -> None:
        off = LEGACY_NOOP_KEYS[key]
        if value is None or value == off or value is False:
            return
        if key == "multiagent":
            self.multi_agent(**value)
        elif key == "evaluation_num_episodes":
            self.evaluation(evaluation_num_episodes=value)
        elif key == "use_pytorch":
            self.framework("torch")
        elif key == "monitor":
            self.environment(render_env=True)
        elif key == "horizon":
            raise ConfigError(
                "'horizon' was removed: limit episode length in the env itself, e.g. "
                "gymnasium.make(id, max_episode_steps=N) or a gymnasium.wrappers.TimeLimit."
            )
        elif key == "eager":
            raise ConfigError("'eager' is a TensorFlow setting and rlx is PyTorch-only; remove it.")
        elif key in ("soft_horizon", "no_done_at_end"):
            raise ConfigError(f"'{key}' was removed from RLlib and rlx; episodes end when the env says so.")
        else:
            # Performance switches of the old stack that have no meaning in rlx.
            return

    @classmethod
    def overrides(cls, **kwargs: Any) -> dict[str, Any]:
        """A validated dict of settings to override elsewhere (e.g. in evaluation_config)."""
        probe = cls()
        out = {}
        for key, value in kwargs.items():
            if probe._table.resolve(key) is None:
                if not key.startswith("_") and callable(getattr(cls, key, None)):
                    # RLlib accepts the names of config methods here (e.g. `exploration=False`, seen in
                    # its examples) and the setting then changes nothing; rlx says so and drops it.
                    logger.warning("AlgorithmConfig.overrides(%s=%r): %r is a config method, not a setting; "
                                   "ignored (as in RLlib). Did you mean %s?", key, value, key,
                                   did_you_mean(key, probe._table.all_names()).strip() or "another key")
                    continue
                raise ConfigError(f"Unknown config key '{key}'.{did_you_mean(key, probe._table.all_names())}")
            out[key] = value
        return out

    def copy(self, copy_frozen: bool | None = None) -> "AlgorithmConfig":
        """A deep copy; frozen unless `copy_frozen=False` (default: same as this one)."""
        new = type(self).__new__(type(self))
        object.__setattr__(new, "_values", {})
        object.__setattr__(new, "_user_set", set(self._user_set))
        object.__setattr__(new, "algo_class", self.algo_class)
        for name, value in self._values.items():
            new._values[name] = _copy_value(value)
        object.__setattr__(new, "_frozen", self._frozen if copy_frozen is None else bool(copy_frozen))
        if "_multi_agent_env_found" in self.__dict__:
            object.__setattr__(new, "_multi_agent_env_found", (new._values["env"],))
        return new

    def freeze(self) -> None:
        """Make the config read-only (done when an Algorithm is built from it)."""
        object.__setattr__(self, "_frozen", True)

    @property
    def is_frozen(self) -> bool:
        """Whether the config is read-only."""
        return self._frozen

    # ------------------------------------------------------------ derived values

    @property
    def total_train_batch_size(self) -> int:
        """Env steps in one training batch across all Learners."""
        per = self._values["train_batch_size_per_learner"]
        if per is not None:
            return per * max(1, self._values["num_learners"])
        return self._values["train_batch_size"]

    def get_rollout_fragment_length(self, worker_index: int = 0) -> int:
        """Steps each sub-env of EnvRunner `worker_index` collects per `sample()` call. 'auto'
        splits the total train batch over all sub-envs as RLlib does: when it does not divide
        evenly, the first EnvRunners take one step more, so the fragments add up to exactly
        the batch (index 0, the local EnvRunner, rounds up)."""
        value = self._values["rollout_fragment_length"]
        if value != "auto":
            return int(value)
        return config_defaults.rollout_fragment_length(
            self.total_train_batch_size, self._values["num_env_runners"], self._values["num_envs_per_env_runner"],
            worker_index)

    def validate_train_batch_size_vs_rollout_fragment_length(self) -> None:
        """Raise ConfigError when a fixed rollout_fragment_length times the EnvRunners and their
        sub-envs cannot add up to the total train batch size within 10% (RLlib's check of
        on-policy algorithms); 'auto' always fits."""
        config_defaults.check_train_batch_vs_fragment(self)

    # ------------------------------------------------------------ RLlib's derived attributes

    @property
    def learner_class(self) -> Any:
        """The Learner class: `training(learner_class=...)` when set, else `get_default_learner_class()`."""
        value = self._values["learner_class"]
        return value if value is not None else self.get_default_learner_class()

    def get_default_learner_class(self) -> Any:
        """The Learner class this config's algorithm uses by default (None for a config without
        an algorithm class). Config subclasses override it, as in RLlib."""
        if self.algo_class is None:
            return None
        return config_defaults.default_learner_class(self)

    @property
    def rl_module_spec(self) -> Any:
        """The RLModuleSpec the algorithm builds its module from: the default one completed with
        `rl_module(rl_module_spec=...)` and the model config (a MultiRLModuleSpec when given
        one). For a config without an algorithm class, the value given (or None)."""
        if self.algo_class is None:
            return self._values["rl_module_spec"]
        return self.get_rl_module_spec()

    def get_default_rl_module_spec(self) -> Any:
        """The RLModuleSpec of the algorithm's default module, before the config's
        rl_module_spec and spaces are applied. Config subclasses override it, as in RLlib."""
        return config_defaults.default_rl_module_spec(self)

    def build_learner_connector(self, input_observation_space: Any = None, input_action_space: Any = None,
                                device: Any = None) -> Any:
        """RLlib's learner connector pipeline of a Learner: turns the episodes of
        `Learner.update(episodes=...)` into per-module train batches, with this config's
        `learner_connector` pieces (rlx.connectors.learner.episodes_pipeline)."""
        # By import path: the connector pipeline loads torch, and a config must stay cheap to import.
        build = import_object("rlx.connectors.learner.episodes_pipeline:build_episodes_learner_connector")
        return build(self, input_observation_space, input_action_space)

    def get_multi_rl_module_spec(self, *, env: Any = None, spaces: dict | None = None,
                                 inference_only: bool = False, **kwargs: Any) -> Any:
        """The MultiRLModuleSpec of this config: one RLModuleSpec per policy (a single-agent
        config's one module under "default_policy"), spaces from `env` or `spaces`
        ({module_id: (observation_space, action_space)}) when given."""
        if kwargs:
            raise ConfigError(f"get_multi_rl_module_spec() got {sorted(kwargs)}: rlx builds module specs from "
                              "the config, env and spaces only (RLlib's hybrid-stack policy_dict and "
                              "single_agent_rl_module_spec are not supported).")
        spec = self.get_rl_module_spec(env=env, spaces=spaces, inference_only=inference_only)
        return config_defaults.multi_rl_module_spec(self, spec, spaces)

    @property
    def is_atari(self) -> bool | None:
        """Whether the env is an Atari game: `environment(is_atari=...)` when set, else judged
        from a Gymnasium id without creating the env; None when that cannot be told (an env
        class or creator), and the EnvRunner then judges the env it creates."""
        value = self._values["is_atari"]
        return value if value is not None else config_defaults.env_is_atari(self._values["env"])

    def get_rl_module_spec(self, env: Any = None, spaces: dict | None = None,
                           inference_only: bool | None = None) -> Any:
        """The RLModuleSpec this config's algorithm builds its module from, spaces and model config
        filled in from the config (or `spaces`): `config.get_rl_module_spec().build()` makes a
        module like the Algorithm's (see rlx.algorithms.config_module_spec)."""
        if env is not None and spaces is None:
            spaces = {"__env__": (env.observation_space, env.action_space)}
        return rl_module_spec_of(self, spaces=spaces, inference_only=inference_only)

    def resolve_num_envs_per_env_runner(self, episode_step_limit: int | None = None) -> int:
        """Sub-envs each EnvRunner steps. A value the user set is kept. rlx's own default of
        several sub-envs (PPO's 8) shrinks, never below 1, so that each sub-env's share of the
        train batch still reaches the env's episode time limit (`episode_step_limit`, from the
        first sub-env) and the user's `rollout_fragment_length`: then the first results
        report finished episodes, as with RLlib's one sub-env (docs/configuration.md, "rlx
        defaults and why"). With `num_learners` > 1 it keeps at least one sub-env per learner,
        since learners split batches along the sub-env axis."""
        if self.is_user_set("num_envs_per_env_runner"):
            return int(self._values["num_envs_per_env_runner"])
        count = int(self._table.options["num_envs_per_env_runner"].default)
        if count <= 1:
            return count
        share = self.total_train_batch_size // max(1, int(self._values["num_env_runners"]))
        fragment = self._values["rollout_fragment_length"]
        if fragment != "auto" and self.is_user_set("rollout_fragment_length"):
            count = min(count, share // int(fragment))
        if episode_step_limit:
            count = min(count, share // int(episode_step_limit))
        # Learner processes split batches along the sub-env axis: keep one column per learner.
        learners = int(self._values["num_learners"])
        default = int(self._table.options["num_envs_per_env_runner"].default)
        return max(1, count, min(default, learners))

    @property
    def sub_envs_in_processes(self) -> bool:
        """Whether each sub-env runs in its own process (remote_worker_envs, or
        gym_env_vectorize_mode='async')."""
        return bool(self._values["remote_worker_envs"]) or self._values["gym_env_vectorize_mode"] == "async"

    @property
    def is_multi_agent(self) -> bool:
        """Whether the config names policies (multi_agent(policies=...)), its env is a
        MultiAgentEnv class (or import path of one), or building an Algorithm found that its env
        creator returns a MultiAgentEnv (see mark_env_multi_agent)."""
        if self._values["policies"] is not None:
            return True
        env = self._values["env"]
        found = self.__dict__.get("_multi_agent_env_found")
        return names_multi_agent_env_class(env) or (found is not None and found[0] is env)

    def mark_env_multi_agent(self) -> None:
        """Record that this config's env creator returns a MultiAgentEnv (known only once an env
        was built); a frozen config may record it, as it describes the env, not a setting."""
        object.__setattr__(self, "_multi_agent_env_found", (self._values["env"],))

    def get_config_for_module(self, module_id: str) -> "AlgorithmConfig":
        """This config with the overrides of module `module_id` applied: its PolicySpec's config,
        then `algorithm_config_overrides_per_module[module_id]` (this config itself without any)."""
        overrides: dict[str, Any] = {}
        spec = (self._values["policies"] or {}).get(module_id)
        if spec is not None and spec.config:
            overrides.update(spec.config)
        overrides.update(self._values["algorithm_config_overrides_per_module"].get(module_id, {}))
        if not overrides:
            return self
        cache = self.__dict__.setdefault("_module_configs", {})
        if module_id not in cache:
            module_config = self.copy(copy_frozen=False)
            try:
                module_config.update_from_dict(overrides)
            except ConfigError as err:
                raise ConfigError(f"In the config overrides of module {module_id!r}: {err}") from err
            if self._frozen:
                module_config.freeze()
            cache[module_id] = module_config
        return cache[module_id]

    @property
    def model_config(self) -> dict:
        """The model settings dict (alias of `model`)."""
        return self._values["model"]

    def make_callback_dispatcher(self) -> Any:
        """A CallbackDispatcher with fresh instances of the configured callbacks classes and
        the per-event callables (one per Algorithm and one per EnvRunner)."""
        callables = {
            event: normalize_event_callables(event, self._values[f"callbacks_{event}"])
            for event in CALLBACK_EVENTS
            if self._values.get(f"callbacks_{event}") is not None
        }
        return CallbackDispatcher(callbacks_class=self._values["callbacks_class"], event_callables=callables)

    def _validate_multi_agent(self) -> None:
        v = self._values
        policies = v["policies"]
        ids = list(policies) if policies is not None else ["default_policy"]
        for module_id in v["algorithm_config_overrides_per_module"]:
            if module_id not in ids:
                raise ConfigError(f"algorithm_config_overrides_per_module names module {module_id!r}, which is not a "
                                  f"policy; the policies are {', '.join(ids)}.{did_you_mean(module_id, ids)}")
        to_train = v["policies_to_train"]
        if isinstance(to_train, list):
            for pid in to_train:
                if pid not in ids:
                    raise ConfigError(f"policies_to_train names {pid!r}, which is not a policy; the policies are "
                                      f"{', '.join(ids)}.{did_you_mean(pid, ids)}")
        if policies is not None:
            AgentMapper(v["policy_mapping_fn"], ids)  # raises when several policies have no mapping
            for module_id in ids:
                self.get_config_for_module(module_id)

    def get_evaluation_config_object(self) -> "AlgorithmConfig":
        """The (unfrozen) config of evaluation EnvRunners: this one with `evaluation_config`
        applied, `in_evaluation=True` and `evaluation_num_env_runners` runners."""
        eval_config = self.copy(copy_frozen=False)
        overrides = self._values["evaluation_config"] or {}
        try:
            eval_config.update_from_dict(dict(overrides))
        except ConfigError as err:
            raise ConfigError(f"In evaluation_config: {err}") from err
        eval_config._values["in_evaluation"] = True
        eval_config._values["num_env_runners"] = self._values["evaluation_num_env_runners"]
        return eval_config

    def validate(self) -> None:
        """Check settings that depend on each other; raise ConfigError naming the conflict."""
        v = self._values
        searched = self.search_space_keys()
        if searched:
            what = f"{searched[0]} holds a Ray Tune search space" if len(searched) == 1 else \
                f"{', '.join(searched)} hold Ray Tune search spaces"
            algo = getattr(self.algo_class, "__name__", None) or self.algo_class or "ALGO"
            raise ConfigError(
                f"{what} (tune.grid_search, tune.uniform, ...): an Algorithm needs plain values, one per "
                f"trial. Run the sweep through Ray Tune: tune.Tuner(\"{algo}\", param_space=config).fit(), "
                "or `rlx train` with this config; or set plain values."
            )
        self._adapt_unset_defaults()
        check_machine_bounds(v, self.total_train_batch_size, self.sub_envs_in_processes)
        if v["restart_failed_env_runners"] and v["ignore_env_runner_failures"]:
            raise ConfigError(
                "'ignore_env_runner_failures' (old: ignore_worker_failures) and 'restart_failed_env_runners' "
                "(old: recreate_failed_workers) are mutually exclusive: set only one of them to True."
            )
        if v["evaluation_duration"] == "auto" and not v["evaluation_parallel_to_training"]:
            raise ConfigError(
                "evaluation_duration='auto' means 'evaluate for as long as the training step takes', so it "
                "needs evaluation_parallel_to_training=True. Set that, or give evaluation_duration a number."
            )
        if v["evaluation_config"]:
            self.get_evaluation_config_object()
        self._validate_multi_agent()
        check_compile_settings(self)
        if v["env"] is None and (v["observation_space"] is None or v["action_space"] is None):
            raise ConfigError(
                "No environment is configured. Call config.environment('CartPole-v1') "
                "(a Gymnasium id, a name registered with rlx.register_env, an import path or an env class)."
            )
        self._validate_algorithm_settings()

    def search_space_keys(self) -> list[str]:
        """The settings that hold Ray Tune search spaces, by their to_dict() name; nested
        ones as 'model/fcnet_hiddens' (Tune's own notation). Empty for a buildable config."""
        found: list[str] = []
        for name, value in self._values.items():
            found.extend(search_space_paths(value, _DICT_NAMES.get(name, name)))
        return found

    def _validate_algorithm_settings(self) -> None:
        """Algorithm-specific cross-checks; subclasses extend this."""

    def _adapt_unset_defaults(self) -> None:
        """Adapt the defaults rlx picks for speed, where the user left them unset, to what the
        user did set (validate() calls this first); subclasses extend it. Each adapted value is
        recomputed from the default, so validating twice gives the same result."""

    # ------------------------------------------------------------ building

    def build(self, env: Any = None, logger_creator: Any = None, use_copy: bool = True) -> Any:
        """Validate and build the Algorithm (alias of `build_algo`)."""
        return self.build_algo(env=env, logger_creator=logger_creator, use_copy=use_copy)

    def build_algo(self, env: Any = None, logger_creator: Any = None, use_copy: bool = True) -> Any:
        """Validate this config and return a new Algorithm built from (a copy of) it."""
        config = self.copy(copy_frozen=False) if use_copy else self
        if env is not None:
            config.environment(env)
        algo_class = config.algo_class
        if algo_class is None:
            raise ConfigError(
                "This config has no algorithm class. Use an algorithm's config, e.g. PPOConfig(), "
                "or AlgorithmConfig(algo_class=PPO)."
            )
        if isinstance(algo_class, str):
            algo_class = get_algorithm_class(algo_class)
        return algo_class(config=config, logger_creator=logger_creator)

    def __repr__(self) -> str:
        changed = {
            k: v for k, v in self._values.items()
            if k in self._table.options and not _same(v, self._table.options[k].default) and k != "model"
        }
        return f"{type(self).__name__}({json.dumps(changed, default=repr)[:400]})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and _same(self.to_dict(), other.to_dict())  # type: ignore[union-attr]

    __hash__ = None  # type: ignore[assignment]


def is_search_space(value: Any) -> bool:
    """Whether `value` is a Ray Tune search space: {'grid_search': [...]} or a tune Domain
    (tune.uniform, tune.choice, ...). Tells by the class's module, so it never imports ray."""
    if isinstance(value, dict):
        return set(value) == {"grid_search"}
    return type(value).__module__.startswith("ray.tune.search")


def search_space_paths(value: Any, path: str = "") -> list[str]:
    """The paths ('a/b/0') of the search spaces in `value`, itself included, as Tune walks
    them: through dicts and lists."""
    if is_search_space(value):
        return [path]
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(search_space_paths(item, f"{path}/{key}" if path else str(key)))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found.extend(search_space_paths(item, f"{path}/{index}" if path else str(index)))
    return found


def contains_search_space(value: Any) -> bool:
    """Whether `value` is or holds (in dicts and lists) a Ray Tune search space."""
    return bool(search_space_paths(value))


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. numpy arrays inside spaces
        return a is b


def _copy_value(value: Any) -> Any:
    if isinstance(value, type) or callable(value) and not isinstance(value, (dict, list)):
        return value
    try:
        return copy.deepcopy(value)
    except Exception:
        return value


AlgorithmConfig._table = AlgorithmConfig._build_table()


def __getattr__(name: str) -> Any:
    # RLlib exports DifferentiableAlgorithmConfig from this module; it lives in its own (which
    # imports this one), so it is looked up on first use.
    if name == "DifferentiableAlgorithmConfig":
        from rlx.algorithms.differentiable_algorithm_config import DifferentiableAlgorithmConfig

        return DifferentiableAlgorithmConfig
    raise AttributeError(f"module 'rlx.algorithms.algorithm_config' has no attribute {name!r}")

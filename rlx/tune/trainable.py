"""The Tune Trainable that runs one rlx Algorithm per trial.

Tune creates one `AlgorithmTrainable` actor per trial with the trial's resolved config
dict (the `param_space`, e.g. `PPOConfig().to_dict()`, with every `tune.grid_search`
replaced by one value). The adapter builds the algorithm's config from that dict,
builds the Algorithm, and hands Tune its `train()` results and checkpoints:

* `step()` returns `algo.train()`. The result is nested; Tune flattens it with "/", so
  `metric="env_runners/episode_return_mean"` and `stop={"env_runners/...": x}` work, as do
  the old flat keys (`episode_reward_mean`, `timesteps_total`).
* `save_checkpoint(dir)` writes a normal rlx checkpoint into `dir`, so
  `Algorithm.from_checkpoint(result.checkpoint)` (or `rlx evaluate PATH`) loads what Tune
  kept; `load_checkpoint` restores one (Tune's fault tolerance, PBT, `Tuner.restore`).
* Tune writes result.json, progress.csv and TensorBoard files into the trial directory
  itself, so the Algorithm's own result logger is a NoopLogger placed in that directory
  (its checkpoints, videos, ... land there), unless the config names a logger of its own;
  `logger_config={"wandb": ..., "mlflow": ...}` adds only those runs.

There is one subclass per algorithm: `trainable("PPO")` (registered with Tune under
"PPO" when `rlx.tune` is imported) and `trainable(MyAlgorithm)` for other Algorithm
classes.
"""
from __future__ import annotations

from typing import Any, ClassVar

from ray.tune import PlacementGroupFactory, Trainable

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.registry import ALGORITHMS, get_algorithm_class
from rlx.algorithms.resources import trial_bundles
from rlx.loggers.creation import create_result_logger
from rlx.loggers.logger import NoopLogger
from rlx.loggers.unified_logger import UnifiedLogger
from rlx.utils.errors import ConfigError, did_you_mean
from rlx.utils.registry import get_registered_creator, register_env


class AlgorithmTrainable(Trainable):
    """A Tune Trainable running the rlx Algorithm named by `algorithm`.

    Use `trainable(PPO)` / `trainable("PPO")` rather than subclassing; `self.algo` is the
    trial's Algorithm once `setup()` ran.
    """

    #: The algorithm: a name of rlx.algorithms.registry (imported in the trial, so the
    #: class pickles by reference) or an Algorithm class.
    algorithm: ClassVar[str | type | None] = None

    algo: Any = None

    # ------------------------------------------------------------------ config

    @classmethod
    def algorithm_class(cls) -> type:
        """The Algorithm class this Trainable builds."""
        algorithm = cls.algorithm
        if algorithm is None:
            raise TypeError(f"{cls.__name__} names no algorithm; use rlx.tune.trainable(AlgorithmClass).")
        return get_algorithm_class(algorithm) if isinstance(algorithm, str) else algorithm

    @classmethod
    def get_default_config(cls) -> Any:
        """The algorithm's default config, as from the Algorithm class itself (RLlib's example
        scripts call `get_trainable_cls("PPO").get_default_config()`)."""
        return cls.algorithm_class().get_default_config()

    @classmethod
    def make_config(cls, config: dict[str, Any]) -> Any:
        """The AlgorithmConfig of one trial: the algorithm's defaults updated with Tune's
        resolved config dict (old flat keys such as num_workers or sgd_minibatch_size included)."""
        if not isinstance(config, dict):
            raise ConfigError(f"Tune's config for {cls.__name__} must be a dict, got {config!r}.")
        _adopt_tune_env(config.get("env"))
        algo_config = cls.algorithm_class().get_default_config()
        algo_config.update_from_dict(dict(config))
        return algo_config

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory | None:
        """The trial's resources, from its config: a bundle for the Algorithm (CPUs
        `num_cpus_for_main_process`, GPUs `num_gpus`, or `num_gpus_per_learner` for its own
        Learner), one per remote EnvRunner, training and evaluation (`num_cpus_per_env_runner`,
        `num_gpus_per_env_runner`, `custom_resources_per_env_runner`), and one per Learner process
        (`num_cpus_per_learner`, `num_gpus_per_learner`).

        None (Tune's default: 1 CPU, or `resources_per_trial` / `tune.with_resources`) when the
        config asks for no more than that, or cannot be read (the trial then reports why).
        """
        try:
            c = cls.make_config(config)
        except Exception:  # noqa: BLE001 - setup() raises the error in the trial, where it is reported
            return None
        bundles = trial_bundles(c)
        return None if bundles is None else PlacementGroupFactory(bundles, strategy=c.placement_strategy)

    # ------------------------------------------------------------------ Trainable API

    def setup(self, config: dict[str, Any]) -> None:
        """Build the trial's Algorithm from its resolved config dict."""
        algo_config = self.make_config(config)
        self.algo = algo_config.build_algo(logger_creator=self._logger_creator(algo_config), use_copy=False)

    def _logger_creator(self, algo_config: Any) -> Any:
        logdir = self.logdir
        if algo_config.logger_creator is not None:
            return None  # the user's own creator
        if algo_config.logger_config and "type" in algo_config.logger_config:
            # The user named a logger (e.g. a Tune/W&B-style class): it writes into the trial dir.
            name = self.algorithm_class().__name__
            return lambda cfg: create_result_logger(cfg, name, logdir=logdir)
        if algo_config.logger_config:
            # Tune writes the files; only the W&B / MLflow runs logger_config asks for are added.
            return lambda cfg: UnifiedLogger(cfg, logdir, loggers=(), logger_config=cfg.logger_config)
        # Tune already writes result.json, progress.csv and events.* for every trial.
        return lambda cfg: NoopLogger(cfg, logdir)

    def step(self) -> dict[str, Any]:
        """One `algo.train()` call; its (nested) result dict."""
        return self.algo.train()

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Write an rlx checkpoint into `checkpoint_dir` (Tune's), loadable by
        `Algorithm.from_checkpoint` and `rlx evaluate`."""
        self.algo.save_to_path(checkpoint_dir)
        return None

    def load_checkpoint(self, checkpoint: Any) -> None:
        """Restore the Algorithm from a checkpoint this Trainable saved: its directory (what
        Tune passes) or a checkpoint object (see `rlx.utils.checkpoints.checkpoint_dir`)."""
        if isinstance(checkpoint, dict):  # pragma: no cover - save_checkpoint never returns a dict
            raise ConfigError(f"{type(self).__name__} restores rlx checkpoint directories, not dicts.")
        self.algo.restore_from_path(checkpoint)

    def cleanup(self) -> None:
        """Stop the Algorithm: envs, runners and its logger."""
        if self.algo is not None:
            self.algo.stop()


def _adopt_tune_env(env: Any) -> None:
    """Inside a trial, make an env name registered with `tune.register_env` (in the driver,
    or with rlx.register_env after `import ray.tune`) known to rlx's env registry."""
    if not isinstance(env, str):
        return
    if get_registered_creator(env) is not None:
        return
    from ray.tune.registry import ENV_CREATOR, _global_registry

    try:
        if _global_registry.contains(ENV_CREATOR, env):
            register_env(env, _global_registry.get(ENV_CREATOR, env))
    except Exception:  # noqa: BLE001 - no Ray session: the name resolves like any other
        return


# ---------------------------------------------------------------------- one class per algorithm

def _make_adapter(name: str, algorithm: str | type, qualname: str) -> type[AlgorithmTrainable]:
    doc = f"Ray Tune Trainable running rlx's {name} (see rlx.tune.AlgorithmTrainable)."
    # __name__ is the algorithm's name: Tune names trials and experiments after it ("PPO_...").
    return type(name, (AlgorithmTrainable,), {
        "algorithm": algorithm, "__module__": __name__, "__qualname__": qualname, "__doc__": doc,
    })


#: name -> Trainable of every registry algorithm. Module attributes `<NAME>Trainable`
#: (e.g. PPOTrainable), so they pickle by reference into Tune's trial actors.
REGISTERED: dict[str, type[AlgorithmTrainable]] = {}
for _name in ALGORITHMS:
    REGISTERED[_name] = globals()[f"{_name}Trainable"] = _make_adapter(_name, _name, f"{_name}Trainable")
del _name

_CLASS_ADAPTERS: dict[type, type[AlgorithmTrainable]] = {}


def is_algorithm_class(obj: Any) -> bool:
    """Whether `obj` is an rlx Algorithm class (not an instance, not a Trainable)."""
    return isinstance(obj, type) and issubclass(obj, Algorithm)


def trainable(algorithm: str | type) -> type[AlgorithmTrainable]:
    """The Tune Trainable class running `algorithm`: a registry name ("PPO", any case) or an
    Algorithm class (rlx's own, a subclass of one, or an old alias such as PPOTrainer).

    `tune.Tuner(rlx.tune.trainable(MyPPO), param_space=...)` runs a custom algorithm;
    after `import rlx.tune`, `tune.Tuner(MyPPO, ...)` does the same.
    """
    if isinstance(algorithm, str):
        key = algorithm.upper() if algorithm.upper() in REGISTERED else algorithm
        if key not in REGISTERED:
            raise ConfigError(f"Unknown algorithm '{algorithm}'.{did_you_mean(algorithm, REGISTERED)} "
                              f"Available: {', '.join(REGISTERED)}.")
        return REGISTERED[key]
    if isinstance(algorithm, type) and issubclass(algorithm, AlgorithmTrainable):
        return algorithm
    if not is_algorithm_class(algorithm):
        raise TypeError(f"rlx.tune.trainable() needs an algorithm name or an rlx Algorithm class, got {algorithm!r}.")
    for name, entry in ALGORITHMS.items():  # the registry names classes ("APEX" -> ApexDQN)
        if entry[1] == algorithm.__name__ and get_algorithm_class(name) is algorithm:
            return REGISTERED[name]  # rlx's own class (or an old alias of it): the registered Trainable
    adapter = _CLASS_ADAPTERS.get(algorithm)
    if adapter is None:
        # Not importable by this name, so Tune's cloudpickle ships it (and, by reference when
        # it is importable, the algorithm class) to the trial actors by value.
        adapter = _make_adapter(algorithm.__name__, algorithm, f"_{algorithm.__name__}Trainable")
        _CLASS_ADAPTERS[algorithm] = adapter
    return adapter

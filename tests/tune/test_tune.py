"""Ray Tune integration (rlx.tune): registration, sweeps, checkpoints, `rlx train` sweeps.

One small local Ray cluster (2 CPUs, no dashboard) serves the whole module; the sweeps
train tiny PPO configs for one or two iterations, so most of the time is Tune starting
trial actors. The `rlx train` sweep and the scripts that never `import rlx.tune` run in
subprocesses connected to that cluster (RAY_ADDRESS).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
tune = pytest.importorskip("ray.tune")

from cli_helpers import ROOT, run_rlx  # noqa: E402

from rlx.algorithms.algorithm import Algorithm  # noqa: E402
from rlx.algorithms.ppo import PPO, PPOConfig  # noqa: E402
from rlx.algorithms.registry import get_algorithm_class, list_algorithms  # noqa: E402
from rlx.loggers import flatten_result  # noqa: E402
from rlx.utils.errors import ConfigError  # noqa: E402

RETURN = "env_runners/episode_return_mean"
LRS = [1e-3, 5e-4, 1e-4]
SMALL = dict(train_batch_size=256, minibatch_size=64, num_epochs=1)


def small_ppo(**training) -> PPOConfig:
    return PPOConfig().environment("CartPole-v1").training(**{**SMALL, **training}).debugging(seed=0)


def run_config(storage: Path, name: str, iterations: int) -> tune.RunConfig:
    return tune.RunConfig(
        name=name, storage_path=str(storage), stop={"training_iteration": iterations}, verbose=0,
        checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
    )


def start_ray() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)


@pytest.fixture(scope="module", autouse=True)
def ray_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One quiet local Ray instance for the module. Trial actors inherit RLX_RESULTS_DIR
    from here; `trial_results_root` must stay empty (trials log into Tune's dirs only)."""
    root = tmp_path_factory.mktemp("trial_results_root")
    saved = {k: os.environ.get(k) for k in ("RLX_RESULTS_DIR", "RAY_AUTH_MODE")}
    os.environ["RLX_RESULTS_DIR"] = str(root)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    import rlx.tune  # noqa: F401 - before ray.init: registrations are flushed at init

    if ray.is_initialized():
        ray.shutdown()
    start_ray()
    try:
        yield root
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def lr_sweep(tmp_path_factory: pytest.TempPathFactory):
    """Seed 003's sweep: PPOConfig().training(lr=tune.grid_search([...])) through
    tune.Tuner("PPO", param_space=config.to_dict()), two iterations per trial."""
    storage = tmp_path_factory.mktemp("tune_storage")
    config = small_ppo(lr=tune.grid_search(LRS))
    tuner = tune.Tuner("PPO", param_space=config.to_dict(), run_config=run_config(storage, "lr_sweep", 2))
    return tuner.fit()


# ------------------------------------------------------------------ registration, imports


def test_import_registers_every_rlx_algorithm_with_tune():
    from ray.tune.registry import get_trainable_cls

    from rlx.tune import AlgorithmTrainable, trainable

    names = list(list_algorithms())
    assert names
    for name in names:
        cls = get_trainable_cls(name)
        assert issubclass(cls, AlgorithmTrainable) and issubclass(cls, tune.Trainable)
        assert cls.algorithm_class() is get_algorithm_class(name)
        assert trainable(name) is trainable(name.lower()) is trainable(get_algorithm_class(name)) is cls
    with pytest.raises(ConfigError, match="Unknown algorithm 'PP0'"):
        trainable("PP0")
    with pytest.raises(TypeError, match="rlx Algorithm class"):
        trainable(dict)


def test_importing_rlx_and_ppo_never_imports_ray():
    code = textwrap.dedent("""
        import sys
        import rlx, rlx.algorithms.ppo, rlx.cli.train
        from rlx.algorithms.ppo import PPOConfig
        config = PPOConfig().training(lr={"grid_search": [0.1, 0.01]})
        assert config.search_space_keys() == ["lr"], config.search_space_keys()
        assert not [m for m in sys.modules if m == "ray" or m.startswith("ray.")]
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_registrations_survive_a_new_ray_session():
    """Tune forgets registrations when Ray shuts down; rlx.tune registers again on init.
    (The module's later tests then run on this second session.)"""
    from ray.tune.registry import get_trainable_cls

    ray.shutdown()
    start_ray()
    for name in list_algorithms():
        assert get_trainable_cls(name).algorithm == name


AUTOREGISTER_SCRIPT = """
import sys
{imports}
assert "rlx.tune" in sys.modules, "importing rlx.algorithms and ray.tune did not register rlx"
from ray.tune.registry import get_trainable_cls
from ray.tune.tune import _Config
assert get_trainable_cls("PPO").__module__ == "rlx.tune.trainable", get_trainable_cls("PPO")
assert isinstance(PPOConfig(), _Config)
if {run_trial}:
    import json
    from pathlib import Path
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128, num_epochs=1)
    [result] = tune.Tuner("PPO", param_space=config, run_config=tune.RunConfig(
        storage_path=sys.argv[1], name="autoregistered", stop={{"training_iteration": 1}}, verbose=0,
        checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True))).fit()
    assert result.error is None, result.error
    # Only rlx writes rlx_checkpoint.json: the trial ran rlx's PPO, not RLlib's.
    meta = json.loads((Path(result.checkpoint.path) / "rlx_checkpoint.json").read_text())
    print(meta["algorithm_class"], result.metrics["num_env_steps_sampled_lifetime"])
print("ok")
"""


def run_script(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=str(ROOT),
                          timeout=300, env=env)


@pytest.mark.slow
def test_tune_runs_rlx_without_importing_rlx_tune(tmp_path):
    """rlx.algorithms first, ray.tune later: the import of ray.tune registers rlx, and a
    Tuner("PPO") trial in a fresh driver runs rlx's PPO."""
    imports = ("from rlx.algorithms.ppo import PPOConfig\n"
               "assert 'ray' not in sys.modules\n"
               "from ray import tune")
    proc = run_script(AUTOREGISTER_SCRIPT.format(imports=imports, run_trial=True), str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-3:] == ["rlx.algorithms.ppo.ppo:PPO", "256", "ok"], proc.stdout


def test_tune_imported_before_rlx_algorithms_registers_rlx_too():
    proc = run_script(AUTOREGISTER_SCRIPT.format(
        imports="from ray import tune\nimport rlx\nassert 'rlx.tune' not in sys.modules\n"
                "from rlx.algorithms.ppo import PPOConfig",
        run_trial=False))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["ok"], proc.stdout


def test_tunes_rllib_fallback_does_not_take_rlx_names(monkeypatch):
    """For a name it does not know, Tune registers every RLlib algorithm (PPO included) when
    RLlib is importable; rlx's PPO must stay registered under "PPO" afterwards."""
    import types

    from ray.tune.registry import get_trainable_cls, register_trainable, validate_trainable

    from rlx.tune import AlgorithmTrainable, register_algorithms

    class RLlibPPO(tune.Trainable):
        pass

    fake_rllib = types.ModuleType("ray.rllib")
    fake_rllib._register_all = lambda: register_trainable("PPO", RLlibPPO)
    monkeypatch.setitem(sys.modules, "ray.rllib", fake_rllib)
    try:
        with pytest.raises(tune.TuneError, match="Unknown trainable: NotAnAlgorithm"):
            validate_trainable("NotAnAlgorithm")
        assert issubclass(get_trainable_cls("PPO"), AlgorithmTrainable)
    finally:
        register_algorithms()


# ------------------------------------------------------------------ config search spaces


def test_search_spaces_stay_in_the_config_and_build_says_to_use_tune():
    config = small_ppo(lr=tune.grid_search(LRS), model={"fcnet_hiddens": tune.choice([[32], [64]])})
    as_dict = config.to_dict()
    assert as_dict["lr"] == {"grid_search": LRS}
    assert type(as_dict["model"]["fcnet_hiddens"]).__name__ == "Categorical"
    assert as_dict["model"]["fcnet_activation"] == "tanh"  # the plain model keys keep their defaults
    assert config.search_space_keys() == ["lr", "model/fcnet_hiddens"]
    with pytest.raises(ConfigError, match=r"lr, model/fcnet_hiddens hold Ray Tune search spaces") as err:
        config.build()
    assert 'tune.Tuner("PPO", param_space=config)' in str(err.value)
    assert "rlx train" in str(err.value)
    with pytest.raises(ConfigError, match="lr holds a Ray Tune search space"):
        small_ppo(lr=tune.loguniform(1e-5, 1e-3)).validate()


def test_default_resource_request_follows_the_config():
    from rlx.tune import trainable

    ppo = trainable("PPO")
    assert ppo.default_resource_request(small_ppo().to_dict()) is None  # Tune's default: 1 CPU
    bigger = small_ppo().resources(num_cpus_for_main_process=2).env_runners(
        num_env_runners=2, num_cpus_per_env_runner=0.5)
    pgf = ppo.default_resource_request(bigger.to_dict())
    assert pgf.bundles == [{"CPU": 2.0}, {"CPU": 0.5}, {"CPU": 0.5}]
    assert pgf.strategy == "PACK"
    assert ppo.default_resource_request({"not_an_option": 1}) is None  # the trial reports the error


# ------------------------------------------------------------------ sweeps


def test_tuner_sweep_of_three_learning_rates(lr_sweep, ray_cluster):
    assert len(lr_sweep) == 3 and not lr_sweep.errors
    assert sorted(r.config["lr"] for r in lr_sweep) == sorted(LRS)
    for result in lr_sweep:
        assert result.metrics["training_iteration"] == 2
        assert result.metrics["num_env_steps_sampled_lifetime"] == 512
        trial_dir = Path(result.path)
        assert (trial_dir / "result.json").is_file() and (trial_dir / "progress.csv").is_file()
        rows = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
        assert [r["training_iteration"] for r in rows] == [1, 2]
        assert (Path(result.checkpoint.path) / "rlx_checkpoint.json").is_file()
        # Tune writes the trial's results; the Algorithm's own logger writes nothing.
        assert not list(trial_dir.glob("PPO_*")) and not list(trial_dir.glob("*/result.json"))
    assert not any(ray_cluster.iterdir()), list(ray_cluster.iterdir())


def test_best_result_checkpoint_restores_the_best_trial(lr_sweep):
    best = lr_sweep.get_best_result(metric=RETURN, mode="max")
    assert best.metrics["env_runners"]["episode_return_mean"] == max(
        r.metrics["env_runners"]["episode_return_mean"] for r in lr_sweep)
    algo = Algorithm.from_checkpoint(best.checkpoint.path)
    try:
        assert isinstance(algo, PPO)
        assert algo.iteration == 2
        assert algo.config.lr == best.config["lr"]
        assert algo.compute_single_action([0.0, 0.0, 0.0, 0.0], explore=False) in (0, 1)
    finally:
        algo.stop()


def test_algorithm_from_checkpoint_takes_tunes_checkpoint_object(lr_sweep):
    best = lr_sweep.get_best_result(metric=RETURN, mode="max")
    algo = Algorithm.from_checkpoint(best.checkpoint)  # seed: Algorithm.from_checkpoint(best.checkpoint)
    try:
        assert algo.iteration == 2 and algo.config.lr == best.config["lr"]
    finally:
        algo.stop()


@pytest.mark.slow
def test_tune_run_with_a_flat_config_dict_as_in_the_seeds(tmp_path):
    analysis = tune.run(
        "PPO",
        config={"env": "CartPole-v1", "lr": tune.grid_search([1e-3, 1e-4]), "train_batch_size": 256,
                "sgd_minibatch_size": 64, "num_sgd_iter": 1},  # old key names, as in seed 002
        stop={"training_iteration": 1},
        storage_path=str(tmp_path), name="seed_style", verbose=0,
    )
    assert sorted(t.config["lr"] for t in analysis.trials) == [1e-4, 1e-3]
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert [t.last_result["training_iteration"] for t in analysis.trials] == [1, 1]
    best = analysis.get_best_trial("episode_reward_mean", mode="max")  # the old flat key works too
    assert best is not None and best.last_result["info"]["learner"]["default_policy"]["learner_stats"]


@pytest.mark.slow
def test_tuner_and_tune_run_take_algorithm_classes_rlx_configs_and_registered_envs(tmp_path):
    """Tuner(PPO) / Tuner(MyPPO) / tune.run("PPO") with param_space=PPOConfig(...) or its dict /
    config=PPOConfig(...), search spaces included, as RLlib users write it, on envs registered
    with rlx or with Tune; the checkpoints Tune reports restore into an Algorithm as objects."""
    import gymnasium as gym

    import rlx

    rlx.register_env("rlx_registered_cartpole", lambda env_config: gym.make("CartPole-v1"))
    tune.register_env("tune_registered_cartpole", lambda env_config: gym.make("CartPole-v1"))

    class MyPPO(PPO):
        """A custom algorithm (defined here, so Tune ships it to the trials by value)."""

    # One sweep checks three input forms at once: an algorithm class, a config object holding
    # a grid search, and an env registered with rlx.
    config = small_ppo(lr=tune.grid_search([1e-3, 1e-4])).environment("rlx_registered_cartpole")
    grid = tune.Tuner(PPO, param_space=config, run_config=run_config(tmp_path, "config_object", 1)).fit()
    assert len(grid) == 2 and not grid.errors, grid.errors
    assert sorted(r.config["lr"] for r in grid) == [1e-4, 1e-3]
    assert all(r.config["train_batch_size"] == 256 and r.config["minibatch_size"] == 64 for r in grid)
    assert all(Path(r.path).name.startswith("PPO_rlx_registered_cartpole") for r in grid)
    custom = tune.Tuner(MyPPO, param_space=small_ppo().environment("tune_registered_cartpole").to_dict(),
                        run_config=run_config(tmp_path, "MyPPO", 1)).fit()
    assert len(custom) == 1 and not custom.errors, custom.errors
    assert Path(custom[0].path).name.startswith("MyPPO_")
    for result in [*grid, custom[0]]:
        assert result.metrics["training_iteration"] == 1
        assert result.metrics["env_runners"]["num_episodes"] > 0
    algo = Algorithm.from_checkpoint(grid[0].checkpoint.path)
    assert algo.config.env == "rlx_registered_cartpole" and algo.iteration == 1
    algo.stop()

    analysis = tune.run("PPO", config=small_ppo(lr=5e-4), stop={"training_iteration": 1}, verbose=0,
                        storage_path=str(tmp_path), name="run_config_object",
                        checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True))
    [trial] = analysis.trials
    assert trial.status == "TERMINATED" and trial.config["lr"] == 5e-4
    reloaded = tune.ExperimentAnalysis(analysis.experiment_path)
    checkpoints = [
        analysis.get_last_checkpoint(trial),
        reloaded.get_best_checkpoint(reloaded.trials[0], metric=RETURN, mode="max"),
        grid[0].checkpoint,
    ]
    assert all(isinstance(c, tune.Checkpoint) for c in checkpoints)
    algo = small_ppo().build()
    try:
        for checkpoint, lr in zip(checkpoints, [5e-4, 5e-4, grid[0].config["lr"]]):
            algo.restore(checkpoint)
            assert algo.iteration == 1
            restored = PPO.from_checkpoint(checkpoint)
            assert restored.config.lr == lr
            restored.stop()
    finally:
        algo.stop()


def test_a_tune_trial_and_a_plain_run_share_the_tensorboard_layout(lr_sweep, tmp_path):
    """Same tags for the same result keys, and the same x-axis (env steps sampled), whether
    Tune's TBXLoggerCallback or rlx's TBXLogger (with tensorboard_legacy_keys) wrote the events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def read(logdir: Path) -> EventAccumulator:
        ea = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
        ea.Reload()
        return ea

    trial = next(r for r in lr_sweep if r.config["lr"] == LRS[0])
    algo = small_ppo(lr=LRS[0]).debugging(
        logger_config={"logdir": str(tmp_path / "plain"), "tensorboard_legacy_keys": True}).build()
    try:
        results = [algo.train(), algo.train()]
    finally:
        algo.stop()
    env_steps = [r["num_env_steps_sampled_lifetime"] for r in results]
    assert env_steps == [256, 512]
    plain_keys = set().union(*(flatten_result(r) for r in results))

    tune_events, plain_events = read(Path(trial.path)), read(tmp_path / "plain")
    tune_tags, plain_tags = tune_events.Tags(), plain_events.Tags()
    assert "ray/tune/env_runners/episode_return_mean" in plain_tags["scalars"]
    for kind in ("scalars", "histograms"):
        shared = {t for t in tune_tags[kind] if t.removeprefix("ray/tune/") in plain_keys}
        assert set(plain_tags[kind]) == shared, kind
    for tag in ("ray/tune/env_runners/episode_return_mean", "ray/tune/learners/default_policy/total_loss"):
        assert [e.step for e in tune_events.Scalars(tag)] == env_steps
        assert [e.step for e in plain_events.Scalars(tag)] == env_steps


# ------------------------------------------------------------------ rlx train sweeps


@pytest.mark.slow
def test_rlx_train_with_grid_search_runs_the_sweep_through_tune(tmp_path):
    storage = tmp_path / "store"
    config = {"lr": {"grid_search": [0.001, 0.0001]}, **SMALL}  # two values show the sweep
    env = {"RAY_ADDRESS": ray.get_runtime_context().gcs_address, "RAY_AUTH_MODE": "disabled"}
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", json.dumps(config),
                   "--stop", '{"training_iteration": 2}', "--storage-path", str(storage),
                   "--experiment-name", "sweep", results_dir=tmp_path / "results", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    trial_lines = re.findall(r"^  lr=(\S+)\s+2 iterations, return [\d.]+, checkpoint (\S+)$", out, re.M)
    assert sorted(float(lr) for lr, _ in trial_lines) == [0.0001, 0.001], out
    for _, checkpoint in trial_lines:
        assert Path(checkpoint).is_relative_to(storage / "sweep")
    best_lr = float(re.search(r"^Best trial: lr=(\S+) \(final return [\d.]+\)$", out, re.M).group(1))
    command = re.search(r"^  (rlx evaluate (\S+) --algo PPO --env CartPole-v1)$", out, re.M)
    assert command, out
    checkpoint = command.group(2)
    assert checkpoint in [c for lr, c in trial_lines if float(lr) == best_lr]
    algo = Algorithm.from_checkpoint(checkpoint)
    try:
        assert algo.iteration == 2 and algo.config.lr == best_lr
    finally:
        algo.stop()
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
    # The printed command itself runs.
    evaluate = run_rlx(*shlex.split(command.group(1))[1:], "--episodes", "1", results_dir=tmp_path / "results")
    assert evaluate.returncode == 0, evaluate.stderr
    assert "Episode #1: reward:" in evaluate.stdout


@pytest.fixture
def without_ray(tmp_path: Path) -> Path:
    """A directory to put first on PYTHONPATH: its `ray` package fails to import."""
    fake = tmp_path / "no_ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray (simulated)')\n")
    return fake.parent


def test_importing_rlx_tune_without_ray_says_how_to_install_it(without_ray):
    code = "import rlx.tune"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=60,
                          env={**os.environ, "PYTHONPATH": str(without_ray)})
    assert proc.returncode != 0
    assert "ImportError: rlx.tune runs rlx algorithms with Ray Tune, which is not installed: " \
           "pip install -c constraints.txt -e '.[tune]' (in your rlx checkout)" in proc.stderr


def test_rlx_train_grid_search_without_ray_says_how_to_install_it(tmp_path, without_ray):
    config = {"lr": {"grid_search": [0.001, 0.0001]}, **SMALL}
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", json.dumps(config),
                   "--stop", '{"training_iteration": 1}', results_dir=tmp_path / "results",
                   env={"PYTHONPATH": str(without_ray)})
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert ("a grid_search in the config runs a sweep with Ray Tune, which is not installed: "
            "pip install -c constraints.txt -e '.[tune]' (in your rlx checkout)") in lines[0]


@pytest.mark.slow
def test_a_trial_with_remote_env_runners_places_them_in_its_own_reservation(tmp_path):
    # The 2-CPU cluster fits the trial (1 CPU) plus its runner (1 CPU) exactly once: the
    # Ray EnvRunner must use the trial's placement group, not reserve a second CPU (which
    # would wait forever; the time budget turns that into a failed assertion).
    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1)
              .training(train_batch_size=256, minibatch_size=64, num_epochs=1))
    results = tune.Tuner(
        "PPO", param_space=config.to_dict(),
        tune_config=tune.TuneConfig(time_budget_s=90),
        run_config=run_config(tmp_path, "with_runners", iterations=2),
    ).fit()
    [result] = list(results)
    assert result.error is None
    assert result.metrics["training_iteration"] == 2
    assert result.metrics["fault_tolerance"]["num_healthy_workers"] == 1


def test_get_trainable_cls_gives_the_algorithms_default_config():
    # RLlib's example scripts: get_trainable_cls(args.algo).get_default_config().environment(...)
    from ray.tune.registry import get_trainable_cls

    import rlx.tune  # noqa: F401  (registers rlx's algorithms with Tune)
    from rlx.algorithms.dqn import DQN, DQNConfig
    from rlx.algorithms.ppo import PPO, PPOConfig

    for name, config_cls, algo_cls in (("PPO", PPOConfig, PPO), ("DQN", DQNConfig, DQN)):
        config = get_trainable_cls(name).get_default_config()
        assert type(config) is config_cls and config.algo_class is algo_cls
        algo = config.environment("CartPole-v1").build()
        try:
            assert isinstance(algo, algo_cls)
        finally:
            algo.stop()

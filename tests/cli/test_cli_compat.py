"""The CLI's promises across commands: the `rlx evaluate` command `rlx train` prints works
wherever the env came from, `rlx train file URL` downloads the file, and stop criteria take
RLlib's legacy result keys and are checked before training starts.

Commands run through the real console script (cli_helpers.run_rlx) with tiny PPO batches.
"""
from __future__ import annotations

import functools
import http.server
import json
import math
import re
import shlex
import socket
import textwrap
import threading
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from cli_helpers import run_rlx
from conftest import small_config

SMALL = {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 1}
ONE_ITERATION = json.dumps({"training_iteration": 1})
#: Keep urllib off any proxy of the environment for the local test server.
NO_PROXY = {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}

TINY_ENV = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class TinyEnv(gym.Env):
        """Box(4) observations, Discrete(2) actions; action 1 earns 1; 5 steps an episode."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            self.t = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(4, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(4, np.float32), float(action), self.t >= 5, False, {}
''')


def assert_one_line_error(proc, *needles: str) -> str:
    """A failed command: non-zero exit, one `rlx: error:` line naming every needle."""
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("rlx: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def printed_evaluate_command(stdout: str) -> list[str]:
    """The arguments (after `rlx`) of the evaluate command `rlx train` printed."""
    match = re.search(r"^Evaluate it with:\n  (rlx evaluate .+)$", stdout, re.M)
    assert match, stdout
    return shlex.split(match.group(1))[1:]


def run_printed_evaluate(train_stdout: str, cwd: Path, *extra: str, **kwargs) -> str:
    """Run the printed evaluate command (one episode) from `cwd`; return its stdout."""
    proc = run_rlx(*printed_evaluate_command(train_stdout), "--episodes", "1", *extra, cwd=cwd, **kwargs)
    assert proc.returncode == 0, proc.stderr
    assert "Episode #1: reward:" in proc.stdout, proc.stdout
    return proc.stdout


def checkpoint_meta(train_stdout: str) -> dict:
    """rlx_checkpoint.json of the checkpoint a train command printed."""
    path = Path(printed_evaluate_command(train_stdout)[1])
    return json.loads((path / "rlx_checkpoint.json").read_text())


def train(*args: str, cwd: Path, results: Path, stop: str = ONE_ITERATION, **kwargs):
    """`rlx train ARGS` with a tiny PPO budget, run from `cwd`."""
    return run_rlx("train", *args, "--config", json.dumps(SMALL), "--stop", stop, results_dir=results, cwd=cwd,
                   **kwargs)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project directory (the cwd of training) holding env modules."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "my_envs.py").write_text(TINY_ENV)
    return root


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """Another directory, to evaluate from."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


# ------------------------------------------------------------------ rlx evaluate after rlx train


def test_env_from_a_python_experiment_file_evaluates_from_anywhere(project, elsewhere, tmp_path):
    (project / "my_exp.py").write_text(TINY_ENV + textwrap.dedent('''
        from rlx.algorithms.ppo import PPOConfig

        config = PPOConfig().environment(TinyEnv).training(train_batch_size=256, minibatch_size=128, num_epochs=1)
        stop = {"training_iteration": 1}
    '''))
    proc = run_rlx("train", "file", "my_exp.py", results_dir=tmp_path / "out", cwd=project)
    assert proc.returncode == 0, proc.stderr
    meta = checkpoint_meta(proc.stdout)
    assert meta["checkpoint_version"] == "1.2"
    assert meta["env_source"]["experiment_file"] == str(project / "my_exp.py")
    run_printed_evaluate(proc.stdout, elsewhere)
    # Without the file the env cannot be rebuilt: one line that names the file.
    (project / "my_exp.py").unlink()
    gone = run_rlx(*printed_evaluate_command(proc.stdout), cwd=elsewhere)
    assert_one_line_error(gone, str(project / "my_exp.py"), "no longer exists")


@pytest.mark.slow
def test_env_module_of_the_current_directory_trains_and_evaluates_from_anywhere(project, elsewhere, tmp_path):
    proc = train("--algo", "PPO", "--env", "my_envs:TinyEnv", cwd=project, results=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert checkpoint_meta(proc.stdout)["env_source"]["imports"] == [{"module": "my_envs", "path": str(project)}]
    run_printed_evaluate(proc.stdout, project)
    run_printed_evaluate(proc.stdout, elsewhere)  # from the directory the checkpoint recorded
    (project / "my_envs.py").unlink()
    gone = run_rlx(*printed_evaluate_command(proc.stdout), cwd=elsewhere)
    assert_one_line_error(gone, "needs module 'my_envs'", str(project))


def test_import_runs_register_env_calls_and_the_checkpoint_remembers_them(project, elsewhere, tmp_path):
    (project / "my_registrations.py").write_text(
        "import rlx\nfrom my_envs import TinyEnv\n\nrlx.register_env('tiny-registered', lambda cfg: TinyEnv(cfg))\n"
    )
    proc = train("--algo", "PPO", "--import", "my_registrations", "--env", "tiny-registered", cwd=project,
                 results=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    imports = checkpoint_meta(proc.stdout)["env_source"]["imports"]
    assert imports == [{"module": "my_registrations", "path": str(project)}]
    run_printed_evaluate(proc.stdout, elsewhere)  # no --import needed: the checkpoint has it
    missing = train("--algo", "PPO", "--import", "no_such_module", "--env", "CartPole-v1", cwd=project,
                    results=tmp_path / "out")
    assert_one_line_error(missing, "--import no_such_module", "no module named 'no_such_module'")


# ------------------------------------------------------------------ Gymnasium plugin namespaces


@pytest.fixture
def plugin(project: Path) -> Path:
    """A Gymnasium plugin package, registered as plugins register (ale_py does the same):
    importing the package registers 'FakeNS/Tiny-v0'."""
    package = project / "fakens_plugin"
    package.mkdir()
    (package / "envs.py").write_text(TINY_ENV)
    (package / "__init__.py").write_text(
        "import gymnasium\n\n"
        "gymnasium.register(id='FakeNS/Tiny-v0', entry_point='fakens_plugin.envs:TinyEnv')\n"
    )
    return project


@pytest.mark.slow
def test_gymnasium_module_prefix_imports_the_plugin_as_gymnasium_does(plugin, elsewhere, tmp_path):
    proc = train("--algo", "PPO", "--env", "fakens_plugin:FakeNS/Tiny-v0", cwd=plugin, results=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "--env FakeNS/Tiny-v0" in proc.stdout
    imports = checkpoint_meta(proc.stdout)["env_source"]["imports"]
    assert {"module": "fakens_plugin", "path": str(plugin)} in imports
    run_printed_evaluate(proc.stdout, elsewhere)
    # The same spelling works for evaluate's --env.
    run_printed_evaluate(proc.stdout, elsewhere, "--env", "fakens_plugin:FakeNS/Tiny-v0")


def test_import_flag_registers_a_plugin_namespace(plugin, elsewhere, tmp_path):
    proc = train("--algo", "PPO", "--import", "fakens_plugin", "--env", "FakeNS/Tiny-v0", cwd=plugin,
                 results=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    run_printed_evaluate(proc.stdout, elsewhere)


def test_a_missing_plugin_package_gets_gymnasiums_hint(plugin, tmp_path):
    unregistered = train("--algo", "PPO", "--env", "FakeNS/Tiny-v0", cwd=plugin, results=tmp_path / "out")
    assert_one_line_error(unregistered, "Namespace FakeNS not found. Have you installed the proper package for FakeNS?",
                          "--import")
    not_installed = train("--algo", "PPO", "--env", "missing_plugin:FakeNS/Tiny-v0", cwd=plugin,
                          results=tmp_path / "out")
    assert_one_line_error(not_installed, "No module named 'missing_plugin'",
                          "Environment registration via importing a module failed")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ checkpoints before env_source


def test_checkpoints_without_env_source_still_load_and_evaluate(tmp_path, results_dir):
    from rlx.algorithms.algorithm import Algorithm

    algo = small_config().build()
    algo.train()
    path = Path(algo.save(str(tmp_path / "ckpt")))
    algo.stop()
    meta_file = path / "rlx_checkpoint.json"
    meta = json.loads(meta_file.read_text())
    del meta["env_source"]
    meta["checkpoint_version"] = "1.0"
    meta_file.write_text(json.dumps(meta))
    restored = Algorithm.from_checkpoint(str(path))
    assert restored.iteration == 1
    restored.stop()
    proc = run_rlx("evaluate", str(path), "--episodes", "1", results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Episode #1: reward:" in proc.stdout


# ------------------------------------------------------------------ rlx train file URL


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, directory it serves) of an HTTP server on 127.0.0.1 in a thread."""
    served = tmp_path / "served"
    served.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def test_train_file_downloads_a_yaml_url(http_dir, tmp_path):
    base, served = http_dir
    experiment = {"url-exp": {"run": "PPO", "env": "CartPole-v1", "stop": {"training_iteration": 1},
                              "config": SMALL}}
    (served / "cartpole-ppo.yaml").write_text(yaml.safe_dump(experiment))
    proc = run_rlx("train", "file", f"{base}/cartpole-ppo.yaml?raw=1", "--no-checkpoint-at-end",
                   results_dir=tmp_path / "out", env=NO_PROXY)
    assert proc.returncode == 0, proc.stderr
    [trial] = list((tmp_path / "out" / "url-exp").iterdir())
    assert len((trial / "result.json").read_text().splitlines()) == 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("case, needles", [
    ("too_big", ["at most 1 MiB"]),
    ("not_found", ["HTTP 404"]),
    ("unreachable", ["Cannot download", "download the file and pass its path"]),
    ("python", ["does not run Python code from a URL"]),
    ("unknown_type", ["unknown experiment file type '.txt'"]),
])
def test_train_file_url_failures_are_one_clear_line(http_dir, tmp_path, case, needles):
    base, served = http_dir
    (served / "big.yaml").write_text("# padding\n" * 110_000 + "exp: {run: PPO, env: CartPole-v1}\n")
    urls = {
        "too_big": f"{base}/big.yaml",
        "not_found": f"{base}/missing.yaml",
        "unreachable": f"http://127.0.0.1:{_free_port()}/exp.yaml",
        "python": f"{base}/my_exp.py",
        "unknown_type": f"{base}/exp.txt",
    }
    proc = run_rlx("train", "file", urls[case], results_dir=tmp_path / "out", env=NO_PROXY)
    assert_one_line_error(proc, urls[case], *needles)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ stop keys


def test_every_legacy_stop_key_reads_the_value_rlx_reports(results_dir):
    from rlx.cli.stop import StopCriteria, canonical_key, legacy_keys, lookup

    algo = small_config().evaluation(evaluation_interval=1, evaluation_duration=2).build()
    result = algo.train()
    algo.stop()
    keys = legacy_keys()
    for key in ("sampler_results/episode_reward_mean", "evaluation/sampler_results/episode_reward_mean",
                "env_runners/episode_reward_mean", "evaluation/episode_reward_mean", "info/num_env_steps_sampled",
                "timesteps_total", "episodes_total", "agent_timesteps_total", "episodes_this_iter",
                "timesteps_this_iter"):
        assert key in keys
    # Reported under these names themselves (agent steps are env steps with one agent).
    assert lookup(result, "num_agent_steps_sampled_lifetime") == result["num_env_steps_sampled_lifetime"]
    assert lookup(result, "policy_reward_mean/default_policy") == \
        result["env_runners"]["module_episode_returns_mean"]["default_policy"]
    criteria = StopCriteria({key: 0 for key in keys})
    for key in keys:
        rlx_key = canonical_key(key)
        assert rlx_key != key and lookup(result, rlx_key) is not None, (key, rlx_key)
        value, expected = criteria.value(result, key), lookup(result, rlx_key)
        assert value == expected or (math.isnan(value) and math.isnan(expected)), key
    assert canonical_key("sampler_results/episode_reward_mean") == "env_runners/episode_return_mean"
    assert canonical_key("evaluation/sampler_results/episode_reward_mean") == \
        "evaluation/env_runners/episode_return_mean"
    assert canonical_key("info/num_env_steps_sampled") == "num_env_steps_sampled_lifetime"
    assert canonical_key("episodes_total") == "env_runners/num_episodes_lifetime"


@pytest.mark.parametrize("key, bound, extra", [
    ("sampler_results/episode_reward_mean", 15, {}),
    ("env_runners/episode_reward_mean", 15, {}),
    ("info/num_agent_steps_sampled", 512, {}),
    ("evaluation/sampler_results/episode_reward_mean", 5, {"evaluation_interval": 1, "evaluation_duration": 1}),
])
def test_legacy_stop_keys_stop_training(tmp_path, key, bound, extra):
    stop = json.dumps({key: bound, "training_iteration": 40})
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", json.dumps({**SMALL, **extra}),
                   "--stop", stop, "--seed", "0", "--no-checkpoint-at-end", results_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"reached {key} >= {bound}" in proc.stdout
    iterations = int(re.search(r"Finished PPO on CartPole-v1: (\d+) iterations", proc.stdout).group(1))
    assert iterations < 40


@pytest.mark.parametrize("stop, needles", [
    ({"episode_reward_meen": 1}, ["'episode_reward_mean' (= env_runners/episode_return_mean)"]),
    ({"my_metric": 1}, ["env_runners/my_metric"]),
    ({"env_runner/episode_return_mean": 1}, ["'env_runners/episode_return_mean'"]),
    ({"evaluation/episode_reward_mean": 1}, ["runs no evaluation", "evaluation_interval"]),
    ({"training_iteration": math.nan}, ["'training_iteration' is NaN", "never stop"]),
])
def test_bad_stop_keys_are_refused_before_the_first_iteration(tmp_path, stop, needles):
    proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", json.dumps(SMALL),
                   "--stop", json.dumps(stop), results_dir=tmp_path)
    assert_one_line_error(proc, *needles)
    assert "iter " not in proc.stdout and not (tmp_path / "default").exists()  # nothing ran


def test_nan_stop_value_in_an_experiment_file_is_refused(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("exp: {run: PPO, env: CartPole-v1, stop: {training_iteration: .nan}}\n")
    proc = run_rlx("train", "file", str(path), results_dir=tmp_path / "out")
    assert_one_line_error(proc, "'training_iteration' is NaN")
    assert not (tmp_path / "out").exists()


def test_a_bad_stop_key_in_a_later_experiment_fails_before_the_first_one_trains(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({
        "first": {"run": "PPO", "env": "CartPole-v1", "stop": {"training_iteration": 1}, "config": SMALL},
        "second": {"run": "PPO", "env": "CartPole-v1", "stop": {"episode_reward_meen": 1}, "config": SMALL},
    }))
    proc = run_rlx("train", "file", str(path), results_dir=tmp_path / "out")
    assert_one_line_error(proc, "episode_reward_meen")
    assert not (tmp_path / "out").exists()


def test_a_metric_that_callbacks_log_later_is_waited_for(project, tmp_path):
    # Episodes last 300 steps and iterations 256, so the first episode (and with it the
    # callback's metric) ends in iteration 2: the key is missing from the first result.
    (project / "late_exp.py").write_text(textwrap.dedent('''
        import gymnasium as gym
        import numpy as np

        from rlx.algorithms.ppo import PPOConfig
        from rlx.callbacks import DefaultCallbacks


        class LongEnv(gym.Env):
            observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
            action_space = gym.spaces.Discrete(2)

            def __init__(self, config=None):
                self.t = 0

            def reset(self, *, seed=None, options=None):
                self.t = 0
                return np.zeros(2, np.float32), {}

            def step(self, action):
                self.t += 1
                return np.zeros(2, np.float32), 1.0, self.t >= 300, False, {}


        class CountEpisodes(DefaultCallbacks):
            def on_episode_end(self, *, metrics_logger=None, **kwargs):
                metrics_logger.log_value("episodes_done", 1, reduce="sum")


        config = (PPOConfig().environment(LongEnv).callbacks(CountEpisodes)
                  .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
                  .training(train_batch_size=256, minibatch_size=128, num_epochs=1))
        stop = {"env_runners/episodes_done": 1, "training_iteration": 6}
    '''))
    proc = run_rlx("train", "file", "late_exp.py", "--no-checkpoint-at-end", results_dir=tmp_path / "out",
                   cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "'env_runners/episodes_done' is not in the results yet" in proc.stdout
    assert "reached env_runners/episodes_done >= 1" in proc.stdout
    assert "Finished PPO on LongEnv: 2 iterations" in proc.stdout


def test_sweeps_map_legacy_keys_and_refuse_bad_ones_before_ray_starts(tmp_path):
    from rlx.cli.sweep import CriteriaStopper

    stopper = CriteriaStopper({"sampler_results/episode_reward_mean": 10})
    assert not stopper("t", {"training_iteration": 1, "env_runners": {"episode_return_mean": 9.0}})
    assert stopper("t", {"training_iteration": 2, "env_runners": {"episode_return_mean": 11.0}})
    sweep = json.dumps({**SMALL, "lr": {"grid_search": [0.001, 0.0005]}})
    for stop, needle in ((math.nan, "is NaN"), ("bogus", "Did you mean")):
        criteria = {"training_iteration": stop} if stop != "bogus" else {"training_iteraton": 1}
        proc = run_rlx("train", "--algo", "PPO", "--env", "CartPole-v1", "--config", sweep,
                       "--stop", json.dumps(criteria), results_dir=tmp_path)
        assert_one_line_error(proc, needle)
        assert "Sweeping" not in proc.stdout


def test_help_lists_the_import_option():
    for command in (["train"], ["train", "file"], ["evaluate"]):
        proc = run_rlx(*command, "--help")
        assert proc.returncode == 0 and "--import MODULE" in proc.stdout, command

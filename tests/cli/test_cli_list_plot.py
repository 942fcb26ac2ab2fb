"""`rlx list` and `rlx plot`, run through the real console script, and plot's trial reading."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import ROOT, run_rlx
from conftest import small_config
from rlx.algorithms.registry import list_algorithms
from rlx.cli.plot import (
    MATPLOTLIB_MISSING, extract_points, find_trial_dirs, load_trial, read_progress_csv, read_result_json,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPERIMENT = "my_experiment"
TRIAL_NAMES = ("PPO_CartPole-v1_seed0", "PPO_CartPole-v1_seed1")


def assert_valid_png(path: Path) -> None:
    """`path` is a PNG that matplotlib reads back as a real picture."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = mpimg.imread(str(path))
    assert image.shape[0] > 100 and image.shape[1] > 100


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """The command failed with exit status 1 and one `rlx: error:` line holding every fragment."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rlx: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------------------------
# rlx list
# ---------------------------------------------------------------------------------------------

def test_list_prints_every_algorithm_with_its_description(results_dir):
    proc = run_rlx("list", results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for name, description in list_algorithms().items():
        matching = [line for line in lines if line.split()[:1] == [name]]
        assert len(matching) == 1, (name, proc.stdout)
        assert matching[0].endswith(description)
    # Names are padded to one column: every description starts at the same offset.
    starts = {line.index(desc) for line in lines for desc in list_algorithms().values() if line.endswith(desc)}
    assert len(starts) == 1
    assert "rlx train --algo PPO --env CartPole-v1" in proc.stdout
    assert proc.stderr == ""


def test_list_help(results_dir):
    proc = run_rlx("list", "--help", results_dir=results_dir)
    assert proc.returncode == 0
    assert "usage: rlx list" in proc.stdout
    assert "algorithms" in proc.stdout


def test_list_and_plot_do_not_import_torch(results_dir, tmp_path):
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "progress.csv").write_text("num_env_steps_sampled_lifetime,env_runners/episode_return_mean\n"
                                        "10,1.0\n20,2.0\n")
    code = (
        "import sys\n"
        "from rlx.cli.main import main\n"
        "assert main(['list']) == 0\n"
        f"assert main(['plot', {str(trial)!r}]) == 0\n"
        "assert 'torch' not in sys.modules, 'rlx list/plot imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                          env={**os.environ, "RLX_RESULTS_DIR": str(results_dir)}, timeout=120)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------------------------
# rlx plot on real trials
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root holding EXPERIMENT/<two real PPO trials of 3 iterations each>."""
    root = tmp_path_factory.mktemp("plot_results")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLX_RESULTS_DIR", str(root / "unused"))
        for seed, name in enumerate(TRIAL_NAMES):
            config = small_config(seed=seed).debugging(logger_config={"logdir": str(root / EXPERIMENT / name)})
            algo = config.build()
            try:
                for _ in range(3):
                    algo.train()
            finally:
                algo.stop()
    return root


@pytest.fixture
def results_copy(trained_root: Path, tmp_path: Path) -> Path:
    """A private copy of the trained results, free to change."""
    copy = tmp_path / "results"
    shutil.copytree(trained_root, copy)
    return copy


def test_plot_writes_a_png_of_every_trial(results_copy, tmp_path):
    out = tmp_path / "plots" / "curves.png"
    proc = run_rlx("plot", str(results_copy), "--out", str(out), results_dir=results_copy)
    assert proc.returncode == 0, proc.stderr
    assert_valid_png(out)
    assert str(out) in proc.stdout
    for name in TRIAL_NAMES:
        assert f"{EXPERIMENT}/{name}: 3 points, last " in proc.stdout
    assert "best (max)" in proc.stdout


def test_plot_default_out_is_in_the_results_dir(results_copy):
    experiment = results_copy / EXPERIMENT
    proc = run_rlx("plot", str(experiment), results_dir=results_copy)
    assert proc.returncode == 0, proc.stderr
    out = experiment / "learning_curves.png"
    assert_valid_png(out)
    assert str(out) in proc.stdout
    for name in TRIAL_NAMES:  # relative to the directory given
        assert f"\n{name}: 3 points" in "\n" + proc.stdout


def test_plot_a_single_trial_dir_names_it(results_copy):
    trial = results_copy / EXPERIMENT / TRIAL_NAMES[0]
    proc = run_rlx("plot", str(trial), results_dir=results_copy)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{TRIAL_NAMES[0]}: 3 points")
    assert_valid_png(trial / "learning_curves.png")


def test_plot_a_nested_metric(results_copy, tmp_path):
    out = tmp_path / "loss.png"
    proc = run_rlx("plot", str(results_copy), "--metric", "learners/default_policy/total_loss",
                   "--out", str(out), results_dir=results_copy)
    assert proc.returncode == 0, proc.stderr
    assert_valid_png(out)
    assert "learners/default_policy/total_loss" in proc.stdout
    assert "best (min)" in proc.stdout


def test_plot_reads_result_json_when_progress_csv_is_gone(results_copy, tmp_path):
    for name in TRIAL_NAMES:
        (results_copy / EXPERIMENT / name / "progress.csv").unlink()
    out = tmp_path / "from_json.png"
    proc = run_rlx("plot", str(results_copy), "--metric", "learners/default_policy/total_loss",
                   "--out", str(out), results_dir=results_copy)
    assert proc.returncode == 0, proc.stderr
    assert_valid_png(out)
    for name in TRIAL_NAMES:
        assert f"{EXPERIMENT}/{name}: 3 points" in proc.stdout


def test_plot_unknown_metric_suggests_the_close_ones(results_copy):
    proc = run_rlx("plot", str(results_copy), "--metric", "env_runners/episode_retrun_mean",
                   results_dir=results_copy)
    line = assert_one_line_error(proc, "env_runners/episode_retrun_mean", "Did you mean")
    assert "'env_runners/episode_return_mean'" in line
    assert not (results_copy / "learning_curves.png").exists()


def test_plot_missing_dir(results_dir, tmp_path):
    missing = tmp_path / "no_such_results"
    proc = run_rlx("plot", str(missing), results_dir=results_dir)
    assert_one_line_error(proc, str(missing), "does not exist")


def test_plot_dir_without_trials(results_dir, tmp_path):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    proc = run_rlx("plot", str(empty), results_dir=results_dir)
    assert_one_line_error(proc, "no trials found", "progress.csv", "result.json")


def test_plot_without_matplotlib_says_how_to_install_it(results_copy, tmp_path):
    fake = tmp_path / "no_matplotlib"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    pythonpath = os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))
    proc = run_rlx("plot", str(results_copy), results_dir=results_copy, env={"PYTHONPATH": pythonpath})
    assert_one_line_error(proc, MATPLOTLIB_MISSING)


# ---------------------------------------------------------------------------------------------
# Finding and reading trials, on hand-written files
# ---------------------------------------------------------------------------------------------

PROGRESS = (
    "training_iteration,num_env_steps_sampled_lifetime,env_runners/episode_return_mean,note\n"
    "1,100,,a\n"
    "2,200,nan,b\n"
    "3,300,15.5,c\n"
    "4,,16.0,d\n"
    "5,500,20,e\n"
)

RESULTS = [
    {"training_iteration": 1, "num_env_steps_sampled_lifetime": 10, "env_runners": {"episode_return_mean": None}},
    {"training_iteration": 2, "num_env_steps_sampled_lifetime": 20,
     "env_runners": {"episode_return_mean": 2.5}, "learners": {"default_policy": {"total_loss": 0.75}}},
    {"training_iteration": 3, "num_env_steps_sampled_lifetime": 30, "env_runners": {}},
    {"training_iteration": 4, "num_env_steps_sampled_lifetime": 40,
     "env_runners": {"episode_return_mean": 4.0}, "hist_stats": {"episode_reward": [1, 2]}},
]


def write_result_json(path: Path, results: list[dict], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in results) + tail)


def test_find_trial_dirs(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "progress.csv").write_text(PROGRESS)
    (root / "b" / "c").mkdir(parents=True)
    write_result_json(root / "b" / "c" / "result.json", RESULTS)
    (root / "d" / "checkpoint_000001").mkdir(parents=True)
    (root / "d" / "params.json").write_text("{}")
    assert find_trial_dirs(root) == [root / "a", root / "b" / "c"]
    assert find_trial_dirs(root / "a") == [root / "a"]
    assert find_trial_dirs(root / "d") == []


def test_progress_csv_points_skip_empty_and_nan(tmp_path):
    (tmp_path / "progress.csv").write_text(PROGRESS)
    rows, keys = read_progress_csv(tmp_path / "progress.csv")
    assert len(rows) == 5
    assert "env_runners/episode_return_mean" in keys
    assert extract_points(rows, "env_runners/episode_return_mean", "num_env_steps_sampled_lifetime") == [
        (300.0, 15.5), (500.0, 20.0)]
    assert extract_points(rows, "env_runners/episode_return_mean", "training_iteration") == [
        (3.0, 15.5), (4.0, 16.0), (5.0, 20.0)]
    assert extract_points(rows, "note", "training_iteration") == []


def test_result_json_points_use_nested_keys(tmp_path):
    write_result_json(tmp_path / "result.json", RESULTS, tail='{"training_iteration": 5, "num_env')
    rows, keys = read_result_json(tmp_path / "result.json")
    assert len(rows) == 4  # the line cut short is skipped
    assert {"env_runners/episode_return_mean", "learners/default_policy/total_loss"} <= keys
    assert extract_points(rows, "env_runners/episode_return_mean", "num_env_steps_sampled_lifetime") == [
        (20.0, 2.5), (40.0, 4.0)]
    assert extract_points(rows, "learners/default_policy/total_loss", "training_iteration") == [(2.0, 0.75)]


def test_load_trial_prefers_progress_csv(tmp_path):
    trial = tmp_path / "exp" / "trial"
    trial.mkdir(parents=True)
    (trial / "progress.csv").write_text(PROGRESS)
    write_result_json(trial / "result.json", RESULTS)
    loaded = load_trial(trial, tmp_path)
    assert loaded.name == "exp/trial"
    assert loaded.source == trial / "progress.csv"
    assert len(loaded.rows) == 5
    # An empty progress.csv (created before the first result) falls back to result.json.
    (trial / "progress.csv").write_text("")
    loaded = load_trial(trial, tmp_path)
    assert loaded.source == trial / "result.json"
    assert len(loaded.rows) == 4
    assert load_trial(trial).name == "trial"


def test_plot_falls_back_to_the_legacy_metric(results_dir, tmp_path):
    old = tmp_path / "old_trial"
    old.mkdir()
    (old / "progress.csv").write_text("timesteps_total,episode_reward_mean\n100,\n200,8.5\n300,9.5\n")
    out = tmp_path / "old.png"
    proc = run_rlx("plot", str(old), "--out", str(out), results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert "old_trial: 2 points, last 9.5, best (max) 9.5 [episode_reward_mean]" in proc.stdout
    assert_valid_png(out)


def test_algorithm_names_are_found_whatever_their_case_and_dashes():
    from rlx.algorithms.registry import get_algorithm_class
    from rlx.utils.errors import ConfigError

    assert get_algorithm_class("DD-PPO").__name__ == "DDPPO"
    assert get_algorithm_class("apex-ddpg").__name__ == "ApexDDPG"
    assert get_algorithm_class("appo").__name__ == "APPO"
    with pytest.raises(ConfigError, match="Did you mean 'APPO'"):
        get_algorithm_class("APOO")

"""benchmarks/learning_curves.py --merge: runs of one example made with different seeds (one seed
per session on a small machine) become one report whose summary covers every seed."""
from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "learning_curves.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("learning_curves_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_run(folder: Path, seed: int, rlx_final: float, sb3_final: float, steps: int = 1000,
               env: str = "HalfCheetah-v5") -> Path:
    folder.mkdir(parents=True)
    report = {"example": "halfcheetah-ppo", "env": env, "algo": "PPO", "steps": steps,
              "loadavg": [1.0, 1.0, 1.0], "side_by_side": True,
              "rlx": {str(seed): {"steps": [500, 1000], "return": [rlx_final / 2, rlx_final], "wall_s": 60.0 + seed}},
              "sb3": {str(seed): {"steps": [400, 1000], "return": [sb3_final / 2, sb3_final], "wall_s": 90.0}}}
    (folder / "curves.json").write_text(json.dumps(report))
    return folder


def test_merge_combines_the_seeds_of_separate_runs(tmp_path):
    first = _write_run(tmp_path / "a", 0, rlx_final=5000.0, sb3_final=4000.0)
    second = _write_run(tmp_path / "b", 1, rlx_final=5400.0, sb3_final=4400.0)
    out = tmp_path / "merged"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--merge", str(first), str(second), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "curves.json").read_text())
    assert sorted(report["rlx"]) == ["0", "1"] and sorted(report["sb3"]) == ["0", "1"]
    assert report["summary"]["rlx"]["final_return_mean"] == pytest.approx(5200.0)
    assert report["summary"]["rlx"]["final_return_std"] == pytest.approx(statistics.pstdev([5000.0, 5400.0]))
    assert report["summary"]["sb3"]["final_return_mean"] == pytest.approx(4200.0)
    assert report["summary"]["rlx"]["wall_s_mean"] == pytest.approx(60.5)
    assert [s["dir"] for s in report["sources"]] == [str(first), str(second)]
    rows = (out / "curves.csv").read_text().splitlines()
    assert rows[0] == "library,seed,env_steps,return" and len(rows) == 1 + 8
    assert json.loads(proc.stdout.strip().splitlines()[-1])["rlx"] == report["summary"]["rlx"]


def test_merge_refuses_a_seed_twice_and_different_budgets(tmp_path):
    module = _load_script()
    first = _write_run(tmp_path / "a", 0, 5000.0, 4000.0)
    same_seed = _write_run(tmp_path / "b", 0, 5100.0, 4100.0)
    with pytest.raises(ValueError, match="seed 0 of rlx is in more than one"):
        module.merged_report([first, same_seed])
    other_budget = _write_run(tmp_path / "c", 1, 5100.0, 4100.0, steps=2000)
    with pytest.raises(ValueError, match="steps 2000.*same example and budget"):
        module.merged_report([first, other_budget])
    with pytest.raises(ValueError, match="curves.json does not exist"):
        module.merged_report([first, tmp_path / "missing"])


def test_merge_without_out_is_a_usage_error(tmp_path):
    first = _write_run(tmp_path / "a", 0, 5000.0, 4000.0)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--merge", str(first)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--merge needs --out" in proc.stderr


def test_merge_joins_the_two_halves_of_one_seed(tmp_path):
    """`--only rlx` and `--only sb3` runs of the same seed (each on whichever core was free)
    merge into one comparison of that seed."""
    module = _load_script()
    ours = _write_run(tmp_path / "rlx_half", 1, 5000.0, 0.0)
    theirs = _write_run(tmp_path / "sb3_half", 1, 0.0, 4000.0)
    for folder, drop in ((ours, "sb3"), (theirs, "rlx")):
        report = json.loads((folder / "curves.json").read_text())
        report[drop] = {}
        (folder / "curves.json").write_text(json.dumps(report))
    merged = module.merged_report([ours, theirs])
    assert merged["rlx"]["1"]["return"][-1] == 5000.0 and merged["sb3"]["1"]["return"][-1] == 4000.0


def _options(**given):
    import argparse

    return argparse.Namespace(**{"side_by_side": False, "only": None, "core": None, **given})


def test_run_options_that_cannot_run_say_why():
    module = _load_script()
    problem = module.usage_problem
    assert problem(_options(), False, [0, 1]) is None
    assert problem(_options(only="rlx", core=1), False, [0, 1]) is None
    assert "give one of them" in problem(_options(side_by_side=True, only="rlx"), True, [0, 1])
    assert "drop --core" in problem(_options(side_by_side=True, core=0), True, [0, 1])
    assert "--only sb3 needs the anchors interpreter" in problem(_options(only="sb3"), False, [0, 1])
    assert "--side-by-side needs the anchors interpreter" in problem(_options(side_by_side=True), False, [0, 1])
    assert "needs two cores" in problem(_options(side_by_side=True), True, [0])
    assert "--core 3 is not one of this process's cores [0, 1]" in problem(_options(core=3), True, [0, 1])


def test_only_sb3_without_anchors_stops_before_writing_anything(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(SCRIPT), "cartpole-ppo", "--steps", "1000", "--only", "sb3",
                           "--anchors-python", str(tmp_path / "no-python"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in __import__("os").environ.items() if k != "ANCHORS_PYTHON"})
    assert proc.returncode == 2
    assert "--only sb3 needs the anchors interpreter" in proc.stderr
    assert not out.exists()


def test_merge_keeps_variants_of_the_rlx_runs_apart(tmp_path):
    """Runs made with `--config` overrides (a variant of the example) merge only with runs of the
    same variant; an SB3-only run joins any of them."""
    module = _load_script()

    def variant(folder: Path, config: dict | None, drop: str | None = None) -> Path:
        report = json.loads((folder / "curves.json").read_text())
        report["rlx_config"] = config
        if drop:
            report[drop] = {}
        (folder / "curves.json").write_text(json.dumps(report))
        return folder

    tweak = {"policy_model_config": {"fcnet_kernel_initializer": "kaiming_uniform_"}}
    first = variant(_write_run(tmp_path / "a", 0, 5000.0, 4000.0), tweak, drop="sb3")
    second = variant(_write_run(tmp_path / "b", 1, 5200.0, 4200.0), tweak, drop="sb3")
    plain = variant(_write_run(tmp_path / "c", 2, 5300.0, 4300.0), None)
    sb3_only = variant(_write_run(tmp_path / "d", 0, 0.0, 4100.0), None, drop="rlx")
    merged = module.merged_report([first, second, sb3_only])
    assert merged["rlx_config"] == tweak and sorted(merged["rlx"]) == ["0", "1"] and sorted(merged["sb3"]) == ["0"]
    with pytest.raises(ValueError, match="merge runs of one variant at a time"):
        module.merged_report([first, plain])


def test_config_that_is_not_a_json_object_is_a_usage_error(tmp_path):
    for bad, message in (("{tau: 1}", "--config is not JSON"), ("[1, 2]", "--config must be a JSON object")):
        proc = subprocess.run([sys.executable, str(SCRIPT), "cartpole-ppo", "--steps", "1000", "--config", bad,
                               "--only", "rlx", "--out", str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr
        assert not (tmp_path / "run").exists()

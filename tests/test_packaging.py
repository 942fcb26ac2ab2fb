"""rlx as a package people install: the built wheel and sdist, a wheel install without a checkout,
install hints that fit how rlx was installed, the license, changelog and typing marker, and the
env checker at RLlib's path.

The wheel test builds the wheel and sdist from a copy of the source tree (`python -m build
--no-isolation`: the test venv's setuptools, no download) and installs the wheel into a fresh
venv without its dependencies; a .pth file lends that venv the test venv's site-packages for
torch, gymnasium and the rest (as a plain sys.path entry, so the editable install's finder, a
.pth hook of the test venv, stays off and rlx is imported from the wheel).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: What the sdist is built from (and so what the wheel is built from).
SOURCE_ITEMS = ["rlx", "tuned_examples", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE",
                "CHANGELOG.md", "constraints.txt"]
DISTRIBUTION = "rlx-torch"


# ----------------------------------------------------------------------------- license, changelog, typing

def test_license_is_the_apache_2_text_pyproject_names():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX" in text
    assert re.search(r'^license = "Apache-2\.0"$', (ROOT / "pyproject.toml").read_text(), flags=re.M)


def test_changelog_follows_keep_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog")
    assert "## [Unreleased]" in text
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, flags=re.M)
    assert versions[0] == ("Unreleased", "")
    assert all(date for name, date in versions[1:]), versions
    sections = set(re.findall(r"^### (\w+)$", text, flags=re.M))
    assert sections and sections <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


# ----------------------------------------------------------------------------- tuned examples by name

def test_train_file_takes_a_tuned_example_by_name_from_any_directory(tmp_path, monkeypatch):
    from rlx.cli.tuned_examples import list_tuned_examples, resolve_experiment_path

    monkeypatch.chdir(tmp_path)
    expected = ROOT / "tuned_examples" / "ppo" / "cartpole-ppo.yaml"
    for text in ("cartpole-ppo", "ppo/cartpole-ppo.yaml", "tuned_examples/ppo/cartpole-ppo.yaml"):
        assert Path(resolve_experiment_path(text)) == expected, text
    names = [e.name for e in list_tuned_examples()]
    assert "cartpole-ppo" in names and "cartpole-dqn" in names
    assert not any(name.startswith("generate_") for name in names)  # helper scripts are not experiments
    # A file that exists wins over a tuned example of the same name.
    (tmp_path / "ppo").mkdir()
    (tmp_path / "ppo" / "cartpole-ppo.yaml").write_text("mine: {run: PPO, env: CartPole-v1}\n")
    assert resolve_experiment_path("ppo/cartpole-ppo.yaml") == "ppo/cartpole-ppo.yaml"
    with pytest.raises(FileNotFoundError, match=r"Did you mean one of: 'cartpole-ppo'.*Run 'rlx list'"):
        resolve_experiment_path("cartpole-pp")


# ----------------------------------------------------------------------------- install hints

def test_install_hints_from_a_checkout_install_from_the_checkout():
    from rlx.utils.errors import install_hint

    assert install_hint("tune") == "pip install -c constraints.txt -e '.[tune]' (in your rlx checkout)"


def test_every_extra_an_install_hint_names_exists():
    """Each install_hint('X') in rlx names an extra of pyproject.toml (the wheel's Provides-Extra);
    ormsgpack, which the docs use, is in one; `all` names every extra."""
    import tomllib

    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    extras = set(optional)
    named = {m for path in (ROOT / "rlx").rglob("*.py")
             for m in re.findall(r"install_hint\(\s*['\"](\w+)['\"]", path.read_text())}
    assert named and named <= extras, named - extras
    assert any(req.startswith("ormsgpack") for req in optional["serialization"])  # docs/replay-buffers.md
    # `all` names every extra but dev.
    (everything,) = optional["all"]
    assert set(re.fullmatch(r"rlx-torch\[([\w,]+)\]", everything).group(1).split(",")) == extras - {"all", "dev"}


#: Import names whose distribution is named otherwise.
DISTRIBUTION_OF = {"PIL": "pillow", "yaml": "pyyaml", "tree": "dm-tree", "google": "protobuf", "mlflow": "mlflow-skinny"}
#: Optional packages rlx uses only when they are installed and that no extra installs, and why.
OPTIONAL_WITHOUT_EXTRA = {
    "pynvml": "GPU readings in the system-usage results, read only when NVIDIA's library is there",
    "gcsfs": "gs:// offline paths; the error without it names the package",
    "adlfs": "abfs:// offline paths; the error without it names the package",
    "protobuf": "RLlib's protobuf example env (rlx.examples); protobuf comes with tensorboardX",
}


#: Lines that may be imports: a cheap first pass; the files it flags are then parsed to be sure
#: (a docstring line such as "import path) ..." is prose).
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(\w+)[\w.]*[ \t]+import[ \t(]|import[ \t]+(\w+))", re.M)


def _requirement_names(requirements: list[str]) -> set[str]:
    return {_normalized(re.match(r"[A-Za-z0-9_.-]+", r).group(0)) for r in requirements}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_names(tree) -> list[tuple[str, int]]:
    import ast

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return found


def test_every_third_party_import_is_a_dependency_or_in_an_extra():
    """A wheel install gets only the declared dependencies: every package rlx imports (at module
    or function level) is one, or in an extra, or an optional package with a fallback."""
    import ast
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _requirement_names(project["dependencies"]) | {
        name for extra, reqs in project["optional-dependencies"].items() if extra != "dev"
        for name in _requirement_names(reqs)}

    def undeclared(top: str) -> bool:
        if top in sys.stdlib_module_names or top in ("rlx", "__future__"):
            return False
        dist = _normalized(DISTRIBUTION_OF.get(top, top))
        return dist not in declared and dist not in OPTIONAL_WITHOUT_EXTRA

    missing = {}
    for path in (ROOT / "rlx").rglob("*.py"):
        text = path.read_text()
        if not any(undeclared(m.group(1) or m.group(2)) for m in _IMPORT_LINE.finditer(text)):
            continue
        for top, line in _imported_top_names(ast.parse(text)):
            if undeclared(top):
                missing.setdefault(DISTRIBUTION_OF.get(top, top), f"{path.relative_to(ROOT)}:{line}")
    assert not missing, f"imported but neither a dependency nor in an extra of pyproject.toml: {missing}"


# ----------------------------------------------------------------------------- env checker at RLlib's path

def test_check_env_at_rllibs_path():
    from rlx.env.multi_agent_env import MultiAgentEnv
    from rlx.utils import check_env
    from rlx.utils.pre_checks.env import check_env as check_env_module_level
    from rlx.utils.pre_checks.env import check_multiagent_environments

    assert check_env is check_env_module_level
    check_env(gym.make("CartPole-v1"))

    class WrongRewardEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            return np.zeros(2, np.float32), "one", False, False, {}

    with pytest.raises(ValueError, match="reward 'one'"):
        check_env(WrongRewardEnv())
    check_env(WrongRewardEnv(), config={"disable_env_checking": True})
    with pytest.raises(ValueError, match="neither a gymnasium.Env nor"):
        check_env("CartPole-v1")

    class TwoAgents(MultiAgentEnv):
        def __init__(self):
            super().__init__()
            self.agents = self.possible_agents = ["a", "b"]
            self.observation_spaces = {a: gym.spaces.Discrete(3) for a in self.agents}
            self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.agents}

        def reset(self, *, seed=None, options=None):
            return {"a": 0, "b": 0}, {}

        def step(self, actions):
            obs = {"a": 1, "b": 7}  # 7 is outside b's Discrete(3)
            return obs, {"a": 0.0, "b": 0.0}, {"__all__": False}, {"__all__": False}, {}

    with pytest.raises(ValueError, match="'b'"):
        check_env(TwoAgents())
    with pytest.raises(ValueError, match="not a MultiAgentEnv"):
        check_multiagent_environments(gym.make("CartPole-v1"))


# ----------------------------------------------------------------------------- the wheel, in a fresh venv

@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The wheel and sdist built from a copy of the source tree."""
    base = tmp_path_factory.mktemp("build")
    source = base / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCE_ITEMS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    out = base / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_wheel_and_sdist_carry_license_typing_marker_and_tuned_examples(dists):
    tuned = sorted(p.relative_to(ROOT / "tuned_examples").as_posix()
                   for p in (ROOT / "tuned_examples").rglob("*") if p.suffix in (".yaml", ".py"))
    assert dists["wheel"].name.startswith("rlx_torch-")
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
    assert "rlx/py.typed" in names
    assert f"{dist_info}/licenses/LICENSE" in names
    assert all(f"rlx/tuned_examples/{path}" in names for path in tuned), tuned
    assert not any("__pycache__" in n for n in names)
    assert metadata["Name"] == DISTRIBUTION and metadata["License-Expression"] == "Apache-2.0"
    assert {"tune", "plot", "video", "serialization", "all"} <= set(metadata.get_all("Provides-Extra"))
    with tarfile.open(dists["sdist"]) as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    assert {"LICENSE", "CHANGELOG.md", "setup.py", "rlx/py.typed", "tuned_examples/ppo/cartpole-ppo.yaml"} <= members


def _fresh_venv(path: Path, wheel: Path) -> Path:
    """A venv with only the wheel installed (no dependencies); the test venv's site-packages lends
    it the dependencies. Returns the venv's python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "--quiet", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    # Plain path entries: the test venv's own .pth hooks (the editable rlx finder) are not run.
    lent = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(site_packages, "_rlx_test_dependencies.pth").write_text("".join(f"{p}\n" for p in lent))
    return python


def test_wheel_install_runs_quickstart_list_train_file_and_evaluate(dists, tmp_path):
    venv = tmp_path / "venv"
    python = _fresh_venv(venv, dists["wheel"])
    work = tmp_path / "work"  # not the checkout: nothing of it on sys.path
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "COLUMNS")}
    env["RLX_RESULTS_DIR"] = str(tmp_path / "results")
    rlx = str(venv / "bin" / "rlx")

    def run_together(*commands: list[str]) -> list[str]:
        """Run the commands at once (each imports torch, which dominates their time); their stdouts."""
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work, env=env)
                 for c in commands]
        outputs = [p.communicate(timeout=300) for p in procs]
        for command, proc, (out, err) in zip(commands, procs, outputs):
            assert proc.returncode == 0, f"{command}:\n{out[-3000:]}\n{err[-3000:]}"
        return [out for out, _ in outputs]

    quickstart_dir = tmp_path / "quickstart"
    probe, listing, quickstart = run_together(
        [str(python), "-c", "import json, rlx; from rlx.utils.errors import install_hint; "
                            "print(json.dumps([rlx.__file__, install_hint('plot')]))"],
        [rlx, "list"],
        [str(python), str(ROOT / "examples" / "quickstart.py"), "--target", "0", "--episodes", "1",
         "--checkpoint-dir", str(quickstart_dir)])
    rlx_file, hint = json.loads(probe)
    assert Path(rlx_file).resolve().is_relative_to(venv.resolve()), rlx_file
    assert hint == f"pip install '{DISTRIBUTION}[plot]'"
    assert re.search(r"^\s+cartpole-ppo\s+ppo/cartpole-ppo\.yaml$", listing, flags=re.M), listing
    assert "Training PPO on CartPole-v1" in quickstart

    _, evaluation = run_together(
        [rlx, "train", "file", "cartpole-ppo", "--stop", '{"training_iteration": 1}', "--no-progress"],
        [rlx, "evaluate", str(quickstart_dir), "--steps", "20"])
    assert list((tmp_path / "results" / "cartpole-ppo").rglob("checkpoint_000001")), "no checkpoint"
    assert "Summary:" in evaluation, evaluation

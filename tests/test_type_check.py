"""The packages listed in pyproject.toml's [tool.mypy] `packages` type-check without errors.

mypy runs with the project's configuration (python_version, the packages to check, the modules
still pending); its cache lives in the temp directory, so a second run takes seconds.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_config_lists_the_clean_packages() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert {"rlx.core", "rlx.env", "rlx.algorithms"} <= set(config["packages"])
    assert (ROOT / "rlx" / "py.typed").is_file()


def _mypy(*targets: str) -> tuple[int, list[str], str]:
    """(exit code, error lines, whole output) of mypy with the project's configuration."""
    # One cache per checkout, so that runs in other checkouts on the machine do not share it.
    cache = os.path.join(tempfile.gettempdir(), f"rlx-mypy-cache-{hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]}")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", cache,
         "--no-error-summary", "--hide-error-context", "--no-color-output", *targets],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    return proc.returncode, errors, proc.stdout + proc.stderr


# One test runs every mypy call: mypy processes sharing the cache (pytest-xdist workers) could race.
def test_configured_packages_type_check_clean_and_configs_fit_their_views(tmp_path: Path) -> None:
    code, errors, output = _mypy()
    assert code == 0 and not errors, f"mypy found {len(errors)} type errors (exit code {code}):\n{output}"

    # rlx/core and rlx/env read the Algorithm's config through these Protocols; the real config
    # classes must satisfy them (and a class that is no config must not).
    good = tmp_path / "views.py"
    good.write_text(
        "from rlx.algorithms.algorithm_config import AlgorithmConfig\n"
        "from rlx.algorithms.ppo import PPOConfig\n"
        "from rlx.core.config_view import ResolvedConfig\n"
        "from rlx.env.config_view import EnvConfig\n"
        "core_view: ResolvedConfig = PPOConfig()\n"
        "env_view: EnvConfig = AlgorithmConfig()\n")
    code, errors, output = _mypy(str(good))
    assert code == 0 and not errors, output
    bad = tmp_path / "not_a_config.py"
    bad.write_text(
        "from rlx.env.config_view import EnvConfig\n"
        "class Settings:\n"
        "    gamma = 0.99\n"
        "view: EnvConfig = Settings()\n")
    code, errors, output = _mypy(str(bad))
    assert code == 1 and len(errors) == 1 and "EnvConfig" in errors[0], output

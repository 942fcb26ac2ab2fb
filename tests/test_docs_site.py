"""The documentation site (mkdocs.yml): it builds with `mkdocs build --strict`, so a broken link or
anchor, a page missing from `nav` or a docstring mkdocstrings cannot render fails here; every
page under docs/ is in the navigation; and the API reference carries the public classes, their
methods' docstrings, every algorithm's config and every `rlx` command.

The build runs once per module (about 10 s of CPU: griffe reads rlx's sources, Material indexes
the pages for search); every check reads the one built site.
"""
from __future__ import annotations

import argparse
import ast
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ALGORITHMS = ROOT / "rlx" / "algorithms"


class _TolerantLoader(yaml.SafeLoader):
    """A YAML loader that reads mkdocs.yml's `!!python/...` tags (the toc slugify) as None."""


_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def _mkdocs_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_TolerantLoader)


def _nav_pages(node: Any) -> list[str]:
    """Every page path in a mkdocs `nav` tree (lists of pages, {title: page} and {title: [...]})."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry in mkdocs.yml: {node!r}")


def _text(path: Path) -> str:
    """The visible text of a built page's article, whitespace collapsed."""
    page = path.read_text()
    article = page[page.index("<article"):page.index("</article>")]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", article)))


def _ids(path: Path) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', path.read_text()))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from this checkout with --strict into a temporary directory."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -c constraints.txt -e '.[docs]' (the dev extra includes it)")
    out = tmp_path_factory.mktemp("site")
    # NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2 (noise in a failure message).
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(warnings or [proc.stderr[-4000:]])
    return out


def test_nav_lists_every_page_of_docs_and_nothing_else() -> None:
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    nav = _nav_pages(_mkdocs_config()["nav"])
    assert len(nav) == len(set(nav)), sorted(p for p in nav if nav.count(p) > 1)
    assert not pages - set(nav), f"pages under docs/ without a nav entry in mkdocs.yml: {sorted(pages - set(nav))}"
    assert not set(nav) - pages, f"nav entries in mkdocs.yml without a page: {sorted(set(nav) - pages)}"


def test_site_builds_strict_with_a_page_for_every_nav_entry(site: Path) -> None:
    for page in _nav_pages(_mkdocs_config()["nav"]):
        assert (site / page).with_suffix(".html").is_file(), page
    assert (site / "search" / "search_index.json").is_file()
    # Nothing in the built pages points at Google Fonts (theme.font: false keeps the build offline).
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()


def _method_docstring(path: Path, cls: str, method: str) -> str:
    """The docstring of `cls.method` as written in `path` (read with ast: no import)."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    doc = ast.get_docstring(item)
                    assert doc, f"{cls}.{method} has no docstring"
                    return doc
    raise AssertionError(f"{cls}.{method} not found in {path}")


@pytest.mark.parametrize("page, objects", [
    ("algorithm", ["rlx.algorithms.algorithm.Algorithm", "rlx.algorithms.algorithm.Algorithm.train"]),
    ("algorithm-config", ["rlx.algorithms.algorithm_config.AlgorithmConfig",
                          "rlx.algorithms.algorithm_config.AlgorithmConfig.training"]),
    ("env-runners", ["rlx.env.single_agent_env_runner.SingleAgentEnvRunner",
                     "rlx.env.single_agent_env_runner.SingleAgentEnvRunner.sample",
                     "rlx.env.multi_agent_env_runner.MultiAgentEnvRunner",
                     "rlx.env.env_runner_group.EnvRunnerGroup"]),
    ("rl-module", ["rlx.core.rl_module.rl_module.RLModule", "rlx.core.rl_module.rl_module.RLModuleSpec",
                   "rlx.core.rl_module.multi_rl_module.MultiRLModule"]),
    ("learner", ["rlx.core.learner.learner.Learner", "rlx.core.learner.learner_group.LearnerGroup"]),
    ("metrics-logger", ["rlx.utils.metrics.metrics_logger.MetricsLogger",
                        "rlx.utils.metrics.metrics_logger.MetricsLogger.log_value"]),
    ("callbacks", ["rlx.callbacks.callbacks.RLlibCallback",
                   "rlx.callbacks.callbacks.RLlibCallback.on_episode_end"]),
])
def test_api_pages_document_the_public_classes(site: Path, page: str, objects: list[str]) -> None:
    ids = _ids(site / "api" / f"{page}.html")
    missing = [name for name in objects if name not in ids]
    assert not missing, f"api/{page}.md renders no heading for {missing}"


def test_api_page_carries_the_method_docstrings(site: Path) -> None:
    text = _text(site / "api" / "algorithm-config.html")
    for method in ("training", "environment", "env_runners"):
        doc = _method_docstring(ALGORITHMS / "algorithm_config.py", "AlgorithmConfig", method)
        assert " ".join(doc.split()) in text, f"AlgorithmConfig.{method}'s docstring is not on the page"
    # The summary line of DefaultCallbacks' old name is on the callbacks page too.
    assert "DefaultCallbacks" in _text(site / "api" / "callbacks.html")


def test_every_algorithm_config_has_an_api_entry(site: Path) -> None:
    """Each `class XConfig(...)` in rlx/algorithms/<algo>/<algo>.py is rendered on the configs page,
    so an algorithm added without its API entry fails here."""
    configs = {
        f"rlx.algorithms.{path.parent.name}.{path.stem}.{match}"
        for path in ALGORITHMS.glob("*/*.py")
        for match in re.findall(r"^class (\w+Config)\(", path.read_text(), flags=re.M)
    }
    assert {"rlx.algorithms.ppo.ppo.PPOConfig", "rlx.algorithms.dqn.dqn.DQNConfig",
            "rlx.algorithms.sac.sac.SACConfig"} <= configs, configs
    ids = _ids(site / "api" / "algorithm-configs.html")
    assert not configs - ids, f"algorithm configs missing from docs/api/algorithm-configs.md: {sorted(configs - ids)}"


def test_cli_page_has_every_command_and_its_options(site: Path) -> None:
    """docs/api/cli.md is filled from `rlx`'s parser at build time (docs/hooks/cli_reference.py)."""
    from rlx.cli.main import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    text = _text(site / "api" / "cli.html")
    ids = _ids(site / "api" / "cli.html")
    for name, sub in commands.choices.items():
        assert f"rlx-{name}" in ids, f"no section for 'rlx {name}'"
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, f"'rlx {name}' option {flag} is not on the page"
    assert "rlx-train-file" in ids and "rlx-hub-push" in ids
    assert "<!-- rlx-cli-reference -->" not in (site / "api" / "cli.html").read_text()

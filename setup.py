"""Build hook: the wheel carries the tuned examples as package data in rlx/tuned_examples/.

In a checkout they stay at the repository root (tuned_examples/, where the docs and tests point);
building a wheel copies their experiment files and helper scripts into the package so
`rlx list` and `rlx train file NAME` find them without a checkout (rlx.cli.tuned_examples looks
in both places). Everything else about the build is in pyproject.toml.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
TUNED_EXAMPLES = ROOT / "tuned_examples"
#: The files of tuned_examples/ that go into the wheel.
SUFFIXES = {".yaml", ".yml", ".json", ".py"}


class BuildPyWithTunedExamples(build_py):
    """setuptools' build_py, then a copy of tuned_examples/ into the built rlx package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode or not TUNED_EXAMPLES.is_dir():
            return  # an editable install finds tuned_examples/ in the checkout itself
        target = Path(self.build_lib) / "rlx" / "tuned_examples"
        for source in sorted(TUNED_EXAMPLES.rglob("*")):
            if source.is_file() and source.suffix in SUFFIXES and "__pycache__" not in source.parts:
                dest = target / source.relative_to(TUNED_EXAMPLES)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)


setup(cmdclass={"build_py": BuildPyWithTunedExamples})

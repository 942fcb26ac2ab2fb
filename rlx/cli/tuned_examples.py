"""Finding rlx's tuned examples, in a checkout and in an installed wheel.

A checkout keeps them at the repository root (tuned_examples/, beside rlx/); a wheel carries
the same files as package data in rlx/tuned_examples/ (setup.py copies them there at build
time). `rlx list` prints them and `rlx train file` accepts their names
(`rlx train file cartpole-ppo`), their paths inside tuned_examples/ (`ppo/cartpole-ppo.yaml`)
and the checkout path the docs use (`tuned_examples/ppo/cartpole-ppo.yaml`) from any directory.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlx.utils.errors import did_you_mean

#: The folder name of the tuned examples, at the checkout's root and inside the installed package.
FOLDER = "tuned_examples"
#: File types that are experiment files `rlx train file` runs.
EXPERIMENT_SUFFIXES = (".yaml", ".yml", ".json", ".py")
#: Helper scripts beside the experiments (they write offline data), not experiments themselves.
HELPER_PREFIX = "generate_"


@dataclass(frozen=True)
class TunedExample:
    """One tuned example: its short name (the file's stem), its path inside tuned_examples/
    and the file itself."""

    name: str
    relative_path: str
    path: Path


def tuned_examples_dir() -> Path | None:
    """The folder holding the tuned examples: the installed package's rlx/tuned_examples (a wheel
    install), else tuned_examples/ beside the rlx package (a checkout); None when neither exists."""
    package_dir = Path(__file__).resolve().parent.parent  # rlx/
    for candidate in (package_dir / FOLDER, package_dir.parent / FOLDER):
        if candidate.is_dir():
            return candidate
    return None


def list_tuned_examples() -> list[TunedExample]:
    """Every tuned experiment file (YAML, JSON or Python; helper scripts left out), sorted by
    path; empty when rlx has no tuned examples folder."""
    root = tuned_examples_dir()
    if root is None:
        return []
    found = []
    for path in sorted(root.rglob("*")):
        if (path.suffix.lower() in EXPERIMENT_SUFFIXES and path.is_file()
                and not path.name.startswith(HELPER_PREFIX) and "__pycache__" not in path.parts):
            found.append(TunedExample(path.stem, path.relative_to(root).as_posix(), path))
    return found


def resolve_experiment_path(text: str) -> str:
    """The experiment file `rlx train file TEXT` runs: TEXT itself when it is an existing path or
    a URL, else the tuned example it names (by name, by its path inside tuned_examples/, or by
    its checkout path tuned_examples/...). Returns TEXT unchanged when it names no tuned example
    and does not look like one, so the loader reports the missing file; raises FileNotFoundError
    with the closest tuned example names when TEXT looks like a tuned example's name."""
    if "://" in text or Path(text).expanduser().exists():
        return text
    examples = list_tuned_examples()
    wanted = text.replace("\\", "/")
    if wanted.startswith(FOLDER + "/"):
        wanted = wanted[len(FOLDER) + 1:]
    for example in examples:
        if wanted in (example.relative_path, example.name):
            return str(example.path)
    # A bare name (no folder, no suffix) can only mean a tuned example.
    if "/" not in text and not Path(text).suffix:
        names = [e.name for e in examples]
        raise FileNotFoundError(
            f"{text!r} is neither an experiment file nor the name of a tuned example.{did_you_mean(text, names)} "
            "Run 'rlx list' to see the tuned examples.")
    return text

"""Install hints that fit how rlx was installed: from a checkout, or from a wheel.

rlx's distribution (what `pip install` names) is `rlx-torch`; the import name stays `rlx`. The
bare name `rlx` is one letter from DeepMind's `rlax` (a JAX RL library on PyPI) and shares its
prefix with other RL packages there, so a hint saying `pip install rlx` would be one typo from
installing someone else's library. README.md ("Install") says the same to users.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

#: The name rlx is installed under (`pip install rlx-torch`); `import rlx` is unchanged.
DISTRIBUTION = "rlx-torch"
#: The rlx package's own folder.
PACKAGE_DIR = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def installed_from_checkout() -> bool:
    """Whether rlx runs from a source tree (an editable install or a checkout on sys.path): the
    folder above the package holds rlx's own pyproject.toml. A wheel install puts the package in
    site-packages, where there is none."""
    pyproject = PACKAGE_DIR.parent / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    except OSError:
        return False
    return re.search(rf'^name\s*=\s*"{re.escape(DISTRIBUTION)}"', text, flags=re.M) is not None


def install_command(extra: str | None = None) -> str:
    """The pip command that installs rlx (with one of its optional extras, e.g. 'tune'): from the
    checkout with constraints.txt's pins when rlx runs from one, else the wheel's distribution."""
    if installed_from_checkout():
        target = f"'.[{extra}]'" if extra else "."
        return f"pip install -c constraints.txt -e {target}"
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"


def install_hint(extra: str) -> str:
    """The command that installs one of rlx's optional extras ('tune', 'plot', 'video', ...), as
    error messages give it: `pip install -c constraints.txt -e '.[tune]' (in your rlx checkout)`
    from a checkout, `pip install 'rlx-torch[tune]'` for a wheel install."""
    if installed_from_checkout():
        return f"{install_command(extra)} (in your rlx checkout)"
    return install_command(extra)

"""The documentation stays true to the code.

- docs/configuration.md holds exactly what tools/gen_config_reference.py generates, and
  names every option, alias, model key, removed legacy key and callback event.
- The error messages quoted in configuration.md's validation table are the real ones.
- The Python examples of each page run: a page's ```python blocks, joined in order, run
  as one script in a fresh interpreter.
"""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from rlx.algorithms.common_options import CALLBACK_EVENTS, COMMON_OPTIONS, LEGACY_NOOP_KEYS
from rlx.algorithms.ppo import PPOConfig
from rlx.models.model_defaults import MODEL_DEFAULTS
from rlx.utils.errors import ConfigError

from cli_helpers import run_python_script

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONFIG_DOC = DOCS / "configuration.md"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_config_reference", ROOT / "tools" / "gen_config_reference.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen():
    return _load_generator()


@pytest.fixture(scope="module")
def config_doc() -> str:
    return CONFIG_DOC.read_text()


# ----------------------------------------------------------------------------- generated reference


def test_configuration_reference_is_up_to_date(gen, config_doc):
    assert gen.BEGIN in config_doc and gen.END in config_doc
    assert gen.render(config_doc) == config_doc, (
        "docs/configuration.md is out of date: run `python tools/gen_config_reference.py`."
    )


def test_generation_is_deterministic(gen):
    assert gen.generate() == gen.generate()


def test_every_option_and_alias_is_documented(config_doc):
    table = PPOConfig._table
    names = list(table.options) + list(table.alias_to_name)
    missing = [n for n in names if f"`{n}`" not in config_doc]
    assert not missing, f"not in docs/configuration.md: {missing}"


def test_model_keys_legacy_keys_and_callback_events_are_documented(config_doc):
    names = list(MODEL_DEFAULTS) + list(LEGACY_NOOP_KEYS) + list(CALLBACK_EVENTS)
    missing = [n for n in names if f"`{n}`" not in config_doc]
    assert not missing, f"not in docs/configuration.md: {missing}"


def test_every_section_method_has_a_table(gen, config_doc):
    for section in gen.SECTIONS:
        assert hasattr(PPOConfig, section), section
        assert f"### `{section}()`" in config_doc


def test_every_option_has_a_meaning(gen):
    undocumented = [n for n, opt in PPOConfig._table.options.items() if not gen.meaning_of(opt)]
    assert not undocumented, (
        f"options without a meaning: {undocumented}; give them doc= in the option table or an "
        "entry in MEANINGS of tools/gen_config_reference.py"
    )
    assert not set(MODEL_DEFAULTS) - set(gen.MODEL_MEANINGS), "add the new model keys to MODEL_MEANINGS"


# ----------------------------------------------------------------------------- quoted error messages


def _validation_rows(doc: str) -> list[tuple[str, str]]:
    section = doc.split("## Validation", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\| [^|]+ \| `([a-z_]+\(.*\))` \| `(.*)` \|$", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def test_validation_table_quotes_real_messages(config_doc):
    rows = _validation_rows(config_doc)
    assert len(rows) >= 5
    for call, message in rows:
        with pytest.raises(ConfigError) as info:
            eval(f"PPOConfig().{call}", {"PPOConfig": PPOConfig})  # noqa: S307 - our own doc text
        expected = message.split("...")[0].rstrip()
        assert str(info.value).startswith(expected), f"{call}: {info.value}"


# ----------------------------------------------------------------------------- runnable examples

PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


def python_blocks(text: str) -> list[str]:
    """The ```python fenced blocks of a markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


PAGES_WITH_EXAMPLES = [p for p in PAGES if python_blocks((DOCS / p).read_text())]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_examples_run(page, tmp_path):
    blocks = python_blocks((DOCS / page).read_text())
    script = tmp_path / "examples.py"
    script.write_text("\n\n".join(blocks))
    env = dict(os.environ, RLX_RESULTS_DIR=str(tmp_path / "rlx_results"), PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    proc = run_python_script(script, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, f"examples of docs/{page} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"


# ----------------------------------------------------------------------------- links between pages


def _anchor(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {_anchor(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_resolve(page):
    source = DOCS / page
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", source.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (source.parent / path).resolve() if path else source
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"broken links in docs/{page}: {broken}"


# ----------------------------------------------------------------------------- statuses against the code

# Options the code mentions by name although their status says they have no effect: the
# mention is not a read of the setting (the reason says what it is).
_NOT_A_READ = {
    "input_": "algorithm_config.py maps the to_dict() name 'input' to 'input_'",
    "policies": "callbacks get a `policies` keyword argument (the policy map), not the setting",
    "env_to_module_connector": "rlx/core/__init__.py names RLlib's state component COMPONENT_ENV_TO_MODULE_CONNECTOR",
    "module_to_env_connector": "rlx/core/__init__.py names RLlib's state component COMPONENT_MODULE_TO_ENV_CONNECTOR",
    "num_aggregator_actors_per_learner": "rlx/examples/utils.py passes RLlib's example-script flag on to "
                                         "config.learners(), as RLlib's helper does",
    "sample_async": "EnvRunnerGroup.sample_async() is the asynchronous sampling method IMPALA/APPO call, not the "
                    "setting (RLlib's new stack removed the option)",
}


def _sources_without_option_rows() -> dict[str, str]:
    """rlx's Python sources, with the Option(...) rows that declare options taken out."""
    declaration = re.compile(r'Option\(\s*"[A-Za-z_0-9]+"')
    out = {}
    for path in (ROOT / "rlx").rglob("*.py"):
        lines = [line for line in path.read_text().splitlines() if not declaration.search(line)]
        out[str(path.relative_to(ROOT))] = "\n".join(lines)
    return out


def _all_options(gen) -> dict[str, object]:
    options = {opt.name: opt for opt in COMMON_OPTIONS}
    for _, cls in gen.algorithm_configs():
        for opt in cls._table.options.values():
            options.setdefault(opt.name, opt)
    return options


def _read_by(name: str, sources: dict[str, str]) -> list[str]:
    if name.startswith("callbacks_on_"):
        name = "callbacks_{"  # read as f"callbacks_{event}"
        return [f for f, text in sources.items() if f'"{name}' in text]
    patterns = [re.compile(rf"\.{re.escape(name)}\b"), re.compile(rf"[\"']{re.escape(name)}[\"']")]
    return [f for f, text in sources.items() if any(p.search(text) for p in patterns)]


@pytest.mark.slow
def test_every_option_status_matches_what_the_code_reads(gen):
    """'supported' options are read somewhere in rlx; options marked not supported yet, TensorFlow-only
    or 'accepted, no effect' are read nowhere (outside their declaration). So the status column of
    the reference, which comes from the Option rows, cannot drift from the code."""
    sources = _sources_without_option_rows()
    wrong = []
    for name, opt in sorted(_all_options(gen).items()):
        status = gen.status_of(opt)
        readers = _read_by(name, sources)
        if status.startswith("supported") and not readers:
            wrong.append(f"{name}: status '{status}', but no rlx code reads it")
        elif not status.startswith(("supported", "only")) and readers and name not in _NOT_A_READ:
            wrong.append(f"{name}: status '{status}', but {', '.join(readers)} read it")
    assert not wrong, "\n".join(wrong)


_UNSUPPORTED_WORDS = re.compile(r"not supported yet|not built yet|nothing reads it|not implemented|no effect",
                                re.IGNORECASE)


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"], ids=lambda p: p.name)
def test_prose_does_not_call_supported_options_unsupported(gen, page):
    """A line of hand-written prose that says something is unsupported (or has no effect) names
    only options whose status says so."""
    options = _all_options(gen)
    aliases = {alias: opt for opt in options.values() for alias in opt.aliases}
    text = page.read_text()
    if page == CONFIG_DOC:
        text = text[: text.index(gen.BEGIN)] + text[text.index(gen.END):]
    wrong = []
    for number, line in enumerate(text.splitlines(), 1):
        if not _UNSUPPORTED_WORDS.search(line):
            continue
        # A bare `option` (not `option=value`, which may name one refused value of a supported option).
        for name in re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", line):
            opt = options.get(name) or aliases.get(name)
            if opt is not None and gen.status_of(opt) == gen.SUPPORTED:
                wrong.append(f"{page.name}:{number}: `{name}` is supported, but the line says: {line.strip()}")
    assert not wrong, "\n".join(wrong)


def test_install_hints_work_from_a_checkout():
    """rlx is not published yet: `pip install 'rlx[extra]'` installs nothing useful, so no doc page
    and no message in the code may give it; hints install from the checkout with the constraints."""
    pages = list(DOCS.rglob("*.md")) + [ROOT / "README.md"] + list((ROOT / "rlx").rglob("*.py"))
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in pages
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"pip install[^`\n]*\brlx\[", line) or re.search(r"'rlx\[\w+\]'", line)]
    assert not offenders, "install hints that only work once rlx is on PyPI:\n" + "\n".join(offenders)


# ----------------------------------------------------------------------------- the multi-agent page

MULTI_AGENT_DOC = DOCS / "multi-agent.md"


def test_multi_agent_page_names_every_multi_agent_option():
    """docs/multi-agent.md covers the whole multi_agent() section (seed 003), plus
    checkpoint_trainable_policies_only."""
    text = MULTI_AGENT_DOC.read_text()
    names = [opt.name for opt in COMMON_OPTIONS if "multi_agent" in opt.sections]
    names.append("checkpoint_trainable_policies_only")
    assert len(names) > 5
    # In a code span (`name`, `name="value"`, `section(name=...)`) or as a heading.
    missing = [n for n in names if not re.search(rf"`[^`\n]*\b{n}\b[^`\n]*`|^#+ {n}$", text, flags=re.M)]
    assert not missing, f"not in docs/multi-agent.md: {missing}"


def test_multi_agent_page_is_linked_from_the_index():
    assert "](multi-agent.md)" in (DOCS / "index.md").read_text()


def test_multi_agent_page_quotes_the_real_env_checker_message():
    import gymnasium as gym

    from rlx.env.multi_agent_env import MultiAgentEnv
    from rlx.env.multi_agent_env_checker import check_multi_agent_env
    from rlx.utils.errors import EnvError

    class NoAll(MultiAgentEnv):
        """The page's example of an env whose step() leaves out "__all__"."""

        def __init__(self, config=None):
            super().__init__()
            self.possible_agents = self.agents = ["a", "b"]
            self.observation_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}
            self.action_spaces = {aid: gym.spaces.Discrete(2) for aid in self.agents}

        def reset(self, *, seed=None, options=None):
            return {"a": 0, "b": 0}, {}

        def step(self, action_dict):
            flags = {"a": False, "b": False}
            return {"a": 0, "b": 0}, {"a": 1.0, "b": 0.0}, dict(flags), dict(flags), {}

    text = MULTI_AGENT_DOC.read_text()
    quoted = [block.strip() for block in re.findall(r"^```text\n(.*?)^```", text, flags=re.S | re.M)
              if block.startswith("NoAll.")]
    assert len(quoted) == 1
    with pytest.raises(EnvError) as info:
        check_multi_agent_env(NoAll())
    assert str(info.value) == quoted[0]

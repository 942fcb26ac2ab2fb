"""mkdocs hook: fill docs/api/cli.md with every `rlx` command's help, from the argparse parser.

The page holds a marker (`<!-- rlx-cli-reference -->`) that this hook replaces with one section per
command (`rlx train`, `rlx train file`, `rlx evaluate`, ..., `rlx hub push`), each the text
`rlx COMMAND --help` prints. Building it from `rlx.cli.main.build_parser()` at build time keeps the
page in step with the options; the parser imports neither torch nor the algorithms.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Iterator

MARKER = "<!-- rlx-cli-reference -->"
PAGE = "api/cli.md"
#: Help text width, fixed so the page does not depend on the terminal that builds it.
WIDTH = "100"


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each subcommand parser under `parser`, depth first, as (its prog, the parser); an alias
    (a second name for the same parser) is listed once, under its first name."""
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                yield sub.prog, sub
                yield from _subparsers(sub)


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """The `rlx` parser and every command's parser, in the order `rlx --help` lists them, with
    `rlx train file` (a parser of its own that `rlx train` hands its arguments to) after `rlx train`."""
    from rlx.cli.main import build_parser

    parser = build_parser()
    commands = [("rlx", parser)]
    for prog, sub in _subparsers(parser):
        commands.append((prog, sub))
        train_file = getattr(parser, "_rlx_train_file", None)
        if prog == "rlx train" and train_file is not None:
            commands.append((train_file.prog, train_file))
    return commands


def cli_reference() -> str:
    """Markdown with one section per command: its one-line help and its full `--help` text."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        sections = []
        for prog, parser in _commands():
            text = parser.format_help().rstrip()
            sections.append(f"## `{prog}`\n\n```text\n{text}\n```\n")
        return "\n".join(sections)
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: replace the marker of docs/api/cli.md with the generated reference."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its {MARKER} line: put it back where the command reference goes")
    return markdown.replace(MARKER, cli_reference())

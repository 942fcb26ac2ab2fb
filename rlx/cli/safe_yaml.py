"""Loading YAML that the CLI reads from users, bounded against alias bombs.

YAML anchors and aliases let a few lines stand for a huge document ("billion laughs":
nine lists of nine aliases of the previous list are 9**9 leaves). PyYAML builds it
cheaply, with shared references, but anything that later walks the data (the config's
search-space scan, params.json) would visit every expanded node and hang. So the
document is composed first, its expanded size counted on the node graph (each distinct
node once, memoised by identity, so the count never expands anything), and only a
document within `MAX_YAML_NODES` is turned into Python data.

The pure-Python SafeLoader is used on purpose: libyaml's CSafeLoader crashes the
interpreter (stack overflow) on very deeply nested input, where SafeLoader raises a
RecursionError that becomes a one-line error.
"""
from __future__ import annotations

from typing import Any, Iterator

from rlx.utils.errors import ConfigError

#: Most nodes (mappings, lists and scalars, aliases counted as what they stand for) an
#: experiment file may expand to; real ones have a few hundred.
MAX_YAML_NODES = 100_000


class _SelfReference(Exception):
    """A YAML node that contains itself through an alias."""


def load_bounded_yaml(text: str, source: str, max_nodes: int = MAX_YAML_NODES) -> Any:
    """The data of the YAML `text` (safe types only, like yaml.safe_load), refusing with a
    one-line ConfigError naming `source` a document that expands to more than
    `max_nodes` nodes or refers to itself."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = expanded_size(node, max_nodes)
        except _SelfReference:
            raise ConfigError(f"{source}: a YAML alias refers to a node that contains it (a self-referencing "
                              "structure); rlx cannot use it.") from None
        if size > max_nodes:
            raise ConfigError(f"{source}: the YAML expands to more than {max_nodes:,} values once its anchors and "
                              "aliases (&name / *name) are substituted; rlx refuses it (an alias bomb?).")
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source} is not valid YAML: {' '.join(str(err).split())}") from err
    except RecursionError as err:
        raise ConfigError(f"{source}: the YAML is nested too deeply.") from err
    finally:
        loader.dispose()


def expanded_size(root: Any, limit: int) -> int:
    """How many nodes the YAML node graph `root` has once every alias is expanded, counted
    without expanding: each distinct node's size is computed once. Counts above `limit`
    are capped at `limit + 1`. Raises _SelfReference for a node that contains itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:  # iterative post-order walk: deep nesting needs no Python recursion
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if key in sizes:
            continue
        if key in open_nodes:  # reached again from inside itself
            raise _SelfReference
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: Any) -> Iterator[Any]:
    """The child nodes of a composed YAML node (a mapping's keys and values)."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value

"""Build the import graph of the rlx package from its source (module- and function-level imports).

Prints the largest set of mutually importing modules, the count of function-level rlx imports,
and upward imports across the layers of DESIGN.md. Used by tests/test_import_layers.py.
"""
from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "rlx"


@dataclass
class ImportEdge:
    """One `import` statement from a module of rlx to another."""

    source: str
    target: str
    line: int
    function_level: bool
    type_checking: bool = False


@dataclass
class ImportGraph:
    """The modules of rlx and the imports between them."""

    modules: dict[str, Path] = field(default_factory=dict)
    edges: list[ImportEdge] = field(default_factory=list)


def module_name(path: Path) -> str:
    """The dotted module name of a file under rlx/."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(modules: dict[str, Path], base: str, names: list[str]) -> list[str]:
    """Resolve `from base import names` to the modules it loads (submodules where they exist)."""
    found = []
    for name in names:
        sub = f"{base}.{name}"
        if sub in modules:
            found.append(sub)
        elif base in modules:
            found.append(base)
    return sorted(set(found)) if found else ([base] if base in modules else [])


class _Visitor(ast.NodeVisitor):
    def __init__(self, graph: ImportGraph, name: str, is_package: bool) -> None:
        self.graph = graph
        self.name = name
        self.is_package = is_package
        self.depth = 0
        self.type_checking = 0

    def _func(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = _func
    visit_AsyncFunctionDef = _func
    visit_Lambda = _func

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        if "TYPE_CHECKING" in test:
            self.type_checking += 1
            for child in node.body:
                self.visit(child)
            self.type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def _add(self, target: str, line: int) -> None:
        if target == self.name:
            return
        self.graph.edges.append(
            ImportEdge(self.name, target, line, self.depth > 0, self.type_checking > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "rlx" or alias.name.startswith("rlx."):
                target = alias.name
                while target not in self.graph.modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                self._add(target, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            pkg = self.name if self.is_package else self.name.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                pkg = pkg.rsplit(".", 1)[0]
            base = f"{pkg}.{node.module}" if node.module else pkg
        else:
            base = node.module or ""
        if not (base == "rlx" or base.startswith("rlx.")):
            return
        for target in _resolve(self.graph.modules, base, [a.name for a in node.names]):
            self._add(target, node.lineno)


def build_graph(root: Path = ROOT) -> ImportGraph:
    """Parse every module under rlx/ and collect its rlx imports."""
    graph = ImportGraph()
    for path in sorted(root.rglob("*.py")):
        graph.modules[module_name(path)] = path
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        _Visitor(graph, name, path.name == "__init__.py").visit(tree)
    return graph


def strongly_connected(nodes: list[str], adjacency: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in adjacency.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            components.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(components, key=len, reverse=True)


#: The documented late bindings (DESIGN.md, "Turn 3 layout"): function-level imports that go up
#: a layer on purpose, at most two. (source module, target module) -> why.
LATE_BINDINGS: dict[tuple[str, str], str] = {
    ("rlx.env.policy_view", "rlx.algorithms.algorithm"):
        "Policy.from_checkpoint rebuilds the Algorithm of a checkpoint to take its policies",
    ("rlx.offline.io_context", "rlx.algorithms.algorithm_config"):
        "IOContext() without a config gets the default AlgorithmConfig, as in RLlib",
}


def is_late_binding(edge: ImportEdge) -> bool:
    """Whether `edge` is one of the documented late bindings."""
    return edge.function_level and (edge.source, edge.target) in LATE_BINDINGS


def cycles(graph: ImportGraph, include_function_level: bool = True) -> list[list[str]]:
    """Sets of mutually importing modules (size > 1), largest first. The documented late
    bindings are left out."""
    adjacency: dict[str, set[str]] = {}
    for e in graph.edges:
        if e.type_checking or (e.function_level and not include_function_level) or is_late_binding(e):
            continue
        adjacency.setdefault(e.source, set()).add(e.target)
    return [c for c in strongly_connected(list(graph.modules), adjacency) if len(c) > 1]


def summary(graph: ImportGraph) -> dict[str, object]:
    """Figures about the graph: cycles, function-level imports, long files."""
    comps = cycles(graph)
    lines = {n: len(p.read_text().splitlines()) for n, p in graph.modules.items()}
    return {
        "modules": len(graph.modules),
        "function_level_imports": sum(1 for e in graph.edges if e.function_level),
        "largest_cycle": len(comps[0]) if comps else 1,
        "upward_imports": len(upward_edges(graph)),
        "cycles": comps[:8],
        "files_over_1000": sorted(n for n, c in lines.items() if c > 1000),
        "files_over_500": sorted(n for n, c in lines.items() if c > 500),
    }


# Layers of DESIGN.md ("Turn 3 layout"): the first prefix that matches a module names its layer.
LAYERS: list[tuple[str, int]] = [
    # The episode replay buffers build SingleAgentEpisode/MultiAgentEpisode objects: they sit
    # beside rlx.env (rlx.utils.replay_buffers imports them lazily).
    ("rlx.utils.replay_buffers.episode_storage", 4), ("rlx.utils.replay_buffers.episode_replay_buffer", 4),
    ("rlx.utils.replay_buffers.prioritized_episode_buffer", 4),
    ("rlx.utils.replay_buffers.multi_agent_episode_buffer", 4),
    ("rlx.utils.replay_buffers.multi_agent_prioritized_episode_buffer", 4),
    ("rlx.utils.exploration", 2), ("rlx.utils.replay_buffers", 2), ("rlx.utils.postprocessing", 2),
    ("rlx.utils.filters", 2), ("rlx.utils.filter", 2), ("rlx.utils.reward_scaling", 2), ("rlx.utils.test_utils", 9),
    # The env checker at RLlib's path runs rlx.env's checkers: it sits beside rlx.env.
    ("rlx.utils.pre_checks", 4),
    ("rlx.utils", 0),
    ("rlx.core", 1),
    ("rlx.connectors", 3), ("rlx.callbacks", 3), ("rlx.loggers", 3),
    # The policy server and external-inference runner read and write offline-format batches
    # (PolicyServerInput is an offline InputReader): they sit beside rlx/offline.
    ("rlx.env.external", 5), ("rlx.env.policy_server_input", 5), ("rlx.env.policy_client", 5),
    ("rlx.env", 4),
    ("rlx.offline", 5),
    ("rlx.tune", 8), ("rlx.agents", 8), ("rlx.evaluation", 8), ("rlx.execution", 8), ("rlx.policy", 8), ("rlx.models", 8),
    ("rlx.cli", 9), ("rlx.examples", 9), ("rlx.__main__", 9), ("rlx.train", 9),
    ("rlx._tune_autoregister", 0),
]


def layer(module: str) -> int:
    """The layer of a module: 0 (base utilities) up to 9 (applications).

    `rlx.algorithms.<algo>` (a package, with its `torch/` Learner classes) is L7; the modules
    directly in rlx/algorithms/ are the algorithm base, L6.
    """
    if module == "rlx":
        return 9
    for prefix, level in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return level
    if module.startswith("rlx.algorithms."):
        top = module.split(".")[2]
        return 7 if (ROOT / "algorithms" / top).is_dir() else 6
    if module == "rlx.algorithms":
        return 6
    raise ValueError(f"no layer for {module}")


def upward_edges(graph: ImportGraph) -> list[ImportEdge]:
    """Imports from a module to a module of a higher layer (TYPE_CHECKING imports and the
    documented late bindings excepted)."""
    return [e for e in graph.edges
            if not e.type_checking and not is_late_binding(e) and layer(e.target) > layer(e.source)]


if __name__ == "__main__":
    print(json.dumps(summary(build_graph()), indent=1))

"""The algorithm base: the Algorithm class knows no specific algorithm, its helper modules do
not import it back, and the on-policy loop lives in its own base class."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from import_graph import ROOT, build_graph, strongly_connected  # noqa: E402

ALGORITHM = "rlx.algorithms.algorithm"


def _base_modules(graph) -> set[str]:
    """The modules directly in rlx/algorithms/ (the algorithm base), not the algorithm packages."""
    return {name for name, path in graph.modules.items()
            if name.startswith("rlx.algorithms.") and path.parent == ROOT / "algorithms" and path.name != "__init__.py"}


def _imported_by_algorithm(graph, base: set[str]) -> set[str]:
    """The base modules algorithm.py imports, directly or through other base modules (any import
    statement, function-level ones included; TYPE_CHECKING imports excepted)."""
    seen, todo = set(), [ALGORITHM]
    while todo:
        source = todo.pop()
        for edge in graph.edges:
            if edge.source == source and not edge.type_checking and edge.target in base and edge.target not in seen:
                seen.add(edge.target)
                todo.append(edge.target)
    return seen


def test_the_algorithm_base_imports_no_specific_algorithm():
    graph = build_graph()
    base = _base_modules(graph)
    parts = _imported_by_algorithm(graph, base) | {ALGORITHM}
    offending = [f"{e.source}:{e.line} imports {e.target}" for e in graph.edges
                 if e.source in parts and not e.type_checking and e.target.startswith("rlx.algorithms.")
                 and e.target not in base and e.target != "rlx.algorithms"]
    assert offending == []


def test_the_modules_of_the_algorithm_base_import_the_algorithm_class_only_to_subclass_it():
    graph = build_graph()
    base = _base_modules(graph)
    adjacency: dict[str, set[str]] = {}
    for e in graph.edges:
        if e.source in base and e.target in base and not e.type_checking:
            adjacency.setdefault(e.source, set()).add(e.target)
    cycles = [c for c in strongly_connected(sorted(base), adjacency) if len(c) > 1 and ALGORITHM in c]
    assert cycles == []


def test_a_custom_on_policy_algorithm_trains_with_the_shared_loop():
    from rlx.algorithms.on_policy import OnPolicyAlgorithm
    from rlx.algorithms.ppo import PPOConfig
    from rlx.algorithms.ppo.ppo_learner import PPOLearner

    class MyPPO(OnPolicyAlgorithm):
        _config_class = PPOConfig
        _learner_class = PPOLearner

    config = (PPOConfig(algo_class=MyPPO).environment("CartPole-v1")
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1))
    algo = config.build()
    try:
        result = algo.train()
        assert isinstance(algo, MyPPO)
        assert result["num_env_steps_trained_this_iter"] >= 64
        assert "policy_loss" in result["learners"]["default_policy"]
    finally:
        algo.stop()

"""LearnerConnectorPipeline and how rlx runs it on a train batch."""
from __future__ import annotations

from typing import Any

from rlx.connectors.builders import call_builder, connector_pieces
from rlx.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from rlx.connectors.learner.batch_episodes import batch_episodes


class LearnerConnectorPipeline(ConnectorPipelineV2):
    """The learner pipeline: its pieces see the train batch and episode views over it
    (rlx.connectors.learner.batch_episodes) before the Learner updates on the batch."""


def build_learner_connector(config: Any, obs_space: Any, act_space: Any) -> LearnerConnectorPipeline | None:
    """The LearnerConnectorPipeline of config.learner_connector (None when unset)."""
    builder = config.learner_connector
    if builder is None:
        return None
    pieces = connector_pieces(call_builder(builder, (obs_space, act_space, None), "learner_connector"),
                              "learner_connector")
    return LearnerConnectorPipeline(obs_space, act_space, connectors=pieces)


def run_learner_connector(pipeline: LearnerConnectorPipeline, batch: dict[str, Any], rl_module: Any,
                          module_id: Any = None, metrics: Any = None) -> dict[str, Any]:
    """Run the learner pipeline on one module's train batch; returns the (changed) batch."""
    episodes = batch_episodes(batch, module_id=module_id)
    out = pipeline(rl_module=rl_module, batch=batch, episodes=episodes, explore=False, shared_data={},
                   metrics=metrics)
    if not isinstance(out, dict):
        raise TypeError(f"The learner connector pipeline returned {type(out).__name__}; pieces must return the "
                        "batch dict they were given.")
    return out

"""EpisodesLearnerConnector: the learner connector pipeline of a Learner's `update(episodes=...)`.

RLlib's learner pipeline turns episodes into per-module train batches. rlx keeps one data path:
`episodes_to_module_batches` lays each module's episodes out as rlx's time-major train batch,
the pipeline's pieces (the config's `learner_connector` ones and any the Learner prepends, e.g.
ComputeReturnsToGo) run on it exactly as they do on batches from rlx's EnvRunners (their
episodes are views over the batch), and the real rows come out as one flat batch per module.
"""
from __future__ import annotations

from typing import Any

from rlx.connectors.builders import call_builder, connector_pieces
from rlx.connectors.learner.batch_episodes import BatchEpisode, batch_episodes
from rlx.connectors.learner.episode_batches import episodes_to_module_batches, flatten_valid_rows
from rlx.connectors.learner.learner_connector_pipeline import LearnerConnectorPipeline


class EpisodesLearnerConnector(LearnerConnectorPipeline):
    """A LearnerConnectorPipeline that also takes RLlib episodes: called with `episodes` (a list of
    SingleAgentEpisode / MultiAgentEpisode) it returns {module_id: train batch of NumPy columns};
    called with rlx's episode views over a batch it runs its pieces as any pipeline."""

    #: It lays RLlib episodes out itself and takes `time_major=` (see __call__).
    lays_out_episodes = True

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, metrics: Any = None,
                 time_major: bool = False, **kwargs: Any) -> Any:
        """The pipeline's pieces run on `batch` and `episodes`; for RLlib episodes,
        {module_id: train batch}: flat rows, or with `time_major` the [T, B] layout (one episode
        per column, VALID marking the real rows) for Learners whose update reads trajectories."""
        if not episodes or isinstance(episodes[0], BatchEpisode):
            return super().__call__(rl_module=rl_module, batch=batch, episodes=episodes, explore=explore,
                                    shared_data=shared_data, metrics=metrics, **kwargs)
        shared_data = {} if shared_data is None else shared_data
        out: dict[str, Any] = {}
        for module_id, module_batch in episodes_to_module_batches(episodes).items():
            module_batch = super().__call__(rl_module=rl_module, batch=module_batch,
                                            episodes=batch_episodes(module_batch, module_id=module_id),
                                            explore=explore, shared_data=shared_data, metrics=metrics, **kwargs)
            out[module_id] = module_batch if time_major else flatten_valid_rows(module_batch)
        return out


def build_episodes_learner_connector(config: Any, obs_space: Any = None, act_space: Any = None
                                     ) -> EpisodesLearnerConnector:
    """The EpisodesLearnerConnector of `config`: its `learner_connector` pieces (none when unset)."""
    builder = getattr(config, "learner_connector", None)
    pieces = [] if builder is None else connector_pieces(
        call_builder(builder, (obs_space, act_space, None), "learner_connector"), "learner_connector")
    return EpisodesLearnerConnector(obs_space, act_space, connectors=pieces)

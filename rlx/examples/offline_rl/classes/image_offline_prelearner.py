"""ImageOfflinePreLearner: an OfflinePreLearner that maps image rows to episodes (RLlib's
`examples/offline_rl/classes/image_offline_prelearner.py`, written against rlx's OfflinePreLearner).

Each row `{"array": image}` (what ImageOfflineData serves) becomes a one-step, terminated
SingleAgentEpisode that observes the image twice, with an action sampled from the action space
and a uniform random reward: synthetic data with no MDP behind it (nothing can be learned from
it), showing how a prelearner subclass reads rows of its own layout by overriding
`_map_to_episodes`. The base class then runs the learner connector pipeline on the episodes and
returns the flat train batch `{"default_policy/<column>": array}`.
"""
from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from rlx.env.single_agent_episode import SingleAgentEpisode
from rlx.offline.offline_prelearner import OfflinePreLearner
from rlx.offline.spaces import OfflineDataError

from rlx.examples.offline_rl.classes.image_offline_data import IMAGE_COLUMN


class ImageOfflinePreLearner(OfflinePreLearner):
    """Maps rows of images to one-step episodes (see the module docstring).

    Args:
        config: the AlgorithmConfig (its `seed` seeds the random actions and rewards).
        learner: RLlib's argument (the Learner or its actor handles); not used.
        spaces: (observation_space, action_space): the action space samples the actions.
        module_spec: the module spec the learner connector pipeline runs with (default the config's).
        module_state: the module's weights.
    """

    def __init__(self, config: Any, learner: Any = None, spaces: tuple[Any, Any] | None = None,
                 module_spec: Any = None, module_state: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, spaces=spaces, module_state=module_state, module_spec=module_spec, **kwargs)
        if self.action_space is None:
            raise OfflineDataError("ImageOfflinePreLearner samples actions from the action space: pass "
                                   "spaces=(observation_space, action_space), or set both in config.environment().")
        seed = getattr(config, "seed", None)
        self._rng = np.random.default_rng(seed)
        self.action_space.seed(None if seed is None else int(seed))

    def _map_to_episodes(self, batch: dict[str, Any], to_numpy: bool = False,
                         **kwargs: Any) -> dict[str, list[SingleAgentEpisode]]:
        """{'episodes': one one-step episode per image of the batch's "array" column}."""
        if IMAGE_COLUMN not in batch:
            raise OfflineDataError(f"ImageOfflinePreLearner maps rows {{{IMAGE_COLUMN!r}: image}} (ImageOfflineData's); "
                                   f"these rows have {sorted(batch)}.")
        episodes = []
        for image in batch[IMAGE_COLUMN]:
            obs = np.asarray(image, dtype=np.float32)
            episode = SingleAgentEpisode(
                id_=uuid.UUID(int=int(self._rng.integers(2**63))).hex,
                observations=[obs, obs], observation_space=self.observation_space,
                actions=[self.action_space.sample()], action_space=self.action_space,
                rewards=[float(self._rng.random())], terminated=True, truncated=False,
                len_lookback_buffer=0, t_started=0)
            if to_numpy:
                episode.to_numpy()
            episodes.append(episode)
        return {"episodes": episodes}

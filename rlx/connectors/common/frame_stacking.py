"""Frame stacking: the module sees the last `num_frames` observations, concatenated along the
last axis (zeros before the episode's start)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class _FrameStacking(ConnectorV2):
    """Stacks the latest `num_frames` observations of each episode into the batch's OBS column.

    Observations are Box arrays whose last axis has size 1 (e.g. (84, 84, 1) frames); the output
    space has `num_frames` there. rlx's EnvRunner stores the stacked observations the module acted
    on in the train batch, so the learner-side piece (as_learner_connector=True) finds them
    already stacked and keeps them; it stacks only observations that are not.
    """

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, *, num_frames: int = 1,
                 multi_agent: bool = False, as_learner_connector: bool = False, **kwargs: Any):
        if int(num_frames) < 1:
            raise ValueError(f"num_frames must be >= 1, got {num_frames}.")
        self.num_frames = int(num_frames)
        self._multi_agent = bool(multi_agent)
        self._as_learner_connector = bool(as_learner_connector)
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def _stacked_space(self, space: gym.Space) -> gym.Space:
        if self._as_learner_connector and isinstance(space, gym.spaces.Box) and space.shape[-1:] == (self.num_frames,):
            return space  # the train batch's space: rlx's runner stored the stacked observations
        if not isinstance(space, gym.spaces.Box) or space.shape[-1:] != (1,):
            raise ValueError(f"Frame stacking needs Box observations whose last axis has size 1 (e.g. (84, 84, 1)); "
                             f"got {space}.")
        return gym.spaces.Box(np.repeat(space.low, self.num_frames, axis=-1),
                              np.repeat(space.high, self.num_frames, axis=-1), dtype=space.dtype)

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        if self._multi_agent:
            return gym.spaces.Dict({aid: self._stacked_space(s) for aid, s in input_observation_space.spaces.items()})
        return self._stacked_space(input_observation_space)

    def _stack(self, frames: list[Any]) -> np.ndarray:
        return np.concatenate([np.asarray(f) for f in frames], axis=-1)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        n = self.num_frames
        if self._as_learner_connector:
            for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
                observations = sa_episode.get_observations()
                if len(observations) and np.shape(observations[0])[-1:] == (n,) and n > 1:
                    continue  # rlx's runner stored the stacked observations already
                stacked = [self._stack(sa_episode.get_observations(slice(t - n + 1, t + 1), fill=0.0,
                                                                   neg_index_as_lookback=True))
                           for t in range(len(sa_episode))]
                if stacked:
                    self.add_n_batch_items(batch, Columns.OBS, np.stack(stacked), len(stacked), sa_episode)
            return batch
        for sa_episode in self.single_agent_episode_iterator(episodes):
            frames = sa_episode.get_observations(slice(-n, None), fill=0.0)
            self.add_batch_item(batch, Columns.OBS, self._stack(frames), sa_episode)
        return batch

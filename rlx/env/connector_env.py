"""Sub-env wrappers that run the user's env-to-module and module-to-env connector pipelines.

rlx's EnvRunners step plain arrays; when the config has custom connectors, each sub-env is
wrapped so that the runner sees the observations as the env-to-module pipeline left them (and the
env gets actions as the module-to-env pipeline made them). The wrapper keeps its own episode of
the raw env data for the pieces to read and rewrite, so pieces work as in RLlib: they call
`episode.get_observations(-1)`, rewrite it with `set_observations(at_indices=-1, ...)`, or add
items to the batch. The runner stores the processed observations in the train batch: the Learner
trains on what the module saw. Without custom connectors no wrapper exists and nothing is spent.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

# Re-exported: the runners build their pipelines through this module (the builders live in rlx.connectors).
from rlx.connectors.builders import build_env_to_module, build_module_to_env, has_env_to_module_pieces  # noqa: F401
from rlx.core.columns import Columns
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.single_agent_episode import SingleAgentEpisode

#: Steps after which a wrapper's episode record is cut (keeping a lookback), so that endless
#: episodes do not grow without bound.
_MAX_EPISODE_STEPS_KEPT = 10_000
_LOOKBACK_KEPT = 100


@dataclass
class ConnectorContext:
    """What the sub-env wrappers of one EnvRunner share: the pipelines and the call arguments."""

    env_to_module: Any = None
    module_to_env: Any = None
    rl_module: Any = None
    explore: bool = True
    metrics: Any = None
    shared_data: dict = field(default_factory=dict)

    def call(self, pipeline: Any, batch: dict[str, Any], episodes: list[Any]) -> dict[str, Any]:
        """Run one pipeline on `episodes`."""
        return pipeline(rl_module=self.rl_module, batch=batch, episodes=episodes, explore=self.explore,
                        shared_data=self.shared_data, metrics=self.metrics)


def _single_item(value: Any) -> Any:
    """The one item a pipeline produced for a one-episode call, as NumPy."""
    if isinstance(value, dict) and value and all(isinstance(k, tuple) for k in value):
        value = next(iter(value.values()))
    if isinstance(value, list):
        value = value[-1]
    elif hasattr(value, "shape") and len(value.shape) and value.shape[0] == 1:
        value = value[0]
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return value


class _Forwarding:
    """What a sub-env wrapper passes to the env it wraps: render(), close() and other attributes."""

    env: Any

    def render(self) -> Any:
        """The wrapped env's render()."""
        return self.env.render()

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class ConnectorEnv(_Forwarding, gym.Env):
    """A single-agent sub-env whose observations went through the env-to-module pipeline (and
    whose actions through the module-to-env pipeline)."""

    def __init__(self, env: Any, context: ConnectorContext, env_index: int = 0, worker_index: int = 0):
        self.env = env
        self.context = context
        self.env_index = env_index
        self.worker_index = worker_index
        pipeline = context.env_to_module
        self.observation_space = pipeline.observation_space if pipeline is not None else env.observation_space
        self.action_space = env.action_space
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)
        self.spec = getattr(env, "spec", None)
        self.episode: SingleAgentEpisode | None = None

    @property
    def unwrapped(self) -> Any:
        """The innermost env."""
        return self.env.unwrapped

    def _started(self) -> SingleAgentEpisode:
        """The episode in progress (reset() starts one)."""
        if self.episode is None:
            raise RuntimeError(f"{type(self).__name__}: call reset() before step().")
        return self.episode

    def _processed_obs(self) -> Any:
        pipeline = self.context.env_to_module
        if pipeline is None:
            return self._started().get_observations(-1)
        batch = self.context.call(pipeline, {}, [self.episode])
        if Columns.OBS in batch:
            return _single_item(batch[Columns.OBS])
        return self._started().get_observations(-1)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.episode = SingleAgentEpisode(env_index=self.env_index, worker_index=self.worker_index,
                                          observation_space=self.env.observation_space,
                                          action_space=self.env.action_space)
        self.episode.add_env_reset(obs, info)
        return self._processed_obs(), info

    def _action_for_env(self, action: Any) -> Any:
        pipeline = self.context.module_to_env
        if pipeline is None:
            return action
        batch = self.context.call(pipeline, {Columns.ACTIONS: np.asarray([action])}, [self.episode])
        return _single_item(batch.get(Columns.ACTIONS_FOR_ENV, batch.get(Columns.ACTIONS)))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(self._action_for_env(action))
        self._record_step(obs, action, reward, terminated, truncated, info)
        return self._processed_obs(), reward, terminated, truncated, info

    def _record_step(self, obs: Any, action: Any, reward: Any, terminated: bool, truncated: bool, info: Any) -> None:
        episode = self._started()
        if len(episode) >= _MAX_EPISODE_STEPS_KEPT:
            self.episode = episode = episode.cut(_LOOKBACK_KEPT)
        scalar = np.isscalar(reward)  # (a plain bool: np.isscalar's TypeGuard would narrow `reward` to str too)
        episode.add_env_step(obs, action, float(reward) if scalar else reward,
                                  info if isinstance(info, dict) else {}, terminated=terminated, truncated=truncated)

    # Sub-envs stepped in their own processes (gym_env_vectorize_mode="async").
    def step_async(self, action: Any) -> None:
        """Send the (connector-processed) action to a sub-env in another process."""
        self._pending_action = action
        self.env.step_async(self._action_for_env(action))

    def step_wait(self) -> tuple[Any, float, bool, bool, dict]:
        """Receive that sub-env's step result and process its observation."""
        obs, reward, terminated, truncated, info = self.env.step_wait()
        self._record_step(obs, self._pending_action, reward, terminated, truncated, info)
        return self._processed_obs(), reward, terminated, truncated, info



class MultiAgentConnectorEnv(_Forwarding, MultiAgentEnv):
    """A multi-agent sub-env whose per-agent observations went through the env-to-module
    pipeline (whose input observation space is a Dict keyed by agent id)."""

    def __init__(self, env: MultiAgentEnv, context: ConnectorContext, env_index: int = 0, worker_index: int = 0):
        super().__init__()
        self.env = env
        self.context = context
        self.env_index = env_index
        self.worker_index = worker_index
        self.possible_agents = list(getattr(env, "possible_agents", None) or [])
        self.agents = list(getattr(env, "agents", None) or [])
        out_space = context.env_to_module.observation_space if context.env_to_module is not None else None
        self._obs_spaces = dict(out_space.spaces) if isinstance(out_space, gym.spaces.Dict) else {}
        self.episode: MultiAgentEpisode | None = None

    def _started(self) -> MultiAgentEpisode:
        """The episode in progress (reset() starts one)."""
        if self.episode is None:
            raise RuntimeError(f"{type(self).__name__}: call reset() before step().")
        return self.episode

    @property
    def unwrapped(self) -> Any:
        """The innermost env."""
        return self.env.unwrapped

    def get_observation_space(self, agent_id: Any) -> gym.Space:
        if agent_id in self._obs_spaces:
            return self._obs_spaces[agent_id]
        return self.env.get_observation_space(agent_id)

    def get_action_space(self, agent_id: Any) -> gym.Space:
        return self.env.get_action_space(agent_id)

    @property
    def observation_spaces(self) -> dict:  # type: ignore[override]
        return {aid: self.get_observation_space(aid) for aid in self.possible_agents}

    @observation_spaces.setter
    def observation_spaces(self, value: Any) -> None:
        pass  # the wrapped env's spaces, processed, are the only truth

    @property
    def action_spaces(self) -> dict:  # type: ignore[override]
        return {aid: self.env.get_action_space(aid) for aid in self.possible_agents}

    @action_spaces.setter
    def action_spaces(self, value: Any) -> None:
        pass

    def get_agent_ids(self) -> set:
        return self.env.get_agent_ids() if hasattr(self.env, "get_agent_ids") else set(self.possible_agents)

    def _processed(self, obs: dict) -> dict:
        pipeline = self.context.env_to_module
        if pipeline is None or not obs:
            return obs
        batch = self.context.call(pipeline, {}, [self.episode])
        column = batch.get(Columns.OBS)
        out = {}
        current = self._started()
        for aid in obs:
            episode = current.agent_episodes.get(aid)
            key = (current.id_, aid, getattr(episode, "module_id", None))
            if isinstance(column, dict) and key in column:
                out[aid] = _single_item(column[key])
            elif episode is not None:
                out[aid] = episode.get_observations(-1)
            else:
                out[aid] = obs[aid]
        return out

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(getattr(self.env, "agents", None) or obs)
        self.episode = MultiAgentEpisode(env_index=self.env_index, worker_index=self.worker_index, record=True)
        self.episode.add_env_reset(obs, infos if isinstance(infos, dict) else {})
        return self._processed(obs), infos

    # (type: ignore: a MultiAgentEnv's step differs from gymnasium.Env's; see MultiAgentEnv.step)
    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:  # type: ignore[override]
        actions = action_dict
        if self.context.module_to_env is not None:
            actions = {}
            for aid, action in action_dict.items():
                batch = self.context.call(self.context.module_to_env, {Columns.ACTIONS: np.asarray([action])},
                                          [self.episode])
                actions[aid] = _single_item(batch.get(Columns.ACTIONS_FOR_ENV, batch.get(Columns.ACTIONS)))
        obs, rewards, terminateds, truncateds, infos = self.env.step(actions)
        self.agents = list(getattr(self.env, "agents", None) or self.agents)
        self._started().add_env_step(obs, action_dict, rewards, terminateds, truncateds,
                                  infos if isinstance(infos, dict) else {})
        return self._processed(obs), rewards, terminateds, truncateds, infos

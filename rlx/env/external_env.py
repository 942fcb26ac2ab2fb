"""ExternalEnv: an env that drives itself and asks the policy for actions (`ray.rllib.env.external_env`).

Subclass it and write `run()`: a loop that starts episodes, asks for (or logs) actions,
logs rewards and ends episodes, from as many threads or episodes at once as you like.
Train on it by returning it from `input_`:

    config.environment(observation_space=obs_space, action_space=act_space) \\
          .offline_data(input_=lambda ioctx: MySimulator(act_space, obs_space))

The Algorithm starts the thread; its steps become the same batches an EnvRunner samples.
The policy server (PolicyServerInput) is an ExternalEnv whose `run()` serves HTTP.
"""
from __future__ import annotations

import threading
from abc import ABCMeta, abstractmethod
from typing import Any

from rlx.utils.errors import ConfigError


class ExternalEnvStopped(SystemExit):
    """Raised by the episode methods once the Algorithm reading the env has stopped; as a
    SystemExit it ends the env thread's run() loop quietly (catch it to clean up)."""


class ExternalEnv(threading.Thread, metaclass=ABCMeta):
    """An environment running its own loop in a thread, querying the policy for actions.

    Args:
        action_space: the env's action space.
        observation_space: the env's observation space.
        max_concurrent: removed in RLlib (episodes are unbounded); giving it is an error.
    """

    #: Marks ExternalEnvs for rlx.offline.input_factory without importing this module there.
    _rlx_external_env = True

    def __init__(self, action_space: Any, observation_space: Any, max_concurrent: int | None = None):
        threading.Thread.__init__(self, daemon=True, name=f"rlx-external-env:{type(self).__name__}")
        if max_concurrent is not None:
            raise ConfigError("ExternalEnv's max_concurrent argument was removed (as in RLlib): any number of "
                              "episodes may be open; size batches with rollout_fragment_length instead.")
        self.action_space = action_space
        self.observation_space = observation_space
        self._backend: Any = None

    @abstractmethod
    def run(self) -> None:
        """Your loop: start_episode(), then get_action()/log_action() and log_returns() per step,
        end_episode() at the end; several episodes may be open at once."""

    def _attach(self, backend: Any) -> None:
        """Connect the episode methods to a trainer's episode book and policy (rlx internal)."""
        self._backend = backend

    @property
    def _connected(self) -> Any:
        if self._backend is None:
            raise ConfigError(f"{type(self).__name__} is not connected to an Algorithm yet: return it from input_ "
                              "(config.offline_data(input_=lambda ioctx: MyExternalEnv(...))); the Algorithm "
                              "starts its thread.")
        return self._backend

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Record the start of an episode; returns its id (a fresh one when `episode_id` is None).
        With `training_enabled=False` its steps are not trained on (its return is still reported)."""
        return self._connected.start_episode(episode_id, training_enabled)

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """Record an observation and return the policy's action for it."""
        return self._connected.get_action(episode_id, observation)

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Record an observation and the action taken for it (off-policy: chosen by someone else)."""
        self._connected.log_action(episode_id, observation, action)

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None) -> None:
        """Record a reward for the episode's last action (rewards add up until the next action)."""
        self._connected.log_returns(episode_id, reward, info)

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """Record the end of an episode at `observation`: terminated, or with `truncated=True`
        cut by a time limit (the learner bootstraps from the value of `observation`)."""
        self._connected.end_episode(episode_id, observation, truncated)

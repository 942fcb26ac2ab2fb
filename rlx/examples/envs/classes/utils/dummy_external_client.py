"""A CartPole simulator acting as an external RLlink client (RLlib's
`ray.rllib.examples.envs.classes.utils.dummy_external_client`).

`_dummy_external_client(port)` connects to an EnvRunnerServerForExternalInference, builds
the server's module from the config it sends, runs CartPole with it (sampling actions from
the module's action distribution, locally) and sends its episodes each time it has
collected the server's rollout fragment, waiting for the new weights in between
(EPISODES_AND_GET_STATE: on-policy). It returns when the server closes the connection (the
training run ended) or `stop` is set.
"""
from __future__ import annotations

import logging
import threading

import gymnasium as gym
import numpy as np
import torch

from rlx.core import COMPONENT_RL_MODULE
from rlx.core.columns import Columns
from rlx.env.external.rllink import RLlinkError
from rlx.env.external.rllink_client import RLlinkClient
from rlx.env.single_agent_episode import SingleAgentEpisode

logger = logging.getLogger("rlx")


def _dummy_external_client(port: int = 5556, *, host: str = "localhost", env_id: str = "CartPole-v1",
                           stop: threading.Event | None = None, connect_timeout_s: float = 300.0,
                           seed: int | None = None) -> int:
    """Run `env_id` as an external client of the RLlink server on host:port; returns the env
    steps it sent."""
    client = RLlinkClient(host, port, connect_timeout_s=connect_timeout_s)
    sent = 0
    try:
        client.ping()
        config = client.get_config()
        module = config.get_rl_module_spec().build()
        module.set_state(client.get_state()[COMPONENT_RL_MODULE])
        steps_per_message = config.get_rollout_fragment_length()
        dist_cls = module.get_exploration_action_dist_cls()
        generator = torch.Generator().manual_seed(seed if seed is not None else int(np.random.randint(2**31)))
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed)
        episode = SingleAgentEpisode(observations=[obs])
        episodes = [episode]
        collected = 0
        while stop is None or not stop.is_set():
            with torch.no_grad():
                logits = module.forward_exploration({Columns.OBS: torch.as_tensor(np.asarray([obs], np.float32))})[
                    Columns.ACTION_DIST_INPUTS]
                dist = dist_cls.from_logits(logits)
                action_t = dist.sample(generator=generator) if _takes_generator(dist) else dist.sample()
                logp = float(dist.logp(action_t)[0])
            action = action_t[0].numpy()
            env_action = int(action) if isinstance(env.action_space, gym.spaces.Discrete) else action
            obs, reward, terminated, truncated, _ = env.step(env_action)
            episode.add_env_step(observation=obs, action=env_action, reward=float(reward), terminated=terminated,
                                 truncated=truncated, extra_model_outputs={
                                     Columns.ACTION_DIST_INPUTS: logits[0].numpy(), Columns.ACTION_LOGP: logp})
            collected += 1
            if collected >= steps_per_message:
                state = client.send_episodes(episodes, get_state=True)
                module.set_state(state[COMPONENT_RL_MODULE])
                sent += collected
                collected = 0
                episodes = []
                if not episode.is_done:
                    episode = episode.cut()
                    episodes.append(episode)
            if episode.is_done:
                obs, _ = env.reset()
                episode = SingleAgentEpisode(observations=[obs])
                episodes.append(episode)
    except RLlinkError as err:
        # The server closes the connection when training ends.
        logger.info("The RLlink server on port %d ended the connection: %s", port, err)
    finally:
        client.close()
    return sent


def _takes_generator(dist: object) -> bool:
    import inspect

    try:
        return "generator" in inspect.signature(dist.sample).parameters
    except (TypeError, ValueError):
        return False

"""make_vec: a VectorMultiAgentEnv of a Gymnasium id registered for a MultiAgentEnv."""
from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym

from rlx.env.vector.sync_vector_multi_agent_env import SyncVectorMultiAgentEnv
from rlx.env.vector.vector_multi_agent_env import VectorMultiAgentEnv

__all__ = ["make_vec"]


def make_vec(id: Any, num_envs: int = 1, vectorization_mode: Any = None,  # noqa: A002 - RLlib's name
             vector_kwargs: dict | None = None, **kwargs: Any) -> VectorMultiAgentEnv:
    """Build `num_envs` copies of the MultiAgentEnv registered under `id` (a Gymnasium id or
    EnvSpec; `kwargs` go to each env's constructor) as a SyncVectorMultiAgentEnv.

    Only "sync" vectorization exists for multi-agent envs (as in RLlib); `vector_kwargs` go
    to SyncVectorMultiAgentEnv (`copy`, `autoreset_mode`).
    """
    if isinstance(id, gym.envs.registration.EnvSpec):
        spec = copy.deepcopy(id)
    elif isinstance(id, str):
        spec = copy.deepcopy(gym.spec(id))
    else:
        raise ValueError(f"make_vec needs a Gymnasium id (str) or EnvSpec, got {type(id).__name__}.")
    env_kwargs = dict(spec.kwargs or {})
    num_envs = int(env_kwargs.pop("num_envs", num_envs))
    vectorization_mode = env_kwargs.pop("vectorization_mode", vectorization_mode)
    vector_kwargs = dict(env_kwargs.pop("vector_kwargs", vector_kwargs) or {})
    env_kwargs.update(kwargs)
    mode = getattr(vectorization_mode, "value", vectorization_mode) or "sync"
    if mode != "sync":
        raise ValueError(f"vectorization_mode={mode!r}: multi-agent envs are vectorized only synchronously; "
                         "use 'sync' (gym_env_vectorize_mode='sync').")
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1, got {num_envs}.")
    spec.kwargs = {}

    def make_one() -> Any:
        return gym.make(spec, **copy.deepcopy(env_kwargs))

    env = SyncVectorMultiAgentEnv([make_one] * num_envs, **vector_kwargs)
    spec.kwargs = {**env_kwargs, "num_envs": num_envs, "vectorization_mode": "sync",
                   **({"vector_kwargs": vector_kwargs} if vector_kwargs else {})}
    env.spec = spec
    return env

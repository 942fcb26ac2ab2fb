"""Vectorized multi-agent envs (RLlib's `ray.rllib.env.vector`).

`VectorMultiAgentEnv` is the interface: `num_envs` MultiAgentEnvs stepped together, with
observations, rewards, terminateds, truncateds and infos as one per-agent dict per
sub-env. `SyncVectorMultiAgentEnv` steps them one after another in this process, and
`make_vec(id, num_envs)` builds one from a Gymnasium id registered for a MultiAgentEnv.

rlx's own EnvRunners keep their sub-envs in a plain list and step them themselves; these
classes are for user code (and callbacks) written against RLlib's vector API.
"""
from rlx.env.vector.registration import make_vec
from rlx.env.vector.sync_vector_multi_agent_env import SyncVectorMultiAgentEnv
from rlx.env.vector.vector_multi_agent_env import VectorMultiAgentEnv

__all__ = ["VectorMultiAgentEnv", "SyncVectorMultiAgentEnv", "make_vec"]

"""RLlib's old path `ray.rllib.examples.env.random_env`; the envs live in
`rlx.examples.envs.classes.random_env`."""
from rlx.examples.envs.classes.random_env import (RandomEnv, RandomLargeObsSpaceEnv,
                                                  RandomLargeObsSpaceEnvContActions, RandomMultiAgentEnv)

__all__ = ["RandomEnv", "RandomMultiAgentEnv", "RandomLargeObsSpaceEnv", "RandomLargeObsSpaceEnvContActions"]

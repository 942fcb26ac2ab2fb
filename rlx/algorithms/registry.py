"""Algorithm names ("PPO") to their classes, for the CLI, Tune and checkpoints."""
from __future__ import annotations

import importlib
from typing import Any

from rlx.utils.errors import ConfigError, did_you_mean

# name -> (module, algorithm class, config class, one-line description)
ALGORITHMS: dict[str, tuple[str, str, str, str]] = {
    "PPO": ("rlx.algorithms.ppo.ppo", "PPO", "PPOConfig", "Proximal Policy Optimization (on-policy, any action space)"),
    "DQN": ("rlx.algorithms.dqn.dqn", "DQN", "DQNConfig",
            "Deep Q-Network with Rainbow options: double Q, dueling, n-step, distributional, noisy, prioritized replay "
            "(off-policy, discrete actions)"),
    "SAC": ("rlx.algorithms.sac.sac", "SAC", "SACConfig",
            "Soft Actor-Critic: twin Q, automatic entropy tuning (off-policy, continuous or discrete actions)"),
    "DDPG": ("rlx.algorithms.ddpg.ddpg", "DDPG", "DDPGConfig",
             "Deep Deterministic Policy Gradient (off-policy, continuous actions)"),
    "APEX": ("rlx.algorithms.apex_dqn.apex_dqn", "ApexDQN", "ApexDQNConfig",
             "Ape-X DQN: runners with per-worker epsilon sample asynchronously into prioritized replay while a "
             "learner thread updates (off-policy, discrete actions)"),
    "APEX_DDPG": ("rlx.algorithms.apex_ddpg.apex_ddpg", "ApexDDPG", "ApexDDPGConfig",
                  "Ape-X DDPG: runners with per-worker Gaussian noise sample asynchronously into prioritized "
                  "replay while a learner thread updates (off-policy, continuous actions)"),
    "DDPPO": ("rlx.algorithms.ddppo.ddppo", "DDPPO", "DDPPOConfig",
              "Decentralized distributed PPO: worker processes each sample and train, gradients all-reduced "
              "among them (on-policy, any action space)"),
    "TD3": ("rlx.algorithms.td3.td3", "TD3", "TD3Config",
            "Twin Delayed DDPG: twin Q, delayed policy updates, target policy smoothing "
            "(off-policy, continuous actions)"),
    "PG": ("rlx.algorithms.pg.pg", "PG", "PGConfig",
           "Vanilla policy gradient (REINFORCE) on complete episodes' returns, no baseline (on-policy, any action space)"),
    "A2C": ("rlx.algorithms.a2c.a2c", "A2C", "A2CConfig",
            "Advantage actor-critic, synchronous, with optional microbatch gradient accumulation "
            "(on-policy, any action space)"),
    "A3C": ("rlx.algorithms.a3c.a3c", "A3C", "A3CConfig",
            "Asynchronous advantage actor-critic: A2C's loss, one gradient step per fragment as remote runners "
            "deliver them (on-policy, any action space)"),
    "ES": ("rlx.algorithms.es.es", "ES", "ESConfig",
           "Evolution strategies: antithetic parameter perturbations evaluated by the runners, rank-normalised "
           "returns, Adam on the flat parameters; no backpropagation (any action space)"),
    "ARS": ("rlx.algorithms.ars.ars", "ARS", "ARSConfig",
            "Augmented random search: linear policy, top-direction perturbation steps scaled by the returns' std "
            "(any action space)"),
    "IMPALA": ("rlx.algorithms.impala.impala", "IMPALA", "IMPALAConfig",
               "Importance-weighted actor-learner: asynchronous sampling with V-trace corrections "
               "(any action space)"),
    "APPO": ("rlx.algorithms.appo.appo", "APPO", "APPOConfig",
             "Asynchronous PPO (IMPACT): IMPALA's asynchronous sampling and V-trace with a clipped surrogate "
             "and a target network (any action space)"),
    "MARWIL": ("rlx.algorithms.marwil.marwil", "MARWIL", "MARWILConfig",
               "Advantage-weighted imitation learning, usually from offline data (any action space)"),
    "BC": ("rlx.algorithms.bc.bc", "BC", "BCConfig",
           "Behavior cloning: imitation of offline data's actions (MARWIL with beta=0; any action space)"),
    "CQL": ("rlx.algorithms.cql.cql", "CQL", "CQLConfig",
            "Conservative Q-Learning: offline SAC whose critics are penalized on actions the data does not take "
            "(Box actions)"),
}


def _lookup(name: str) -> tuple[str, str, str, str]:
    # Case and dashes do not matter: "dd-ppo" and "APEX-DDPG" name DDPPO and APEX_DDPG, as the docs write them.
    spellings = (name, name.upper(), name.upper().replace("-", ""), name.upper().replace("-", "_"))
    key = next((k for k in spellings if k in ALGORITHMS), name)
    if key not in ALGORITHMS:
        raise ConfigError(f"Unknown algorithm '{name}'.{did_you_mean(name, ALGORITHMS)} Available: {', '.join(ALGORITHMS)}.")
    return ALGORITHMS[key]


def get_algorithm_class(name: str) -> Any:
    """The Algorithm class registered under `name` (case-insensitive)."""
    module, cls, _, _ = _lookup(name)
    return getattr(importlib.import_module(module), cls)


def get_algorithm_config(name: str) -> Any:
    """A default config of the algorithm registered under `name`."""
    module, _, cfg, _ = _lookup(name)
    return getattr(importlib.import_module(module), cfg)()


def list_algorithms() -> dict[str, str]:
    """{name: description} of every registered algorithm."""
    return {name: entry[3] for name, entry in ALGORITHMS.items()}

"""Exploration strategies: how (and whether) actions are sampled from a module's outputs.

Configured with `config.exploration(explore=True, exploration_config={"type": ..., **kwargs})`;
`type` is a class name below, an Exploration subclass, or an import path.
"""
from rlx.utils.exploration.epsilon_greedy import EpsilonGreedy
from rlx.utils.exploration.exploration import Exploration
from rlx.utils.exploration.gaussian_noise import GaussianNoise
from rlx.utils.exploration.ornstein_uhlenbeck_noise import OrnsteinUhlenbeckNoise
from rlx.utils.exploration.per_worker_epsilon_greedy import PerWorkerEpsilonGreedy
from rlx.utils.exploration.per_worker_gaussian_noise import PerWorkerGaussianNoise
from rlx.utils.exploration.per_worker_ornstein_uhlenbeck_noise import PerWorkerOrnsteinUhlenbeckNoise
from rlx.utils.exploration.random import Random
from rlx.utils.exploration.soft_q import SoftQ
from rlx.utils.exploration.stochastic_sampling import StochasticSampling
from rlx.utils.exploration.utils import EXPLORATION_CLASSES, make_exploration, validate_exploration_config

__all__ = [
    "Exploration", "StochasticSampling", "EpsilonGreedy", "PerWorkerEpsilonGreedy", "SoftQ", "Random",
    "GaussianNoise", "OrnsteinUhlenbeckNoise", "PerWorkerGaussianNoise", "PerWorkerOrnsteinUhlenbeckNoise",
    "EXPLORATION_CLASSES", "make_exploration", "validate_exploration_config",
]

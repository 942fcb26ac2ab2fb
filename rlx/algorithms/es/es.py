"""ES (evolution strategies, Salimans et al. 2017): its config (options and defaults) and its training step."""
from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

import numpy as np

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, choice, integer, number
from rlx.algorithms.es.perturbations import PerturbationResults, evaluate_perturbations, noise_seed
from rlx.utils.errors import NotSupportedYetError

T = ("training",)
#: rlx's default table: 25M floats (100 MB per process). RLlib's 250M (1 GB) lives once in Ray's
#: object store; rlx's processes each regenerate theirs from the seed.
DEFAULT_NOISE_SIZE = 25_000_000


def evolution_options(*, action_noise_std: float) -> list[Option]:
    """The options ES and ARS share (RLlib's names and meanings)."""
    return [
        Option("action_noise_std", action_noise_std, T, number(0.0),
               doc="Std of Gaussian noise added to the actions of perturbed episodes on Box action spaces "
                   "(discrete actions are taken deterministically)."),
        Option("noise_stdev", 0.02, T, number(0.0, exclusive_min=True),
               doc="Std (sigma) of the parameter perturbations."),
        Option("noise_size", DEFAULT_NOISE_SIZE, T, integer(1),
               doc="Entries of the shared noise table (float32), regenerated from the seed in every process."),
        Option("eval_prob", 0.03, T, number(0.0, 1.0),
               doc="Probability, per perturbation, of also running one episode of the unperturbed policy; their "
                   "returns are reported as evaluation_return_mean (not used by the update)."),
        Option("report_length", 10, T, integer(1),
               doc="How many of the latest unperturbed episodes evaluation_return_mean averages."),
        Option("tf_single_threaded", True, T, boolean, no_effect="rlx is PyTorch-only"),
    ]


class ESConfig(AlgorithmConfig):
    """Config of ES: antithetic Gaussian perturbations of the policy's parameters, evaluated by the
    EnvRunners (whole episodes, deterministic actions), rank-normalised returns, an Adam step on
    the flat parameter vector. No backpropagation.

    Defaults are RLlib's (stepsize 0.01, noise_stdev 0.02, episodes_per_batch 1000,
    train_batch_size 10000, MeanStdFilter), except noise_size (25M entries) and rlx's
    one-process default num_env_runners=0.

    Example:
        >>> config = ESConfig().environment("CartPole-v1").training(episodes_per_batch=40, train_batch_size=2000)
        >>> algo = config.build()
    """

    _extra_options = evolution_options(action_noise_std=0.01) + [
        Option("l2_coeff", 0.005, T, number(0.0),
               doc="L2 penalty on the parameters, added to the Adam step's gradient."),
        Option("episodes_per_batch", 1000, T, integer(2),
               doc="Minimum perturbed episodes per update (two per perturbation)."),
        Option("return_proc_mode", "centered_rank", T, choice("centered_rank"),
               doc="How returns are normalised before weighting the noise: centered ranks in [-0.5, 0.5]."),
        Option("stepsize", 0.01, T, number(0.0, exclusive_min=True), doc="Adam's learning rate."),
    ]
    _default_overrides = {
        "train_batch_size": 10000,
        "observation_filter": "MeanStdFilter",
        "explore": False,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or ES)


class ES(Algorithm):
    """Evolution strategies. Each training step evaluates perturbations theta +- sigma * eps on the
    EnvRunners (at least `episodes_per_batch` episodes and `train_batch_size` env steps), then
    the Learner estimates the gradient from their rank-normalised returns and steps theta.

    The perturbed policy is the module's deterministic action (argmax or mean). The module is
    built inference-only (no value head), so every parameter it has is one the policy uses.
    Result: the runners' usual episode statistics (all evaluated episodes) under
    `env_runners`, and under `learners/default_policy` the update's statistics plus
    `evaluation_return_mean` (the last `report_length` unperturbed episodes).
    """

    _config_class = ESConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        from rlx.algorithms.es.es_learner import ESLearner

        return ESLearner

    def setup(self, config: AlgorithmConfig) -> None:
        """Refuse multi-agent setups and learner processes, then build runners and the learner."""
        if self._detect_multi_agent(config):
            raise self._multi_agent_error()
        if config.num_learners > 0:
            raise NotSupportedYetError(f"num_learners > 0 with {type(self).__name__}",
                                       "its update is one vector operation in the driver, with no gradients "
                                       "to share between learner processes",
                                       fix="Leave num_learners=0; scale with env_runners(num_env_runners=N).")
        super().setup(config)
        if self.is_multi_agent:
            raise self._multi_agent_error()
        self._eval_returns: deque[float] = deque(maxlen=config.report_length)

    def _multi_agent_error(self) -> NotSupportedYetError:
        name = type(self).__name__
        return NotSupportedYetError(f"multi-agent {name}", "perturbations are evaluated on single-agent episodes",
                                    fix="Use PPO, A2C or IMPALA for multi-agent training.")

    def _module_spec(self) -> Any:
        """The module spec, built inference-only: ES perturbs only what acting uses."""
        return dataclasses.replace(super()._module_spec(), inference_only=True)

    def perturbation_budget(self) -> tuple[int, int]:
        """(minimum perturbations, minimum env steps) of one training step."""
        cfg = self.config
        return math.ceil(cfg.episodes_per_batch / 2), int(cfg.train_batch_size)

    def reward_offset(self) -> float:
        """Subtracted from every step's reward in the update's returns (ARS's `offset`; ES: 0)."""
        return 0.0

    def training_step(self) -> dict[str, Any]:
        """Evaluate perturbations of the current weights, update them, push them to the runners."""
        cfg = self.config
        min_pairs, min_steps = self.perturbation_budget()
        results = evaluate_perturbations(
            self.env_runner_group, self.learner.get_flat_weights(), min_pairs=min_pairs, min_env_steps=min_steps,
            noise_stdev=cfg.noise_stdev, noise_seed=noise_seed(cfg), noise_size=cfg.noise_size,
            seed=(cfg.seed or 0) * 1_000_003 + self._counters["num_env_steps_sampled_lifetime"],
            eval_prob=cfg.eval_prob, action_noise_std=cfg.action_noise_std, offset=self.reward_offset())
        steps = results.num_env_steps
        timestep = self._counters["num_env_steps_sampled_lifetime"] + steps
        for key in ("num_env_steps_sampled_lifetime", "num_agent_steps_sampled_lifetime"):
            self._counters[key] += steps
        metrics = self.learner.update_from_batch(
            {"noise_indices": results.noise_indices, "returns": results.returns}, timestep=timestep)
        self.weights_version += 1
        for key in ("num_env_steps_trained_lifetime", "num_agent_steps_trained_lifetime"):
            self._counters[key] += steps
        self.sync_env_runner_weights()
        metrics.update(self._step_stats(results))
        return self.module_results(metrics)

    def _step_stats(self, results: PerturbationResults) -> dict[str, Any]:
        self._eval_returns.extend(results.eval_returns)
        return {
            "num_perturbations": int(results.returns.shape[0]),
            "episodes_this_iter": results.num_episodes + len(results.eval_returns),
            "perturbed_return_mean": float(results.returns.mean()),
            "evaluation_return_mean": float(np.mean(self._eval_returns)) if self._eval_returns else float("nan"),
        }


# Old names (Trainer era).
ESTrainer = ES

DEFAULT_CONFIG = ESConfig().to_dict()

"""ES (evolution strategies, Salimans et al. 2017): its config (options and defaults) and its training step."""
from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any, ClassVar

import numpy as np

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_bounds import rows_option
from rlx.algorithms.config_options import Option, boolean, choice, count, integer, number
from rlx.algorithms.es.es_learner import ESLearner
from rlx.algorithms.es.perturbations import (
    PerturbationResults, evaluate_perturbations, module_offsets, noise_seed,
)
from rlx.core.rl_module.rl_module import RLModuleSpec
from rlx.utils.errors import ConfigError, NotSupportedYetError

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
        Option("noise_size", DEFAULT_NOISE_SIZE, T, rows_option(1, "noise table entries (float32)", row_bytes=4),
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
        Option("episodes_per_batch", 1000, T, count(2),
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
    `env_runners`, and under `learners/<module_id>` the update's statistics plus
    `evaluation_return_mean` (the last `report_length` unperturbed episodes).

    Multi-agent: every policy in `policies_to_train` is perturbed by each perturbation (its own
    part of one slice of the noise table) and updated from its own returns (the rewards of the
    agents mapped to it), rank-normalised on their own; other policies act unperturbed.
    """

    _config_class: ClassVar[type[AlgorithmConfig]] = ESConfig  # subclasses bring their own config class

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]

        return ESLearner

    def setup(self, config: AlgorithmConfig) -> None:
        """Refuse learner processes, then build runners and the learner (one per policy when multi-agent)."""
        if config.num_learners > 0:
            raise NotSupportedYetError(f"num_learners > 0 with {type(self).__name__}",
                                       "its update is one vector operation in the driver, with no gradients "
                                       "to share between learner processes",
                                       fix="Leave num_learners=0; scale with env_runners(num_env_runners=N).")
        super().setup(config)
        self._eval_returns: dict[str, deque[float]] = {}

    def _module_spec(self) -> Any:
        """The module spec(s), built inference-only: ES perturbs only what acting uses."""
        spec = super()._module_spec()
        if isinstance(spec, RLModuleSpec):
            return dataclasses.replace(spec, inference_only=True)
        specs = spec.rl_module_specs  # a MultiRLModuleSpec
        if isinstance(specs, RLModuleSpec):
            specs = dataclasses.replace(specs, inference_only=True)
        else:
            specs = {mid: dataclasses.replace(s, inference_only=True) for mid, s in (specs or {}).items()}
        default = spec.default_spec and dataclasses.replace(spec.default_spec, inference_only=True)
        return dataclasses.replace(spec, rl_module_specs=specs, module_specs=specs, default_spec=default)

    def perturbation_budget(self) -> tuple[int, int]:
        """(minimum perturbations, minimum env steps) of one training step."""
        cfg = self.config
        return math.ceil(cfg.episodes_per_batch / 2), int(cfg.train_batch_size)

    def reward_offset(self) -> float:
        """Subtracted from every step's reward in the update's returns (ARS's `offset`; ES: 0)."""
        return 0.0

    def trainable_learners(self) -> dict[str, Any]:
        """{module_id: Learner} of the policies ES perturbs and updates (policies_to_train), by id."""
        learners = self.learners
        return {mid: learners.by_module()[mid] for mid in sorted(learners) if learners.is_trainable(mid)}

    def training_step(self) -> dict[str, Any]:
        """Evaluate perturbations of the current weights of every trainable policy, update each
        policy from its own returns, push the weights to the runners."""
        cfg = self.config
        learners = self.trainable_learners()
        if not learners:
            raise ConfigError(f"policies_to_train ({cfg.policies_to_train!r}) leaves no policy of "
                              f"{self.policy_ids} to train; name at least one.")
        thetas = {mid: learner.get_flat_weights() for mid, learner in learners.items()}
        offsets, _ = module_offsets(thetas)
        min_pairs, min_steps = self.perturbation_budget()
        results = evaluate_perturbations(
            self.env_runner_group, thetas, min_pairs=min_pairs, min_env_steps=min_steps,
            noise_stdev=cfg.noise_stdev, noise_seed=noise_seed(cfg), noise_size=cfg.noise_size,
            seed=(cfg.seed or 0) * 1_000_003 + self._counters["num_env_steps_sampled_lifetime"],
            eval_prob=cfg.eval_prob, action_noise_std=cfg.action_noise_std, offset=self.reward_offset())
        steps = results.num_env_steps
        timestep = self._counters["num_env_steps_sampled_lifetime"] + steps
        for key in ("num_env_steps_sampled_lifetime", "num_agent_steps_sampled_lifetime"):
            self._counters[key] += steps
        metrics = {}
        for mid, learner in learners.items():
            # The policy's noise is its part of each perturbation's slice of the table.
            batch = {"noise_indices": results.noise_indices + offsets[mid], "returns": results.module_returns[mid]}
            metrics[mid] = {**learner.update_from_batch(batch, timestep=timestep), **self._step_stats(results, mid)}
        self.weights_version += 1
        for key in ("num_env_steps_trained_lifetime", "num_agent_steps_trained_lifetime"):
            self._counters[key] += steps
        self.sync_env_runner_weights()
        return metrics

    def _step_stats(self, results: PerturbationResults, module_id: str) -> dict[str, Any]:
        window = self._eval_returns.setdefault(module_id, deque(maxlen=self.config.report_length))
        window.extend(results.eval_returns.get(module_id, []))
        return {
            "num_perturbations": results.num_pairs,
            "episodes_this_iter": results.num_episodes + len(results.eval_lengths),
            "perturbed_return_mean": float(results.module_returns[module_id].mean()),
            "evaluation_return_mean": float(np.mean(window)) if window else float("nan"),
        }


# Old names (Trainer era).
ESTrainer = ES

DEFAULT_CONFIG = ESConfig().to_dict()

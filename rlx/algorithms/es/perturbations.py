"""What ES and ARS share: the seeded noise table, the policy as one flat parameter vector, rank
normalisation, and the evaluation of antithetic perturbations on the EnvRunners.

Every process regenerates the noise table from (seed, size) instead of receiving it, so a
perturbation travels as one integer: its offset into the table. A runner evaluates theta +
sigma * eps and theta - sigma * eps (eps = table[i:i + dim]) for one episode each and returns the
offsets and the two returns; the driver looks the same noise up to estimate the gradient.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

#: The noise table's seed when config.seed is None (all processes must agree on it).
DEFAULT_NOISE_SEED = 123

_TABLES: dict[tuple[int, int], np.ndarray] = {}


def noise_seed(config: Any) -> int:
    """The seed every process builds the noise table from: config.seed, else a fixed one."""
    return DEFAULT_NOISE_SEED if config.seed is None else int(config.seed)


def shared_noise_table(seed: int, size: int) -> np.ndarray:
    """`size` standard-normal float32 numbers from `seed`; built once per process and cached."""
    key = (int(seed), int(size))
    table = _TABLES.get(key)
    if table is None:
        table = np.random.default_rng(key[0]).standard_normal(key[1], dtype=np.float32)
        table.setflags(write=False)
        _TABLES.clear()  # one table per process: an old size is not needed any more
        _TABLES[key] = table
    return table


def noise_slices(table: np.ndarray, indices: np.ndarray, dim: int) -> np.ndarray:
    """The perturbations of `indices` as an [N, dim] array (rows of the table)."""
    if len(indices) == 0:
        return np.zeros((0, dim), np.float32)
    return np.stack([table[int(i):int(i) + dim] for i in indices])


def policy_parameters(module: Any) -> list[torch.nn.Parameter]:
    """The parameters ES/ARS perturb, in a fixed order (the same on every runner's copy)."""
    return [p for p in module.parameters() if p.requires_grad]


def get_flat(params: list[torch.nn.Parameter]) -> np.ndarray:
    """`params` as one float32 vector."""
    with torch.no_grad():
        return torch.nn.utils.parameters_to_vector(params).detach().cpu().numpy().astype(np.float32)


def set_flat(params: list[torch.nn.Parameter], flat: np.ndarray) -> None:
    """Write the vector `flat` into `params` (in place)."""
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.as_tensor(flat, dtype=params[0].dtype), params)


def centered_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of all entries of `x` scaled to [-0.5, 0.5] (0 the lowest rank), in x's shape.

    Rank normalisation makes the update invariant to the scale of the returns and robust to
    outliers (Salimans et al., 2017)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    ranks = np.empty(flat.size, dtype=np.float64)
    ranks[flat.argsort(kind="stable")] = np.arange(flat.size)
    if flat.size > 1:
        ranks = ranks / (flat.size - 1) - 0.5
    else:
        ranks[:] = 0.0
    return ranks.reshape(np.shape(x)).astype(np.float32)


@dataclass
class PerturbationResults:
    """What runners return from evaluating perturbations (concatenated over runners)."""

    noise_indices: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: [N, 2]: the episode return of theta + sigma*eps and of theta - sigma*eps.
    returns: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.float32))
    lengths: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    #: Returns and lengths of episodes of the unperturbed theta (drawn with eval_prob).
    eval_returns: list[float] = field(default_factory=list)
    eval_lengths: list[int] = field(default_factory=list)

    @property
    def num_env_steps(self) -> int:
        """Env steps of all episodes."""
        return int(self.lengths.sum()) + int(sum(self.eval_lengths))

    @property
    def num_episodes(self) -> int:
        """Perturbed episodes (two per perturbation)."""
        return int(self.returns.size)

    def extend(self, other: "PerturbationResults") -> None:
        """Append another runner's results."""
        self.noise_indices = np.concatenate([self.noise_indices, other.noise_indices])
        self.returns = np.concatenate([self.returns, other.returns])
        self.lengths = np.concatenate([self.lengths, other.lengths])
        self.eval_returns.extend(other.eval_returns)
        self.eval_lengths.extend(other.eval_lengths)


@dataclass
class EvaluatePerturbations:
    """Run on an EnvRunner (via foreach_env_runner): evaluate `num_pairs` antithetic perturbations
    of `theta`, one episode each sign, plus an unperturbed episode with probability `eval_prob`
    per pair. The runner's parameters are `theta` again afterwards (the local runner's module is
    the Learner's). Returns (PerturbationResults, observation-filter delta or None)."""

    theta: np.ndarray
    num_pairs: int
    noise_stdev: float
    noise_seed: int
    noise_size: int
    seed: int
    eval_prob: float = 0.0
    action_noise_std: float = 0.0
    offset: float = 0.0

    def __call__(self, runner: Any) -> tuple[PerturbationResults, Any]:
        table = shared_noise_table(self.noise_seed, self.noise_size)
        params = policy_parameters(runner.module)
        dim = self.theta.size
        rng = np.random.default_rng([self.seed, int(runner.worker_index)])
        out = PerturbationResults(noise_indices=np.zeros(self.num_pairs, np.int64),
                                  returns=np.zeros((self.num_pairs, 2), np.float32),
                                  lengths=np.zeros((self.num_pairs, 2), np.int64))
        explore, restore = _action_noise(runner, self.action_noise_std)
        try:
            for k in range(self.num_pairs):
                if self.eval_prob > 0 and rng.random() < self.eval_prob:
                    set_flat(params, self.theta)
                    ret, length = _episode(runner, explore=False)
                    out.eval_returns.append(ret)
                    out.eval_lengths.append(length)
                index = int(rng.integers(0, self.noise_size - dim + 1))
                eps = table[index:index + dim]
                out.noise_indices[k] = index
                for sign, column in ((1.0, 0), (-1.0, 1)):
                    set_flat(params, self.theta + sign * self.noise_stdev * eps)
                    ret, length = _episode(runner, explore=explore)
                    out.returns[k, column] = ret - self.offset * length
                    out.lengths[k, column] = length
        finally:
            set_flat(params, self.theta)
            restore()
        runner_filter = runner.filter
        has_state = getattr(runner_filter, "has_state", not runner_filter.is_identity)
        delta = runner_filter.pop_delta() if has_state and runner.worker_index > 0 else None
        return out, delta


def _episode(runner: Any, explore: bool) -> tuple[float, int]:
    """One episode on the runner's first sub-env: (return, length)."""
    batch = runner.sample(num_episodes=1, explore=explore)
    valid = batch["valid"][:, 0]
    return float(batch["rewards"][:, 0][valid].sum()), int(valid.sum())


def _action_noise(runner: Any, std: float) -> tuple[bool, Any]:
    """ES's action noise: on Box action spaces, perturbed episodes add N(0, std) to the
    deterministic action (RLlib's `action_noise_std`); elsewhere they act deterministically.
    Returns (explore flag for the perturbed episodes, a function that undoes the change)."""
    import gymnasium as gym

    space = getattr(runner, "module_action_space", None) or runner.action_space
    if std <= 0 or not isinstance(space, gym.spaces.Box):
        return False, lambda: None
    from rlx.utils.exploration.gaussian_noise import GaussianNoise

    # The runner's Exploration turns the module's output into actions; swapped for the call.
    original = runner.exploration
    runner.exploration = GaussianNoise(space, random_timesteps=0, stddev=std, initial_scale=1.0, final_scale=1.0)

    def restore() -> None:
        runner.exploration = original

    return True, restore


def evaluate_perturbations(env_runner_group: Any, theta: np.ndarray, *, min_pairs: int, min_env_steps: int,
                           noise_stdev: float, noise_seed: int, noise_size: int, seed: int,
                           eval_prob: float = 0.0, action_noise_std: float = 0.0,
                           offset: float = 0.0) -> PerturbationResults:
    """Evaluate at least `min_pairs` antithetic perturbations of `theta` and at least
    `min_env_steps` env steps, spread evenly over the remote runners (or the local runner when
    there are none). The observation statistics the remote runners gathered are merged into the
    local runner's filter and sent back out."""
    if noise_size < theta.size:
        from rlx.utils.errors import ConfigError

        raise ConfigError(f"noise_size ({noise_size}) is smaller than the policy's {theta.size} parameters; raise "
                          "noise_size (it should be many times larger).")
    remote = env_runner_group.num_remote_env_runners() > 0
    num_runners = max(1, env_runner_group.num_healthy_remote_workers()) if remote else 1
    results = PerturbationResults()
    round_no = 0
    while results.returns.shape[0] < min_pairs or results.num_env_steps < min_env_steps:
        pairs = min_pairs - results.returns.shape[0]
        if pairs <= 0:  # enough pairs, too few steps: estimate the pairs left from the episode lengths
            per_pair = max(1.0, float(results.lengths.sum(axis=1).mean()))
            pairs = math.ceil((min_env_steps - results.num_env_steps) / per_pair)
        call = EvaluatePerturbations(theta=theta, num_pairs=max(1, math.ceil(pairs / num_runners)),
                                     noise_stdev=noise_stdev, noise_seed=noise_seed, noise_size=noise_size,
                                     seed=int(seed) * 1000 + round_no, eval_prob=eval_prob,
                                     action_noise_std=action_noise_std, offset=offset)
        answers = env_runner_group.foreach_env_runner(call, local_env_runner=not remote)
        local = env_runner_group.local_env_runner
        for part, delta in answers:
            results.extend(part)
            if delta is not None and local is not None:
                local.filter.merge_delta(delta)
        if remote and local is not None and getattr(local.filter, "has_state", not local.filter.is_identity):
            env_runner_group.sync_filters(local)
        round_no += 1
    return results

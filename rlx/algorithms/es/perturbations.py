"""What ES and ARS share: the seeded noise table, the policy as one flat parameter vector, rank
normalisation, and the evaluation of antithetic perturbations on the EnvRunners.

Every process regenerates the noise table from (seed, size) instead of receiving it, so a
perturbation travels as one integer: its offset into the table. A runner evaluates theta +
sigma * eps and theta - sigma * eps (eps = table[i:i + dim]) for one episode each and returns the
offsets and the two returns; the driver looks the same noise up to estimate the gradient.

Multi-agent: theta is {module_id: flat vector} over the trainable policies (sorted by id), and
one perturbation perturbs all of them at once with one slice of the table, read as their
concatenation: policy k's noise starts at `index + offset_k` (`module_offsets`). An episode's
return for a policy is the sum of the rewards of the agents mapped to it; each policy's
learner ranks its own returns and steps its own vector. A single-agent run is the one-module
case ({"default_policy": theta}).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from rlx.core.config_view import ResolvedConfig
from rlx.core.rl_module.agent_mapping import DEFAULT_POLICY_ID
from rlx.utils.errors import ConfigError
from rlx.utils.exploration.gaussian_noise import GaussianNoise

#: The noise table's seed when config.seed is None (all processes must agree on it).
DEFAULT_NOISE_SEED = 123

_TABLES: dict[tuple[int, int], np.ndarray] = {}


def noise_seed(config: ResolvedConfig) -> int:
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


def module_offsets(thetas: dict[str, np.ndarray]) -> tuple[dict[str, int], int]:
    """({module_id: where its noise starts within a perturbation's slice}, total dimension)."""
    offsets, total = {}, 0
    for module_id, theta in thetas.items():
        offsets[module_id] = total
        total += int(theta.size)
    return offsets, total


def policy_parameters(module: Any) -> list[torch.nn.Parameter]:
    """The parameters ES/ARS perturb, in a fixed order (the same on every runner's copy)."""
    return [p for p in module.parameters() if p.requires_grad]


def get_flat(params: Sequence[torch.Tensor]) -> np.ndarray:
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
    #: {module_id: [N, 2]}: each policy's episode return under theta + sigma*eps and theta - sigma*eps.
    module_returns: dict[str, np.ndarray] = field(default_factory=dict)
    #: [N, 2]: env steps of the two episodes.
    lengths: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    #: Per policy, the returns of episodes of the unperturbed theta (drawn with eval_prob), and their lengths.
    eval_returns: dict[str, list[float]] = field(default_factory=dict)
    eval_lengths: list[int] = field(default_factory=list)

    @property
    def returns(self) -> np.ndarray:
        """[N, 2]: the episodes' returns summed over the policies (single-agent: the policy's)."""
        if not self.module_returns:
            return np.zeros((self.noise_indices.shape[0], 2), np.float32)
        return np.sum(list(self.module_returns.values()), axis=0).astype(np.float32)

    @property
    def num_env_steps(self) -> int:
        """Env steps of all episodes."""
        return int(self.lengths.sum()) + int(sum(self.eval_lengths))

    @property
    def num_pairs(self) -> int:
        """Perturbations evaluated."""
        return int(self.noise_indices.shape[0])

    @property
    def num_episodes(self) -> int:
        """Perturbed episodes (two per perturbation)."""
        return 2 * self.num_pairs

    def extend(self, other: "PerturbationResults") -> None:
        """Append another runner's results."""
        for module_id, returns in other.module_returns.items():
            mine = self.module_returns.get(module_id, np.zeros((self.num_pairs, 2), np.float32))
            self.module_returns[module_id] = np.concatenate([mine, returns])
        self.noise_indices = np.concatenate([self.noise_indices, other.noise_indices])
        self.lengths = np.concatenate([self.lengths, other.lengths])
        for module_id, eval_returns in other.eval_returns.items():
            self.eval_returns.setdefault(module_id, []).extend(eval_returns)
        self.eval_lengths.extend(other.eval_lengths)


def _as_module_dict(theta: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(theta) if isinstance(theta, dict) else {DEFAULT_POLICY_ID: theta}


def runner_module(runner: Any, module_id: str) -> Any:
    """The RLModule `module_id` acts with on `runner` (a single-agent runner's one module)."""
    module = runner.module
    return module[module_id] if hasattr(module, "keys") and callable(module.keys) else module


@dataclass
class EvaluatePerturbations:
    """Run on an EnvRunner (via foreach_env_runner): evaluate `num_pairs` antithetic perturbations
    of `theta` ({module_id: flat vector}, or one vector for a single-agent runner), one episode
    each sign, plus an unperturbed episode with probability `eval_prob` per pair. Policies not in
    `theta` act unperturbed. The runner's parameters are `theta` again afterwards (the local
    runner's modules are the Learners'). Returns (PerturbationResults, observation-filter delta or None)."""

    theta: np.ndarray | dict[str, np.ndarray]
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
        thetas = _as_module_dict(self.theta)
        params = {mid: policy_parameters(runner_module(runner, mid)) for mid in thetas}
        offsets, dim = module_offsets(thetas)
        rng = np.random.default_rng([self.seed, int(runner.worker_index)])
        out = PerturbationResults(noise_indices=np.zeros(self.num_pairs, np.int64),
                                  module_returns={mid: np.zeros((self.num_pairs, 2), np.float32) for mid in thetas},
                                  lengths=np.zeros((self.num_pairs, 2), np.int64),
                                  eval_returns={mid: [] for mid in thetas})

        def set_all(index: int | None, sign: float) -> None:
            for mid, theta in thetas.items():
                if index is None:
                    set_flat(params[mid], theta)
                else:
                    start = index + offsets[mid]
                    set_flat(params[mid], theta + sign * self.noise_stdev * table[start:start + theta.size])

        explore, restore = _action_noise(runner, self.action_noise_std)
        try:
            for k in range(self.num_pairs):
                if self.eval_prob > 0 and rng.random() < self.eval_prob:
                    set_all(None, 0.0)
                    returns, _, length = _episode(runner, explore=False)
                    for mid in thetas:
                        out.eval_returns[mid].append(returns.get(mid, 0.0))
                    out.eval_lengths.append(length)
                index = int(rng.integers(0, self.noise_size - dim + 1))
                out.noise_indices[k] = index
                for sign, column in ((1.0, 0), (-1.0, 1)):
                    set_all(index, sign)
                    returns, agent_steps, length = _episode(runner, explore=explore)
                    for mid in thetas:
                        out.module_returns[mid][k, column] = \
                            returns.get(mid, 0.0) - self.offset * agent_steps.get(mid, 0)
                    out.lengths[k, column] = length
        finally:
            set_all(None, 0.0)
            restore()
        runner_filter = runner.filter
        has_state = getattr(runner_filter, "has_state", not runner_filter.is_identity)
        delta = runner_filter.pop_delta() if has_state and runner.worker_index > 0 else None
        return out, delta


def _episode(runner: Any, explore: bool) -> tuple[dict[str, float], dict[str, int], int]:
    """One episode on the runner's first sub-env: ({module_id: return}, {module_id: agent steps},
    env steps). A policy's return sums the rewards of every agent mapped to it."""
    batch = runner.sample(num_episodes=1, explore=explore)
    policy_batches = getattr(batch, "policy_batches", None)
    if policy_batches is None:  # a single-agent runner: its one module, column 0 (the first sub-env)
        valid = batch["valid"][:, 0]
        length = int(valid.sum())
        return {DEFAULT_POLICY_ID: float(batch["rewards"][:, 0][valid].sum())}, {DEFAULT_POLICY_ID: length}, length
    returns, agent_steps = {}, {}
    for module_id, module_batch in policy_batches.items():
        rewards = module_batch["rewards"]
        valid = module_batch.get("valid")
        valid = np.ones(rewards.shape, bool) if valid is None else valid
        returns[module_id] = float(rewards[valid].sum())
        agent_steps[module_id] = int(valid.sum())
    return returns, agent_steps, int(batch.env_steps())


class _Deterministic:
    """An Exploration that always takes the deterministic action (a discrete policy's, while
    a Box policy of the same runner explores with action noise)."""

    def __init__(self, original: Any):
        self.original = original

    def __getattr__(self, name: str) -> Any:
        if name == "original":
            raise AttributeError(name)
        return getattr(self.original, name)

    def get_exploration_action(self, *, action_distribution: Any, timestep: Any, explore: bool = True) -> Any:
        return self.original.get_exploration_action(action_distribution=action_distribution, timestep=timestep,
                                                    explore=False)


def _action_noise(runner: Any, std: float) -> tuple[bool, Any]:
    """ES's action noise: on Box action spaces, perturbed episodes add N(0, std) to the
    deterministic action (RLlib's `action_noise_std`); elsewhere they act deterministically.
    A multi-agent runner's policies each get their own. Returns (explore flag for the perturbed
    episodes, a function that undoes the change)."""
    import gymnasium as gym

    # The Exploration of each module (a multi-agent runner's slots; a single-agent runner itself)
    # turns the module's output into actions; swapped for the call.
    holders = list(runner.slots.values()) if hasattr(runner, "slots") else [runner]

    def space(holder: Any) -> Any:
        return getattr(holder, "module_action_space", None) or holder.action_space

    boxes = [h for h in holders if isinstance(space(h), gym.spaces.Box)]
    if std <= 0 or not boxes:
        return False, lambda: None
    originals = [(h, h.exploration) for h in holders]
    for holder in holders:
        if isinstance(space(holder), gym.spaces.Box):
            holder.exploration = GaussianNoise(space(holder), random_timesteps=0, stddev=std, initial_scale=1.0,
                                               final_scale=1.0)
        else:
            holder.exploration = _Deterministic(holder.exploration)

    def restore() -> None:
        for holder, original in originals:
            holder.exploration = original

    return True, restore


def evaluate_perturbations(env_runner_group: Any, theta: np.ndarray | dict[str, np.ndarray], *, min_pairs: int,
                           min_env_steps: int, noise_stdev: float, noise_seed: int, noise_size: int, seed: int,
                           eval_prob: float = 0.0, action_noise_std: float = 0.0,
                           offset: float = 0.0) -> PerturbationResults:
    """Evaluate at least `min_pairs` antithetic perturbations of `theta` ({module_id: vector} or
    one vector) and at least `min_env_steps` env steps, spread evenly over the remote runners (or
    the local runner when there are none). The observation statistics the remote runners
    gathered are merged into the local runner's filters and sent back out."""
    thetas = _as_module_dict(theta)
    _, dim = module_offsets(thetas)
    if noise_size < dim:
        raise ConfigError(f"noise_size ({noise_size}) is smaller than the {dim} parameters perturbed together "
                          f"(policies {sorted(thetas)}); raise noise_size (it should be many times larger).")
    remote = env_runner_group.num_remote_env_runners() > 0
    num_runners = max(1, env_runner_group.num_healthy_remote_workers()) if remote else 1
    results = PerturbationResults(module_returns={mid: np.zeros((0, 2), np.float32) for mid in thetas},
                                  eval_returns={mid: [] for mid in thetas})
    round_no = 0
    while results.num_pairs < min_pairs or results.num_env_steps < min_env_steps:
        pairs = min_pairs - results.num_pairs
        if pairs <= 0:  # enough pairs, too few steps: estimate the pairs left from the episode lengths
            per_pair = max(1.0, float(results.lengths.sum(axis=1).mean()))
            pairs = math.ceil((min_env_steps - results.num_env_steps) / per_pair)
        call = EvaluatePerturbations(theta=thetas, num_pairs=max(1, math.ceil(pairs / num_runners)),
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

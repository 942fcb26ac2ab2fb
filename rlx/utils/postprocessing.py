"""Return and advantage estimators over time-major arrays [T, B]: the one GAE of rlx.

Everything that computes advantages or value targets calls these: the PPO family's Learners
(PPO, A2C, PG, APPO, recurrent PPO), MARWIL's value targets, the GeneralAdvantageEstimation
learner connector, IMPALA's cuts, and the old API's `rlx.evaluation.postprocessing`.

* `discounted_cumsum`: y[t] = x[t] + discount[t] * y[t + 1], the recursion under all of them.
* `compute_gae` / `discounted_returns`: GAE(gamma, lambda) and bootstrapped discounted returns
  of [T, B] arrays, given V(s_t) and V(s_{t+1}).
* `estimate_advantages`: advantages, value targets and V(s_t) of a time-major train batch with a
  module's value function (`episode_dones`, `bootstrap_mask`, `state_values`,
  `next_state_values` are its steps); `advantages_from_values` when the values come from
  elsewhere (recurrent modules run over sequences).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from rlx.core.columns import Columns

__all__ = [
    "advantages_from_values", "bootstrap_mask", "compute_gae", "discounted_cumsum", "discounted_returns",
    "episode_dones", "estimate_advantages", "next_state_values", "state_values",
]


def discounted_cumsum(x: np.ndarray, discounts: Any, initial: Any = None) -> np.ndarray:
    """y[t] = x[t] + discounts[t] * y[t + 1] backwards along axis 0, with y[T] = `initial` (0
    when None), in x's dtype. `discounts` is a number or an array shaped like x (0 where a
    trajectory is cut)."""
    x = np.asarray(x)
    out = np.empty_like(x)
    per_step = np.ndim(discounts) > 0
    running = initial
    for t in range(x.shape[0] - 1, -1, -1):
        discount = discounts[t] if per_step else discounts
        running = x[t] if running is None else x[t] + discount * running
        out[t] = running
    return out


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over a [T, B] rollout.

    `next_values[t]` is V(s_{t+1}) for the observation that followed step t (the final
    observation at a truncation), `terminateds[t]` cuts the bootstrap, and `dones[t]`
    (terminated or truncated, or padding) cuts the recursion between episodes.

    Returns (advantages, value_targets) with value_targets = advantages + values.
    """
    not_term = 1.0 - terminateds.astype(np.float32)
    not_done = 1.0 - dones.astype(np.float32)
    deltas = rewards + gamma * next_values * not_term - values
    advantages = discounted_cumsum(deltas, gamma * lambda_ * not_done).astype(np.float32, copy=False)
    return advantages, advantages + values


def discounted_returns(
    rewards: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    dones: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """Discounted returns over [T, B], bootstrapped with next_values where an episode
    was cut without terminating (truncation or the end of the rollout)."""
    not_term = 1.0 - terminateds.astype(np.float32)
    # gamma multiplies values: it has their precision (float64 with float64 values).
    not_done = 1.0 - dones.astype(np.result_type(rewards, next_values, np.float32))
    boot = next_values * not_term
    # At a cut (done but not terminated) the return restarts from the bootstrap value.
    cut_returns = rewards + gamma * ((1.0 - not_done) * boot)
    return discounted_cumsum(cut_returns, gamma * not_done, initial=boot[-1]).astype(np.float32, copy=False)


# ---------------------------------------------------------------------- time-major train batches


def episode_dones(batch: Mapping[str, np.ndarray]) -> np.ndarray:
    """Where each [T, B] trajectory is cut: terminated, truncated, or a padding row."""
    dones = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
    valid = batch.get(Columns.VALID)
    return dones | ~valid if valid is not None else dones


def bootstrap_mask(batch: Mapping[str, np.ndarray]) -> np.ndarray:
    """[T, B]: the steps whose V(s_{t+1}) is not the next row's value but that of the stored next
    observation, because the episode was cut there (truncation, the end of the rollout, or padding)."""
    term = batch[Columns.TERMINATEDS]
    valid = batch.get(Columns.VALID)
    need = batch[Columns.TRUNCATEDS].copy()
    need[-1] |= ~term[-1]
    if valid is not None:
        need &= valid
        # The last valid step of each env in a padded batch needs its own bootstrap.
        need[:-1] |= valid[:-1] & ~valid[1:] & ~term[:-1]
    return need


def _values(module: Any, obs: np.ndarray) -> np.ndarray:
    """module.compute_values of a flat batch of observations, as a float32 NumPy array."""
    import torch

    from rlx.core.learner.device import module_device, to_device

    with torch.no_grad():
        obs = np.ascontiguousarray(obs)
        # (A read-only array, e.g. from Ray's object store, is copied: torch warns about sharing it.)
        tensor = to_device(torch.from_numpy(obs if obs.flags.writeable else obs.copy()), module_device(module))
        return module.compute_values({Columns.OBS: tensor}).float().cpu().numpy()


def state_values(module: Any, obs: np.ndarray) -> np.ndarray:
    """V(obs) of a time-major [T, B, ...] observation array, as a [T, B] array."""
    return _values(module, obs.reshape((-1,) + obs.shape[2:])).reshape(obs.shape[:2])


def next_state_values(module: Any, batch: Mapping[str, np.ndarray], values: np.ndarray) -> np.ndarray:
    """V(s_{t+1}) for every step of a time-major batch, given `values` = V(s_t) ([T, B]): the next
    row's value, or where the episode was cut (`bootstrap_mask`) that of the stored next observation."""
    next_values = np.zeros_like(values)
    next_values[:-1] = values[1:]
    rows, cols = np.nonzero(bootstrap_mask(batch))
    if rows.size:
        next_values[rows, cols] = _values(module, batch[Columns.NEXT_OBS][rows, cols])
    return next_values


def advantages_from_values(batch: Mapping[str, np.ndarray], values: np.ndarray, next_values: np.ndarray, *,
                           gamma: float, lambda_: float = 1.0, use_gae: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(advantages, value_targets), each [T, B], of a time-major batch given V(s_t) and V(s_{t+1}):
    GAE(gamma, lambda_) with `use_gae`, else discounted returns minus V(s_t)."""
    rewards = batch[Columns.REWARDS]
    term = batch[Columns.TERMINATEDS]
    dones = episode_dones(batch)
    if use_gae:
        return compute_gae(rewards, values, next_values, term, dones, gamma, lambda_)
    targets = discounted_returns(rewards, next_values, term, dones, gamma)
    return targets - values, targets


def estimate_advantages(module: Any, batch: Mapping[str, np.ndarray], *, gamma: float, lambda_: float = 1.0,
                        use_critic: bool = True, use_gae: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(advantages, value_targets, vf_preds), each [T, B], of a time-major batch: GAE (`use_gae`,
    `lambda_`) or discounted returns minus V with the module's value function (`use_critic`), or
    plain discounted returns without one (REINFORCE; vf_preds are then zeros)."""
    rewards = batch[Columns.REWARDS]
    if not use_critic:
        zeros = np.zeros_like(rewards)
        returns = discounted_returns(rewards, zeros, batch[Columns.TERMINATEDS], episode_dones(batch), gamma)
        return returns, returns, zeros
    values = state_values(module, batch[Columns.OBS])
    next_values = next_state_values(module, batch, values)
    adv, targets = advantages_from_values(batch, values, next_values, gamma=gamma, lambda_=lambda_, use_gae=use_gae)
    return adv, targets, values

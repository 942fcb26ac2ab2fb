"""V-trace off-policy value targets and policy-gradient advantages (Espeholt et al., 2018, sec. 4.1).

For a trajectory x_s, a_s, r_s sampled by a behaviour policy mu and a target policy pi:

    rho_t   = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))           (clip_rho_threshold)
    c_t     = min(c_bar,   pi(a_t|x_t) / mu(a_t|x_t))           (clip_c_threshold, 1 in the paper)
    delta_t = rho_t * (r_t + gamma_t * V(x_{t+1}) - V(x_t))
    v_s     = V(x_s) + sum_{t>=s} (prod_{s<=i<t} gamma_i * c_i) * delta_t
            = V(x_s) + delta_s + gamma_s * c_s * (v_{s+1} - V(x_{s+1}))     (the recursion used here)
    A_s     = min(rho_pg_bar, pi/mu)_s * (r_s + gamma_s * v_{s+1} - V(x_s))   (clip_pg_rho_threshold)

Batches are time-major [T, B]. gamma_t is `gamma` except after a termination (0). Where a
trajectory is cut (`dones`: termination, truncation, padding) the sum stops: v_{s+1} is then the
value of the observation that followed, V(x_{s+1}) = `next_values[s]`, as at the end of the batch.
"""
from __future__ import annotations

import numpy as np
import torch


@torch.no_grad()
def vtrace(
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminateds: torch.Tensor,
    dones: torch.Tensor,
    gamma: float,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(vs, pg_advantages), each [T, B]: the V-trace value targets and policy-gradient advantages.

    Args:
        behaviour_logp: log mu(a_t|x_t), the sampling policy's log-probabilities.
        target_logp: log pi(a_t|x_t), the policy being evaluated.
        rewards: r_t.
        values: V(x_t).
        next_values: V(x_{t+1}), the value of the observation that followed step t.
        terminateds: whether step t ended its episode (no bootstrap after it).
        dones: whether the trajectory is cut after step t (terminated, truncated or padding).
        gamma: the discount.
        clip_rho_threshold, clip_pg_rho_threshold, clip_c_threshold: rho_bar, rho_pg_bar, c_bar.
    """
    ratios = torch.exp(target_logp - behaviour_logp)
    rhos = ratios.clamp(max=clip_rho_threshold)
    cs = ratios.clamp(max=clip_c_threshold)
    discounts = gamma * (1.0 - terminateds.float())
    deltas = rhos * (rewards + discounts * next_values - values)
    carry = (1.0 - dones.float()) * discounts * cs
    # corrections[t] = v_t - V(x_t), accumulated backwards in time (in NumPy: a loop of small ops).
    deltas_np, carry_np = deltas.cpu().numpy(), carry.cpu().numpy()
    corrections_np = np.zeros_like(deltas_np)
    acc = np.zeros_like(deltas_np[0])
    for t in range(deltas_np.shape[0] - 1, -1, -1):
        acc = deltas_np[t] + carry_np[t] * acc
        corrections_np[t] = acc
    corrections = torch.from_numpy(corrections_np).to(values.device)
    vs = values + corrections
    # v_{t+1}: the next row's target, or V(x_{t+1}) where the trajectory is cut or the batch ends.
    next_corrections = torch.zeros_like(corrections)
    next_corrections[:-1] = corrections[1:]
    vs_next = next_values + (1.0 - dones.float()) * next_corrections
    pg_rhos = ratios.clamp(max=clip_pg_rho_threshold)
    pg_advantages = pg_rhos * (rewards + discounts * vs_next - values)
    return vs, pg_advantages

"""Actions from a trained Algorithm (`compute_single_action` / `compute_actions`), RLlib's old
inference API: the observation is preprocessed and filtered as during sampling, then the
Policy view of the local EnvRunner's module acts on it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm


def compute_single_action(algo: "Algorithm", observation: Any, state: list | None, *, input_dict: dict | None,
                          policy_id: str, full_fetch: bool, explore: bool | None, timestep: int | None,
                          unsquash_action: bool | None, clip_action: bool | None) -> Any:
    """The action of `policy_id` for one observation (or `input_dict["obs"]`); with
    `full_fetch` or a `state`, `(action, state_out, extra_fetches)`."""
    if observation is None and input_dict is not None:
        observation = input_dict.get("obs")
    if observation is None:
        raise ValueError("compute_single_action() needs an observation.")
    policy = algo.get_policy(policy_id)
    # The Policy takes filtered observations (RLlib's recipe: preprocess, filter, then the policy).
    action, state_out, extra = policy.compute_single_action(
        policy.filter_observation(observation), state, explore=explore, timestep=timestep,
        unsquash_action=unsquash_action, clip_action=clip_action,
    )
    if full_fetch or state:
        return action, state_out, extra
    return action


def compute_actions(algo: "Algorithm", observations: Any, state: list | None, *, policy_id: str, full_fetch: bool,
                    explore: bool | None, timestep: int | None, unsquash_actions: bool | None,
                    clip_actions: bool | None) -> Any:
    """Actions of `policy_id` for several observations: a dict {key: obs} gives a dict, a batch
    an array; with `full_fetch` or a `state`, `(actions, state_out, extra_fetches)`."""
    policy = algo.get_policy(policy_id)
    if isinstance(observations, dict):
        keys = list(observations)
        actions, state_out, extra = policy.compute_actions(
            policy.filter_observations([observations[k] for k in keys]), explore=explore,
            timestep=timestep, unsquash_actions=unsquash_actions, clip_actions=clip_actions,
        )
        out = {k: actions[i] for i, k in enumerate(keys)}
    else:
        out, state_out, extra = policy.compute_actions(
            policy.filter_observations(observations), explore=explore, timestep=timestep,
            unsquash_actions=unsquash_actions, clip_actions=clip_actions,
        )
    if full_fetch or state:
        return out, state_out, extra
    return out

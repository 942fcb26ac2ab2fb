"""One join per batch kind and one advantage estimation, whoever calls them.

Single- and multi-agent time-major batches are joined by the same function (a single-agent
batch is one module's), and the GAE learner connector, PPO's Learner and the old API's
`compute_advantages` all estimate advantages with rlx.utils.postprocessing.
"""
from __future__ import annotations

import numpy as np

from rlx.algorithms.ppo import PPOConfig
from rlx.connectors.learner import GeneralAdvantageEstimation
from rlx.core.columns import Columns
from rlx.env.env_runner_group import concat_batches, join_runner_batches
from rlx.policy.sample_batch import MultiAgentBatch


def time_major(T: int, B: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {Columns.OBS: rng.normal(size=(T, B, 3)).astype(np.float32),
            Columns.ACTIONS: rng.integers(0, 2, size=(T, B)),
            Columns.REWARDS: rng.normal(size=(T, B)).astype(np.float32),
            Columns.TERMINATEDS: rng.random((T, B)) < 0.1,
            Columns.TRUNCATEDS: np.zeros((T, B), bool)}


def assert_same_batch(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def as_multi_agent(batch: dict) -> MultiAgentBatch:
    return MultiAgentBatch({"default_policy": batch}, env_steps=batch[Columns.REWARDS].size)


def test_single_and_multi_agent_batches_join_alike():
    # Runners' fragments of equal length: every row is real, so no `valid` column either way.
    runners = [time_major(5, 2, seed) for seed in range(3)]
    side_by_side = join_runner_batches(runners)
    assert Columns.VALID not in side_by_side and side_by_side[Columns.REWARDS].shape == (5, 6)
    assert_same_batch(join_runner_batches([as_multi_agent(b) for b in runners])["default_policy"], side_by_side)
    in_time = concat_batches(runners)
    assert Columns.VALID not in in_time and in_time[Columns.REWARDS].shape == (15, 2)
    assert_same_batch(concat_batches([as_multi_agent(b) for b in runners])["default_policy"], in_time)

    # A shorter fragment is padded with rows marked invalid, single- and multi-agent alike.
    uneven = [time_major(5, 2, 0), time_major(3, 1, 1)]
    joined = join_runner_batches(uneven)
    assert joined[Columns.VALID].tolist() == [[True, True, True]] * 3 + [[True, True, False]] * 2
    assert_same_batch(join_runner_batches([as_multi_agent(b) for b in uneven])["default_policy"], joined)


def test_the_gae_connector_estimates_what_ppos_learner_trains_on():
    # With a MeanStdFilter, the stored next observation of a step and the next step's observation
    # were filtered with different statistics: both estimators must take the same values.
    algo = (PPOConfig().environment("CartPole-v1").env_runners(observation_filter="MeanStdFilter")
            .training(train_batch_size=256, minibatch_size=64, num_epochs=1, lambda_=0.9)
            .debugging(seed=0).build())
    try:
        batch = algo.env_runner.sample(num_timesteps=64)
        adv, targets, values = algo.learner.compute_advantages(batch)
        out = GeneralAdvantageEstimation(gamma=algo.config.gamma, lambda_=0.9)(
            rl_module=algo.learner.rl_module, batch=dict(batch), episodes=[])
        np.testing.assert_array_equal(out[Columns.ADVANTAGES], adv)
        np.testing.assert_array_equal(out[Columns.VALUE_TARGETS], targets)
        np.testing.assert_array_equal(out[Columns.VF_PREDS], values)
    finally:
        algo.stop()


def test_old_api_compute_advantages_is_the_one_gae():
    from rlx.evaluation.postprocessing import Postprocessing, compute_advantages
    from rlx.utils.postprocessing import compute_gae

    rng = np.random.default_rng(3)
    rewards = rng.normal(size=40).astype(np.float32)
    vf_preds = rng.normal(size=40).astype(np.float32)
    rollout = compute_advantages({"rewards": rewards, "vf_preds": vf_preds}, last_r=0.7, gamma=0.97, lambda_=0.93)
    next_values = np.append(vf_preds[1:], np.float32(0.7))
    no_cut = np.zeros((40, 1), bool)
    adv, targets = compute_gae(rewards[:, None], vf_preds[:, None], next_values[:, None], no_cut, no_cut, 0.97, 0.93)
    np.testing.assert_array_equal(rollout[Postprocessing.ADVANTAGES], adv[:, 0])
    np.testing.assert_array_equal(rollout[Postprocessing.VALUE_TARGETS], targets[:, 0])

"""Multi-agent ES, ARS, APEX-DQN and APEX-DDPG (issue 19): how one perturbation perturbs every
trainable policy and how each policy's return is its agents' rewards; per-policy updates,
filters and priorities; policies_to_train; checkpoints; learning on 2-agent CartPole.

Learning bars (fixed seeds, CI-sized): on MultiAgentCartPole with 2 agents, every policy's
mean episode return reaches 100 (a random policy: about 22) within the step budget.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.algorithms.apex_ddpg import ApexDDPGConfig
from rlx.algorithms.apex_dqn import ApexDQN, ApexDQNConfig
from rlx.algorithms.ars import ARSConfig
from rlx.algorithms.es import ES, ESConfig
from rlx.algorithms.es.perturbations import EvaluatePerturbations, shared_noise_table
from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole, MultiAgentPendulum
from rlx.utils.errors import ConfigError

SMALL_NOISE = 200_000
RETURN_BAR = 100.0


def _per_agent(agent_id, *args, **kwargs):
    return f"p{agent_id}"


def _shared(agent_id, *args, **kwargs):
    return "shared"


def _two_policies(config, policies_to_train=None):
    return (config.environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=_per_agent, policies_to_train=policies_to_train)
            .debugging(seed=0))


def small_ars(**training):
    return ARSConfig().training(**{"num_rollouts": 8, "rollouts_used": 4, "noise_size": SMALL_NOISE,
                                   "noise_stdev": 0.05, "sgd_stepsize": 0.05, **training})


def small_es(**training):
    config = ESConfig().training(**{"episodes_per_batch": 16, "train_batch_size": 1000, "noise_size": SMALL_NOISE,
                                    "noise_stdev": 0.05, "stepsize": 0.05, "eval_prob": 0.0, **training})
    config.model.update({"fcnet_hiddens": [16]})
    return config


def small_apex_dqn(num_env_runners: int = 0):
    config = (ApexDQNConfig()
              .env_runners(num_env_runners=num_env_runners, rollout_fragment_length=16)
              .training(lr=2e-3, train_batch_size=64, training_intensity=8, target_network_update_freq=500,
                        num_steps_sampled_before_learning_starts=1000, replay_buffer_config={"capacity": 50000})
              .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=1000,
                         metrics_num_episodes_for_smoothing=20))
    config.model.update({"fcnet_hiddens": [64], "fcnet_activation": "tanh"})
    return config


def _weights(algo, module_id):
    return {k: np.array(v) for k, v in algo.get_weights()[module_id].items()}


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _train_until(algo, budget, bar=RETURN_BAR):
    """Train until every policy's mean episode return reaches `bar`; (reached, progress)."""
    progress = []
    try:
        while True:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            modules = result["env_runners"].get("module_episode_returns_mean") or {}
            progress.append((steps, {m: round(v, 1) for m, v in modules.items()}))
            if len(modules) == len(algo.policy_ids) and min(modules.values()) >= bar:
                return True, progress
            if steps >= budget:
                return False, progress
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- ES / ARS mechanics


def test_one_perturbation_perturbs_every_policy_with_its_own_part_of_the_noise_slice():
    """p0's noise is table[i:i+d0], p1's table[i+d0:i+d0+d1]; each policy's return is the sum of
    its agents' rewards (CartPole: +1 per agent step); the weights are theta again afterwards."""
    algo = _two_policies(small_es()).build()
    try:
        runner = algo.env_runner_group.local_env_runner
        thetas = {mid: learner.get_flat_weights() for mid, learner in algo.trainable_learners().items()}
        assert list(thetas) == ["p0", "p1"]
        seen = []
        original_sample = runner.sample

        def sample(**kwargs):
            seen.append({mid: algo.learner_by_module()[mid].get_flat_weights() for mid in thetas})
            batch = original_sample(**kwargs)
            seen[-1]["agent_steps"] = {mid: int(b.get("valid", np.ones_like(b["rewards"], bool)).sum())
                                       for mid, b in batch.policy_batches.items()}
            seen[-1]["env_steps"] = batch.env_steps()
            return batch

        runner.sample = sample
        results, _ = EvaluatePerturbations(theta=thetas, num_pairs=2, noise_stdev=0.1, noise_seed=0,
                                           noise_size=SMALL_NOISE, seed=0)(runner)
        table = shared_noise_table(0, SMALL_NOISE)
        d0 = thetas["p0"].size
        for k, index in enumerate(results.noise_indices):
            for sign, episode in ((1.0, seen[2 * k]), (-1.0, seen[2 * k + 1])):
                np.testing.assert_allclose(episode["p0"], thetas["p0"] + sign * 0.1 * table[index:index + d0],
                                           atol=1e-6)
                np.testing.assert_allclose(episode["p1"], thetas["p1"] + sign * 0.1 *
                                           table[index + d0:index + d0 + thetas["p1"].size], atol=1e-6)
        for k in range(2):
            for column in range(2):
                episode = seen[2 * k + column]
                for mid in ("p0", "p1"):
                    assert results.module_returns[mid][k, column] == episode["agent_steps"][mid]
                assert results.lengths[k, column] == episode["env_steps"]
        np.testing.assert_array_equal(results.returns, results.module_returns["p0"] + results.module_returns["p1"])
        for mid, theta in thetas.items():
            np.testing.assert_array_equal(algo.learner_by_module()[mid].get_flat_weights(), theta)
    finally:
        algo.stop()


def test_each_policy_is_updated_from_its_own_returns_and_noise():
    algo = _two_policies(small_ars()).build()
    try:
        learners = algo.learner_by_module()
        d0 = learners["p0"].get_flat_weights().size
        batches = {}
        for mid, learner in learners.items():
            def recording(batch, timestep, _mid=mid, _update=learner.update_from_batch):
                batches[_mid] = {k: np.array(v) for k, v in batch.items()}
                return _update(batch, timestep)

            learner.update_from_batch = recording
        result = algo.train()
        np.testing.assert_array_equal(batches["p1"]["noise_indices"], batches["p0"]["noise_indices"] + d0)
        assert batches["p0"]["returns"].shape == batches["p1"]["returns"].shape == (8, 2)
        assert not np.array_equal(batches["p0"]["returns"], batches["p1"]["returns"])
        for mid in ("p0", "p1"):
            stats = result["learners"][mid]
            assert stats["num_perturbations"] == 8
            assert stats["perturbed_return_mean"] == pytest.approx(float(batches[mid]["returns"].mean()))
        # Each policy's observations went through its own MeanStdFilter.
        filters = algo.env_runner_group.local_env_runner.filters
        assert filters["p0"] is not filters["p1"] and filters["p0"].count > 0 and filters["p1"].count > 0
    finally:
        algo.stop()


def test_remote_runners_merge_each_policys_filter_statistics_and_get_every_policys_weights():
    algo = _two_policies(small_es()).env_runners(num_env_runners=2, env_runner_backend="thread").build()
    try:
        algo.train()
        group = algo.env_runner_group
        local = {mid: f.count for mid, f in group.local_env_runner.filters.items()}
        remote = group.foreach_env_runner(lambda r: {mid: f.count for mid, f in r.filters.items()},
                                          local_env_runner=False)
        assert remote == [local, local] and min(local.values()) > 0
        weights = algo.get_weights()
        for runner_weights in group.foreach_env_runner(lambda r: r.get_weights(), local_env_runner=False):
            for mid in ("p0", "p1"):
                assert _same({k: np.asarray(v) for k, v in runner_weights[mid].items()},
                             {k: np.asarray(v) for k, v in weights[mid].items()})
    finally:
        algo.stop()


def test_action_noise_applies_to_every_box_policy_and_is_undone():
    config = (small_es(episodes_per_batch=4, train_batch_size=100)
              .environment(MultiAgentPendulum, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=_per_agent).debugging(seed=0))
    algo = config.build()
    try:
        runner = algo.env_runner_group.local_env_runner
        originals = {mid: slot.exploration for mid, slot in runner.slots.items()}
        original_sample, seen = runner.sample, []

        def sample(**kwargs):
            seen.append((kwargs["explore"], {mid: (type(slot.exploration).__name__,
                                                   getattr(slot.exploration, "stddev", None))
                                             for mid, slot in runner.slots.items()}))
            return original_sample(**kwargs)

        runner.sample = sample
        algo.train()
        assert seen and all(explore for explore, _ in seen)
        assert all(per_policy == {"p0": ("GaussianNoise", 0.01), "p1": ("GaussianNoise", 0.01)}
                   for _, per_policy in seen)
        assert {mid: slot.exploration for mid, slot in runner.slots.items()} == originals
    finally:
        algo.stop()


@pytest.mark.parametrize("make_config", [small_es, small_ars], ids=["es", "ars"])
def test_policies_to_train_leaves_the_other_policy_unchanged(make_config):
    algo = _two_policies(make_config(), policies_to_train=["p0"]).build()
    try:
        before = {mid: _weights(algo, mid) for mid in ("p0", "p1")}
        result = algo.train()
        assert set(result["learners"]) >= {"p0"} and "p1" not in result["learners"]
        assert _same(_weights(algo, "p1"), before["p1"])
        assert not _same(_weights(algo, "p0"), before["p0"])
    finally:
        algo.stop()


def test_no_policy_to_train_is_a_clear_error():
    algo = _two_policies(small_ars(), policies_to_train=[]).build()
    try:
        with pytest.raises(ConfigError, match="policies_to_train"):
            algo.train()
    finally:
        algo.stop()


def test_multi_agent_es_checkpoint_restores_every_policy_and_filter(tmp_path):
    algo = _two_policies(small_es()).build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "ckpt"))
        weights = {mid: _weights(algo, mid) for mid in ("p0", "p1")}
        filters = {mid: f.get_state() for mid, f in algo.env_runner_group.local_env_runner.filters.items()}
    finally:
        algo.stop()
    restored = ES.from_checkpoint(path)
    try:
        for mid in ("p0", "p1"):
            assert _same(_weights(restored, mid), weights[mid])
            state = restored.env_runner_group.local_env_runner.filters[mid].get_state()
            assert repr(state) == repr(filters[mid])
        restored.train()
    finally:
        restored.stop()


# ----------------------------------------------------------------------------- ES / ARS learning


def test_ars_trains_two_policies_on_two_agent_cartpole():
    reached, progress = _train_until(_two_policies(small_ars()).build(), budget=30_000)
    assert reached, f"both policies did not reach {RETURN_BAR} within 30k env steps: {progress}"


def test_es_trains_one_shared_policy_for_both_agents():
    config = (small_es().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .multi_agent(policies={"shared"}, policy_mapping_fn=_shared).debugging(seed=0))
    # The shared policy's return is both agents' rewards: 2 * RETURN_BAR.
    reached, progress = _train_until(config.build(), budget=30_000, bar=2 * RETURN_BAR)
    assert reached, f"the shared policy did not reach {2 * RETURN_BAR} within 30k env steps: {progress}"


# ----------------------------------------------------------------------------- Ape-X


def test_apex_dqn_trains_two_policies_on_two_agent_cartpole():
    reached, progress = _train_until(_two_policies(small_apex_dqn()).build(), budget=10_000)
    assert reached, f"both policies did not reach {RETURN_BAR} within 10k env steps: {progress}"


def test_apex_priorities_are_written_back_per_policy():
    algo = _two_policies(small_apex_dqn()).build()
    try:
        algo.train()
        algo.train()
        buffers = algo.local_replay_buffer.replay_buffers
        assert set(buffers) == {"p0", "p1"}
        for buffer in buffers.values():
            leaves = buffer._sum_tree[np.arange(len(buffer))]
            # New rows get max_priority ** alpha; replayed ones got (|TD error| + eps) ** alpha.
            assert (leaves != buffer.max_priority ** buffer.alpha).sum() > 0
    finally:
        algo.stop()


def test_apex_policies_to_train_leaves_the_other_policy_unchanged():
    algo = _two_policies(small_apex_dqn(), policies_to_train=["p1"]).build()
    try:
        before = {mid: _weights(algo, mid) for mid in ("p0", "p1")}
        result = algo.train()
        result = algo.train()
        assert "p0" not in result["learners"] and "p1" in result["learners"]
        assert _same(_weights(algo, "p0"), before["p0"])
        assert not _same(_weights(algo, "p1"), before["p1"])
    finally:
        algo.stop()


def test_apex_per_worker_epsilons_apply_to_every_policy_on_remote_runners():
    algo = _two_policies(small_apex_dqn(num_env_runners=3)).env_runners(env_runner_backend="thread").build()
    try:
        eps = dict(algo.env_runner_group.foreach_env_runner(
            lambda r: (r.worker_index, {m: s.exploration.epsilon(10**6) for m, s in r.slots.items()}),
            local_env_runner=False))
        result = algo.train()
        while result["num_env_steps_trained_lifetime"] == 0:
            result = algo.train()
        assert set(result["learners"]) == {"p0", "p1"}
    finally:
        algo.stop()
    expected = {1: 0.4, 2: 0.4 ** 4.5, 3: 0.4 ** 8}
    assert eps.keys() == expected.keys()
    for index, per_policy in eps.items():
        assert per_policy == pytest.approx({"p0": expected[index], "p1": expected[index]})


def test_multi_agent_apex_checkpoint_round_trip(tmp_path):
    """Weights of both policies, the replayed-step count and (store_buffer_in_checkpoints) each
    policy's prioritized buffer with its priorities."""
    algo = _two_policies(small_apex_dqn().update_from_dict({"store_buffer_in_checkpoints": True})).build()

    def priorities(algo):
        return {m: b._sum_tree[np.arange(len(b))].copy() for m, b in algo.local_replay_buffer.replay_buffers.items()}

    try:
        algo.train()
        algo.train()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        weights = {mid: _weights(algo, mid) for mid in ("p0", "p1")}
        replayed, saved = algo._replayed_steps, priorities(algo)
    finally:
        algo.stop()
    restored = ApexDQN.from_checkpoint(path)
    try:
        assert restored._replayed_steps == replayed > 0
        restored_priorities = priorities(restored)
        assert restored_priorities.keys() == saved.keys() == {"p0", "p1"}
        for mid, leaves in saved.items():
            np.testing.assert_array_equal(restored_priorities[mid], leaves)
        for mid in ("p0", "p1"):
            assert _same(_weights(restored, mid), weights[mid])
        restored.train()
    finally:
        restored.stop()


def test_apex_ddpg_updates_two_policies_with_per_policy_priorities():
    """Two Pendulum agents, two policies, driver-side sampling: both policies' buffers get their
    new priorities and both actors move. (Learning Pendulum takes longer than CI allows; the
    single-agent tuned example covers APEX-DDPG's learning.)"""
    config = (ApexDDPGConfig().environment(MultiAgentPendulum, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=_per_agent)
              .env_runners(num_env_runners=0, rollout_fragment_length=8)
              .training(train_batch_size=32, training_intensity=4, actor_hiddens=[16], critic_hiddens=[16],
                        num_steps_sampled_before_learning_starts=100, replay_buffer_config={"capacity": 5000})
              .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=200)
              .debugging(seed=0))
    algo = config.build()
    try:
        before = {mid: _weights(algo, mid) for mid in ("p0", "p1")}
        result = algo.train()
        assert set(result["learners"]) == {"p0", "p1"}
        assert all(math.isfinite(result["learners"][m]["critic_loss"]) for m in ("p0", "p1"))
        for mid, buffer in algo.local_replay_buffer.replay_buffers.items():
            leaves = buffer._sum_tree[np.arange(len(buffer))]
            assert (leaves != buffer.max_priority ** buffer.alpha).sum() > 0, mid
            assert not _same(_weights(algo, mid), before[mid])
    finally:
        algo.stop()

"""One learner container: each module's Learner is local or a group of data-parallel learner
processes, decided per module from `num_learners`; single-agent is the one-module case.

Multi-agent training with `learners(num_learners=2)` used to be refused. Now every module gets
its own LearnerGroup of 2 processes; the tests train two policies that way until they balance
CartPole, round-trip a checkpoint, and check the per-module metrics and learner surface.
"""
from __future__ import annotations

import pytest

import math

import numpy as np

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.core.learner_group import LearnerGroup

from process_helpers import process_gone

#: Mean return of each of the two CartPole agents to reach, within ENV_STEP_BUDGET env steps.
PER_AGENT_RETURN = 200.0
ENV_STEP_BUDGET = 100_000


def two_policy_cartpole(num_learners: int = 2, **training) -> PPOConfig:
    """Two CartPole agents, agent i acting with policy p<i>, trained with `num_learners`."""
    from rlx.env.multi_agent_env import make_multi_agent

    two_cartpoles = make_multi_agent("CartPole-v1")
    opts = dict(train_batch_size=2000, minibatch_size=250, num_epochs=6, lr=0.001)
    opts.update(training)
    return (PPOConfig().environment(two_cartpoles, env_config={"num_agents": 2})
            .env_runners(num_envs_per_env_runner=4)  # 4 trajectories per policy: 2 per learner
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
            .training(**opts)
            .learners(num_learners=num_learners)
            .debugging(seed=0))


def assert_weights_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]), err_msg=name)


@pytest.mark.slow
def test_multi_agent_ppo_with_two_learners_per_module_learns():
    algo = two_policy_cartpole().build()
    progress = []
    try:
        while True:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            per_agent = result["env_runners"]["agent_episode_returns_mean"]
            mean = min(per_agent.values()) if len(per_agent) == 2 else math.nan
            progress.append((steps, round(mean, 1)))
            if mean >= PER_AGENT_RETURN or steps > ENV_STEP_BUDGET:
                break
        # Both policies trained through their own groups of two learner processes.
        assert set(result["learners"]) >= {"p0", "p1"}
        for module_id in ("p0", "p1"):
            assert isinstance(algo.learner.by_module()[module_id], LearnerGroup)
            assert np.isfinite(result["learners"][module_id]["total_loss"])
    finally:
        algo.stop()
    assert mean >= PER_AGENT_RETURN, \
        f"each agent's return did not reach {PER_AGENT_RETURN} in {ENV_STEP_BUDGET} env steps: {progress}"


@pytest.mark.slow
def test_two_learners_per_module_report_per_module_metrics_and_round_trip_a_checkpoint(tmp_path):
    algo = two_policy_cartpole(train_batch_size=400, minibatch_size=100, num_epochs=2).build()
    restored = None
    try:
        groups = algo.learner.by_module()
        assert set(groups) == {"p0", "p1"}
        assert all(isinstance(g, LearnerGroup) and g.num_learners == 2 for g in groups.values())
        assert len({pid for g in groups.values() for pid in g.pids}) == 4
        assert not algo.learner_group.is_local
        for module_id, group in groups.items():
            # The local EnvRunner acts with the module the group updates: no copy to sync.
            assert algo.env_runner.module[module_id] is group.module

        result = algo.train()
        result = algo.train()
        for module_id in ("p0", "p1"):
            stats = result["learners"][module_id]
            for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "curr_lr", "curr_kl_coeff"):
                assert np.isfinite(stats[key]), (module_id, key)
            assert stats["num_minibatch_updates"] >= 2  # 2 epochs of minibatches of 100 rows
            assert result["info"]["learner"][module_id]["learner_stats"]["total_loss"] == stats["total_loss"]
        # Every rank of a module's group holds the weights the driver has.
        driver = algo.get_weights()
        for module_id, group in groups.items():
            for weights in group.foreach_learner(lambda learner: learner.get_weights()):
                assert_weights_equal(weights, driver[module_id])
        # The two modules trained apart: their weights differ.
        assert any(not np.array_equal(driver["p0"][k], driver["p1"][k]) for k in driver["p0"])
        extra = algo.learner.get_extra_state()
        assert set(extra) == {"p0", "p1"} and extra["p0"]["num_grad_updates"] > 0

        path = algo.save(str(tmp_path / "ckpt"))
        restored = Algorithm.from_checkpoint(path)
        assert restored.iteration == 2
        restored_groups = restored.learner.by_module()
        assert all(isinstance(g, LearnerGroup) and g.num_learners == 2 for g in restored_groups.values())
        for module_id, group in restored_groups.items():
            for weights in group.foreach_learner(lambda learner: learner.get_weights()):
                assert_weights_equal(weights, driver[module_id])
            ours = groups[module_id].optimizer.state_dict()
            theirs = group.optimizer.state_dict()
            for i in ours["state"]:
                np.testing.assert_array_equal(ours["state"][i]["exp_avg_sq"], theirs["state"][i]["exp_avg_sq"])
        restored_extra = restored.learner.get_extra_state()
        for module_id in ("p0", "p1"):
            for key in ("num_grad_updates", "kl_coeff"):
                assert restored_extra[module_id][key] == extra[module_id][key]
        assert set(restored.train()["learners"]) >= {"p0", "p1"}
    finally:
        pids = [pid for g in algo.learner.by_module().values() for pid in g.pids]
        if restored is not None:
            pids += [pid for g in restored.learner.by_module().values() for pid in g.pids]
            restored.stop()
        algo.stop()
    assert all(process_gone(pid) for pid in pids)


@pytest.mark.slow
def test_a_policy_added_to_a_run_with_learner_processes_gets_its_own_group():
    algo = two_policy_cartpole(train_batch_size=400, minibatch_size=100, num_epochs=1).build()
    try:
        algo.train()
        p0 = algo.get_policy("p0")
        algo.add_policy("p2", observation_space=p0.observation_space, action_space=p0.action_space,
                        policy_mapping_fn=lambda agent_id, *args, **kwargs: "p0" if agent_id == 0 else "p2")
        group = algo.learner.by_module()["p2"]
        assert isinstance(group, LearnerGroup) and group.num_learners == 2
        assert set(algo.train()["learners"]) >= {"p0", "p2"}  # agent 1 now trains p2, in p2's group
        weights = algo.get_weights(["p2"])["p2"]
        for rank_weights in group.foreach_learner(lambda learner: learner.get_weights()):
            assert_weights_equal(rank_weights, weights)
        pids = list(group.pids)
        algo.remove_policy("p2", policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
        assert "p2" not in algo.learner.by_module()
        assert all(process_gone(pid) for pid in pids)  # a removed module's learner processes stop
        assert set(algo.train()["learners"]) >= {"p0", "p1"}
    finally:
        algo.stop()


def test_num_learners_is_decided_per_module():
    from rlx.algorithms.ppo.ppo_learner import PPOLearner

    config = two_policy_cartpole(num_learners=1, train_batch_size=400, minibatch_size=100, num_epochs=1)
    # learner_device: a Learner in the driver trains its own copy of the modules (as on a GPU).
    algo = (config.multi_agent(algorithm_config_overrides_per_module={"p1": {"num_learners": 0}})
            .learners(learner_device="cpu").build())
    try:
        learners = algo.learner.by_module()
        assert isinstance(learners["p0"], LearnerGroup) and learners["p0"].num_learners == 1
        assert isinstance(learners["p1"], PPOLearner)  # p1 trains in the driver
        assert not algo.learner_group.is_local
        assert algo.learner.module is not algo.env_runner.module
        result = algo.train()
        assert all(np.isfinite(result["learners"][m]["total_loss"]) for m in ("p0", "p1"))
        driver = algo.get_weights()
        assert_weights_equal(learners["p0"].foreach_learner(lambda learner: learner.get_weights())[0], driver["p0"])
        # The EnvRunner acts with the weights both modules trained to.
        acting = algo.env_runner.module.get_state()
        for module_id in ("p0", "p1"):
            assert_weights_equal(acting[module_id], driver[module_id])
        assert algo.learner.foreach_learner(lambda learner: type(learner).__name__) == ["PPOLearner", "PPOLearner"]
    finally:
        algo.stop()


def test_single_agent_and_local_multi_agent_learners_are_the_one_module_case():
    from rlx.core.learner.container import LearnerContainer, module_learners
    from rlx.algorithms.ppo.ppo_learner import PPOLearner

    algo = two_policy_cartpole(num_learners=0, train_batch_size=400, minibatch_size=100, num_epochs=1).build()
    single = (PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=64, num_epochs=1)
              .debugging(seed=0).build())
    try:
        assert isinstance(algo.learner, LearnerContainer) and algo.learner_group.is_local
        assert all(isinstance(l, PPOLearner) for l in algo.learner.by_module().values())
        # A single-agent run keeps its Learner as algo.learner; the container's view of it has one module.
        assert isinstance(single.learner, PPOLearner)
        view = module_learners(single.learner)
        assert view.by_module() == {"default_policy": single.learner}
        assert_weights_equal(view.get_weights()["default_policy"], single.learner.get_weights())
        assert module_learners(algo.learner) is algo.learner
    finally:
        algo.stop()
        single.stop()

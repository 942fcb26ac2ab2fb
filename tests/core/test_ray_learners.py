"""Learners as Ray actors (`learner_backend="ray"`, or "auto" with Ray initialised): the same
updates as one Learner, batches as ObjectRefs, multi-module runs, and a learner actor that is
killed mid-training replaced without stopping train().

The shared local Ray instance (tests/conftest.py `local_ray`: 4 logical CPUs) for the whole module.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402
from rlx.algorithms.ppo.ppo_learner import PPOLearner  # noqa: E402
from rlx.core.learner_group import LearnerGroup  # noqa: E402

import test_learner_group as lg  # noqa: E402  (tests/core: the process backend's helpers)


@pytest.fixture(scope="module", autouse=True)
def ray_instance(local_ray):
    local_ray()
    # The test Learner classes live in a test module Ray's workers cannot import.
    ray.cloudpickle.register_pickle_by_value(lg)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.cloudpickle.unregister_pickle_by_value(lg)
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _my_actors() -> list:
    """The alive learner actors' ids, from the GCS's actor table (ray.util.state needs the
    dashboard, which this module's Ray instance runs without)."""
    from ray._private.state import actors

    return [actor_id for actor_id, info in actors().items()
            if info["State"] == "ALIVE" and "_LearnerActor" in str(info.get("ActorClassName"))]


def _start_like(group: LearnerGroup, fresh) -> None:
    group.set_weights(fresh.get_weights())
    group.set_extra_state(fresh.get_extra_state())
    for name, optimizer in fresh.optimizers.items():
        group.optimizers[name].load_state_dict(optimizer.state_dict())


def _assert_unplaceable_learners_are_a_clear_error(caplog) -> None:
    """2 learners x 3 CPUs (more than the 4 CPUs of this Ray instance) fail fast with an error
    naming the shortfall and the option, after a warning while waiting (PLACEMENT_TIMEOUT_S and
    WARN_AFTER_S patched by the caller to 3 s and 1 s)."""
    from rlx.utils.ray_placement_wait import PlacementTimeoutError

    config = lg.regression_config().learners(learner_backend="ray", num_cpus_per_learner=3)
    started = time.perf_counter()
    with caplog.at_level("WARNING", logger="rlx"), \
            pytest.raises(PlacementTimeoutError, match=r"6 CPU .* 4 CPU in all .*num_cpus_per_learner"):
        LearnerGroup(config, lg.TwoHeadRegressionLearner, lg.make_module(0), num_learners=2)
    assert time.perf_counter() - started < 30
    assert any("Waiting up to 3 s for Ray to place the 2 learner actor(s)" in r.getMessage() for r in caplog.records)


def test_ray_learners_error_when_unplaceable_then_match_one_learner_take_refs_survive_a_kill(monkeypatch, caplog):
    import rlx.core.learner.ray_learners as ray_learners
    import rlx.utils.ray_placement_wait as placement_wait

    config = lg.regression_config().learners(learner_backend="auto")  # auto: Ray is initialised
    jobs = len(ray._private.state.jobs())
    with monkeypatch.context() as patch:
        patch.setattr(ray_learners, "PLACEMENT_TIMEOUT_S", 3.0)
        patch.setattr(placement_wait, "WARN_AFTER_S", 1.0)
        _assert_unplaceable_learners_are_a_clear_error(caplog)
        # Nothing stays reserved: the group that fits (the one all checks below use) is placed
        # right after, within the same 3 s.
        group = LearnerGroup(config, lg.TwoHeadRegressionLearner, lg.make_module(0), num_learners=2)
    try:
        assert group.learner_backend == "ray"
        assert len(ray._private.state.jobs()) == jobs  # the actors are part of the driver's job
        assert set(group.actor_ids) <= set(_my_actors())  # Ray actors (the GCS lists them)
        # The rendezvous is rank 0's node address, as Ray knows it (not a hard-wired loopback).
        addresses = group.foreach_learner(lambda learner: __import__("os").environ["MASTER_ADDR"])
        assert addresses == [ray.util.get_node_ip_address()] * 2

        # 1. An update of 2 actors == one Learner on the whole batch.
        fresh = lg.TwoHeadRegressionLearner(lg.regression_config(), lg.make_module(0))
        _start_like(group, fresh)
        batch = lg.regression_batch((64,))
        single, single_metrics = lg.local_update(lg.TwoHeadRegressionLearner, lg.regression_config(), batch)
        metrics = group.update_from_batch(batch, timestep=100)
        assert metrics["num_minibatches"] == single_metrics["num_minibatches"] == 8
        assert metrics["pi_loss"] == pytest.approx(single_metrics["pi_loss"], rel=1e-5)
        lg.assert_weights_close(group.get_weights(), single.get_weights(), rtol=1e-5, atol=1e-6)
        ranks = group.foreach_learner(lambda learner: learner.get_weights())
        lg.assert_weights_equal(ranks[0], ranks[1])

        # 2. The same with the batch as an ObjectRef: each actor fetches it and takes its shard.
        _start_like(group, fresh)
        tm_batch = lg.regression_batch((16, 4))
        single, single_metrics = lg.local_update(lg.TwoHeadRegressionLearner, lg.regression_config(), tm_batch)
        metrics = group.update_from_batch(ray.put(tm_batch), timestep=100)
        assert metrics["pi_loss"] == pytest.approx(single_metrics["pi_loss"], rel=1e-5)
        np.testing.assert_allclose(metrics["initial_sq_error"], single_metrics["initial_sq_error"], rtol=1e-6)
        lg.assert_weights_close(group.get_weights(), single.get_weights(), rtol=1e-5, atol=1e-6)

        # 3. A killed actor: the update goes on at once on the survivor (nothing raised), from the
        # driver's weights with the optimizer state the survivor held; a replacement joins later.
        old_ids = list(group.actor_ids)
        ray.kill(group._handles[1].actor, no_restart=True)
        for update in range(40):
            before = group.get_extra_state()["num_grad_updates"]
            before_step = [float(p["step"]) for p in group.optimizers["default"].state_dict()["state"].values()]
            metrics = group.update_from_batch(batch, timestep=200 + update)
            assert group.is_healthy and group.actor_ids[0] == old_ids[0] and old_ids[1] not in group.actor_ids
            # Counted once: the lost attempt left no trace in the update counts, and Adam went on
            # from the survivor's moments (a fresh optimizer would be back at step == the new steps).
            steps = metrics["num_minibatches"]
            assert group.get_extra_state()["num_grad_updates"] == before + steps
            after_step = [float(p["step"]) for p in group.optimizers["default"].state_dict()["state"].values()]
            assert after_step == [s + steps for s in before_step]
            if len(group.actor_ids) == 2:
                break
            time.sleep(0.5)
        assert len(group.actor_ids) == 2 and steps == 8  # the replacement joined: 2 ranks again
        ranks = group.foreach_learner(lambda learner: (learner.get_weights(), learner.get_extra_state()))
        lg.assert_weights_equal(ranks[0][0], ranks[1][0])
        assert ranks[0][1]["num_grad_updates"] == ranks[1][1]["num_grad_updates"]
    finally:
        ids = list(group.actor_ids)
        group.stop()
    time.sleep(1.0)  # ray.kill is asynchronous
    assert not set(_my_actors()) & set(ids)


def test_ppo_update_on_ray_actors_matches_one_learner():
    batch = lg.ppo_batch(T=16, B=4)
    single, single_metrics = lg.local_update(PPOLearner, lg.ppo_config(), batch)
    group = LearnerGroup(lg.ppo_config().learners(learner_backend="ray"), PPOLearner, lg.make_module(0),
                         num_learners=2)
    try:
        metrics = group.update_from_batch(batch, timestep=64)
        for key in ("policy_loss", "vf_loss", "total_loss", "mean_kl_loss", "entropy"):
            assert metrics[key] == pytest.approx(single_metrics[key], rel=1e-4, abs=1e-7), key
        lg.assert_weights_close(group.get_weights(), single.get_weights(), rtol=1e-4, atol=1e-6)
        assert group.get_extra_state()["kl_coeff"] == single.kl_coeff
    finally:
        group.stop()


def test_multi_agent_ppo_trains_each_module_on_ray_learner_actors(tmp_path):
    from rlx.env.multi_agent_env import make_multi_agent

    config = (
        PPOConfig()
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1, model={"fcnet_hiddens": [16]})
        .learners(num_learners=1, learner_backend="ray")
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        groups = algo.learner.by_module()
        assert set(groups) == {"p0", "p1"}
        assert all(isinstance(g, LearnerGroup) and g.learner_backend == "ray" for g in groups.values())
        result = algo.train()
        for module_id in ("p0", "p1"):
            assert np.isfinite(result["learners"][module_id]["total_loss"])
            learner_weights = groups[module_id].foreach_learner(lambda learner: learner.get_weights())[0]
            lg.assert_weights_equal(learner_weights, algo.get_weights()[module_id])
        ids = set(_my_actors())
        assert all(set(g.actor_ids) <= ids for g in groups.values())

        # A checkpoint holds the actors' optimizer state; a restored run trains on new actors.
        from rlx.algorithms.algorithm import Algorithm

        path = algo.save(str(tmp_path / "ckpt"))
        restored = Algorithm.from_checkpoint(path)
        try:
            for module_id, group in restored.learner.by_module().items():
                assert group.learner_backend == "ray"
                lg.assert_weights_equal(group.get_weights(), algo.get_weights()[module_id])
                ours = groups[module_id].optimizer.state_dict()["state"]
                theirs = group.optimizer.state_dict()["state"]
                for i in ours:
                    np.testing.assert_array_equal(ours[i]["exp_avg_sq"], theirs[i]["exp_avg_sq"])
        finally:
            restored.stop()
    finally:
        algo.stop()


def test_learners_in_a_trial_placement_group_take_its_learner_bundles():
    """Inside a Tune trial (whose placement group ends with a bundle per learner, see
    rlx.algorithms.resources.trial_bundles) the learners reserve nothing more: with the trial's
    3 CPUs taken out of 4, a second reservation of 2 CPUs could never be granted."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    trial_pg = placement_group([{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}])
    ray.get(trial_pg.ready(), timeout=60)

    @ray.remote(num_cpus=1)
    def trial(config, learner_class, module, batch):
        group = LearnerGroup(config, learner_class, module, num_learners=2)
        try:
            group.update_from_batch(batch, timestep=1)
            return group._placement.pg.id.hex(), group._placement.first_bundle
        finally:
            group.stop()

    strategy = PlacementGroupSchedulingStrategy(trial_pg, placement_group_bundle_index=0,
                                                placement_group_capture_child_tasks=True)
    try:
        pg_id, first = ray.get(trial.options(scheduling_strategy=strategy).remote(
            lg.regression_config().learners(learner_backend="ray"), lg.TwoHeadRegressionLearner, lg.make_module(0),
            lg.regression_batch((32,))), timeout=120)
        assert pg_id == trial_pg.id.hex() and first == 1
    finally:
        remove_placement_group(trial_pg)


def test_learner_backend_process_keeps_processes_with_ray_initialised():
    group = LearnerGroup(lg.regression_config().learners(learner_backend="process"), lg.TwoHeadRegressionLearner,
                         lg.make_module(0), num_learners=1)
    try:
        assert group.learner_backend == "process" and group.actor_ids == [None]
    finally:
        group.stop()

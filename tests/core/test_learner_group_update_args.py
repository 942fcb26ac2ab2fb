"""RLlib 2.60's `LearnerGroup.update(...)` arguments beyond `batch=`: `episodes=`, `num_epochs`,
`minibatch_size`, `return_state` and `async_update`, on the local group (the Learner in the
driver) and on groups of learner processes (`num_learners > 0`), single- and multi-agent.

The VPG example algorithm is used: its Learner updates through the loss API (so it follows
`num_epochs`/`minibatch_size`) and its `build()` adds ComputeReturnsToGo to the learner
connector pipeline, which the group's `update(episodes=...)` must run too."""
from __future__ import annotations

import numpy as np
import pytest

from rlx.core.learner.async_updates import RL_MODULE_STATE_AFTER_UPDATE
from rlx.core.learner.learner_group import LearnerGroup, LearnerGroupError
from rlx.core.learner.ray_learners import is_object_ref


def vpg_config(num_learners: int, multi_agent: bool = False):
    """VPG on CartPole (two agents with `multi_agent`), seed 0, local EnvRunner only."""
    from rlx.examples.algorithms.classes.vpg import VPGConfig

    config = (VPGConfig().environment("CartPole-v1").env_runners(num_env_runners=0).training(lr=0.01)
              .learners(num_learners=num_learners, learner_backend="process").debugging(seed=0))
    if multi_agent:
        from rlx.env.multi_agent_env import make_multi_agent

        config = (config.environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
                  .multi_agent(policies={"p0", "p1"},
                               policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}"))
    return config


def adam_steps(group) -> list[int]:
    """Each learner's optimizer step count (Adam's `step` of its first parameter)."""
    return group.foreach_learner(lambda learner: int(next(iter(learner.optimizer.state_dict()["state"].values()))
                                                     ["step"]) if learner.optimizer.state_dict()["state"] else 0)


def state_of(result: dict) -> dict:
    """The state a `return_state=True` result holds (an ObjectRef when this process runs Ray,
    e.g. after an earlier test on the same pytest worker started it)."""
    state = result[RL_MODULE_STATE_AFTER_UPDATE]
    if is_object_ref(state):
        import ray

        state = ray.get(state)
    return state


def assert_weights_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]), err_msg=name)


def weights_differ(a: dict, b: dict) -> bool:
    return any(not np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def test_local_group_returns_state_and_refuses_async_as_rllib():
    algo = vpg_config(num_learners=0).build()
    try:
        group = algo.learner_group
        episodes = algo.env_runner.sample(num_episodes=2)
        with pytest.raises(ValueError, match="async_update=True when running in local mode"):
            group.update(episodes=episodes, async_update=True)
        before = group.get_weights()
        results = group.update(episodes=episodes, return_state=True)
        assert isinstance(results, list) and len(results) == 1
        state = state_of(results[0])
        after = group.get_weights()
    finally:
        algo.stop()
    assert np.isfinite(results[0]["default_policy"]["total_loss"])
    assert weights_differ(before, after)
    assert_weights_equal(state["rl_module"]["default_policy"], after)
    assert state["extra_state"]["default_policy"]["num_grad_updates"] >= 1


def test_learner_processes_update_on_episodes_with_epochs_minibatches_and_state():
    algo = vpg_config(num_learners=2).build()
    try:
        group = algo.learner  # the group itself (algo.learner_group views it: see the test below)
        assert isinstance(group, LearnerGroup) and group.num_learners == 2
        episodes = algo.env_runner.sample(num_episodes=3)
        rows = sum(len(e) for e in episodes)
        before = group.get_weights()
        steps0 = adam_steps(group)
        one = group.update(episodes=episodes, num_epochs=1, return_state=True)
        steps1 = adam_steps(group)
        two = group.update(episodes=episodes, num_epochs=2)
        steps2 = adam_steps(group)
        # minibatch_size counts all learners' rows: 16 per learner here.
        group.update(episodes=episodes, num_epochs=1, minibatch_size=32)
        steps3 = adam_steps(group)
        after = group.get_weights()
        learner_weights = group.foreach_learner(lambda learner: learner.get_weights())
    finally:
        algo.stop()
    assert set(one) == {"default_policy", RL_MODULE_STATE_AFTER_UPDATE} and set(two) == {"default_policy"}
    assert np.isfinite(one["default_policy"]["total_loss"])
    assert "action_0_return_to_go_mean" in one["default_policy"]  # ComputeReturnsToGo ran (VPG's build())
    # One pass over the whole batch is one step of each learner; two passes take twice as many.
    assert [b - a for a, b in zip(steps0, steps1)] == [1, 1]
    assert [b - a for a, b in zip(steps1, steps2)] == [2, 2]
    shard = (rows + 1) // 2  # rank 0's strided share of the rows
    assert [b - a for a, b in zip(steps2, steps3)] == [-(-shard // 16)] * 2
    assert weights_differ(before, after)
    for weights in learner_weights:  # the driver's module holds the learners' weights
        assert_weights_equal(weights, after)
    state = state_of(one)
    assert weights_differ(state["rl_module"]["default_policy"], after)  # the state after THAT update
    assert state["extra_state"]["default_policy"] is not None


def test_learner_processes_update_asynchronously_and_later_calls_see_every_update():
    algo = vpg_config(num_learners=2).build()
    try:
        group = algo.learner
        episodes = algo.env_runner.sample(num_episodes=2)
        start = adam_steps(group)
        assert group.update(episodes=episodes, async_update=True) == []  # never this update's result
        collected = group.update(episodes=episodes, async_update=True, return_state=True)
        collected += group.update(episodes=episodes, async_update=True)
        synced = group.get_weights()  # waits for the three updates
        assert [b - a for a, b in zip(start, adam_steps(group))] == [3, 3]
        for weights in group.foreach_learner(lambda learner: learner.get_weights()):
            assert_weights_equal(weights, synced)
        collected += group.update(episodes=episodes, async_update=True)
        assert len(collected) == 3 and all(np.isfinite(r["default_policy"]["total_loss"]) for r in collected)
        assert RL_MODULE_STATE_AFTER_UPDATE in collected[1] and RL_MODULE_STATE_AFTER_UPDATE not in collected[0]
        # A synchronous update waits for the fourth, then applies its own.
        group.update(episodes=episodes)
        assert [b - a for a, b in zip(start, adam_steps(group))] == [5, 5]
        # The wait is bounded: it says what waited for what.
        group.async_wait_timeout_s = 1e-6
        group.update(episodes=episodes, async_update=True)
        with pytest.raises(LearnerGroupError, match=r"get_weights\(\) waited .* async update"):
            group.get_weights()
        group.async_wait_timeout_s = 300.0
        group.get_weights()
        assert [b - a for a, b in zip(start, adam_steps(group))] == [6, 6]
    finally:
        algo.stop()


def test_multi_agent_groups_take_the_new_arguments_per_module():
    algo = vpg_config(num_learners=1, multi_agent=True).build()
    try:
        container = algo.learner
        groups = container.by_module()
        assert set(groups) == {"p0", "p1"} and all(isinstance(g, LearnerGroup) for g in groups.values())
        episodes = algo.env_runner.sample(num_episodes=2)
        start = {mid: adam_steps(g) for mid, g in groups.items()}
        result = container.update(episodes=episodes, num_epochs=2, return_state=True)
        assert {mid: [b - a for a, b in zip(start[mid], adam_steps(g))] for mid, g in groups.items()} == \
            {"p0": [2], "p1": [2]}
        state = state_of(result)
        weights = container.get_weights()
        for mid in ("p0", "p1"):
            assert np.isfinite(result[mid]["total_loss"])
            assert_weights_equal(state["rl_module"][mid], weights[mid])
        assert container.update(episodes=episodes, async_update=True) == []
        later = container.update(episodes=episodes, async_update=True, return_state=True)
        container.get_weights()
        later += container.update(episodes=episodes, async_update=True)
        weights = container.get_weights()
        assert len(later) == 2 and all(set(r) >= {"p0", "p1"} for r in later)
        assert {mid: [b - a for a, b in zip(start[mid], adam_steps(g))] for mid, g in groups.items()} == \
            {"p0": [5], "p1": [5]}
        assert set(state_of(later[1])["rl_module"]) == {"p0", "p1"}
    finally:
        algo.stop()
    assert weights.keys() == {"p0", "p1"}


def test_algorithms_learner_group_answers_rllibs_lists_and_vpg_trains_on_learner_processes():
    algo = vpg_config(num_learners=2).build()
    try:
        view = algo.learner_group
        assert view.is_remote and not view.is_local
        episodes = algo.env_runner.sample(num_episodes=2)
        [result] = view.update(episodes=episodes, return_state=True)  # RLlib's list of results
        assert np.isfinite(result["default_policy"]["total_loss"])
        assert_weights_equal(state_of(result)["rl_module"]["default_policy"], view.get_weights())
        assert view.update(episodes=episodes, async_update=True) == []
        # The example's training_step (sample episodes, learner_group.update, MetricsLogger.aggregate)
        # runs unchanged on learner processes.
        before = view.get_weights()
        results = [algo.train() for _ in range(2)]
        assert weights_differ(before, view.get_weights())
        assert all(np.isfinite(r["learners"]["default_policy"]["total_loss"]) for r in results)
    finally:
        algo.stop()


def test_group_update_refuses_unknown_arguments_and_bad_options():
    algo = vpg_config(num_learners=1).build()
    try:
        group = algo.learner_group
        episodes = algo.env_runner.sample(num_episodes=1)
        with pytest.raises(TypeError, match="unsupported arguments .*'foo'"):
            group.update(episodes=episodes, foo=1)
        with pytest.raises(ValueError, match="num_epochs=0"):
            group.update(episodes=episodes, num_epochs=0)
        with pytest.raises(ValueError, match="exactly one of batch= and episodes="):
            group.update()
    finally:
        algo.stop()


def test_ray_learner_actors_take_the_arguments_and_return_state_through_the_object_store(local_ray):
    ray = local_ray()
    algo = vpg_config(num_learners=1).learners(learner_backend="ray").build()
    try:
        group = algo.learner
        assert group.learner_backend == "ray"
        episodes = algo.env_runner.sample(num_episodes=2)
        start = adam_steps(group)
        result = group.update(episodes=episodes, num_epochs=2, return_state=True)
        ref = result[RL_MODULE_STATE_AFTER_UPDATE]
        assert isinstance(ref, ray.ObjectRef)
        assert_weights_equal(ray.get(ref)["rl_module"]["default_policy"], group.get_weights())
        assert [b - a for a, b in zip(start, adam_steps(group))] == [2]
        assert group.update(episodes=episodes, async_update=True) == []
        weights = group.get_weights()
        assert [b - a for a, b in zip(start, adam_steps(group))] == [3]
        assert_weights_equal(group.foreach_learner(lambda learner: learner.get_weights())[0], weights)
    finally:
        algo.stop()

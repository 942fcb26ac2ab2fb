"""Learners as Ray actors on a two-node cluster: PPO's learners spread over both nodes (one on
the node that is not the driver's) learn CartPole, also when one of them is killed mid-training;
DD-PPO's workers sample and train one per node.
"""
from __future__ import annotations

import time

from rlx.algorithms.ddppo import DDPPOConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.core.learner_group import LearnerGroup

#: Mean episode return that shows learning (a random policy scores about 20) within the CI budget.
THRESHOLD = 150.0


def _train_until(algo, threshold: float, budget_s: float, kill_learner_at: int = 0) -> float:
    """Train until the mean return reaches `threshold` (or `budget_s` passes); returns the best.
    With `kill_learner_at`, learner actor 1 is killed (ray.kill) before that iteration: train()
    must go on, and every iteration must count its sampled steps as trained exactly once."""
    import ray

    best, start, it = 0.0, time.monotonic(), 0
    trained = algo._counters["num_env_steps_trained_lifetime"]
    while time.monotonic() - start < budget_s:
        it += 1
        if it == kill_learner_at:
            ray.kill(algo.learner._handles[1].actor, no_restart=True)
        sampled = algo._counters["num_env_steps_sampled_lifetime"]
        result = algo.train()
        new_trained = algo._counters["num_env_steps_trained_lifetime"]
        assert new_trained - trained == algo._counters["num_env_steps_sampled_lifetime"] - sampled
        trained = new_trained
        best = max(best, float(result["env_runners"].get("episode_return_mean", 0.0) or 0.0))
        if best >= threshold:
            break
    return best


def _alive_learner_actors() -> dict[str, str]:
    """{actor id: node id} of the alive learner actors, from the GCS's actor table (the cluster
    runs without the dashboard that ray.util.state asks)."""
    from ray._private.state import actors

    return {actor_id: info["Address"]["NodeID"] for actor_id, info in actors().items()
            if info["State"] == "ALIVE" and "_LearnerActor" in str(info.get("ActorClassName"))}


def test_ppo_learners_are_actors_on_both_nodes_and_learn_cartpole(two_node_cluster):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=1, custom_resources_per_env_runner={"worker_node": 1})
        .resources(placement_strategy="SPREAD")
        .learners(num_learners=2)  # Ray is initialised: learner_backend "auto" -> Ray actors
        .training(train_batch_size=1000, minibatch_size=250, num_epochs=6, lr=1e-3,
                  model={"fcnet_hiddens": [32, 32]})
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        group = algo.learner
        assert isinstance(group, LearnerGroup) and group.learner_backend == "ray"
        actors = _alive_learner_actors()
        assert set(group.actor_ids) <= set(actors)
        nodes = {actors[actor_id] for actor_id in group.actor_ids}
        assert nodes == set(group.node_ids)
        assert two_node_cluster.worker_node_id in nodes  # one learner on the node that is not the driver's
        best = _train_until(algo, THRESHOLD, budget_s=40, kill_learner_at=2)
        assert best >= THRESHOLD
        assert group.is_healthy  # (the replacement joins at the first update after it is built)
    finally:
        algo.stop()


def test_ddppo_workers_sample_and_train_on_both_nodes(two_node_cluster):
    config = (
        DDPPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2, num_envs_per_env_runner=4, rollout_fragment_length=64)
        .resources(placement_strategy="STRICT_SPREAD")  # one worker per node
        .training(minibatch_size=64, num_epochs=6, lr=1e-3, model={"fcnet_hiddens": [32, 32]})
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        group = algo.learner
        assert group.learner_backend == "ray"
        actors = _alive_learner_actors()
        nodes = [actors[actor_id] for actor_id in group.actor_ids]
        assert set(nodes) == {two_node_cluster.head_node_id, two_node_cluster.worker_node_id}
        best = _train_until(algo, 100.0, budget_s=30)
        assert best >= 100.0
    finally:
        algo.stop()

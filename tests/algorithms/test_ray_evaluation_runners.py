"""Evaluation EnvRunners live where the training runners do: Ray actors when those are Ray
actors, with their own fault tolerance (a killed evaluation actor is replaced in the background
and evaluation goes on with the others)."""
from __future__ import annotations

import os
import sys
import time

import pytest

ray = pytest.importorskip("ray")

from rlx.algorithms.ppo import PPOConfig  # noqa: E402
from rlx.env.ray_env_runner import RayEnvRunner  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_session(local_ray):
    """The shared local Ray instance (4 CPUs), this module shipped by value to its workers, and
    rlx's algorithms registered with Tune. Tune's trials log under the Tuner's storage_path (the
    trial's logdir), never under RLX_RESULTS_DIR, so the instance need not be started anew."""
    local_ray()
    module = sys.modules[__name__]
    ray.cloudpickle.register_pickle_by_value(module)
    import rlx.tune  # noqa: F401 - registers rlx's algorithms with Tune

    yield
    ray.cloudpickle.unregister_pickle_by_value(module)


def runner_facts(runner):
    return runner.worker_index, runner.weights_seq_no, runner.config.in_evaluation, os.getpid()


def test_evaluation_runners_are_ray_actors_and_survive_a_kill():
    recreated = []
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=1, num_envs_per_env_runner=1, num_cpus_per_env_runner=0.5)
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
              .evaluation(evaluation_interval=1, evaluation_num_env_runners=2, evaluation_duration=4,
                          evaluation_duration_unit="episodes")
              .fault_tolerance(restart_failed_env_runners=True)
              .callbacks(on_env_runners_recreated=lambda **kw: recreated.append(
                  (list(kw["env_runner_indices"]), kw["is_evaluation"])))
              .debugging(seed=0))
    algo = config.build()  # env_runner_backend "auto": Ray actors, Ray being initialised
    try:
        result = algo.train()
        group = algo.eval_env_runner_group
        assert group.backend == "ray"
        handles = group.remote_workers()
        assert len(handles) == 2 and all(isinstance(h, RayEnvRunner) for h in handles)
        assert result["evaluation"]["env_runners"]["num_episodes"] == 4
        facts = group.foreach_env_runner(runner_facts, local_env_runner=False)
        assert [f[0] for f in facts] == [1, 2]
        assert all(seq_no == algo.iteration and in_eval and pid != os.getpid() for _, seq_no, in_eval, pid in facts)

        victim = handles[1]
        victim.kill()
        result = algo.train()  # evaluates on the runner left while the killed one restarts
        assert result["evaluation"]["env_runners"]["num_episodes"] == 4
        deadline = time.monotonic() + 60
        while recreated != [([2], True)] and time.monotonic() < deadline:
            result = algo.train()
            assert result["evaluation"]["env_runners"]["num_episodes"] == 4
        assert recreated == [([2], True)]
        replacement = group.remote_workers()[1]
        assert replacement is not victim and isinstance(replacement, RayEnvRunner)
        assert group.num_healthy_remote_workers() == 2 and group.num_remote_worker_restarts == 1
        assert algo.env_runner_group.num_remote_worker_restarts == 0  # the training runner was not touched
        result = algo.train()
        assert result["evaluation"]["num_healthy_workers"] == 2
        facts = group.foreach_env_runner(runner_facts, local_env_runner=False)
        assert [seq_no for _, seq_no, _, _ in facts] == [algo.iteration] * 2  # both evaluated these weights
    finally:
        algo.stop()


def test_a_tune_trial_places_evaluation_runners_in_their_own_bundles(tmp_path):
    # The trial reserves [Algorithm, training runner, evaluation runner] (1 CPU each). An
    # evaluation actor that took the training runner's bundle would wait forever for its CPU
    # (the time budget turns that into a failed trial).
    from ray import tune

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=1, num_cpus_per_env_runner=1)
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
              .evaluation(evaluation_interval=1, evaluation_num_env_runners=1, evaluation_duration=2))
    results = tune.Tuner(
        "PPO", param_space=config.to_dict(), tune_config=tune.TuneConfig(time_budget_s=60),
        run_config=tune.RunConfig(name="eval_bundles", storage_path=str(tmp_path), verbose=0,
                                  stop={"training_iteration": 1}),
    ).fit()
    [result] = list(results)
    assert result.error is None
    assert result.metrics["training_iteration"] == 1
    assert result.metrics["evaluation"]["env_runners"]["num_episodes"] == 2
    assert result.metrics["evaluation"]["num_healthy_workers"] == 1

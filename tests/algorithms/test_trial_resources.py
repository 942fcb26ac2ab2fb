"""What a Tune trial of an Algorithm reserves (Algorithm.default_resource_request): the
Algorithm's process, training and evaluation EnvRunners (with evaluation_config's resources),
Learners with their custom resources, and aggregator actors, in RLlib's bundle order."""
from __future__ import annotations

import pytest

from rlx.algorithms.impala import IMPALAConfig
from rlx.algorithms.ppo import PPO, PPOConfig


def test_trial_reserves_evaluation_runners_learners_and_custom_resources():
    pytest.importorskip("ray.tune")
    config = (PPOConfig().environment("CartPole-v1")
              .resources(custom_resources_for_main_process={"driver_host": 1})
              .env_runners(num_env_runners=2, num_cpus_per_env_runner=1, custom_resources_per_env_runner={"sim": 1})
              .evaluation(evaluation_interval=1, evaluation_num_env_runners=1,
                          evaluation_config={"custom_resources_per_env_runner": {"eval_sim": 1},
                                             "num_cpus_per_env_runner": 0.5})
              .learners(num_learners=2, num_cpus_per_learner=1, num_gpus_per_learner=0.5,
                        custom_resources_per_learner={"fast_disk": 1}))
    request = PPO.default_resource_request(config)
    assert request.bundles == [
        {"CPU": 1.0, "driver_host": 1.0},
        {"CPU": 1.0, "sim": 1.0}, {"CPU": 1.0, "sim": 1.0},
        {"CPU": 0.5, "eval_sim": 1.0},
        {"CPU": 1.0, "GPU": 0.5, "fast_disk": 1.0}, {"CPU": 1.0, "GPU": 0.5, "fast_disk": 1.0},
    ]


def test_aggregator_actors_are_reserved_beside_their_learners():
    pytest.importorskip("ray.tune")
    from rlx.algorithms.impala import IMPALA

    beside_learners = IMPALAConfig().environment("CartPole-v1").learners(
        num_learners=2, num_cpus_per_learner=1, num_aggregator_actors_per_learner=2)
    assert IMPALA.default_resource_request(beside_learners).bundles == [{"CPU": 1.0}, {"CPU": 3.0}, {"CPU": 3.0}]
    driver_learner = IMPALAConfig().environment("CartPole-v1").learners(num_aggregator_actors_per_learner=2)
    assert IMPALA.default_resource_request(driver_learner).bundles == [{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}]


@pytest.mark.parametrize("setter, name", [
    (lambda c, v: c.resources(custom_resources_for_main_process=v), "custom_resources_for_main_process"),
    (lambda c, v: c.env_runners(custom_resources_per_env_runner=v), "custom_resources_per_env_runner"),
    (lambda c, v: c.learners(custom_resources_per_learner=v), "custom_resources_per_learner"),
])
@pytest.mark.parametrize("bad", [{"sim": -1}, {"sim": float("nan")}, {"sim": "2"}, {3: 1}])
def test_custom_resource_amounts_must_be_named_finite_and_non_negative(setter, name, bad):
    from rlx.algorithms.ppo import PPOConfig
    from rlx.utils.errors import ConfigError

    with pytest.raises(ConfigError, match=name):
        setter(PPOConfig(), bad)
    assert getattr(setter(PPOConfig(), {"sim": 0.5}), name) == {"sim": 0.5}

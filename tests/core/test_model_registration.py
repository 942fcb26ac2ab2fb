"""Custom models and action distributions registered in the driver reach the processes rlx
starts: EnvRunner processes (num_env_runners > 0) and learner processes (num_learners > 0).
Registration happens inside each test function, so nothing is importable by name there."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlx.algorithms.ppo import PPOConfig
from rlx.models.catalog import ModelCatalog
from rlx.models.torch.torch_action_dist import TorchCategorical
from rlx.models.torch.torch_modelv2 import TorchModelV2


def test_a_model_registered_in_a_function_reaches_runner_and_learner_processes():
    class LocalModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, width=8):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.body = nn.Linear(obs_space.shape[0], width)
            self.logits, self.value = nn.Linear(width, num_outputs), nn.Linear(width, 1)

        def forward(self, input_dict, state, seq_lens):
            self._features = torch.tanh(self.body(input_dict["obs_flat"].float()))
            return self.logits(self._features), state

        def value_function(self):
            return self.value(self._features).squeeze(1)

    ModelCatalog.register_custom_model("model_registered_in_a_test_function", LocalModel)
    algo = (PPOConfig().environment("CartPole-v1")
            .env_runners(num_env_runners=2).learners(num_learners=1)
            .training(model={"custom_model": "model_registered_in_a_test_function",
                             "custom_model_config": {"width": 12}}, train_batch_size=400, minibatch_size=100)
            .build())
    try:
        result = algo.train()
        assert result["env_runners"]["num_episodes"] > 0
        # The runners' modules have the driver's class and its constructor arguments.
        widths = algo.env_runner_group.foreach_env_runner(lambda runner: runner.module.model.body.out_features)
        assert widths and set(widths) == {12}
    finally:
        algo.stop()


def test_an_action_distribution_registered_in_a_function_reaches_runner_processes():
    class AlwaysFirst(TorchCategorical):
        def sample(self):
            return torch.zeros(self.inputs.shape[0], dtype=torch.long)

        def deterministic_sample(self):
            return self.sample()

    ModelCatalog.register_custom_action_dist("dist_registered_in_a_test_function", AlwaysFirst)
    algo = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1)
            .training(model={"custom_action_dist": "dist_registered_in_a_test_function"}, train_batch_size=200,
                      minibatch_size=100)
            .build())
    try:
        batch = algo.env_runner_group.sample(200)
        actions = np.asarray(batch["actions"])
        assert actions.size >= 200 and not actions.any()  # the remote runner sampled with AlwaysFirst
    finally:
        algo.stop()


def test_a_shipped_class_that_cannot_be_loaded_fails_only_where_it_is_used():
    import cloudpickle
    import pytest

    from rlx.env.registry import restore_registry
    from rlx.utils.errors import ConfigError

    saved = {kind: dict(v) for kind, v in ModelCatalog._shipped.items()}
    try:
        # A class pickled by reference to a module this process cannot import (as a test module's
        # classes are in a Ray actor).
        broken = cloudpickle.dumps(TorchCategorical).replace(b"rlx.models.torch.torch_action_dist",
                                                             b"module_that_is_not_there_xyz")
        restore_registry({"creators": {}, "unpicklable": {}, "custom_models": {"unloadable_model": broken}},
                         where="a test")
        with pytest.raises(ConfigError, match="'unloadable_model' was registered .* cannot load its class"):
            ModelCatalog.get_custom_model_class("unloadable_model")
    finally:
        ModelCatalog._shipped.update(saved)

"""Modules that lack what a loss needs fail with an error that says what to implement.

(These failures were AttributeErrors or "'NoneType' object is not callable" deep in a loss.)
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch


def test_value_function_names_the_missing_compute_values() -> None:
    from rlx.core.rl_module.apis import value_function
    from rlx.core.rl_module.rl_module import RLModule

    class NoCritic(RLModule):
        def setup(self) -> None:
            self.pi = torch.nn.Linear(4, 2)

    module = NoCritic(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    with pytest.raises(TypeError, match=r"A2C's value loss needs state values.*NoCritic.*compute_values"):
        value_function(module, "A2C's value loss")

    class WithCritic(NoCritic):
        def compute_values(self, batch: dict, embeddings: object = None) -> torch.Tensor:
            return torch.zeros(len(batch["obs"]))

    critic = WithCritic(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert value_function(critic, "A2C's value loss")({"obs": torch.zeros(3, 4)}).shape == (3,)


@pytest.mark.parametrize("module_path", ["rlx.algorithms.sac.sac_rl_module.SACRLModule",
                                         "rlx.algorithms.ddpg.ddpg_rl_module.DDPGRLModule"])
def test_inference_only_module_says_it_has_no_critic(module_path: str) -> None:
    import importlib

    module_name, cls_name = module_path.rsplit(".", 1)
    cls = getattr(importlib.import_module(module_name), cls_name)
    module = cls(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                 inference_only=True)
    with pytest.raises(ValueError, match="inference_only"):
        module.q_values(torch.zeros(5, 3), torch.zeros(5, 2))

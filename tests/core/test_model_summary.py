"""`policy.model.base_model.summary()`: a layer table with exact parameter counts."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlx.algorithms.ppo import PPOConfig
from rlx.models.torch.fcnet import FullyConnectedNetwork
from rlx.utils.model_summary import summarize


def _param_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_ppo_base_model_summary_lists_layers_with_exact_counts() -> None:
    config = PPOConfig().environment("CartPole-v1").training(model={"fcnet_hiddens": [32, 16]})
    algo = config.build()
    try:
        base = algo.get_policy().model.base_model
        text = base.summary(print_fn=None)
        assert f"Total params: {_param_count(base):,}" in text
        # Policy head: 4 -> 32 -> 16 -> 2; its first layer has 4 * 32 + 32 weights.
        assert "(None, 32)" in text and "(None, 16)" in text and "(None, 2)" in text
        assert f"{4 * 32 + 32:,}" in text
        printed: list[str] = []
        assert base.summary(print_fn=printed.append) == printed[0]
    finally:
        algo.stop()


def test_frozen_layers_count_as_non_trainable() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    for p in model[0].parameters():
        p.requires_grad_(False)
    table = summarize(model, lambda: model(torch.zeros(1, 3)))
    assert table.total_params == 3 * 5 + 5 + 5 * 2 + 2
    assert table.non_trainable_params == 3 * 5 + 5
    assert [row.output_shape for row in table.rows] == ["(None, 5)", "(None, 5)", "(None, 2)"]


def test_failing_example_keeps_exact_counts() -> None:
    model = torch.nn.Linear(4, 3)

    def broken() -> None:
        raise RuntimeError("no example input")

    table = summarize(model, broken)
    assert table.total_params == 15
    assert table.rows == []  # the root module is not listed as its own layer
    assert "Total params: 15" in str(table)


def test_modelv2_summary_runs_an_example_observation() -> None:
    obs_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    model = FullyConnectedNetwork(obs_space, gym.spaces.Discrete(3), 3,
                                  {"fcnet_hiddens": [8], "fcnet_activation": "tanh"}, "fc_test")
    text = model.summary(print_fn=None)
    assert text.startswith('Model: "fc_test"')
    assert f"Total params: {_param_count(model):,}" in text
    assert "(None, 8)" in text and "(None, 3)" in text

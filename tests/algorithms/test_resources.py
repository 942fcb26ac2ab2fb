"""GPU requests are checked against the machine: more than exist is the seed's RuntimeError,
naming the setting; fractional requests share one GPU; _fake_gpus runs on the CPU."""
from __future__ import annotations

import pytest
import torch

from conftest import small_config
from rlx.algorithms.resources import check_gpu_request

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


def test_more_gpus_than_exist_is_a_runtime_error_naming_the_setting():
    with pytest.raises(RuntimeError, match=rf"num_gpus={GPUS + 1}.*has {GPUS}.*_fake_gpus=True"):
        small_config().resources(num_gpus=GPUS + 1).build()


def test_env_runner_gpus_count_once_per_runner():
    config = small_config().env_runners(num_env_runners=3).resources(num_gpus_per_env_runner=0.5)
    config.freeze()
    if GPUS >= 2:
        check_gpu_request(config)
    else:
        with pytest.raises(RuntimeError, match=r"num_gpus_per_env_runner=0.5 x 3 runners asks for 1.5 GPU"):
            check_gpu_request(config)


def test_fractional_gpu_needs_one_gpu_to_share():
    config = small_config().resources(num_gpus=0.2)
    config.freeze()
    if GPUS == 0:
        with pytest.raises(RuntimeError, match="num_gpus=0.2 asks for 0.2 GPU"):
            check_gpu_request(config)
    else:
        check_gpu_request(config)  # one GPU, shared: the Learner trains on it


def test_fake_gpus_train_on_the_cpu():
    algo = small_config().resources(num_gpus=2, _fake_gpus=True).build()
    try:
        result = algo.train()
        assert result["training_iteration"] == 1
        assert all(p.device.type == "cpu" for p in algo.learner.module.parameters())
    finally:
        algo.stop()


def test_no_gpus_asked_builds_anywhere():
    config = small_config().resources(num_gpus=0)
    config.freeze()
    check_gpu_request(config)

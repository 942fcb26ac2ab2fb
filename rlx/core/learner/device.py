"""Where a Learner computes: the torch device chosen from the config, and moving tensors there.

RLlib's settings choose it: `num_gpus_per_learner > 0` (or the old `num_gpus > 0` without
learner processes) puts each Learner on a CUDA device (`local_gpu_idx` in the driver, one
device per rank in learner processes); `_fake_gpus=True` keeps everything on the CPU.
rlx's `learners(learner_device=...)` names the device outright ("cuda:1", "mps", or "cpu").

A Learner on another device than its EnvRunner's module (or with `learner_device` set at all,
"cpu" included, so that the path runs in tests on machines without a GPU) trains a copy of
the module; the Algorithm pushes its weights to the local EnvRunner after every update, as it
does for remote runners. Train batches move to the device once per update.
"""
from __future__ import annotations

from typing import Any

import torch

from rlx.core.config_view import ResolvedConfig
from rlx.utils.errors import ConfigError

__all__ = ["learner_device", "learner_trains_a_copy", "module_device", "to_device"]

_CPU = torch.device("cpu")


def learner_trains_a_copy(config: ResolvedConfig) -> bool:
    """Whether the Learner trains its own copy of the module (it is not on the EnvRunner's CPU
    module): a GPU learner, an explicit `learner_device`, or a compiling Learner (EnvRunners act
    with the eager module)."""
    return (config.learner_device is not None or learner_device(config).type != "cpu"
            or bool(getattr(config, "torch_compile_learner", False)))


def learner_device(config: ResolvedConfig) -> torch.device:
    """The device a Learner of `config` computes on. In a learner process (num_learners > 0) that
    is the CUDA device the process group selected for its rank."""
    explicit = config.learner_device
    if explicit is not None:
        return _checked(torch.device(explicit), "learner_device")
    if config._fake_gpus:
        return _CPU
    per_learner = float(config.num_gpus_per_learner)
    gpus = per_learner if int(config.num_learners) > 0 else max(per_learner, float(config.num_gpus))
    if gpus <= 0:
        return _CPU
    if int(config.num_learners) > 0:
        if not torch.cuda.is_available():
            return _checked(torch.device("cuda", 0), "num_gpus_per_learner")
        return torch.device("cuda", torch.cuda.current_device())
    return _checked(torch.device("cuda", int(config.local_gpu_idx)), "num_gpus_per_learner / num_gpus")


def _checked(device: torch.device, setting: str) -> torch.device:
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = device.index or 0
        if index >= count:
            raise ConfigError(
                f"{setting} asks for {device}, but torch sees {count} CUDA device(s) here. Use a CPU learner "
                "(num_gpus_per_learner=0), _fake_gpus=True to debug a GPU set-up on the CPU, or another "
                "local_gpu_idx.")
    elif device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ConfigError(f"{setting}='mps', but this machine's torch has no MPS (Apple GPU) backend.")
    return device


def module_device(module: Any) -> torch.device:
    """The device of a module's parameters (the CPU for a module without any, or for an object
    that is no torch module, e.g. one that only answers compute_values)."""
    for param in getattr(module, "parameters", tuple)():
        return param.device
    return _CPU


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` on `device` (itself when it is there already)."""
    return tensor if tensor.device == device else tensor.to(device, non_blocking=True)

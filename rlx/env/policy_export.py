"""Export one policy's acting path as a model file that runs without rlx (TorchScript or ONNX).

`Policy.export_model(dir, onnx=None|opset)`, `Algorithm.export_policy_model`, `rlx export` and
`checkpointing(export_native_model_files=True)` all write through `export_policy_files`.

The exported model is a `torch.nn.Module` (`ExportedPolicy`) traced with its weights, mapping a
batch of env observations to the greedy (deterministic) action:

    inputs:  obs [B, ...]                 (recurrent: + state_in_0, state_in_1, ... [B, ...])
    outputs: actions [B, ...], action_dist_inputs [B, D]   (recurrent: + state_out_0, ...)

What it includes: the observation preprocessing of Box (a cast to float32), Discrete and
MultiDiscrete (one-hot), MultiBinary (flattening) and Atari-RAM observations; the observation
filter with its statistics frozen at export time (MeanStdFilter); the module's inference
forward pass; the inference distribution's deterministic sample (argmax, mean, tanh(mean));
and the adaptation to the env's action space (Discrete `start`, unsquashing and clipping of Box
actions, reshaping of multi-dimensional Box and MultiBinary actions).
What it does not include: exploration (epsilon, sampling, noise); the flattening of Tuple and
Dict observations and the downsampling of Atari frames (for those spaces the model takes the
preprocessed observation, `policy.preprocessor.transform(obs)`, as `obs`); splitting Tuple/Dict
actions (the model returns their flat rows). `export_info.json` beside the model records all of
it: input and output names, shapes and dtypes, and what preprocessing the model does.
"""
from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.preprocessors import AtariRAMPreprocessor, MultiBinaryPreprocessor, NoPreprocessor, OneHotPreprocessor
from rlx.env.runner.actions import ActionAdapter
from rlx.env.runner.module_slot import without_time_axis
from rlx.utils.errors import install_hint
from rlx.utils.filters import FilterWithParts, MeanStdFilter, NoFilter
from rlx.utils.version import __version__

#: The TorchScript file `export_model` writes (RLlib's name for a torch policy's export).
TORCHSCRIPT_FILE = "model.pt"
#: The ONNX file `export_model(dir, onnx=opset)` writes (RLlib's name).
ONNX_FILE = "model.onnx"
#: What the exported files take and return (JSON), written beside them.
EXPORT_INFO_FILE = "export_info.json"
#: The opset `rlx export --format onnx` and checkpoints use when none is given.
DEFAULT_ONNX_OPSET = 17
#: The rows of the example batch the model is traced with (any batch size works afterwards).
_EXAMPLE_ROWS = 2


class ObservationInput(torch.nn.Module):
    """Env observations [B, ...] -> the module's input rows [B, *preprocessed shape] (float32):
    the part of rlx's preprocessing that is plain tensor math, then the frozen observation filter."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, preprocessor: Any, obs_filter: Any, observation_space: gym.Space):
        super().__init__()
        self.shape = tuple(int(d) for d in preprocessor.shape)
        self.kind, self.input_dtype, self.input_shape = _input_kind(preprocessor, observation_space)
        # One-hot sizes (Discrete: [n]; MultiDiscrete: nvec) and the Discrete space's `start`.
        nvec = getattr(observation_space, "nvec", [getattr(observation_space, "n", 1)])
        self.sizes = [int(n) for n in np.asarray(nvec).reshape(-1)]
        discrete = isinstance(observation_space, gym.spaces.Discrete)
        self.start = int(getattr(observation_space, "start", 0)) if discrete else 0
        if isinstance(obs_filter, FilterWithParts):  # (its other parts play no part in acting)
            obs_filter = obs_filter.obs_filter
        self.filtered = isinstance(obs_filter, MeanStdFilter)
        if not self.filtered and not isinstance(obs_filter, NoFilter):
            raise ValueError(f"Cannot export the observation filter {type(obs_filter).__name__}: export supports "
                             "observation_filter='NoFilter' and 'MeanStdFilter'.")
        if self.filtered:
            # float64, as MeanStdFilter.apply_batch computes (the result is cast to float32 after clipping).
            self.demean, self.destd, self.clip = obs_filter.demean, obs_filter.destd, obs_filter.clip
            self.register_buffer("mean", torch.as_tensor(np.asarray(obs_filter.mean, np.float64)), persistent=False)
            self.register_buffer("std", torch.as_tensor(np.asarray(obs_filter.std, np.float64) + 1e-8),
                                 persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The filtered module input rows of a batch of observations."""
        if self.kind == "one_hot":
            x = torch.nn.functional.one_hot(obs.reshape(-1).long() - self.start, self.sizes[0]).float()
        elif self.kind == "multi_one_hot":
            flat = obs.reshape(obs.shape[0], -1).long()
            parts = [torch.nn.functional.one_hot(flat[:, i], n) for i, n in enumerate(self.sizes)]
            x = torch.cat(parts, dim=-1).float()
        elif self.kind == "atari_ram":
            x = (obs.float() - 128.0) / 128.0
        else:  # box, multi_binary, preprocessed
            x = obs.float().reshape((obs.shape[0],) + self.shape)
        if not self.filtered:
            return x
        y = x.double()
        if self.demean:
            y = y - self.mean
        if self.destd:
            y = y / self.std
        if self.clip is not None:
            y = torch.clamp(y, -float(self.clip), float(self.clip))
        return y.float()


class ActionOutput(torch.nn.Module):
    """Module actions [B, ...] -> env actions, as rlx's ActionAdapter converts them."""

    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, action_space: gym.Space, normalize: bool, clip: bool):
        super().__init__()
        adapter = ActionAdapter(action_space, normalize, clip)
        self.is_discrete, self.is_box, self.structured = adapter.is_discrete, adapter.is_box, adapter.structured
        self.discrete_start = adapter.discrete_start
        self.normalize, self.clip = adapter.normalize, adapter.clip
        self.env_shape = adapter.env_shape if (adapter.reshape or adapter.is_multi_binary) else None
        self.out_dtype = _torch_dtype(action_space.dtype) if (self.is_box or adapter.is_multi_binary) else None
        if self.is_box:
            self.register_buffer("low", torch.as_tensor(adapter.low), persistent=False)
            self.register_buffer("high", torch.as_tensor(adapter.high), persistent=False)

    def forward(self, actions: torch.Tensor) -> torch.Tensor:
        """The env actions of a batch of module actions (Tuple/Dict actions stay flat rows)."""
        if self.is_discrete:
            return actions.long() + self.discrete_start if self.discrete_start else actions.long()
        out = actions
        if self.is_box and (self.normalize or self.clip):
            # In ActionAdapter's precision: (a + 1) * 0.5 in the action's float32, the rest in float64.
            if self.normalize:
                out = self.low + ((out + 1.0) * 0.5).double() * (self.high - self.low)
            out = out.double()
            out = torch.minimum(torch.maximum(out, self.low), self.high)
        if self.env_shape is not None:
            out = out.reshape((out.shape[0],) + tuple(self.env_shape))
        return out.to(self.out_dtype) if self.out_dtype is not None else out


class ExportedPolicy(torch.nn.Module):
    """A policy's greedy acting path as one torch module: observations (and a recurrent
    module's state) in; env actions, action distribution inputs (and the next state) out."""

    def __init__(self, module: Any, preprocessor: Any, obs_filter: Any, observation_space: gym.Space,
                 action_space: gym.Space, normalize_actions: bool, clip_actions: bool):
        super().__init__()
        self.module = module
        self.obs_input = ObservationInput(preprocessor, obs_filter, observation_space)
        self.action_output = ActionOutput(action_space, normalize_actions, clip_actions)
        self.dist_cls = module.get_inference_action_dist_cls()
        initial = module.get_initial_state() if hasattr(module, "get_initial_state") else {}
        self.state_names = list(initial)
        self.state_shapes = [tuple(np.shape(v)) for v in initial.values()]

    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(actions, action_dist_inputs, *state_out) for a batch of env observations."""
        x = self.obs_input(obs)
        if self.state_names:
            batch: dict[str, Any] = {Columns.OBS: x[:, None], Columns.STATE_IN: dict(zip(self.state_names, state))}
            out = without_time_axis(self.module.forward_inference(batch))
            state_out = [out[Columns.STATE_OUT][name] for name in self.state_names]
        else:
            out = self.module.forward_inference({Columns.OBS: x})
            state_out = []
        if Columns.ACTION_DIST_INPUTS not in out:
            raise ValueError(f"{type(self.module).__name__}.forward_inference returns no "
                             f"'{Columns.ACTION_DIST_INPUTS}': only modules whose actions come from an action "
                             "distribution can be exported.")
        logits = out[Columns.ACTION_DIST_INPUTS]
        greedy = self.dist_cls.from_logits(logits).deterministic_sample()
        return (self.action_output(greedy), logits, *state_out)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """A batch of `_EXAMPLE_ROWS` observations (and initial states) to trace with."""
        obs = np.zeros((_EXAMPLE_ROWS,) + self.obs_input.input_shape, dtype=self.obs_input.input_dtype)
        if self.obs_input.kind == "one_hot":
            obs = obs + self.obs_input.start
        states = [torch.zeros((_EXAMPLE_ROWS,) + shape) for shape in self.state_shapes]
        return (torch.as_tensor(obs), *states)

    def input_names(self) -> list[str]:
        """Names of the model's inputs (ONNX and export_info.json)."""
        return ["obs"] + [f"state_in_{i}" for i in range(len(self.state_names))]

    def output_names(self) -> list[str]:
        """Names of the model's outputs (ONNX and export_info.json)."""
        return ["actions", Columns.ACTION_DIST_INPUTS] + [f"state_out_{i}" for i in range(len(self.state_names))]


def _input_kind(preprocessor: Any, space: gym.Space) -> tuple[str, np.dtype, tuple[int, ...]]:
    """(kind of in-model preprocessing, input dtype, input shape without the batch axis)."""
    if type(preprocessor) is OneHotPreprocessor:
        if isinstance(space, gym.spaces.Discrete):
            return "one_hot", np.dtype(np.int64), ()
        return "multi_one_hot", np.dtype(np.int64), tuple(space.shape or ())
    if type(preprocessor) is AtariRAMPreprocessor:
        return "atari_ram", np.dtype(space.dtype), tuple(space.shape or ())
    if type(preprocessor) is MultiBinaryPreprocessor:
        return "multi_binary", np.dtype(space.dtype), tuple(space.shape or ())
    if type(preprocessor) is NoPreprocessor and isinstance(space, gym.spaces.Box):
        return "box", np.dtype(space.dtype), tuple(space.shape or ())
    # Tuple/Dict flattening, Atari frame downsampling, custom preprocessors: done outside the model.
    return "preprocessed", np.dtype(np.float32), tuple(int(d) for d in preprocessor.shape)


def _torch_dtype(dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=np.dtype(dtype))).dtype


def exported_policy(policy: Any, module: Any = None) -> ExportedPolicy:
    """The ExportedPolicy of an rlx Policy view (a frozen copy of its module, or of `module`
    when given: e.g. the Learner's copy of the same network), in eval mode."""
    config = policy.config
    # A copy without gradients: the exported model's outputs need no autograd, and the live
    # module that trains keeps requires_grad.
    # On the CPU: a Learner's module may live on a GPU; the exported file then loads anywhere.
    frozen = copy.deepcopy(module if module is not None else policy.module).requires_grad_(False).cpu()
    wrapper = ExportedPolicy(frozen, policy.preprocessor, policy.filter,
                             policy.observation_space, policy.action_space, bool(config.normalize_actions),
                             bool(config.clip_actions))
    return wrapper.eval()


def _check_opset(onnx: Any) -> int:
    if isinstance(onnx, bool) or not isinstance(onnx, (int, np.integer)) or onnx < 7:
        raise ValueError(f"onnx={onnx!r}: pass the ONNX opset version to export with (an int, e.g. "
                         f"onnx={DEFAULT_ONNX_OPSET}), or onnx=None for a TorchScript file.")
    return int(onnx)


def _import_onnx() -> Any:
    try:
        import onnx  # noqa: F401  (torch's TorchScript-based exporter needs it)
    except ImportError as err:
        raise ImportError("Exporting to ONNX needs the `onnx` package (and `onnxruntime` to run the model): "
                          f"{install_hint('export')}.") from err
    return onnx


def export_policy_files(policy: Any, export_dir: str | os.PathLike, onnx: int | None = None,
                        module: Any = None) -> list[str]:
    """Write `policy`'s greedy acting path into `export_dir`: `model.pt` (TorchScript, for
    `torch.jit.load`) or, with an ONNX opset, `model.onnx`; and `export_info.json`. Returns the
    names of the written files (relative to `export_dir`)."""
    opset = None if onnx is None else _check_opset(onnx)
    if opset is not None:
        _import_onnx()
    directory = Path(export_dir)
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = exported_policy(policy, module)
    inputs = wrapper.example_inputs()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about Python values; the result is checked below
            if opset is None:
                traced = torch.jit.trace(wrapper, inputs, check_trace=False)
                target = TORCHSCRIPT_FILE
                torch.jit.save(traced, str(directory / target))
            else:
                target = ONNX_FILE
                names_in, names_out = wrapper.input_names(), wrapper.output_names()
                torch.onnx.export(wrapper, inputs, str(directory / target), dynamo=False, opset_version=opset,
                                  input_names=names_in, output_names=names_out, do_constant_folding=True,
                                  dynamic_axes={name: {0: "batch"} for name in names_in + names_out})
    except (RuntimeError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"Cannot export {type(wrapper.module).__name__} as {'ONNX' if opset else 'TorchScript'}: "
                         f"{type(err).__name__}: {err}") from err
    _write_info(directory, target, wrapper, policy, opset)
    return [target, EXPORT_INFO_FILE]


def _write_info(directory: Path, target: str, wrapper: ExportedPolicy, policy: Any, opset: int | None) -> None:
    """export_info.json: the files and what they take and return (merged with an earlier export's)."""
    path = directory / EXPORT_INFO_FILE
    files: dict[str, Any] = {}
    if path.is_file():
        try:
            files = dict(json.loads(path.read_text()).get("files", {}))
        except (ValueError, AttributeError, TypeError):
            files = {}
    files[target] = {"format": "torchscript"} if opset is None else {"format": "onnx", "opset": opset}
    obs_in = wrapper.obs_input
    info = {
        "rlx_version": __version__,
        "files": files,
        "observation_space": repr(policy.observation_space),
        "action_space": repr(policy.action_space),
        "inputs": [{"name": "obs", "shape": ["batch", *obs_in.input_shape], "dtype": obs_in.input_dtype.name}]
        + [{"name": f"state_in_{i}", "shape": ["batch", *shape], "dtype": "float32", "state": name}
           for i, (name, shape) in enumerate(zip(wrapper.state_names, wrapper.state_shapes))],
        "outputs": ["actions (greedy, in the env's action space)",
                    f"{Columns.ACTION_DIST_INPUTS} (the module's raw outputs: logits, mean/log-std or Q-values)"]
        + [f"state_out_{i} ({name})" for i, name in enumerate(wrapper.state_names)],
        "initial_state": [np.asarray(v, np.float32).tolist()
                          for v in (wrapper.module.get_initial_state() if wrapper.state_names else {}).values()],
        "preprocessing": {
            "in_model": obs_in.kind != "preprocessed",
            "kind": obs_in.kind,
            "observation_filter": "MeanStdFilter (statistics frozen at export)" if obs_in.filtered else "NoFilter",
            "note": "obs is the preprocessed observation (rlx's preprocessor.transform), computed outside the model"
            if obs_in.kind == "preprocessed" else "obs is the env's observation",
        },
        "exploration": "not included: the model returns the deterministic (greedy) action",
    }
    path.write_text(json.dumps(info, indent=1))

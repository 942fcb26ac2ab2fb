"""ResolvedConfig: the typed view of an algorithm's resolved config that rlx/core reads.

rlx/core (learners, learner groups, model builders) is handed the Algorithm's config, an
`AlgorithmConfig` from the algorithm layer, which core may not import (layers only import
downward). This Protocol names, with their types, the settings and methods core reads from it;
`AlgorithmConfig` satisfies it structurally (its settings are read through its option table).

Settings that only some algorithms have (PPO's `clip_param`, DQN's `double_q`, ...) are read
by name through `__getattr__`: an algorithm's Learner reads its own settings from the same
object, and those are typed by the algorithm's config class, not here.
"""
from __future__ import annotations

from typing import Any, Protocol


class ResolvedConfig(Protocol):
    """What rlx/core reads from an algorithm's config (AlgorithmConfig satisfies it).

    Settings are read-only here: core never changes the config it is given (a changed copy is
    made with `copy()` and the algorithm config's own builder methods).
    """

    # -- training
    @property
    def gamma(self) -> float:
        """Discount factor."""
        ...

    @property
    def lr(self) -> float | list[list[float]]:
        """Learning rate, or a piecewise schedule [[timestep, lr], ...]."""
        ...

    @property
    def optimizer(self) -> dict[str, Any]:
        """Optimizer settings (`type`, `betas`, `eps`, ...)."""
        ...

    @property
    def grad_clip(self) -> float | None:
        """Gradient clipping threshold (None: no clipping)."""
        ...

    @property
    def grad_clip_by(self) -> str:
        """"value", "norm" or "global_norm"."""
        ...

    @property
    def train_batch_size(self) -> int:
        """Env steps per training batch."""
        ...

    @property
    def minibatch_size(self) -> int | None:
        """Rows per SGD minibatch (None: the whole batch)."""
        ...

    @property
    def model(self) -> dict[str, Any]:
        """The model config dict (MODEL_DEFAULTS updated with the user's settings)."""
        ...

    # -- target networks (off-policy algorithms)
    @property
    def target_network_update_freq(self) -> int:
        """Timesteps between target network updates."""
        ...

    @property
    def tau(self) -> float:
        """Soft target update coefficient."""
        ...

    # -- resources and learners
    @property
    def num_learners(self) -> int:
        """Learner processes (0: the Learner runs in the driver)."""
        ...

    @property
    def num_cpus_per_learner(self) -> float:
        """CPUs per Learner (its torch thread count)."""
        ...

    @property
    def num_gpus_per_learner(self) -> float:
        """GPUs per Learner."""
        ...

    @property
    def num_gpus(self) -> float:
        """Old-stack GPU count of the driver's Learner."""
        ...

    @property
    def local_gpu_idx(self) -> int:
        """The CUDA device of the driver's Learner (num_learners=0)."""
        ...

    @property
    def learner_device(self) -> str | None:
        """An explicit torch device for the Learner (None: from the GPU settings)."""
        ...

    @property
    def _fake_gpus(self) -> bool:
        """Pretend GPUs exist (run on CPU)."""
        ...

    @property
    def num_env_runners(self) -> int:
        """Remote EnvRunners (0: sampling in the driver)."""
        ...

    @property
    def torch_num_threads(self) -> int | None:
        """Torch threads of the Learner (None: torch's default)."""
        ...

    # -- torch.compile of the learner
    @property
    def torch_compile_learner_dynamo_backend(self) -> str | None:
        """torch.compile backend of the learner."""
        ...

    @property
    def torch_compile_learner_dynamo_mode(self) -> str | None:
        """torch.compile mode of the learner."""
        ...

    # -- methods
    def get_config_for_module(self, module_id: str) -> ResolvedConfig:
        """The config module `module_id` trains with (per-module overrides applied)."""
        ...

    def copy(self, copy_frozen: bool | None = None) -> ResolvedConfig:
        """A copy (unfrozen with copy_frozen=False)."""
        ...

    def training(self, **kwargs: Any) -> ResolvedConfig:
        """Set training settings (on an unfrozen copy); returns the config."""
        ...

    def freeze(self) -> None:
        """Make the config read-only."""
        ...

    def __getattr__(self, name: str) -> Any:
        """An algorithm-specific setting, by name (typed by the algorithm's config class)."""
        ...

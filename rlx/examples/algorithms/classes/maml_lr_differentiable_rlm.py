"""DifferentiableTorchRLModule: the sinusoid regressor of the MAML example (RLlib's
`ray.rllib.examples.algorithms.classes.maml_lr_differentiable_rlm`)."""
from __future__ import annotations

from typing import Any

from torch import nn

from rlx.core.columns import Columns
from rlx.core.rl_module.torch.torch_rl_module import TorchRLModule


class DifferentiableTorchRLModule(TorchRLModule):
    """An MLP (1 -> 40 -> 40 -> 1, ReLU) predicting `y_pred` from `obs`. Its whole computation is
    `_forward`, which `forward` (= forward_train) runs, so `torch.func.functional_call` can run
    it with other parameter tensors."""

    def setup(self) -> None:
        """Build the network (the spaces are not read: input and output are one number)."""
        self.net = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 1))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """{"y_pred": the network's output for batch["obs"]}."""
        return {"y_pred": self.net(batch[Columns.OBS])}

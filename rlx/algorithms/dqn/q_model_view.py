"""`algo.get_policy().model` for DQN: the old API's Q-model surface over DQNRLModule.

RLlib's old-stack DQN model (`DQNTorchModel`, printed as
`FullyConnectedNetwork_as_DistributionalQModel`) splits the Q-network in two: calling the
model (or `model.from_batch(batch)`) runs the base network and returns its features
`(model_out, [])`; the Q-value head and the state-value head take those features:

    model = algo.get_policy().model
    model_out = model.from_batch({"obs": np.array([[0.1, 0.2, 0.3, 0.4]])})
    scores, logits, probs = model.get_q_value_distributions(model_out)   # num_atoms == 1
    value = model.get_state_value(model_out)                               # dueling

As in RLlib, `get_q_value_distributions` returns the advantage head's scores; with
`dueling=True` the Q-values are `value + scores - scores.mean(1)`. `base_model`,
`q_value_head` and `state_value_head` are torch modules over the DQNRLModule's own layers
(same parameters) with a Keras-style `summary()`. Noisy layers run with their mean weights
here, and an action mask in the observation is left out of the features (the module applies
it to the Q-values when it acts).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from rlx.core.rl_module.model_view import ModelView
from rlx.utils.model_summary import summarize

__all__ = ["DQNModelView", "ModelPart"]


class ModelPart(nn.Module):
    """One part of the Q-model (base network, Q-value head, state-value head) as a torch module:
    its layers are the DQNRLModule's own, `forward` runs the part, `summary()` prints its layers."""

    def __init__(self, name: str, layers: dict[str, nn.Module | None], run: Callable[[Any], Any],
                 example_input: Callable[[], Any]):
        super().__init__()
        self.part_name = name
        self.layers = nn.ModuleDict({k: v for k, v in layers.items() if v is not None})
        self._run = run
        self._example_input = example_input

    def forward(self, inputs: Any) -> Any:  # noqa: D102 - the part's computation
        return self._run(inputs)

    def summary(self, print_fn: Any = print) -> str:
        """Print (with `print_fn`; None: do not print) and return a Keras-style table of the
        part's layers: output shapes for one example input, parameter counts and totals."""
        # summarize() switches train/eval mode recursively; the layers are the module's, so put
        # each back as it was.
        modes = [(m, m.training) for m in self.modules()]
        try:
            text = str(summarize(self, lambda: self(self._example_input()), title=self.part_name))
        finally:
            for m, mode in modes:
                m.training = mode
        if print_fn is not None:
            print_fn(text)
        return text


def _features_input(model_out: Any) -> torch.Tensor:
    """The features tensor of `model_out`: the tensor itself, or the first item of the
    `(features, state)` pair that calling the model returns."""
    if isinstance(model_out, (tuple, list)):
        if not model_out:
            raise ValueError("model_out is empty; pass what model.from_batch({'obs': ...}) returned.")
        model_out = model_out[0]
    if isinstance(model_out, np.ndarray):
        model_out = torch.as_tensor(model_out, dtype=torch.float32)
    if not isinstance(model_out, torch.Tensor) or model_out.ndim != 2:
        raise ValueError(f"model_out must be the base features [B, F] that model.from_batch({{'obs': ...}}) returns, "
                         f"got {type(model_out).__name__}{tuple(getattr(model_out, 'shape', ()))}.")
    return model_out


class DQNModelView(ModelView):
    """DQN's `policy.model`: base features, Q-value distributions and state values of a DQNRLModule."""

    def __init__(self, module: Any):
        super().__init__(module)
        self._parts: dict[str, ModelPart] = {}

    # ------------------------------------------------------------------ base network

    def _obs_tensor(self, input_dict: Any) -> torch.Tensor:
        obs = input_dict["obs"] if isinstance(input_dict, dict) else input_dict
        obs_t = obs if isinstance(obs, torch.Tensor) else torch.as_tensor(np.asarray(obs, dtype=np.float32))
        device = next(self.module.parameters()).device
        return obs_t.float().to(device)

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.module.action_mask is not None:
            obs, _ = self.module.action_mask.split(obs)
        return self.module._features(obs)

    def __call__(self, input_dict: dict[str, Any], state: list | None = None,
                 seq_lens: Any = None) -> tuple[torch.Tensor, list]:
        """`(features [B, F], [])`: the base network's output for `input_dict["obs"]`
        (preprocessed observations), which the Q-value and state-value heads take."""
        return self._features(self._obs_tensor(input_dict)), []

    def from_batch(self, train_batch: dict[str, Any], is_training: bool = True) -> tuple[torch.Tensor, list]:
        """`(features, [])` for the batch's `"obs"`, as calling the model gives them."""
        return self(train_batch)

    def value_function(self) -> torch.Tensor:
        """DQN's model has no value function of the actor-critic kind; use get_state_value."""
        raise ValueError("DQN's model has no value_function(); its state-value head is "
                         "model.get_state_value(model_out) (dueling=True).")

    # ------------------------------------------------------------------ heads

    def get_q_value_distributions(self, model_out: Any) -> tuple[torch.Tensor, ...]:
        """The Q-value head on the base features, as RLlib's DQNTorchModel returns it:
        `(action_scores [B, A], logits [B, A, 1], logits)` when num_atoms == 1, else
        `(action_scores [B, A], z [atoms], support_logits_per_action [B, A, atoms], logits, probs)`
        with action_scores the expected values over the support z. With dueling the scores are
        the advantages (Q = state value + scores - mean of scores)."""
        module = self.module
        scores = module._call_head(module.advantage, _features_input(model_out), False)
        if module.num_atoms == 1:
            logits = torch.ones_like(scores).unsqueeze(-1)
            return scores, logits, logits
        support_logits = scores.reshape(-1, module.num_actions, module.num_atoms)
        probs = torch.softmax(support_logits, dim=-1)
        z = module.support
        return (probs * z).sum(-1), z, support_logits, support_logits, probs

    def get_state_value(self, model_out: Any) -> torch.Tensor:
        """The state-value head on the base features: [B, 1] (or [B, num_atoms] for distributional
        DQN). Only dueling Q-networks (DQNConfig.training(dueling=True), the default) have one."""
        self._require_value_head()
        return self.module._call_head(self.module.value, _features_input(model_out), False)

    def _require_value_head(self) -> None:
        if self.module.value is None:
            raise ValueError("This DQN model has no state-value head: it was built with dueling=False. Set "
                             "DQNConfig().training(dueling=True) for a value and an advantage head.")

    # ------------------------------------------------------------------ parts as torch modules

    def _example_obs(self) -> torch.Tensor:
        """One sampled observation [1, ...]: the input the summaries run their parts on."""
        obs = np.asarray(self.module.observation_space.sample(), dtype=np.float32)[None]
        return self._obs_tensor({"obs": obs})

    def _example_features(self) -> torch.Tensor:
        return self._features(self._example_obs())

    def _part(self, name: str, layers: dict[str, nn.Module | None], run: Callable[[Any], Any],
              example: Callable[[], Any]) -> ModelPart:
        if name not in self._parts:
            self._parts[name] = ModelPart(name, layers, run, example)
        return self._parts[name]

    @property
    def base_model(self) -> ModelPart:
        """The base network (observations -> features) as a torch module with `summary()`."""
        return self._part("base_model", {"encoder": self.module.encoder},
                          lambda obs: self(obs if isinstance(obs, dict) else {"obs": obs})[0], self._example_obs)

    @property
    def q_value_head(self) -> ModelPart:
        """The Q-value head (features -> get_q_value_distributions) as a torch module with `summary()`."""
        return self._part("q_value_head", {"advantage": self.module.advantage}, self.get_q_value_distributions,
                          self._example_features)

    @property
    def state_value_head(self) -> ModelPart:
        """The state-value head (features -> get_state_value) as a torch module with `summary()`."""
        self._require_value_head()
        return self._part("state_value_head", {"value": self.module.value}, self.get_state_value,
                          self._example_features)

    def __repr__(self) -> str:
        return f"DQNModelView({self.module!r})"

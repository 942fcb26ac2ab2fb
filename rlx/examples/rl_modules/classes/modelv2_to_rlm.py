"""ModelV2ToRLModule: an RLModule running the model of an old-API-stack policy or config.

model_config keys (one of the sources):
- `policy_checkpoint_dir`: a policy's folder in an rlx checkpoint (`<checkpoint>/policies/<id>`);
  the module starts from that policy's network and weights.
- `algo_checkpoint_dir` (with `policy_id`, default "default_policy"): an rlx checkpoint.
- `old_api_stack_algo_config`: an AlgorithmConfig whose `model` settings (fcnet_*, use_lstm,
  custom_model, ...) describe the network; it starts freshly initialized.
Everything (forward passes, values, the recurrent state, the action distribution) is the
wrapped network's.
"""
from __future__ import annotations

import pathlib
from typing import Any

import torch

from rlx.core import DEFAULT_POLICY_ID
from rlx.core.attention_models import AttentionActorCriticModule
from rlx.core.lstm_models import LSTMActorCriticModule
from rlx.core.models import ActorCriticModule
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec
from rlx.models.modelv2_rl_module import ModelV2RLModule
from rlx.policy.policy import Policy


def _network_for(config: Any, observation_space: Any, action_space: Any) -> RLModule:
    """rlx's default module of an (old-API) config's model settings, for these spaces."""
    model = dict(config.model)
    module_class: type[RLModule]
    if model.get("custom_model"):
        module_class = ModelV2RLModule
    elif model.get("use_lstm"):
        module_class = LSTMActorCriticModule
    elif model.get("use_attention"):
        module_class = AttentionActorCriticModule
    else:
        module_class = ActorCriticModule
    return RLModuleSpec(module_class=module_class, observation_space=observation_space, action_space=action_space,
                        model_config=model).build()


class ModelV2ToRLModule(RLModule):
    """Wraps the network of an old-API policy (from a checkpoint) or config (see the module docstring)."""

    def setup(self) -> None:
        cfg = self.model_config
        policy_id = cfg.get("policy_id", DEFAULT_POLICY_ID)
        policy_dir = cfg.get("policy_checkpoint_dir")
        algo_dir = cfg.get("algo_checkpoint_dir")
        if algo_dir:
            algo_dir = pathlib.Path(algo_dir)
            if not algo_dir.is_dir():
                raise ValueError(f"model_config['algo_checkpoint_dir'] = {str(algo_dir)!r} is not a directory; give "
                                 "the folder of an rlx checkpoint.")
            policy_dir = algo_dir / "policies" / policy_id
        if policy_dir:
            policy_dir = pathlib.Path(policy_dir)
            if not policy_dir.is_dir():
                raise ValueError(f"model_config['policy_checkpoint_dir'] = {str(policy_dir)!r} is not a directory; "
                                 "give <checkpoint>/policies/<policy_id>.")
            self.network = Policy.from_checkpoint(policy_dir).module
        elif cfg.get("old_api_stack_algo_config") is not None:
            self.network = _network_for(cfg["old_api_stack_algo_config"], self.observation_space, self.action_space)
        else:
            raise ValueError("ModelV2ToRLModule needs model_config['policy_checkpoint_dir'], "
                             "['algo_checkpoint_dir'] or ['old_api_stack_algo_config'].")
        # The wrapped network's settings (e.g. max_seq_len of a recurrent one) are the Learner's.
        self.model_config = {**self.network.model_config, **{k: v for k, v in cfg.items() if k == "max_seq_len"}}

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.network.forward_inference(batch, **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.network.forward_exploration(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.network.forward_train(batch, **kwargs)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """The wrapped network's value estimates."""
        return self.network.compute_values(batch)

    def get_initial_state(self) -> dict[str, Any]:
        return self.network.get_initial_state()

    def get_train_action_dist_cls(self) -> Any:
        return self.network.get_train_action_dist_cls()

    def get_exploration_action_dist_cls(self) -> Any:
        return self.network.get_exploration_action_dist_cls()

    def get_inference_action_dist_cls(self) -> Any:
        return self.network.get_inference_action_dist_cls()

"""The old API's ModelV2 machinery sits in the core layer (rlx.core.models.v2), because the
algorithm base runs it for any config that names a `custom_model`; RLlib's paths (rlx.models...,
rlx.models.torch...) are aliases that give the same objects, so user code, isinstance checks and
import paths stored in existing checkpoints keep working."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from import_graph import build_graph, layer  # noqa: E402

#: (old public path, name, the core module the name lives in now)
MOVED = [
    ("rlx.models.modelv2_rl_module", "ModelV2RLModule", "rlx.core.models.v2.modelv2_rl_module"),
    ("rlx.models.torch.fcnet", "FullyConnectedNetwork", "rlx.core.models.v2.fcnet"),
    ("rlx.models.torch", "FullyConnectedNetwork", "rlx.core.models.v2.fcnet"),
    ("rlx.models.torch.visionnet", "VisionNetwork", "rlx.core.models.v2.visionnet"),
    ("rlx.models.torch.recurrent_net", "RecurrentNetwork", "rlx.core.models.v2.recurrent_net"),
    ("rlx.models.torch.recurrent_net", "LSTMWrapper", "rlx.core.models.v2.recurrent_net"),
    ("rlx.models.torch.torch_modelv2", "TorchModelV2", "rlx.core.models.v2.torch_modelv2"),
    ("rlx.models.torch", "TorchModelV2", "rlx.core.models.v2.torch_modelv2"),
    ("rlx.models.torch.misc", "SlimFC", "rlx.core.models.v2.misc"),
    ("rlx.models.torch.misc", "AppendBiasLayer", "rlx.core.models.v2.misc"),
    ("rlx.models.torch.misc", "normc_initializer", "rlx.core.models.v2.misc"),
    ("rlx.models.torch.misc", "get_activation_fn", "rlx.core.models.v2.misc"),
    ("rlx.models.torch.misc", "same_padding", "rlx.core.models.v2.misc"),
    ("rlx.models.torch.misc", "valid_padding", "rlx.core.models.v2.misc"),
    ("rlx.policy.rnn_sequencing", "add_time_dimension", "rlx.core.models.v2.rnn_sequencing"),
    ("rlx.models", "ModelV2", "rlx.core.modelv2"),
]


@pytest.mark.parametrize("old, name, new", MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_old_public_path_gives_the_core_object(old, name, new):
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)


def test_nothing_below_the_compat_layer_imports_the_old_api_models():
    graph = build_graph()
    offenders = sorted(f"{e.source}:{e.line}" for e in graph.edges
                       if (e.target == "rlx.models" or e.target.startswith("rlx.models."))
                       and layer(e.source) < layer("rlx.models"))
    assert not offenders, f"modules below rlx/models (L8) that import it: {offenders}"


def test_a_user_model_subclassing_the_old_paths_is_built_and_run_by_the_core_adapter():
    import gymnasium as gym
    import torch
    from torch import nn

    from rlx.core.models.v2.modelv2_rl_module import ModelV2RLModule as CoreModule
    from rlx.core.modelv2 import ModelV2 as CoreModelV2
    from rlx.models.catalog import ModelCatalog
    from rlx.models.modelv2_rl_module import ModelV2RLModule
    from rlx.models.torch.fcnet import FullyConnectedNetwork
    from rlx.models.torch.torch_modelv2 import TorchModelV2

    class TwoLayer(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.inner = FullyConnectedNetwork(obs_space, action_space, num_outputs,
                                               {"fcnet_hiddens": [8]}, "inner")

        def forward(self, input_dict, state, seq_lens):
            return self.inner(input_dict, state, seq_lens)

        def value_function(self):
            return self.inner.value_function()

    obs_space, act_space = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
    model = ModelCatalog.get_model_v2(obs_space, act_space, 2, {"custom_model": TwoLayer})
    assert isinstance(model, CoreModelV2) and issubclass(TwoLayer, CoreModelV2)
    assert isinstance(model.inner, FullyConnectedNetwork)

    module = ModelV2RLModule(observation_space=obs_space, action_space=act_space,
                             model_config={"custom_model": TwoLayer})
    assert isinstance(module, CoreModule) and module.old_api_model().__class__ is TwoLayer
    out = module.forward_train({"obs": torch.zeros(4, 3)})
    assert out["action_dist_inputs"].shape == (4, 2) and out["vf_preds"].shape == (4,)


def test_checkpoint_import_paths_at_the_old_paths_still_resolve():
    from rlx.core.models.v2.fcnet import FullyConnectedNetwork
    from rlx.core.models.v2.modelv2_rl_module import ModelV2RLModule
    from rlx.utils.checkpoints import decode_value, encode_value
    from rlx.utils.registry import import_object

    # What config.json of a checkpoint written before the move holds.
    assert decode_value({"__import__": "rlx.models.modelv2_rl_module:ModelV2RLModule"},
                        key="rl_module_spec.module_class") is ModelV2RLModule
    assert decode_value({"__import__": "rlx.models.torch.fcnet:FullyConnectedNetwork"},
                        key="model.custom_model") is FullyConnectedNetwork
    assert import_object("rlx.models.torch.fcnet.FullyConnectedNetwork") is FullyConnectedNetwork
    # New checkpoints name the core module, which resolves to the same class.
    encoded = encode_value(ModelV2RLModule)
    assert encoded == {"__import__": "rlx.core.models.v2.modelv2_rl_module:ModelV2RLModule"}
    assert decode_value(encoded, key="rl_module_spec.module_class") is ModelV2RLModule


def test_use_lstm_without_num_outputs_is_a_clear_error():
    import gymnasium as gym

    from rlx.models.catalog import ModelCatalog
    from rlx.utils.errors import ConfigError

    with pytest.raises(ConfigError, match="use_lstm .* num_outputs=None"):
        ModelCatalog.get_model_v2(gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2), None,
                                  {"use_lstm": True, "lstm_cell_size": 8})

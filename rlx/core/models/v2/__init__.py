"""The old API's ModelV2 machinery that the algorithm base runs: the TorchModelV2 base class and
default networks (FullyConnectedNetwork, VisionNetwork, RecurrentNetwork / LSTMWrapper), the
model builder behind `ModelCatalog.get_model_v2`, and `ModelV2RLModule`, the RLModule a config's
`custom_model` runs in.

They sit in the core layer because `Algorithm` builds a ModelV2RLModule for any config that names
a `custom_model`; RLlib's paths (`rlx.models.catalog`, `rlx.models.modelv2_rl_module`,
`rlx.models.torch.*`) are aliases of these modules' names. Importing this package imports torch.
"""
from rlx.core.models.v2.fcnet import FullyConnectedNetwork
from rlx.core.models.v2.model_builder import build_model_v2, custom_model_class
from rlx.core.models.v2.modelv2_rl_module import ModelV2RLModule
from rlx.core.models.v2.recurrent_net import LSTMWrapper, RecurrentNetwork
from rlx.core.models.v2.torch_modelv2 import TorchModelV2
from rlx.core.models.v2.visionnet import VisionNetwork

__all__ = ["FullyConnectedNetwork", "LSTMWrapper", "ModelV2RLModule", "RecurrentNetwork", "TorchModelV2",
           "VisionNetwork", "build_model_v2", "custom_model_class"]

"""RLlib's `ray.rllib.core.models.base`: the keys that unify model inputs and outputs.

`ENCODER_OUT` is the key of an encoder's output (embeddings) in a forward pass's dict,
`ACTOR` / `CRITIC` the keys of the actor's and critic's parts of an actor-critic encoder's
output. RLlib's Model/Encoder class hierarchy (built from ModelConfigs) is not rlx's: rlx's
modules build plain torch networks (rlx.core.mlp, rlx.core.cnn, rlx.core.catalog); importing
those class names raises NotSupportedYetError saying so.
"""
from __future__ import annotations

from typing import Any

from rlx.utils.errors import NotSupportedYetError

#: The key of an encoder's output in a forward pass's dict.
ENCODER_OUT: str = "encoder_out"
#: The actor's part of an actor-critic encoder's output.
ACTOR: str = "actor"
#: The critic's part of an actor-critic encoder's output.
CRITIC: str = "critic"

_UNSUPPORTED = ("Model", "Encoder", "ActorCriticEncoder", "StatefulActorCriticEncoder")


def __getattr__(name: str) -> Any:
    if name in _UNSUPPORTED:
        raise NotSupportedYetError(f"ray.rllib.core.models.base.{name}",
                                   "rlx's RLModules build plain torch.nn networks, not RLlib's Model classes",
                                   fix="Subclass torch.nn.Module (or use rlx.core.mlp.MLP) and return "
                                       "{ENCODER_OUT: embeddings} from its forward.")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

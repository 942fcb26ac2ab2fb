"""RLlib's `ray.rllib.utils.error` path: the exceptions RLlib users catch, as rlx's classes
(defined in rlx.utils.errors)."""
from rlx.utils.errors import EnvError, MultiAgentEnvError, NotSerializableError, UnsupportedSpaceException

#: RLlib's name of NotSerializableError.
NotSerializable = NotSerializableError

__all__ = ["EnvError", "MultiAgentEnvError", "NotSerializable", "UnsupportedSpaceException"]

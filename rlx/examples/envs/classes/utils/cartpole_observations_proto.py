"""CartPoleObservation: a protobuf message of CartPole's four state values.

Built from its descriptor at import time (no generated code, no protoc step); needs the
`protobuf` package. Fields: x_pos, x_veloc, angle_pos, angle_veloc (doubles).
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FIELDS = ("x_pos", "x_veloc", "angle_pos", "angle_veloc")


def _message_class() -> type:
    proto = descriptor_pb2.FileDescriptorProto(name="rlx_examples/cartpole_observations.proto",
                                               package="rlx.examples", syntax="proto3")
    message = proto.message_type.add(name="CartPoleObservation")
    for number, name in enumerate(FIELDS, start=1):
        message.field.add(name=name, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                          label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("rlx.examples.CartPoleObservation"))


#: The message class: CartPoleObservation(x_pos=..., ...).SerializeToString(), ParseFromString(...).
CartPoleObservation = _message_class()

__all__ = ["CartPoleObservation", "FIELDS"]

"""Reading gRPC error details without extra packages: the
'grpc-status-details-bin' trailer is a serialized google.rpc.Status
(code = 1, message = 2, details = 3 repeated google.protobuf.Any). The
Status message is declared here in a private descriptor pool, so it cannot
clash with googleapis-common-protos if that is ever installed; the
synapse.v1.ErrorDetail inside comes from the generated errors_pb2."""

from __future__ import annotations

from functools import lru_cache

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from synapse.v1 import errors_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"
ERROR_DETAIL_TYPE_URL = "type.googleapis.com/synapse.v1.ErrorDetail"


@lru_cache(maxsize=1)
def status_class() -> type[Message]:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="google/rpc/status.proto",
        package="google.rpc",
        syntax="proto3",
        dependency=["google/protobuf/any.proto"],
    )
    status = file.message_type.add(name="Status")
    status.field.add(name="code", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, json_name="code")
    status.field.add(name="message", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="message")
    status.field.add(
        name="details", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
        type_name=".google.protobuf.Any", json_name="details",
    )
    pool.AddSerializedFile(file.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))


def status_of(error: grpc.RpcError) -> Message | None:
    """The google.rpc.Status of a failed call, or None when the trailer is absent."""
    for key, value in error.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            status = status_class()()
            status.ParseFromString(value if isinstance(value, bytes) else value.encode("latin-1"))
            return status
    return None


def error_details(status: Message) -> list[errors_pb2.ErrorDetail]:
    """Every synapse.v1.ErrorDetail among the status details."""
    found = []
    for detail in status.details:
        if detail.type_url.rsplit("/", 1)[-1] == "synapse.v1.ErrorDetail":
            found.append(errors_pb2.ErrorDetail.FromString(detail.value))
    return found

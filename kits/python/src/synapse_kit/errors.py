"""Protocol errors (docs/PROTOCOL.md §3): Refused, the RPC status each code
travels as, and the synapse.v1.ErrorDetail inside a gRPC status."""

from __future__ import annotations

from functools import cache
from typing import Any

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, json_format, message_factory, struct_pb2
from google.protobuf.message import DecodeError, Message

from . import _stubs

STATUS_DETAILS_KEY = "grpc-status-details-bin"
ERROR_DETAIL_TYPE_URL = "type.googleapis.com/synapse.v1.ErrorDetail"

_STATUS: dict[str, grpc.StatusCode] = {
    "message_format_invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "invalid_params": grpc.StatusCode.INVALID_ARGUMENT,
    "confidentiality_required": grpc.StatusCode.INVALID_ARGUMENT,
    "decryption_failed": grpc.StatusCode.INVALID_ARGUMENT,
    "encryption_key_unknown": grpc.StatusCode.INVALID_ARGUMENT,
    "inner_signature_invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "signature_invalid": grpc.StatusCode.UNAUTHENTICATED,
    "message_expired": grpc.StatusCode.UNAUTHENTICATED,
    "unknown_sender": grpc.StatusCode.UNAUTHENTICATED,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "task_not_found": grpc.StatusCode.NOT_FOUND,
    "replay_detected": grpc.StatusCode.ALREADY_EXISTS,
    "wrong_receiver": grpc.StatusCode.PERMISSION_DENIED,
    "permission_denied": grpc.StatusCode.PERMISSION_DENIED,
    "capability_lacking": grpc.StatusCode.PERMISSION_DENIED,
    "illegal_transition": grpc.StatusCode.FAILED_PRECONDITION,
    "task_already_completed": grpc.StatusCode.FAILED_PRECONDITION,
    "unsupported_version": grpc.StatusCode.FAILED_PRECONDITION,
    "message_too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "concurrency_limit": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "rate_limited": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "execution_timeout": grpc.StatusCode.DEADLINE_EXCEEDED,
    "task_duration_exceeded": grpc.StatusCode.DEADLINE_EXCEEDED,
    "task_cancelled": grpc.StatusCode.CANCELLED,
    "agent_not_ready": grpc.StatusCode.UNAVAILABLE,
}


def status_code_for(protocol_code: str) -> grpc.StatusCode:
    """The RPC status that carries a protocol code ("wrong_receiver" -> PERMISSION_DENIED)."""
    return _STATUS.get(protocol_code, grpc.StatusCode.INTERNAL)


def error_code_number(protocol_code: str) -> int:
    """The ErrorCode enum value of a protocol code ("signature_invalid" -> 1002)."""
    try:
        return _stubs.errors().ErrorCode.Value("ERROR_CODE_" + protocol_code.upper())
    except ValueError:
        return 0


def protocol_code_of(error_code: int) -> str:
    """The string spelling of an ErrorCode value (1002 -> "signature_invalid")."""
    try:
        return _stubs.errors().ErrorCode.Name(error_code).removeprefix("ERROR_CODE_").lower()
    except ValueError:
        return ""


class Refused(Exception):
    """A protocol refusal: ``code`` is its spelling ("signature_invalid"), ``status`` the
    RPC status it travels as. An Agent answers a Refused raised while handling a call
    with that status and a synapse.v1.ErrorDetail."""

    def __init__(self, code: str, message: str, *, details: dict[str, Any] | None = None,
                 status: grpc.StatusCode | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = status or status_code_for(code)

    def error_detail(self) -> Message:
        """The synapse.v1.ErrorDetail that travels."""
        detail = _stubs.errors().ErrorDetail(code=error_code_number(self.code), message=self.message, protocol_code=self.code)
        if self.details:
            details = struct_pb2.Struct()
            details.update(self.details)
            detail.details.CopyFrom(details)
        return detail

    def abort(self, context: grpc.ServicerContext) -> None:
        """Ends the RPC with this refusal: its status, and the ErrorDetail in grpc-status-details-bin."""
        status = status_class()(code=self.status.value[0], message=self.message)
        status.details.add(type_url=ERROR_DETAIL_TYPE_URL, value=self.error_detail().SerializeToString())
        context.set_trailing_metadata(((STATUS_DETAILS_KEY, status.SerializeToString()),))
        context.abort(self.status, self.message)


@cache
def status_class() -> type[Message]:
    """google.rpc.Status, declared in a private descriptor pool (so it cannot clash
    with googleapis-common-protos if that is installed too)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="google/rpc/status.proto", package="google.rpc", syntax="proto3", dependency=["google/protobuf/any.proto"]
    )
    status = file.message_type.add(name="Status")
    status.field.add(name="code", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, json_name="code")
    status.field.add(name="message", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="message")
    status.field.add(name="details", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                     type_name=".google.protobuf.Any", json_name="details")
    pool.AddSerializedFile(file.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))


def error_detail_of(error: BaseException) -> Message | None:
    """The synapse.v1.ErrorDetail of a Refused, or of a failed gRPC call (from its
    grpc-status-details-bin trailer); None when there is none."""
    if isinstance(error, Refused):
        return error.error_detail()
    trailers = getattr(error, "trailing_metadata", None)
    if not callable(trailers):
        return None
    for key, value in trailers() or ():
        if key != STATUS_DETAILS_KEY:
            continue
        status = status_class()()
        try:
            status.ParseFromString(value if isinstance(value, bytes) else value.encode("latin-1"))
        except DecodeError:
            return None
        for detail in status.details:
            if detail.type_url.rsplit("/", 1)[-1] == "synapse.v1.ErrorDetail":
                return _stubs.errors().ErrorDetail.FromString(detail.value)
    return None


def protocol_code(error: BaseException) -> str:
    """The protocol code of an error ("task_not_found"), from a Refused or a gRPC
    status's ErrorDetail; "" when it carries none."""
    detail = error_detail_of(error)
    if detail is None:
        return ""
    return detail.protocol_code or protocol_code_of(detail.code)


def details_dict(detail: Message) -> dict[str, Any]:
    """An ErrorDetail's details as a dict."""
    return json_format.MessageToDict(detail.details) if detail.HasField("details") else {}

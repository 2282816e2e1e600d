"""Sealing and opening synapse.v1.Envelope with the modules generated from
proto/: a sender serializes header and payload once, signs exactly those
bytes and carries them; a receiver verifies the signature over the bytes it
received and only then parses them (docs/PROTOCOL.md §2.4), never
re-serializing anything. Refusals raise Refused with the protocol code."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp

from synapse.v1 import envelope_pb2
from synapse_crypto import SIGNATURE_LENGTH, Identity, key_id_of, signing_input, verify

PROTOCOL_VERSION = "1.0.0"
DEFAULT_CLOCK_SKEW_SECONDS = 300

# Message types that must carry Header.task_id (every task_* type and human_decision).
TASK_SCOPED = {
    name for name in envelope_pb2.MessageType.keys() if name.startswith("MESSAGE_TYPE_TASK_")
} | {"MESSAGE_TYPE_HUMAN_DECISION"}


class Refused(Exception):
    """A receiver's refusal: `code` is the protocol spelling, e.g. "signature_invalid"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def payload_type_of(message_type: int) -> str:
    """MESSAGE_TYPE_TASK_REQUEST -> "synapse.v1.TaskRequestPayload" (PROTOCOL.md §2.5)."""
    name = envelope_pb2.MessageType.Name(message_type).removeprefix("MESSAGE_TYPE_")
    return "synapse.v1." + "".join(part.capitalize() for part in name.split("_")) + "Payload"


def message_class(full_name: str) -> type[Message]:
    """The generated class of a message by its full protobuf name."""
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(full_name))


def timestamp_now(offset_seconds: int = 0) -> Timestamp:
    ns = time.time_ns() + offset_seconds * 1_000_000_000
    return Timestamp(seconds=ns // 1_000_000_000, nanos=ns % 1_000_000_000)


def seconds_of(ts: Timestamp) -> float:
    return ts.seconds + ts.nanos / 1e9


def seal(identity: Identity, header: envelope_pb2.Header, payload: Message) -> envelope_pb2.Envelope:
    """Serializes header and payload once and signs exactly those bytes."""
    header_bytes = header.SerializeToString()
    payload_bytes = payload.SerializeToString()
    return sign_bytes(identity, header_bytes, payload_bytes)


def sign_bytes(identity: Identity, header_bytes: bytes, payload_bytes: bytes) -> envelope_pb2.Envelope:
    return envelope_pb2.Envelope(
        header=header_bytes,
        payload=payload_bytes,
        signature=envelope_pb2.Signature(
            algorithm=envelope_pb2.SIGNATURE_ALGORITHM_ED25519,
            key_id=identity.key_id,
            value=identity.sign(signing_input(header_bytes, payload_bytes)),
            public_key=identity.public_key,
        ),
    )


def new_header(
    identity: Identity,
    agent_id: str,
    receiver: str,
    message_type: int,
    task_id: str = "",
    lifetime_seconds: int = 300,
) -> envelope_pb2.Header:
    sent_at = timestamp_now()
    return envelope_pb2.Header(
        message_id=str(uuid.uuid4()),
        message_type=message_type,
        protocol_version=PROTOCOL_VERSION,
        sender=envelope_pb2.AgentRef(agent_id=agent_id, key_id=identity.key_id),
        receiver=envelope_pb2.AgentRef(agent_id=receiver),
        sent_at=sent_at,
        expires_at=Timestamp(seconds=sent_at.seconds + lifetime_seconds, nanos=sent_at.nanos),
        task_id=task_id,
        payload_type=payload_type_of(message_type),
    )


def verify_signature(envelope: envelope_pb2.Envelope, key_id: str, public_key: bytes) -> None:
    """Checks 1-3 of PROTOCOL.md §2.4 against one trusted key (the only trust source here)."""
    if not envelope.HasField("signature") or len(envelope.signature.value) == 0:
        raise Refused("signature_invalid", "envelope is not signed")
    sig = envelope.signature
    if sig.algorithm != envelope_pb2.SIGNATURE_ALGORITHM_ED25519:
        raise Refused("signature_invalid", f"algorithm {sig.algorithm} is not Ed25519")
    if len(sig.value) != SIGNATURE_LENGTH:
        raise Refused("signature_invalid", f"signature is {len(sig.value)} bytes, not 64")
    if sig.key_id != key_id:
        raise Refused("unknown_sender", f"signed with key {sig.key_id!r}, the trusted key is {key_id!r}")
    if sig.public_key:
        if len(sig.public_key) != 32 or key_id_of(sig.public_key) != sig.key_id:
            raise Refused("signature_invalid", "embedded public key does not match key_id")
        if bytes(sig.public_key) != bytes(public_key):
            raise Refused("unknown_sender", "embedded public key differs from the trusted key for this key id")
    if not verify(public_key, sig.value, signing_input(envelope.header, envelope.payload)):
        raise Refused("signature_invalid", "signature does not verify over PAE(domain, header, payload)")


def check_time(header: envelope_pb2.Header, now: float, skew: float) -> None:
    """Check 8: |now - sent_at| <= skew and now < expires_at (unset: sent_at + skew)."""
    if not header.HasField("sent_at"):
        raise Refused("message_format_invalid", "header.sent_at is required")
    sent_at = seconds_of(header.sent_at)
    if abs(now - sent_at) > skew:
        raise Refused("message_expired", f"sent_at is {now - sent_at:.0f} s from now, outside the {skew} s skew")
    expires_at = seconds_of(header.expires_at) if header.HasField("expires_at") else sent_at + skew
    if now >= expires_at:
        raise Refused("message_expired", "expires_at has passed")


@dataclass
class Opened:
    header: envelope_pb2.Header
    payload: Message


def open_envelope(
    envelope: envelope_pb2.Envelope,
    *,
    key_id: str,
    public_key: bytes,
    sender: str,
    receiver: str,
    check_times: bool = True,
    now: float | None = None,
    skew: float = DEFAULT_CLOCK_SKEW_SECONDS,
) -> Opened:
    """Verifies, then parses, then checks sender, receiver, version, time and payload type."""
    verify_signature(envelope, key_id, public_key)
    header = envelope_pb2.Header()
    try:
        header.ParseFromString(envelope.header)
    except DecodeError as error:
        raise Refused("message_format_invalid", f"header bytes do not parse: {error}") from None
    if header.sender.key_id != envelope.signature.key_id:
        raise Refused("signature_invalid", "header.sender.key_id differs from signature.key_id")
    if header.sender.agent_id != sender:
        raise Refused("unknown_sender", f"key {key_id} belongs to {sender}, not {header.sender.agent_id!r}")
    if header.receiver.agent_id != receiver:
        raise Refused("wrong_receiver", f"addressed to {header.receiver.agent_id!r}, not {receiver!r}")
    if header.protocol_version.split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
        raise Refused("unsupported_version", f"protocol_version {header.protocol_version!r}")
    if check_times:
        check_time(header, time.time() if now is None else now, skew)
    if header.message_type == envelope_pb2.MESSAGE_TYPE_UNSPECIFIED:
        raise Refused("message_format_invalid", "message_type is unspecified")
    expected = payload_type_of(header.message_type)
    if header.payload_type != expected:
        raise Refused("message_format_invalid", f"payload_type {header.payload_type!r}, expected {expected!r}")
    if envelope_pb2.MessageType.Name(header.message_type) in TASK_SCOPED and not header.task_id:
        raise Refused("message_format_invalid", "task-scoped message without task_id")
    payload = message_class(expected)()
    try:
        payload.ParseFromString(envelope.payload)
    except DecodeError as error:
        raise Refused("message_format_invalid", f"payload bytes do not parse as {expected}: {error}") from None
    return Opened(header, payload)

"""Sealing and opening synapse.v1.Envelope (docs/PROTOCOL.md §2).

A sender serializes header and payload once and signs exactly those bytes; a
receiver verifies the signature over the bytes it received and only then
parses them, never re-serializing anything, and checks the rest in the order
of §2.4. A refusal raises Refused with the protocol code of the failed check.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp

from . import _stubs
from .errors import Refused
from .keys import PUBLIC_KEY_LENGTH, SIGNATURE_LENGTH, Identity, key_id, signing_input, verify
from .trust import Peer, TrustPolicy, Verdict

if TYPE_CHECKING:
    from .confidential import ConfidentialKeys

PROTOCOL_VERSION = "1.0.0"
DEFAULT_CLOCK_SKEW_SECONDS = 300.0
DEFAULT_TTL_SECONDS = 300.0

_SEMVER = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:[-+].*)?$")
_MAX_HEADER_STRING = 256
_MAX_TRACESTATE = 512
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799
_NOT_TASK_SCOPED = {"ACK", "NACK", "HEARTBEAT", "CAPABILITY_QUERY", "CAPABILITY_RESPONSE", "REGISTRY_REGISTER", "REGISTRY_DEREGISTER"}


def _payload_field(message_type: int) -> Any:
    """The field of the synapse.v1.Payload oneof whose number is the message type (§2.5)."""
    if message_type == 0:
        return None
    return _stubs.payloads().Payload.DESCRIPTOR.fields_by_number.get(message_type)


def payload_type(message_type: int) -> str:
    """The payload message a message type carries ("synapse.v1.TaskRequestPayload"), or ""."""
    f = _payload_field(message_type)
    return f.message_type.full_name if f is not None else ""


def payload_class(message_type: int) -> type[Message]:
    """The generated class of a message type's payload."""
    f = _payload_field(message_type)
    if f is None:
        raise ValueError(f"unknown message type {message_type}")
    return message_factory.GetMessageClass(f.message_type)


def is_task_scoped(message_type: int) -> bool:
    """Whether messages of this type must carry a task_id."""
    if _payload_field(message_type) is None:
        return False
    return type_name(message_type) not in _NOT_TASK_SCOPED


def type_name(message_type: int) -> str:
    """MESSAGE_TYPE_TASK_REQUEST -> "TASK_REQUEST"."""
    try:
        return _stubs.envelope().MessageType.Name(message_type).removeprefix("MESSAGE_TYPE_")
    except ValueError:
        return str(message_type)


def _timestamp(seconds: float) -> Timestamp:
    ns = int(seconds * 1_000_000_000)
    return Timestamp(seconds=ns // 1_000_000_000, nanos=ns % 1_000_000_000)


def _seconds(ts: Timestamp) -> float:
    return ts.seconds + ts.nanos / 1e9


def sign_bytes(identity: Identity, header: bytes, payload: bytes) -> Message:
    """The Envelope of already serialized header and payload bytes, signed, with the key embedded."""
    env = _stubs.envelope()
    return env.Envelope(
        header=header,
        payload=payload,
        signature=env.Signature(
            algorithm=env.SIGNATURE_ALGORITHM_ED25519,
            key_id=identity.key_id,
            value=identity.sign(signing_input(header, payload)),
            public_key=identity.public_key,
        ),
    )


def seal_header(identity: Identity, header: Message, payload: Message) -> Message:
    """Signs a header the caller built in full with its payload: both serialized once."""
    return sign_bytes(identity, header.SerializeToString(), payload.SerializeToString())



def new_uuid(at: float | None = None) -> str:
    """An RFC 9562 version 7 UUID (the Unix time in milliseconds, then random bits), for
    message and task ids: ids made in time order reach a receiver's indexes near their
    last pages. ``at`` is the time in seconds (default now)."""
    ms = round((time.time() if at is None else at) * 1000)
    b = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

def seal(
    identity: Identity,
    message_type: int,
    payload: Message,
    receiver: Peer | str,
    *,
    task_id: str = "",
    reply_to: str = "",
    sequence: int = 0,
    session_id: str = "",
    correlation_id: str = "",
    idempotency_key: str = "",
    message_id: str = "",
    sent_at: float | None = None,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
) -> tuple[Message, Message]:
    """Builds the header of a message to ``receiver`` (a Peer pins its key id; a str
    names the agent only), serializes header and payload once and signs those bytes.
    Returns (envelope, header)."""
    header = build_header(identity, message_type, payload, receiver, task_id=task_id, reply_to=reply_to, sequence=sequence,
                          session_id=session_id, correlation_id=correlation_id, idempotency_key=idempotency_key,
                          message_id=message_id, sent_at=sent_at, ttl_seconds=ttl_seconds)
    return seal_header(identity, header, payload), header


def build_header(
    identity: Identity,
    message_type: int,
    payload: Message,
    receiver: Peer | str,
    *,
    task_id: str = "",
    reply_to: str = "",
    sequence: int = 0,
    session_id: str = "",
    correlation_id: str = "",
    idempotency_key: str = "",
    message_id: str = "",
    sent_at: float | None = None,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
) -> Message:
    """The header ``seal`` signs, unserialized (checked against the payload's type)."""
    env = _stubs.envelope()
    want = payload_type(message_type)
    if not want:
        raise ValueError(f"unknown message type {message_type}")
    if payload.DESCRIPTOR.full_name != want:
        raise ValueError(f"{type_name(message_type)} carries {want}, not {payload.DESCRIPTOR.full_name}")
    if is_task_scoped(message_type) and not task_id:
        raise ValueError(f"{type_name(message_type)} needs a task id")
    now = time.time() if sent_at is None else sent_at
    to = receiver if isinstance(receiver, Peer) else Peer(receiver, b"", "")
    header = env.Header(
        message_id=message_id or new_uuid(now),
        message_type=message_type,
        protocol_version=PROTOCOL_VERSION,
        sender=env.AgentRef(agent_id=identity.agent_id, key_id=identity.key_id),
        receiver=env.AgentRef(agent_id=to.agent_id, key_id=to.key_id),
        sent_at=_timestamp(now),
        expires_at=_timestamp(now + ttl_seconds),
        reply_to=reply_to,
        task_id=task_id,
        session_id=session_id,
        correlation_id=correlation_id,
        idempotency_key=idempotency_key,
        payload_type=want,
        sequence=sequence,
    )
    return header


@dataclass
class Opened:
    """An envelope that passed every check, parsed."""

    envelope: Message
    header: Message
    payload: Message
    public_key: bytes
    digest: bytes = field(repr=False)
    """SHA-256 over signing input and signature: equal digests are the same envelope."""
    task_key: bytes | None = field(default=None, repr=False)
    """For a confidential message: the task key it opened with."""

    @property
    def confidential(self) -> bool:
        """Whether the message travelled sealed (PROTOCOL.md §9)."""
        return self.header.HasField("confidential")

    @property
    def type(self) -> int:
        """The message type (a synapse.v1.MessageType value)."""
        return self.header.message_type

    def view(self) -> Message:
        """The decoded EnvelopeView, for SignedMessage.view."""
        p2p, payloads = _stubs.p2p(), _stubs.payloads()
        if self.confidential:
            # A sealed event's view shows its clear header only (§9.4).
            return p2p.EnvelopeView(header=self.header)
        body = payloads.Payload()
        f = _payload_field(self.type)
        if f is not None:
            getattr(body, f.name).CopyFrom(self.payload)
        return p2p.EnvelopeView(header=self.header, payload=body)


def open_envelope(
    envelope: Message,
    trust: TrustPolicy,
    *,
    self_id: str = "",
    self_key_id: str = "",
    records: bool = False,
    clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS,
    now: float | None = None,
    confidential: ConfidentialKeys | None = None,
) -> Opened:
    """Checks an envelope as a receiver must (PROTOCOL.md §2.4), in order: the
    signature over the received bytes (present, Ed25519, 64 bytes; the trusted key
    for key_id, else the embedded one whose key id matches; verified), then the
    parsed header's sender key id, the key's binding to the sender's agent id, the
    receiver (``self_id``, and ``self_key_id`` when the sender pinned one), the major
    protocol version, the clock skew and expiry (skipped for ``records``: events
    read back from a task's log), and the payload type. Raises Refused.

    An envelope whose signature value is empty and whose header has
    ``confidential`` set is opened as §9.3 says: the same header checks first,
    then the task key from ``confidential`` (without it: encryption_key_unknown),
    the payload decrypted and the signature inside verified."""
    env = _stubs.envelope()
    sig = envelope.signature
    if envelope.HasField("signature") and not sig.value:
        header = _parse_header(envelope.header)
        if header.HasField("confidential"):
            return _open_confidential(envelope, header, trust, self_id, self_key_id, records, clock_skew, now, confidential)
    if not envelope.HasField("signature") or not sig.value:
        raise Refused("signature_invalid", "envelope is not signed")
    if sig.algorithm != env.SIGNATURE_ALGORITHM_ED25519:
        raise Refused("signature_invalid", f"signature algorithm {sig.algorithm} is not Ed25519")
    if len(sig.value) != SIGNATURE_LENGTH:
        raise Refused("signature_invalid", f"signature is {len(sig.value)} bytes, not 64")
    public_key = _signer_key(envelope, trust)
    data = signing_input(envelope.header, envelope.payload)
    if not verify(public_key, sig.value, data):
        raise Refused("signature_invalid", "signature does not verify")
    # Only now, with the bytes proven to be the signer's, parse them.
    header = _parse_header(envelope.header)
    _check_header(header, sig.key_id, public_key, trust, self_id, self_key_id, records, clock_skew, now)
    payload = _parse_payload(header, envelope.payload)
    trust.accepted(header.sender.agent_id, sig.key_id, public_key)
    digest = hashlib.sha256(data + bytes(sig.value)).digest()
    return Opened(envelope, header, payload, public_key, digest)


def _open_confidential(envelope: Message, header: Message, trust: TrustPolicy, self_id: str, self_key_id: str, records: bool,
                       clock_skew: float, now: float | None, keys: ConfidentialKeys | None) -> Opened:
    from .confidential import open_sealed_payload

    sig = envelope.signature
    public_key = _signer_key(envelope, trust)
    at = time.time() if now is None else now
    _check_header(header, sig.key_id, public_key, trust, self_id, self_key_id, records, clock_skew, at)
    if keys is None:
        raise Refused("encryption_key_unknown", "this receiver holds no key for confidential messages")
    task_key = keys.task_key_for(header, self_id, at)
    signature, plaintext = open_sealed_payload(envelope.header, header, envelope.payload, task_key)
    if not verify(public_key, signature, signing_input(envelope.header, plaintext)):
        raise Refused("inner_signature_invalid", "the signature inside the confidential payload does not verify")
    payload = _parse_payload(header, plaintext)
    trust.accepted(header.sender.agent_id, sig.key_id, public_key)
    # The digest of the bytes as they travelled, for replay checks (§9.3).
    digest = hashlib.sha256(signing_input(envelope.header, envelope.payload)).digest()
    return Opened(envelope, header, payload, public_key, digest, task_key)


def _signer_key(envelope: Message, trust: TrustPolicy) -> bytes:
    """The sender's public key: from the trust policy, or embedded when its id matches."""
    sig = envelope.signature
    if sig.algorithm != _stubs.envelope().SIGNATURE_ALGORITHM_ED25519:
        raise Refused("signature_invalid", f"signature algorithm {sig.algorithm} is not Ed25519")
    public_key = trust.key_for(sig.key_id)
    if public_key is None and sig.public_key:
        if len(sig.public_key) != PUBLIC_KEY_LENGTH or key_id(sig.public_key) != sig.key_id:
            raise Refused("signature_invalid", "embedded public key does not match key_id")
        public_key = bytes(sig.public_key)
    if public_key is None:
        raise Refused("unknown_sender", f"no public key known for key id {_clip(sig.key_id)}")
    return public_key


def _parse_header(data: bytes) -> Message:
    header = _stubs.envelope().Header()
    try:
        header.ParseFromString(data)
    except DecodeError:
        raise Refused("message_format_invalid", "header bytes are not a synapse.v1.Header") from None
    return header


def _check_header(header: Message, signing_key_id: str, public_key: bytes, trust: TrustPolicy, self_id: str, self_key_id: str,
                  records: bool, clock_skew: float, now: float | None) -> None:
    """Every check of a header that the signature (or, sealed, the associated data) covers."""
    _check_header_strings(header)
    sender = header.sender.agent_id
    if not sender:
        raise Refused("message_format_invalid", "header.sender.agent_id is required")
    if header.sender.key_id != signing_key_id:
        raise Refused("signature_invalid", "header.sender.key_id differs from the signature's key_id")
    verdict = trust.check(sender, signing_key_id, public_key)
    if verdict is Verdict.CONFLICT:
        raise Refused("unknown_sender", f"agent {_clip(sender)} is known with a different key")
    if verdict is not Verdict.TRUSTED:
        raise Refused("unknown_sender", f"agent {_clip(sender)} with key {_clip(signing_key_id)} is not trusted")
    if self_id and header.receiver.agent_id != self_id:
        raise Refused("wrong_receiver", f"message is addressed to {_clip(header.receiver.agent_id)!r}, not {self_id}")
    if self_key_id and header.receiver.key_id and header.receiver.key_id != self_key_id:
        raise Refused("wrong_receiver", f"message is addressed to key {_clip(header.receiver.key_id)!r}, not {self_key_id}")
    if not header.message_id:
        raise Refused("message_format_invalid", "header.message_id is required")
    version = _SEMVER.match(header.protocol_version)
    if version is None:
        raise Refused("message_format_invalid", f"protocol_version {_clip(header.protocol_version)!r} is not semver")
    if version.group(1) != PROTOCOL_VERSION.split(".")[0]:
        raise Refused("unsupported_version", f"protocol {_clip(header.protocol_version)} is not compatible with {PROTOCOL_VERSION}")
    _check_time(header, records, clock_skew, time.time() if now is None else now)
    field_ = _payload_field(header.message_type)
    if field_ is None:
        raise Refused("message_format_invalid", f"unknown message type {header.message_type}")
    want = field_.message_type.full_name
    if header.payload_type != want:
        raise Refused("message_format_invalid", f"{type_name(header.message_type)} must carry {want}, not {_clip(header.payload_type)!r}")
    if is_task_scoped(header.message_type) and not header.task_id:
        raise Refused("message_format_invalid", f"{type_name(header.message_type)} requires header.task_id")


def _parse_payload(header: Message, data: bytes) -> Message:
    field_ = _payload_field(header.message_type)
    payload = message_factory.GetMessageClass(field_.message_type)()
    try:
        payload.ParseFromString(data)
    except DecodeError:
        raise Refused("message_format_invalid", f"payload bytes are not a {field_.message_type.full_name}") from None
    return payload


def _check_header_strings(header: Message) -> None:
    fields = {
        "message_id": header.message_id, "protocol_version": header.protocol_version,
        "sender.agent_id": header.sender.agent_id, "sender.system_id": header.sender.system_id,
        "sender.key_id": header.sender.key_id, "receiver.agent_id": header.receiver.agent_id,
        "receiver.system_id": header.receiver.system_id, "receiver.key_id": header.receiver.key_id,
        "reply_to": header.reply_to, "task_id": header.task_id, "session_id": header.session_id,
        "correlation_id": header.correlation_id, "trace.traceparent": header.trace.traceparent,
        "idempotency_key": header.idempotency_key, "payload_type": header.payload_type,
    }
    for name, value in fields.items():
        if len(value) > _MAX_HEADER_STRING:
            raise Refused("message_format_invalid", f"header.{name} is longer than {_MAX_HEADER_STRING} characters")
    if len(header.trace.tracestate) > _MAX_TRACESTATE:
        raise Refused("message_format_invalid", f"header.trace.tracestate is longer than {_MAX_TRACESTATE} characters")


def _in_range(name: str, ts: Timestamp) -> float:
    if not (_MIN_SECONDS <= ts.seconds <= _MAX_SECONDS) or not (0 <= ts.nanos <= 999_999_999):
        raise Refused("message_format_invalid",
                      f"header.{name} is outside the range of google.protobuf.Timestamp (years 1 to 9999, nanos 0 to 999999999)")
    return _seconds(ts)


def _check_time(header: Message, records: bool, skew: float, now: float) -> None:
    """Check 8: timestamps in range, |now - sent_at| <= skew, now < expires_at (unset: sent_at + skew)."""
    if not header.HasField("sent_at"):
        raise Refused("message_format_invalid", "header.sent_at is required")
    sent = _in_range("sent_at", header.sent_at)
    expires = _in_range("expires_at", header.expires_at) if header.HasField("expires_at") else sent + skew
    if records:
        return
    if abs(now - sent) > skew:
        raise Refused("message_expired", f"sent_at is {now - sent:.0f} s from now, outside the allowed clock skew of {skew:g} s")
    if now >= expires:
        raise Refused("message_expired", "message has expired")


def _clip(text: str) -> str:
    return text if len(text) <= 128 else f"{text[:128]}…({len(text)} chars)"

"""Confidential tasks (docs/PROTOCOL.md §9).

Every message of a confidential task is signed in plaintext, as any envelope,
and then the signature and the payload are sealed with AES-128-GCM under a key
derived from the task's key, the clear header as associated data. The task key
is wrapped with HPKE (RFC 9180, base mode, DHKEM(X25519, HKDF-SHA256),
HKDF-SHA256, AES-128-GCM) to each party's X25519 encryption key, which the
party publishes in a binding signed by its Ed25519 identity key. Results are
sealed in records of 65,536 bytes, and an executor's record at rest under a
key of its own. Every refusal is a Refused with the protocol code.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp

from . import _stubs
from .envelope import DEFAULT_TTL_SECONDS, build_header
from .errors import Refused
from .keys import SIGNATURE_LENGTH, Identity, b64url, key_id, pae, signing_input, verify
from .trust import Peer

SUITE_NAME = "CONFIDENTIAL_SUITE_X25519_HKDF_SHA256_AES128GCM"
ENCRYPTION_KEY_LENGTH = 32
TASK_KEY_LENGTH = 32
NONCE_LENGTH = 12
TAG_LENGTH = 16
RESULT_RECORD_BYTES = 65_536
"""Plaintext bytes per sealed result record; each sealed record is 16 bytes longer."""
DEFAULT_OVERLAP_SECONDS = 7 * 24 * 3600.0
ENCRYPTION_KEY_FILE = "encryption.key"

_TASK_KEY_LABEL = b"synapse.v1.TaskKey"
_BINDING_DOMAIN = b"synapse.v1.EncryptionKeyBinding"
_HPKE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.AES_128_GCM)
_ENC_LENGTH = 32


def suite() -> int:
    """The ConfidentialSuite value this kit seals and opens with."""
    return _stubs.confidential().ConfidentialSuite.Value(SUITE_NAME)


# ── encryption keys ─────────────────────────────────────────────────────


def encryption_key_id(public_key: bytes) -> str:
    """The RFC 7638 thumbprint of a raw X25519 public key as an OKP JWK (§9.1)."""
    if len(public_key) != ENCRYPTION_KEY_LENGTH:
        raise ValueError(f"an X25519 public key is {ENCRYPTION_KEY_LENGTH} bytes, not {len(public_key)}")
    canonical = '{"crv":"X25519","kty":"OKP","x":"%s"}' % b64url(bytes(public_key))
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


@dataclass(frozen=True)
class EncryptionKey:
    """An agent's X25519 key pair for confidential messages. ``created_at`` and
    ``retired_until`` are Unix seconds; ``retired_until`` is None on a current key."""

    private_key: X25519PrivateKey = field(repr=False)
    public_key: bytes
    key_id: str
    created_at: float
    retired_until: float | None = None

    @classmethod
    def of(cls, private_key: X25519PrivateKey, created_at: float | None = None, retired_until: float | None = None) -> "EncryptionKey":
        public_key = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(private_key, public_key, encryption_key_id(public_key), time.time() if created_at is None else created_at, retired_until)

    @classmethod
    def generate(cls, created_at: float | None = None) -> "EncryptionKey":
        """A fresh random key."""
        return cls.of(X25519PrivateKey.generate(), created_at)

    @classmethod
    def from_private_bytes(cls, raw: bytes, created_at: float | None = None, retired_until: float | None = None) -> "EncryptionKey":
        """The key of a raw 32-byte X25519 private key."""
        if len(raw) != ENCRYPTION_KEY_LENGTH:
            raise ValueError(f"an X25519 private key is {ENCRYPTION_KEY_LENGTH} bytes, not {len(raw)}")
        return cls.of(X25519PrivateKey.from_private_bytes(bytes(raw)), created_at, retired_until)

    @classmethod
    def from_pem(cls, data: bytes, created_at: float | None = None, retired_until: float | None = None) -> "EncryptionKey":
        """Reads a PKCS#8 PEM X25519 key (the encryption.key file of a data dir)."""
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, X25519PrivateKey):
            raise ValueError(f"the key is a {type(key).__name__}, not X25519")
        return cls.of(key, created_at, retired_until)

    def to_pem(self) -> bytes:
        """The private key as PKCS#8 PEM (keep it secret)."""
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    def retired(self, until: float) -> "EncryptionKey":
        """This key, retired: still opened until ``until``."""
        return EncryptionKey(self.private_key, self.public_key, self.key_id, self.created_at, until)


def save_encryption_key(path: str | os.PathLike[str], key: EncryptionKey) -> None:
    """Writes the key as PKCS#8 PEM with mode 0600 (written aside, then renamed)."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, key.to_pem())
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)


def load_encryption_key(path: str | os.PathLike[str]) -> EncryptionKey:
    """Reads a PKCS#8 PEM X25519 key; its creation time is the file's."""
    target = Path(path)
    return EncryptionKey.from_pem(target.read_bytes(), created_at=target.stat().st_mtime)


def load_or_create_encryption_key(data_dir: str | os.PathLike[str]) -> EncryptionKey:
    """The data dir's encryption.key, made on first use."""
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / ENCRYPTION_KEY_FILE
    if path.exists():
        return load_encryption_key(path)
    key = EncryptionKey.generate()
    save_encryption_key(path, key)
    return key


class EncryptionKeyRing:
    """The keys an agent opens with: the current one, and retired ones within their overlap."""

    def __init__(self, current: EncryptionKey, retired: Sequence[EncryptionKey] = ()) -> None:
        self.current = current
        self.retired = list(retired)
        self._by_id = {k.key_id: k for k in [current, *self.retired]}

    def find(self, key_id_: str, now: float | None = None) -> EncryptionKey | None:
        """The key with this id, if it may still open messages at ``now``."""
        key = self._by_id.get(key_id_)
        at = time.time() if now is None else now
        if key is None or (key.retired_until is not None and key.retired_until <= at):
            return None
        return key

    def published(self, now: float | None = None) -> list[EncryptionKey]:
        """The keys to publish: the current one and each retired one still in its overlap."""
        at = time.time() if now is None else now
        return [self.current, *(k for k in self.retired if k.retired_until is not None and k.retired_until > at)]

    def rotated(self, now: float | None = None, overlap: float = DEFAULT_OVERLAP_SECONDS) -> "EncryptionKeyRing":
        """A ring with a new current key and this one retired until ``now + overlap``."""
        at = time.time() if now is None else now
        keep = [k for k in self.retired if k.retired_until is not None and k.retired_until > at]
        return EncryptionKeyRing(EncryptionKey.generate(at), [self.current.retired(at + overlap), *keep])


# ── bindings ────────────────────────────────────────────────────────────


def _timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def binding_signing_input(binding: bytes) -> bytes:
    """PAE(["synapse.v1.EncryptionKeyBinding", binding]): what a binding's signature covers."""
    return pae([_BINDING_DOMAIN, bytes(binding)])


def sign_encryption_key(identity: Identity, key: EncryptionKey) -> Message:
    """The SignedEncryptionKey that binds ``key`` to ``identity``'s agent id and Ed25519 key."""
    conf = _stubs.confidential()
    binding = conf.EncryptionKeyBinding(agent_id=identity.agent_id, signing_key_id=identity.key_id, public_key=key.public_key,
                                        key_id=key.key_id, suite=suite(), created_at=_timestamp(key.created_at))
    if key.retired_until is not None:
        binding.retired_until.CopyFrom(_timestamp(key.retired_until))
    data = binding.SerializeToString()
    return conf.SignedEncryptionKey(binding=data, signature=identity.sign(binding_signing_input(data)))


def verify_encryption_key(signed: Message, agent_id: str, signing_public_key: bytes) -> Message:
    """The EncryptionKeyBinding of ``signed`` if it is ``agent_id``'s, signed by
    ``signing_public_key`` (the Ed25519 key trusted for that agent) under its own key
    id, for a key whose id is its thumbprint, with this kit's suite. Otherwise
    Refused("encryption_key_unknown"): no key of that agent is known by it."""
    conf = _stubs.confidential()
    binding = conf.EncryptionKeyBinding()
    try:
        binding.ParseFromString(signed.binding)
    except DecodeError:
        raise Refused("encryption_key_unknown", "the binding is not a synapse.v1.EncryptionKeyBinding") from None
    if binding.agent_id != agent_id:
        raise Refused("encryption_key_unknown", f"the key is bound to {binding.agent_id[:128]!r}, not {agent_id[:128]!r}")
    if binding.signing_key_id != key_id(signing_public_key):
        raise Refused("encryption_key_unknown", "the binding names another signing key")
    if not verify(signing_public_key, signed.signature, binding_signing_input(signed.binding)):
        raise Refused("encryption_key_unknown", "the binding's signature does not verify")
    if len(binding.public_key) != ENCRYPTION_KEY_LENGTH or binding.key_id != encryption_key_id(binding.public_key):
        raise Refused("encryption_key_unknown", "the binding's key id is not its key's thumbprint")
    if binding.suite != suite():
        raise Refused("encryption_key_unknown", f"the binding's suite {binding.suite} is not {SUITE_NAME}")
    return binding


def current_encryption_key(keys: Iterable[Message], agent_id: str, signing_public_key: bytes) -> Message:
    """The binding to seal to: the newest one that verifies and is not retired
    (from AgentCapabilities.encryption_keys); Refused("encryption_key_unknown") if none."""
    best = None
    reasons = []
    for signed in keys:
        try:
            binding = verify_encryption_key(signed, agent_id, signing_public_key)
        except Refused as refused:
            reasons.append(refused.message)
            continue
        if binding.HasField("retired_until"):
            continue
        if best is None or binding.created_at.ToNanoseconds() > best.created_at.ToNanoseconds():
            best = binding
    if best is None:
        why = f": {'; '.join(reasons)}" if reasons else ""
        raise Refused("encryption_key_unknown", f"agent {agent_id[:128]} publishes no encryption key it signed{why}")
    return best


# ── task keys ───────────────────────────────────────────────────────────


def new_task_key() -> bytes:
    """32 fresh random bytes."""
    return os.urandom(TASK_KEY_LENGTH)


def task_key_id(task_key: bytes) -> str:
    """base64url of the first 16 bytes of SHA-256("synapse.v1.TaskKey" || task_key)."""
    return b64url(hashlib.sha256(_TASK_KEY_LABEL + bytes(task_key)).digest()[:16])


def _wrap_info(task_id: str, sender_agent_id: str, sender_key_id: str, recipient_agent_id: str, recipient_key_id: str) -> bytes:
    return pae([_TASK_KEY_LABEL, *(s.encode("utf-8") for s in (task_id, sender_agent_id, sender_key_id, recipient_agent_id, recipient_key_id))])


def wrap_task_key(task_key: bytes, task_id: str, sender: Identity | Peer, recipient_agent_id: str, recipient_key_id: str,
                  recipient_public_key: bytes) -> Message:
    """The task key sealed with HPKE to one party's X25519 key: a WrappedKey.
    ``sender`` is the task_request's sender (its agent id and Ed25519 key id)."""
    if len(recipient_public_key) != ENCRYPTION_KEY_LENGTH:
        raise ValueError(f"an X25519 public key is {ENCRYPTION_KEY_LENGTH} bytes, not {len(recipient_public_key)}")
    info = _wrap_info(task_id, sender.agent_id, sender.key_id, recipient_agent_id, recipient_key_id)
    sealed = _HPKE.encrypt(bytes(task_key), X25519PublicKey.from_public_bytes(bytes(recipient_public_key)), info)
    return _stubs.confidential().WrappedKey(agent_id=recipient_agent_id, key_id=recipient_key_id,
                                            enc=sealed[:_ENC_LENGTH], ciphertext=sealed[_ENC_LENGTH:])


def wrap_to_binding(task_key: bytes, task_id: str, sender: Identity | Peer, binding: Message) -> Message:
    """The task key wrapped to the key a verified EncryptionKeyBinding names."""
    return wrap_task_key(task_key, task_id, sender, binding.agent_id, binding.key_id, bytes(binding.public_key))


def unwrap_task_key(confidentiality: Message, task_id: str, sender_agent_id: str, sender_key_id: str, self_id: str,
                    ring: EncryptionKeyRing, now: float | None = None) -> bytes:
    """The task key from the ``keys`` entry wrapped to ``self_id`` with one of the
    ring's keys, checked against ``task_key_id``. ``sender`` is the task_request's
    sender: the requester. Refused with encryption_key_unknown (no entry for a key
    held) or decryption_failed (it does not open, or is another key)."""
    mine = [w for w in confidentiality.keys if w.agent_id == self_id]
    found = next(((w, k) for w in mine if (k := ring.find(w.key_id, now)) is not None), None)
    if found is None:
        if not mine:
            raise Refused("encryption_key_unknown", f"the task key is not wrapped to {self_id[:128]}",
                          details={"expected_key_id": ring.current.key_id})
        raise Refused("encryption_key_unknown", f"the task key is wrapped to key {mine[0].key_id[:128]!r}, which this agent does not hold",
                      details={"key_id": mine[0].key_id[:128], "expected_key_id": ring.current.key_id})
    wrapped, key = found
    info = _wrap_info(task_id, sender_agent_id, sender_key_id, self_id, wrapped.key_id)
    try:
        task_key = _HPKE.decrypt(bytes(wrapped.enc) + bytes(wrapped.ciphertext), key.private_key, info)
    except (InvalidTag, ValueError) as error:
        raise Refused("decryption_failed", "the wrapped task key does not open") from error
    if len(task_key) != TASK_KEY_LENGTH:
        raise Refused("decryption_failed", "the wrapped task key does not open")
    if task_key_id(task_key) != confidentiality.task_key_id:
        raise Refused("decryption_failed", "the wrapped task key does not match header.confidential.task_key_id")
    return task_key


def _derived_key(task_key: bytes, label: bytes, piece: str) -> bytes:
    """HKDF-SHA256, empty salt, info PAE([label, piece]), 16 bytes."""
    return HKDF(algorithm=hashes.SHA256(), length=16, salt=b"", info=pae([label, piece.encode("utf-8")])).derive(bytes(task_key))


def message_key(task_key: bytes, message_id: str) -> bytes:
    """The AES-128 key of one message."""
    return _derived_key(task_key, b"synapse.v1.MessageKey", message_id)


def _associated_data(header: bytes) -> bytes:
    return pae([b"synapse.v1.Confidential", bytes(header)])


# ── sealing and opening messages ────────────────────────────────────────


def confidentiality_of(task_key: bytes, keys: Sequence[Message] = (), nonce: bytes | None = None) -> Message:
    """The header's ``confidential`` for a message sealed with ``task_key``."""
    conf = _stubs.confidential()
    return conf.Confidentiality(suite=suite(), task_key_id=task_key_id(task_key), nonce=nonce or os.urandom(NONCE_LENGTH), keys=list(keys))


def seal_sealed_header(identity: Identity, header: Message, payload: bytes, task_key: bytes) -> Message:
    """The Envelope of a header with ``confidential`` set and a serialized payload:
    signed over header and plaintext, then signature and payload encrypted."""
    header_bytes = header.SerializeToString()
    signature = identity.sign(signing_input(header_bytes, payload))
    sealed = AESGCM(message_key(task_key, header.message_id)).encrypt(bytes(header.confidential.nonce), signature + bytes(payload),
                                                                      _associated_data(header_bytes))
    env = _stubs.envelope()
    return env.Envelope(header=header_bytes, payload=sealed, signature=env.Signature(
        algorithm=env.SIGNATURE_ALGORITHM_ED25519, key_id=identity.key_id, value=b"", public_key=identity.public_key))


def seal_confidential(
    identity: Identity,
    message_type: int,
    payload: Message,
    receiver: Peer | str,
    task_key: bytes,
    *,
    keys: Sequence[Message] = (),
    nonce: bytes | None = None,
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
    """Seals a message confidentially (§9.2): the header as ``seal`` builds it with
    ``confidential`` set (``keys``, the wrapped task keys, on a task_request only),
    signed over header and plaintext payload, then AES-128-GCM. Returns (envelope, header)."""
    if len(task_key) != TASK_KEY_LENGTH:
        raise ValueError(f"a task key is {TASK_KEY_LENGTH} bytes, not {len(task_key)}")
    header = build_header(identity, message_type, payload, receiver, task_id=task_id, reply_to=reply_to, sequence=sequence,
                          session_id=session_id, correlation_id=correlation_id, idempotency_key=idempotency_key,
                          message_id=message_id, sent_at=sent_at, ttl_seconds=ttl_seconds)
    header.confidential.CopyFrom(confidentiality_of(task_key, keys, nonce))
    return seal_sealed_header(identity, header, payload.SerializeToString(), task_key), header


def open_sealed_payload(header_bytes: bytes, header: Message, sealed: bytes, task_key: bytes) -> tuple[bytes, bytes]:
    """The inner signature and the plaintext payload of a confidential envelope."""
    confidentiality = header.confidential
    if confidentiality.suite != suite():
        raise Refused("decryption_failed", f"unknown confidential suite {confidentiality.suite}")
    if len(confidentiality.nonce) != NONCE_LENGTH:
        raise Refused("decryption_failed", f"header.confidential.nonce must be {NONCE_LENGTH} bytes")
    if task_key_id(task_key) != confidentiality.task_key_id:
        raise Refused("encryption_key_unknown", f"sealed with task key {confidentiality.task_key_id[:128]!r}, not this task's")
    try:
        plaintext = AESGCM(message_key(task_key, header.message_id)).decrypt(bytes(confidentiality.nonce), bytes(sealed),
                                                                             _associated_data(header_bytes))
    except InvalidTag:
        raise Refused("decryption_failed", "the payload does not open: the header or the ciphertext was changed, or another key sealed it") from None
    if len(plaintext) < SIGNATURE_LENGTH:
        raise Refused("decryption_failed", "the opened payload is shorter than a signature")
    return plaintext[:SIGNATURE_LENGTH], plaintext[SIGNATURE_LENGTH:]


TaskKeyLookup = Callable[[Message], "bytes | None"]
"""The task key of the task a message's header names (``header.task_id``), or
None when the receiver knows no such confidential task (or none for that sender)."""


@dataclass
class ConfidentialKeys:
    """What a receiver opens confidential messages with (open_envelope's
    ``confidential``): its own encryption keys, which open the key wrapped in a
    task_request, and the task keys of the confidential tasks it knows."""

    encryption_keys: EncryptionKeyRing | None = None
    task_keys: TaskKeyLookup | None = None

    def task_key_for(self, header: Message, self_id: str, now: float | None = None) -> bytes:
        """§9.3 step 2: the suite, then the task key (unwrapped on a task_request)."""
        confidentiality = header.confidential
        if confidentiality.suite != suite():
            raise Refused("decryption_failed", f"unknown confidential suite {confidentiality.suite}")
        if header.message_type == _stubs.envelope().MESSAGE_TYPE_TASK_REQUEST:
            if self.encryption_keys is None:
                raise Refused("encryption_key_unknown", "this receiver holds no encryption key")
            return unwrap_task_key(confidentiality, header.task_id, header.sender.agent_id, header.sender.key_id,
                                   self_id or header.receiver.agent_id, self.encryption_keys, now)
        task_key = self.task_keys(header) if self.task_keys is not None else None
        if task_key is None:
            raise Refused("encryption_key_unknown", f"no confidential task {header.task_id[:128]} is known here")
        if task_key_id(task_key) != confidentiality.task_key_id:
            raise Refused("encryption_key_unknown", f"sealed with task key {confidentiality.task_key_id[:128]!r}, not this task's")
        return task_key


# ── result records (§9.5) ───────────────────────────────────────────────


def result_key(task_key: bytes, task_id: str) -> bytes:
    """The AES-128 key of a task's result records."""
    return _derived_key(task_key, b"synapse.v1.ResultKey", task_id)


def _record_nonce(index: int) -> bytes:
    return index.to_bytes(NONCE_LENGTH, "big")


def _record_aad(task_id: str, index: int, final: bool) -> bytes:
    return pae([b"synapse.v1.ResultRecord", task_id.encode("utf-8"), struct.pack("<Q", index), b"\x01" if final else b"\x00"])


def sealed_result_size(plaintext_size: int) -> int:
    """The size of the sealed stream of a result of ``plaintext_size`` bytes."""
    return plaintext_size + TAG_LENGTH * max(1, -(-plaintext_size // RESULT_RECORD_BYTES))


def seal_result(task_key: bytes, task_id: str, plaintext: bytes) -> bytes:
    """A result sealed as records of RESULT_RECORD_BYTES (an empty one is one empty record)."""
    aead = AESGCM(result_key(task_key, task_id))
    count = max(1, -(-len(plaintext) // RESULT_RECORD_BYTES))
    view = memoryview(plaintext)
    return b"".join(
        aead.encrypt(_record_nonce(i), bytes(view[i * RESULT_RECORD_BYTES:(i + 1) * RESULT_RECORD_BYTES]), _record_aad(task_id, i, i == count - 1))
        for i in range(count)
    )


def open_result(task_key: bytes, task_id: str, sealed: bytes) -> bytes:
    """Opens a whole sealed result; decryption_failed when a record does not open,
    another task's key sealed it, or the stream was cut."""
    aead = AESGCM(result_key(task_key, task_id))
    step = RESULT_RECORD_BYTES + TAG_LENGTH
    count = max(1, -(-len(sealed) // step))
    view = memoryview(sealed)
    parts = []
    for i in range(count):
        try:
            parts.append(aead.decrypt(_record_nonce(i), bytes(view[i * step:(i + 1) * step]), _record_aad(task_id, i, i == count - 1)))
        except InvalidTag:
            raise Refused("decryption_failed", f"result record {i} does not open: the stream was changed or cut") from None
    return b"".join(parts)


# ── the record at rest (§9.6) ───────────────────────────────────────────


def record_key(task_key: bytes, task_id: str) -> bytes:
    """The AES-128 key of an executor's stored record of a task."""
    return _derived_key(task_key, b"synapse.v1.RecordKey", task_id)


def seal_at_rest(task_key: bytes, task_id: str, plaintext: bytes) -> bytes:
    """A fresh nonce, then AES-128-GCM with the task id as associated data."""
    nonce = os.urandom(NONCE_LENGTH)
    return nonce + AESGCM(record_key(task_key, task_id)).encrypt(nonce, bytes(plaintext), task_id.encode("utf-8"))


def open_at_rest(task_key: bytes, task_id: str, sealed: bytes) -> bytes:
    try:
        return AESGCM(record_key(task_key, task_id)).decrypt(bytes(sealed[:NONCE_LENGTH]), bytes(sealed[NONCE_LENGTH:]), task_id.encode("utf-8"))
    except (InvalidTag, ValueError):
        raise Refused("decryption_failed", f"the stored record of task {task_id[:128]} does not open") from None

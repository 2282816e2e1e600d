"""test/vectors/confidential.json (PROTOCOL.md §9): each positive vector opens
through open_envelope to its plaintext with the inner signature verifying, each
negative one is refused with its code, the bindings verify and the sealed
result records are byte for byte the vector's."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf import json_format
from synapse.v1 import confidential_pb2, envelope_pb2

from synapse_kit import Identity, Peer, Refused, TrustStore, open_envelope, payload_class, signing_input, verify
from synapse_kit.confidential import (
    RESULT_RECORD_BYTES,
    ConfidentialKeys,
    EncryptionKey,
    EncryptionKeyRing,
    encryption_key_id,
    message_key,
    open_result,
    open_sealed_payload,
    seal_result,
    sealed_result_size,
    task_key_id,
    verify_encryption_key,
)
from synapse_kit.keys import pae


def load() -> dict:
    from conftest import VECTORS

    return json.loads((VECTORS / "confidential.json").read_text())


V = load()
TASK_KEY = bytes.fromhex(V["task_key_hex"])
AT = datetime.fromisoformat(V["verify_at"].replace("Z", "+00:00")).timestamp()
PARTIES = V["parties"]


def trust() -> TrustStore:
    """Exactly the three parties' Ed25519 keys."""
    return TrustStore(*(Peer(p["agent_id"], bytes.fromhex(p["ed25519_public_key"])) for p in PARTIES.values()))


def open_as(opener: str, envelope: envelope_pb2.Envelope):
    party = PARTIES[opener]
    ring = EncryptionKeyRing(EncryptionKey.from_private_bytes(bytes.fromhex(party["x25519_private_key"]), created_at=0))
    # Every message but the task_request opens with the task's key.
    keys = ConfidentialKeys(encryption_keys=ring, task_keys=lambda header: TASK_KEY if header.task_id == V["task_id"] else None)
    return open_envelope(envelope, trust(), self_id=party["agent_id"], now=AT, clock_skew=V["clock_skew_seconds"], confidential=keys)


def resealed(envelope: envelope_pb2.Envelope, signature: bytes) -> envelope_pb2.Envelope:
    """The message sealed again with the task key, same header and nonce, its inner
    signature replaced: what a holder of the task key could make."""
    header = envelope_pb2.Header.FromString(envelope.header)
    _, payload = open_sealed_payload(envelope.header, header, envelope.payload, TASK_KEY)
    aad = pae([b"synapse.v1.Confidential", envelope.header])
    sealed = AESGCM(message_key(TASK_KEY, header.message_id)).encrypt(header.confidential.nonce, signature + payload, aad)
    copy = envelope_pb2.Envelope()
    copy.CopyFrom(envelope)
    copy.payload = sealed
    return copy


def test_the_vectors_are_there() -> None:
    assert len(V["positive"]) >= 4 and len(V["negative"]) >= 9
    assert task_key_id(TASK_KEY) == V["task_key_id"]
    for party in PARTIES.values():
        key = EncryptionKey.from_private_bytes(bytes.fromhex(party["x25519_private_key"]))
        assert key.public_key.hex() == party["x25519_public_key"]
        assert key.key_id == encryption_key_id(key.public_key) == party["encryption_key_id"]
        assert Identity.from_seed(bytes.fromhex(party["ed25519_seed"])).key_id == party["key_id"]


@pytest.mark.parametrize("v", V["positive"], ids=[v["name"] for v in V["positive"]])
def test_positive(v: dict) -> None:
    envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
    assert envelope.signature.value == b""
    opened = open_as(v["opener"], envelope)
    assert opened.confidential and opened.task_key == TASK_KEY
    assert opened.header.confidential.task_key_id == V["task_key_id"]
    assert envelope.header.hex() == v["header_hex"]
    assert opened.payload.DESCRIPTOR.full_name == v["payload_type"]
    assert opened.payload.SerializeToString().hex() == v["plaintext_payload_hex"]
    assert json_format.MessageToDict(opened.payload) == v["payload"]
    plaintext = bytes.fromhex(v["plaintext_payload_hex"])
    assert verify(opened.public_key, bytes.fromhex(v["inner_signature_hex"]), signing_input(envelope.header, plaintext))
    assert payload_class(opened.type) is type(opened.payload)
    # The digest is of the bytes as they travelled.
    assert opened.digest == hashlib.sha256(signing_input(envelope.header, envelope.payload)).digest()


@pytest.mark.parametrize("v", V["negative"], ids=[v["name"] for v in V["negative"]])
def test_negative(v: dict) -> None:
    envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
    if v.get("zero_signature"):
        envelope = resealed(envelope, bytes(64))
    if "resign_with_seed" in v:
        header = envelope_pb2.Header.FromString(envelope.header)
        _, payload = open_sealed_payload(envelope.header, header, envelope.payload, TASK_KEY)
        other = Identity.from_seed(bytes.fromhex(v["resign_with_seed"]))
        envelope = resealed(envelope, other.sign(signing_input(envelope.header, payload)))
    with pytest.raises(Refused) as refused:
        open_as(v["opener"], envelope)
    assert refused.value.code == v["expected_error"], refused.value.message


def test_the_resealed_negatives_open_with_their_true_signature() -> None:
    """The re-seal itself is sound: with the signature it carried, the message still opens."""
    for v in V["negative"]:
        if v.get("zero_signature") or "resign_with_seed" in v:
            envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
            header = envelope_pb2.Header.FromString(envelope.header)
            signature, _ = open_sealed_payload(envelope.header, header, envelope.payload, TASK_KEY)
            assert open_as(v["opener"], resealed(envelope, signature)).payload is not None


def test_a_confidential_envelope_needs_keys_to_open() -> None:
    v = V["positive"][0]
    envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
    with pytest.raises(Refused) as refused:
        open_envelope(envelope, trust(), self_id=PARTIES[v["opener"]]["agent_id"], now=AT)
    assert refused.value.code == "encryption_key_unknown"
    # An empty signature without `confidential` is an unsigned message.
    header = envelope_pb2.Header.FromString(envelope.header)
    header.ClearField("confidential")
    plain = envelope_pb2.Envelope(header=header.SerializeToString(), payload=envelope.payload, signature=envelope.signature)
    with pytest.raises(Refused) as refused:
        open_as(v["opener"], plain)
    assert refused.value.code == "signature_invalid"


def test_a_retired_key_opens_until_its_overlap_ends() -> None:
    v = V["positive"][0]
    party = PARTIES[v["opener"]]
    envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
    old = EncryptionKey.from_private_bytes(bytes.fromhex(party["x25519_private_key"]), created_at=0)
    for until, code in ((AT + 60, None), (AT - 1, "encryption_key_unknown")):
        ring = EncryptionKeyRing(EncryptionKey.generate(AT), [old.retired(until)])
        keys = ConfidentialKeys(encryption_keys=ring)
        if code is None:
            assert open_envelope(envelope, trust(), self_id=party["agent_id"], now=AT, confidential=keys).task_key == TASK_KEY
        else:
            with pytest.raises(Refused) as refused:
                open_envelope(envelope, trust(), self_id=party["agent_id"], now=AT, confidential=keys)
            assert refused.value.code == code


def test_bindings() -> None:
    for party in PARTIES.values():
        signed = confidential_pb2.SignedEncryptionKey.FromString(bytes.fromhex(party["encryption_key_binding_hex"]))
        binding = verify_encryption_key(signed, party["agent_id"], bytes.fromhex(party["ed25519_public_key"]))
        assert binding.key_id == party["encryption_key_id"]
        assert binding.public_key.hex() == party["x25519_public_key"]
        assert binding.signing_key_id == party["key_id"]
        assert not binding.HasField("retired_until")
        with pytest.raises(Refused, match="bound to"):
            verify_encryption_key(signed, "agent_someone_else", bytes.fromhex(party["ed25519_public_key"]))
    executor, outsider = PARTIES["executor"], PARTIES["outsider"]
    signed = confidential_pb2.SignedEncryptionKey.FromString(bytes.fromhex(executor["encryption_key_binding_hex"]))
    with pytest.raises(Refused, match="another signing key") as refused:
        verify_encryption_key(signed, executor["agent_id"], bytes.fromhex(outsider["ed25519_public_key"]))
    assert refused.value.code == "encryption_key_unknown"
    forged = confidential_pb2.SignedEncryptionKey(binding=signed.binding, signature=bytes(64))
    with pytest.raises(Refused, match="signature"):
        verify_encryption_key(forged, executor["agent_id"], bytes.fromhex(executor["ed25519_public_key"]))


def test_result_records() -> None:
    r = V["result"]
    plaintext = bytes(i % 251 for i in range(r["result_size"]))
    assert hashlib.sha256(plaintext).hexdigest() == r["result_sha256"]
    sealed = seal_result(TASK_KEY, r["task_id"], plaintext)
    assert len(sealed) == r["sealed_size"] == sealed_result_size(len(plaintext))
    assert hashlib.sha256(sealed).hexdigest() == r["sealed_sha256"]
    assert sealed[:32].hex() == r["first_record_prefix_hex"]
    assert sealed[RESULT_RECORD_BYTES + 16:].hex() == r["last_record_hex"]
    assert open_result(TASK_KEY, r["task_id"], sealed) == plaintext
    for cut in (sealed[:RESULT_RECORD_BYTES + 16], sealed[:-1], b""):
        with pytest.raises(Refused) as refused:
            open_result(TASK_KEY, r["task_id"], cut)
        assert refused.value.code == "decryption_failed"
    with pytest.raises(Refused):
        open_result(TASK_KEY, "another-task", sealed)
    assert open_result(TASK_KEY, r["task_id"], seal_result(TASK_KEY, r["task_id"], b"")) == b""

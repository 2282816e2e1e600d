"""Every vector of test/vectors: RFC 8032 Ed25519 and the Synapse envelopes."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from google.protobuf import json_format
from synapse.v1 import envelope_pb2

from synapse_kit import (
    DEFAULT_CLOCK_SKEW_SECONDS,
    Identity,
    Peer,
    Refused,
    TrustStore,
    Verdict,
    key_id,
    open_envelope,
    payload_class,
    seal_header,
    sign_bytes,
    signing_input,
    verify,
)


def load(name: str) -> dict:
    from conftest import VECTORS

    return json.loads((VECTORS / name).read_text())


def at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


RFC = load("rfc8032-ed25519.json")["vectors"]
ENVELOPES = load("envelopes.json")


def test_the_vectors_are_there() -> None:
    assert RFC and ENVELOPES["positive"] and ENVELOPES["negative"]
    assert ENVELOPES["signing_domain"] == "synapse.v1.Envelope"
    assert ENVELOPES["clock_skew_seconds"] == DEFAULT_CLOCK_SKEW_SECONDS


@pytest.mark.parametrize("v", RFC, ids=[v["name"] for v in RFC])
def test_rfc8032(v: dict) -> None:
    identity = Identity.from_seed(bytes.fromhex(v["secret_key"]))
    message, signature = bytes.fromhex(v["message"]), bytes.fromhex(v["signature"])
    assert identity.public_key.hex() == v["public_key"]
    assert identity.sign(message) == signature
    assert verify(identity.public_key, signature, message)
    flipped = bytearray(signature)
    flipped[0] ^= 1
    assert not verify(identity.public_key, bytes(flipped), message)


@pytest.mark.parametrize("v", ENVELOPES["positive"], ids=[v["name"] for v in ENVELOPES["positive"]])
def test_positive_envelope(v: dict) -> None:
    identity = Identity.from_seed(bytes.fromhex(v["seed"]))
    assert identity.public_key.hex() == v["public_key"]
    assert identity.key_id == key_id(identity.public_key) == v["key_id"]
    header, payload = bytes.fromhex(v["header_hex"]), bytes.fromhex(v["payload_hex"])
    assert signing_input(header, payload).hex() == v["signing_input_hex"]
    assert sign_bytes(identity, header, payload).signature.value.hex() == v["signature_hex"]

    envelope = json_format.ParseDict(v["envelope"], envelope_pb2.Envelope())
    assert (envelope.header, envelope.payload) == (header, payload)
    assert envelope.signature.value.hex() == v["signature_hex"]
    want_header = json_format.ParseDict(v["header"], envelope_pb2.Header())
    trust = TrustStore(Peer(want_header.sender.agent_id, identity.public_key))
    opened = open_envelope(envelope, trust, self_id=v["receiver"], now=at(v["verify_at"]))
    assert opened.header == want_header
    assert opened.payload.DESCRIPTOR.full_name == v["payload_type"]
    assert opened.payload == json_format.ParseDict(v["payload"], payload_class(opened.type)())
    # Sealed again from the parsed parts, it is accepted too.
    again = seal_header(identity, opened.header, opened.payload)
    open_envelope(again, trust, self_id=v["receiver"], now=at(v["verify_at"]))
    # An hour later it is stale, but still authentic as a record.
    with pytest.raises(Refused) as stale:
        open_envelope(envelope, trust, self_id=v["receiver"], now=at(v["verify_at"]) + 3600)
    assert stale.value.code == "message_expired"
    open_envelope(envelope, trust, self_id=v["receiver"], now=at(v["verify_at"]) + 3600, records=True)


class AnyAgent:
    """Trusts one key for whatever agent id it signs as: the negative vectors test
    the envelope checks, not the binding of ids to keys."""

    def __init__(self, public_key: bytes) -> None:
        self.public_key = public_key

    def key_for(self, kid: str) -> bytes | None:
        return self.public_key if kid == key_id(self.public_key) else None

    def check(self, agent_id: str, kid: str, public_key: bytes) -> Verdict:
        return Verdict.TRUSTED if public_key == self.public_key else Verdict.CONFLICT

    def accepted(self, agent_id: str, kid: str, public_key: bytes) -> None:
        pass


@pytest.mark.parametrize("v", ENVELOPES["negative"], ids=[v["name"] for v in ENVELOPES["negative"]])
def test_negative_envelope(v: dict) -> None:
    public_key = bytes.fromhex(v["verify_public_key"])
    envelope = envelope_pb2.Envelope(
        header=bytes.fromhex(v["header_hex"]),
        payload=bytes.fromhex(v["payload_hex"]),
        signature=envelope_pb2.Signature(
            algorithm=envelope_pb2.SIGNATURE_ALGORITHM_ED25519, key_id=key_id(public_key), value=bytes.fromhex(v["signature_hex"])
        ),
    )
    with pytest.raises(Refused) as refused:
        open_envelope(envelope, AnyAgent(public_key), now=at(v["verify_at"]))
    assert refused.value.code == v["expected_error"]

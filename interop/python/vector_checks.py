"""Check (a): the language-neutral vectors under test/vectors, through the
kit: RFC 8032 Ed25519 (public key from seed, exact signature, a flipped bit
refused) and the Synapse envelopes (signing input, key id, exact signature,
a receiver's checks at verify_at with the bytes parsed by the generated
classes and compared with the vector's JSON; every negative vector refused
for its expected reason), and the confidential vectors (§9: each sealed
message opened to its plaintext with the inner signature verifying, each
negative refused with its code, the sealed result records byte for byte)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from google.protobuf import json_format
from synapse.v1 import envelope_pb2

from report import Reporter, require
from synapse_kit import Identity, Peer, Refused, TrustStore, Verdict, key_id, open_envelope, payload_class, sign_bytes, signing_input, verify
from synapse_kit.confidential import (
    ConfidentialKeys,
    EncryptionKey,
    EncryptionKeyRing,
    open_result,
    open_sealed_payload,
    seal_result,
    seal_sealed_header,
)


def at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def flip_bit(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 1
    return bytes(out)


def rfc8032(report: Reporter, path: Path) -> None:
    for v in json.loads(path.read_text())["vectors"]:
        def check(v: dict = v) -> None:
            identity = Identity.from_seed(bytes.fromhex(v["secret_key"]))
            message, signature = bytes.fromhex(v["message"]), bytes.fromhex(v["signature"])
            require(identity.public_key.hex() == v["public_key"], f"derived {identity.public_key.hex()}")
            require(identity.sign(message) == signature, f"signed {identity.sign(message).hex()}")
            require(verify(identity.public_key, signature, message), "the vector's signature does not verify")
            require(not verify(identity.public_key, flip_bit(signature, 0), message), "a flipped signature verifies")

        report.check(f"vectors.rfc8032[{v['name']}]", check)


class AnyAgent:
    """Trusts one key for whatever agent id it signs as: the negative vectors
    test the envelope checks, not the binding of ids to keys."""

    def __init__(self, public_key: bytes) -> None:
        self.public_key = public_key

    def key_for(self, kid: str) -> bytes | None:
        return self.public_key if kid == key_id(self.public_key) else None

    def check(self, agent_id: str, kid: str, public_key: bytes) -> Verdict:
        return Verdict.TRUSTED if public_key == self.public_key else Verdict.CONFLICT

    def accepted(self, agent_id: str, kid: str, public_key: bytes) -> None:
        pass


def envelope_vectors(report: Reporter, path: Path) -> None:
    doc = json.loads(path.read_text())
    for v in doc["positive"]:
        def positive(v: dict = v) -> None:
            identity = Identity.from_seed(bytes.fromhex(v["seed"]))
            header, payload = bytes.fromhex(v["header_hex"]), bytes.fromhex(v["payload_hex"])
            require(identity.key_id == v["key_id"], f"key id {identity.key_id}")
            require(signing_input(header, payload).hex() == v["signing_input_hex"], "the signing input differs")
            require(sign_bytes(identity, header, payload).signature.value.hex() == v["signature_hex"], "the signature differs")
            envelope = json_format.ParseDict(v["envelope"], envelope_pb2.Envelope())
            want = json_format.ParseDict(v["header"], envelope_pb2.Header())
            trust = TrustStore(Peer(want.sender.agent_id, identity.public_key))
            opened = open_envelope(envelope, trust, self_id=v["receiver"], now=at(v["verify_at"]))
            require(opened.header == want, "the header bytes and the header JSON differ")
            require(opened.payload == json_format.ParseDict(v["payload"], payload_class(opened.type)()), "the payload bytes and JSON differ")

        report.check(f"vectors.envelope[{v['name']}]", positive)
    for v in doc["negative"]:
        def negative(v: dict = v) -> None:
            public_key = bytes.fromhex(v["verify_public_key"])
            envelope = envelope_pb2.Envelope(
                header=bytes.fromhex(v["header_hex"]), payload=bytes.fromhex(v["payload_hex"]),
                signature=envelope_pb2.Signature(algorithm=envelope_pb2.SIGNATURE_ALGORITHM_ED25519, key_id=key_id(public_key),
                                                 value=bytes.fromhex(v["signature_hex"])))
            try:
                open_envelope(envelope, AnyAgent(public_key), now=at(v["verify_at"]))
            except Refused as refused:
                require(refused.code == v["expected_error"], f"refused as {refused.code}, expected {v['expected_error']}")
                return
            require(False, f"accepted; expected {v['expected_error']}")

        report.check(f"vectors.envelope_negative[{v['name']}]", negative)


class _Resealer:
    """Signs with a fixed signature: a holder of the task key sealing a forged inner signature."""

    def __init__(self, original: envelope_pb2.Signature, signature: bytes) -> None:
        self.key_id, self.public_key, self._signature = original.key_id, bytes(original.public_key), signature

    def sign(self, message: bytes) -> bytes:
        return self._signature


def confidential_vectors(report: Reporter, path: Path) -> None:
    doc = json.loads(path.read_text())
    task_key = bytes.fromhex(doc["task_key_hex"])
    parties = doc["parties"]
    trust = lambda: TrustStore(*(Peer(p["agent_id"], bytes.fromhex(p["ed25519_public_key"])) for p in parties.values()))  # noqa: E731

    def open_as(opener: str, envelope: envelope_pb2.Envelope):
        party = parties[opener]
        ring = EncryptionKeyRing(EncryptionKey.from_private_bytes(bytes.fromhex(party["x25519_private_key"]), created_at=0))
        keys = ConfidentialKeys(ring, lambda header: task_key if header.task_id == doc["task_id"] else None)
        return open_envelope(envelope, trust(), self_id=party["agent_id"], now=at(doc["verify_at"]), confidential=keys)

    def resealed(envelope: envelope_pb2.Envelope, signature: bytes | None, seed: str | None) -> envelope_pb2.Envelope:
        header = envelope_pb2.Header.FromString(envelope.header)
        _, payload = open_sealed_payload(envelope.header, header, envelope.payload, task_key)
        if signature is None:
            signature = Identity.from_seed(bytes.fromhex(seed)).sign(signing_input(envelope.header, payload))
        again = seal_sealed_header(_Resealer(envelope.signature, signature), header, payload, task_key)
        require(again.header == envelope.header and again.signature == envelope.signature, "re-sealing changed the header")
        return again

    for v in doc["positive"]:
        def positive(v: dict = v) -> None:
            envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
            opened = open_as(v["opener"], envelope)
            require(opened.payload.SerializeToString().hex() == v["plaintext_payload_hex"], "the opened payload differs")
            require(json_format.MessageToDict(opened.payload) == v["payload"], "the payload bytes and JSON differ")
            require(verify(opened.public_key, bytes.fromhex(v["inner_signature_hex"]), signing_input(envelope.header, bytes.fromhex(v["plaintext_payload_hex"]))),
                    "the inner signature does not verify")

        report.check(f"vectors.confidential[{v['name']}]", positive)
    for v in doc["negative"]:
        def negative(v: dict = v) -> None:
            envelope = envelope_pb2.Envelope.FromString(bytes.fromhex(v["envelope_hex"]))
            if v.get("zero_signature"):
                envelope = resealed(envelope, bytes(64), None)
            if "resign_with_seed" in v:
                envelope = resealed(envelope, None, v["resign_with_seed"])
            try:
                open_as(v["opener"], envelope)
            except Refused as refused:
                require(refused.code == v["expected_error"], f"refused as {refused.code}, expected {v['expected_error']}")
                return
            require(False, f"accepted; expected {v['expected_error']}")

        report.check(f"vectors.confidential_negative[{v['name']}]", negative)

    def result() -> None:
        r = doc["result"]
        plaintext = bytes(i % 251 for i in range(r["result_size"]))
        sealed = seal_result(task_key, r["task_id"], plaintext)
        require(len(sealed) == r["sealed_size"], f"{len(sealed)} sealed bytes")
        require(hashlib.sha256(sealed).hexdigest() == r["sealed_sha256"], "the sealed SHA-256 differs")
        require(sealed[65_552:].hex() == r["last_record_hex"], "the last record differs")
        require(open_result(task_key, r["task_id"], sealed) == plaintext, "the records do not open to the result")
        try:
            open_result(task_key, r["task_id"], sealed[:65_552])
        except Refused as refused:
            require(refused.code == "decryption_failed", f"a cut stream refused as {refused.code}")
        else:
            require(False, "a stream cut after its first record opened")

    report.check("vectors.confidential_result", result)


def run(report: Reporter, vectors_dir: Path) -> None:
    rfc8032(report, vectors_dir / "rfc8032-ed25519.json")
    envelope_vectors(report, vectors_dir / "envelopes.json")
    confidential_vectors(report, vectors_dir / "confidential.json")

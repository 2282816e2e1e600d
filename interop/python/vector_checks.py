"""Check (a): the language-neutral vectors under test/vectors. RFC 8032
Ed25519 (public key from seed, exact signature, verification, a flipped bit
refused) and Synapse envelopes (PAE signing input, key id, exact signature,
header and payload parsed with the generated classes and compared with the
vector's canonical JSON; negative vectors refused for their expected reason)."""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from envelopes import Refused, check_time, message_class, seconds_of
from report import Reporter, require
from synapse.v1 import envelope_pb2
from synapse_crypto import Identity, key_id_of, signing_input, verify


def flip_bit(data: bytes, index: int, bit: int = 0) -> bytes:
    out = bytearray(data)
    out[index] ^= 1 << bit
    return bytes(out)


def rfc8032(report: Reporter, path: Path) -> None:
    doc = json.loads(path.read_text())
    for v in doc["vectors"]:
        name = f"vectors.rfc8032[{v['name']}]"
        seed, public_key = bytes.fromhex(v["secret_key"]), bytes.fromhex(v["public_key"])
        message, signature = bytes.fromhex(v["message"]), bytes.fromhex(v["signature"])
        identity = Identity.from_seed(seed)

        report.check(f"{name}.public_key_from_seed", lambda: require(
            identity.public_key == public_key, f"derived {identity.public_key.hex()}"))
        report.check(f"{name}.signature", lambda: require(
            identity.sign(message) == signature, f"signed {identity.sign(message).hex()}"))
        report.check(f"{name}.verifies", lambda: require(
            verify(public_key, signature, message), "the vector's signature does not verify"))

        def flipped() -> None:
            require(not verify(public_key, flip_bit(signature, 0), message), "signature with bit 0 flipped verifies")
            require(not verify(public_key, flip_bit(signature, 63, 7), message), "signature with bit 511 flipped verifies")
            if message:
                require(not verify(public_key, signature, flip_bit(message, len(message) - 1)), "message with a bit flipped verifies")
            require(not verify(flip_bit(public_key, 0), signature, message), "public key with a bit flipped verifies")

        report.check(f"{name}.flipped_bit_refused", flipped)


def timestamp(text: str) -> float:
    ts = Timestamp()
    ts.FromJsonString(text)
    return seconds_of(ts)


def envelope_vectors(report: Reporter, path: Path) -> None:
    doc = json.loads(path.read_text())
    domain = doc["signing_domain"].encode("utf-8")
    skew = doc["clock_skew_seconds"]

    for v in doc["positive"]:
        name = f"vectors.envelope[{v['name']}]"
        header, payload = bytes.fromhex(v["header_hex"]), bytes.fromhex(v["payload_hex"])
        public_key, signature = bytes.fromhex(v["public_key"]), bytes.fromhex(v["signature_hex"])
        identity = Identity.from_seed(bytes.fromhex(v["seed"]))
        computed = signing_input(header, payload, domain)

        report.check(f"{name}.signing_input", lambda: require(
            computed.hex() == v["signing_input_hex"], f"computed {computed.hex()}"))
        report.check(f"{name}.public_key", lambda: require(
            identity.public_key == public_key, f"derived {identity.public_key.hex()}"))
        report.check(f"{name}.key_id", lambda: require(
            key_id_of(public_key) == v["key_id"], f"computed {key_id_of(public_key)}"))
        report.check(f"{name}.signature", lambda: require(
            identity.sign(computed) == signature, f"signed {identity.sign(computed).hex()}"))
        report.check(f"{name}.verifies", lambda: require(
            verify(public_key, signature, computed), "the vector's signature does not verify"))

        def header_parses() -> None:
            parsed = envelope_pb2.Header.FromString(header)
            require(parsed.message_id == v["header"]["messageId"], f"message_id {parsed.message_id!r}")
            require(parsed.sender.key_id == v["key_id"], f"sender.key_id {parsed.sender.key_id!r}")
            require(parsed.receiver.agent_id == v["receiver"], f"receiver {parsed.receiver.agent_id!r}")
            require(parsed.payload_type == v["payload_type"], f"payload_type {parsed.payload_type!r}")
            from_json = json_format.ParseDict(v["header"], envelope_pb2.Header())
            require(parsed == from_json, "header bytes and header JSON decode to different messages")
            check_time(parsed, timestamp(v["verify_at"]), skew)

        report.check(f"{name}.header_parses", header_parses)

        def payload_parses() -> None:
            cls = message_class(v["payload_type"])
            parsed = cls.FromString(payload)
            require(parsed == json_format.ParseDict(v["payload"], cls()), "payload bytes and payload JSON decode to different messages")

        report.check(f"{name}.payload_parses", payload_parses)

        def envelope_json() -> None:
            env = json_format.ParseDict(v["envelope"], envelope_pb2.Envelope())
            require(env.header == header and env.payload == payload, "envelope JSON carries other bytes")
            require(env.signature.value == signature, "envelope JSON carries another signature")
            require(env.signature.public_key == public_key, "envelope JSON carries another public key")
            require(env.signature.key_id == v["key_id"], "envelope JSON carries another key id")

        report.check(f"{name}.envelope_json", envelope_json)

    for v in doc["negative"]:
        name = f"vectors.envelope_negative[{v['name']}]"

        def refused() -> None:
            header, payload = bytes.fromhex(v["header_hex"]), bytes.fromhex(v["payload_hex"])
            signature, public_key = bytes.fromhex(v["signature_hex"]), bytes.fromhex(v["verify_public_key"])
            reason = None
            try:
                if not verify(public_key, signature, signing_input(header, payload, domain)):
                    raise Refused("signature_invalid", "signature does not verify")
                check_time(envelope_pb2.Header.FromString(header), timestamp(v["verify_at"]), skew)
            except Refused as refusal:
                reason = refusal.code
            require(reason is not None, f"accepted; expected {v['expected_error']}")
            require(reason == v["expected_error"], f"refused as {reason}, expected {v['expected_error']}")

        report.check(name, refused)


def run(report: Reporter, vectors_dir: Path) -> None:
    rfc8032(report, vectors_dir / "rfc8032-ed25519.json")
    envelope_vectors(report, vectors_dir / "envelopes.json")

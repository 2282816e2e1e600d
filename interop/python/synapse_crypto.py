"""Synapse cryptography without protobuf: Ed25519 identities (RFC 8032, via
the `cryptography` package), key ids (RFC 7638 JWK thumbprints of the OKP
public key), and the envelope signing input (PASETO PAE over the domain
string, the header bytes and the payload bytes), as docs/PROTOCOL.md §2
specifies them byte by byte."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SIGNING_DOMAIN = b"synapse.v1.Envelope"
SEED_LENGTH = 32
PUBLIC_KEY_LENGTH = 32
SIGNATURE_LENGTH = 64


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 4648 §5, as JOSE uses it)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def le64(n: int) -> bytes:
    """PAE's LE64: unsigned 64-bit little-endian with the top bit cleared."""
    return struct.pack("<Q", n & 0x7FFF_FFFF_FFFF_FFFF)


def pae(pieces: list[bytes]) -> bytes:
    """PASETO pre-authentication encoding: LE64(count), then LE64(len) + bytes of each piece."""
    out = bytearray(le64(len(pieces)))
    for piece in pieces:
        out += le64(len(piece))
        out += piece
    return bytes(out)


def signing_input(header: bytes, payload: bytes, domain: bytes = SIGNING_DOMAIN) -> bytes:
    """PAE(["synapse.v1.Envelope", header, payload]) over the exact bytes carried."""
    return pae([domain, bytes(header), bytes(payload)])


def key_id_of(public_key: bytes) -> str:
    """RFC 7638 thumbprint of the Ed25519 key as an OKP JWK (members in lexicographic order)."""
    if len(public_key) != PUBLIC_KEY_LENGTH:
        raise ValueError(f"Ed25519 public key must be {PUBLIC_KEY_LENGTH} bytes, got {len(public_key)}")
    canonical = '{"crv":"Ed25519","kty":"OKP","x":"%s"}' % b64url(public_key)
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def self_certifying_agent_id(public_key: bytes) -> str:
    """The agent id derived from the key (PROTOCOL.md §2.3): "agent_" and 32 hex digits of SHA-256(public key)."""
    return "agent_" + hashlib.sha256(bytes(public_key)).hexdigest()[:32]


def verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Pure Ed25519 verification; False for a bad signature or a malformed key."""
    if len(signature) != SIGNATURE_LENGTH or len(public_key) != PUBLIC_KEY_LENGTH:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(bytes(public_key)).verify(bytes(signature), bytes(message))
        return True
    except (InvalidSignature, ValueError):
        return False


@dataclass(frozen=True)
class Identity:
    """An Ed25519 key pair: the 32-byte seed, the raw public key and its key id."""

    seed: bytes
    public_key: bytes
    key_id: str
    private_key: Ed25519PrivateKey

    @classmethod
    def from_seed(cls, seed: bytes) -> "Identity":
        if len(seed) != SEED_LENGTH:
            raise ValueError(f"Ed25519 seed must be {SEED_LENGTH} bytes, got {len(seed)}")
        private_key = Ed25519PrivateKey.from_private_bytes(bytes(seed))
        public_key = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(bytes(seed), public_key, key_id_of(public_key), private_key)

    @classmethod
    def generate(cls) -> "Identity":
        return cls.from_seed(os.urandom(SEED_LENGTH))

    def sign(self, message: bytes) -> bytes:
        return self.private_key.sign(bytes(message))

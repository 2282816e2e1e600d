"""Ed25519 identities, key ids, self-certifying agent ids and the signing input
(docs/PROTOCOL.md §2.1 and §2.3), without protobuf."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SIGNING_DOMAIN = b"synapse.v1.Envelope"
SEED_LENGTH = 32
PUBLIC_KEY_LENGTH = 32
SIGNATURE_LENGTH = 64


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 4648 §5, as JOSE uses it)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decodes base64url with or without padding."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _le64(n: int) -> bytes:
    return struct.pack("<Q", n & 0x7FFF_FFFF_FFFF_FFFF)


def pae(pieces: list[bytes]) -> bytes:
    """PASETO's pre-authentication encoding: LE64(count), then LE64(len) and the bytes of each piece."""
    out = bytearray(_le64(len(pieces)))
    for piece in pieces:
        out += _le64(len(piece))
        out += piece
    return bytes(out)


def signing_input(header: bytes, payload: bytes) -> bytes:
    """PAE(["synapse.v1.Envelope", header, payload]): the bytes an envelope's signature covers."""
    return pae([SIGNING_DOMAIN, bytes(header), bytes(payload)])


def key_id(public_key: bytes) -> str:
    """The RFC 7638 thumbprint of an Ed25519 public key as an OKP JWK."""
    if len(public_key) != PUBLIC_KEY_LENGTH:
        raise ValueError(f"an Ed25519 public key is {PUBLIC_KEY_LENGTH} bytes, not {len(public_key)}")
    canonical = '{"crv":"Ed25519","kty":"OKP","x":"%s"}' % b64url(bytes(public_key))
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def agent_id_for(public_key: bytes) -> str:
    """The self-certifying agent id of a key: "agent_" and 32 hex digits of SHA-256 over it."""
    return "agent_" + hashlib.sha256(bytes(public_key)).hexdigest()[:32]


def is_self_certifying(agent_id: str, public_key: bytes) -> bool:
    """Whether agent_id is derived from public_key, so it may be trusted on first use."""
    return len(public_key) == PUBLIC_KEY_LENGTH and agent_id == agent_id_for(public_key)


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
    """An agent's Ed25519 key pair and the ids derived from it.

    ``agent_id`` defaults to the self-certifying id of the key; another id is
    allowed, but then peers must be told which key belongs to it.
    """

    private_key: Ed25519PrivateKey = field(repr=False)
    public_key: bytes
    key_id: str
    agent_id: str

    @classmethod
    def from_seed(cls, seed: bytes, agent_id: str | None = None) -> "Identity":
        """The identity of a 32-byte Ed25519 seed."""
        if len(seed) != SEED_LENGTH:
            raise ValueError(f"an Ed25519 seed is {SEED_LENGTH} bytes, not {len(seed)}")
        private_key = Ed25519PrivateKey.from_private_bytes(bytes(seed))
        public_key = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(private_key, public_key, key_id(public_key), agent_id or agent_id_for(public_key))

    @classmethod
    def generate(cls) -> "Identity":
        """A fresh key pair with its self-certifying agent id."""
        return cls.from_seed(os.urandom(SEED_LENGTH))

    @classmethod
    def from_pem(cls, data: bytes, agent_id: str | None = None) -> "Identity":
        """Reads a PKCS#8 PEM Ed25519 key (the agent.key file of `synapse keygen`)."""
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"the key is a {type(key).__name__}, not Ed25519")
        return cls.from_seed(key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()), agent_id)

    def to_pem(self) -> bytes:
        """The private key as PKCS#8 PEM (keep it secret)."""
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    @property
    def seed(self) -> bytes:
        """The 32-byte private seed."""
        return self.private_key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())

    def sign(self, message: bytes) -> bytes:
        """Pure Ed25519 (RFC 8032) signature of message."""
        return self.private_key.sign(bytes(message))

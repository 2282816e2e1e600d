"""Bearer tokens for the RPCs that carry no envelope (docs/PROTOCOL.md §5.4):
short-lived EdDSA JWTs (RFC 8037) signed by the caller's agent key, made and
checked with PyJWT."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import Refused
from .keys import PUBLIC_KEY_LENGTH, Identity, b64url, b64url_decode, key_id
from .trust import TrustPolicy, Verdict

MAX_TOKEN_LIFETIME_SECONDS = 300
TOKEN_CLOCK_TOLERANCE_SECONDS = 60


def make_token(identity: Identity, audience: str, lifetime: int = MAX_TOKEN_LIFETIME_SECONDS, *, now: float | None = None) -> str:
    """A bearer token: kid the key id, jwk the public key, iss and sub the agent id,
    aud the agent called, iat now and exp iat + lifetime (at most 300 s)."""
    if not audience:
        raise ValueError("a token needs an audience (the agent id called)")
    lifetime = min(int(lifetime), MAX_TOKEN_LIFETIME_SECONDS)
    if lifetime < 1:
        raise ValueError(f"token lifetime {lifetime} s is not positive")
    iat = int(time.time() if now is None else now)
    claims = {"iss": identity.agent_id, "sub": identity.agent_id, "aud": audience, "iat": iat, "exp": iat + lifetime}
    headers = {"typ": "JWT", "kid": identity.key_id, "jwk": {"kty": "OKP", "crv": "Ed25519", "x": b64url(identity.public_key)}}
    return jwt.encode(claims, identity.private_key, algorithm="EdDSA", headers=headers)


def bearer_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """gRPC call metadata carrying the token (``authorization: Bearer ...``)."""
    return (("authorization", f"Bearer {token}"),)


@dataclass(frozen=True)
class Caller:
    """Who a verified token speaks for."""

    agent_id: str
    key_id: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def verify_token(token: str, audience: str, trust: TrustPolicy, *, now: float | None = None) -> Caller:
    """Checks a bearer token: alg EdDSA and a kid; the key from the trust policy, else
    the embedded jwk whose thumbprint is the kid; the signature; aud this agent; iss =
    sub; iat and exp present, exp after iat by at most 300 s; refused from 60 s after
    exp and when iat is more than 60 s ahead; the trust policy vouches for the key
    speaking for sub. Raises Refused("unauthenticated", ...)."""
    def fail(why: str) -> Refused:
        return Refused("unauthenticated", f"bearer token {why}")

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise fail("is not a JWT") from None
    if header.get("alg") != "EdDSA":
        raise fail("must be signed with EdDSA (Ed25519)")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise fail("has no kid")
    public_key = trust.key_for(kid)
    jwk = header.get("jwk")
    if public_key is None and isinstance(jwk, dict) and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519" and isinstance(jwk.get("x"), str):
        try:
            embedded = b64url_decode(jwk["x"])
        except ValueError:
            embedded = b""
        if len(embedded) == PUBLIC_KEY_LENGTH and key_id(embedded) == kid:
            public_key = embedded
    if public_key is None:
        raise fail(f"names kid {kid[:128]}, whose public key is not known")
    try:
        # PyJWT checks the signature, the audience and the claims' presence; the
        # times are checked below against `now` with the protocol's tolerance.
        claims = jwt.decode(
            token,
            Ed25519PublicKey.from_public_bytes(public_key),
            algorithms=["EdDSA"],
            audience=audience,
            options={"require": ["iss", "sub", "aud", "iat", "exp"], "verify_exp": False, "verify_iat": False, "verify_nbf": False},
        )
    except jwt.InvalidAudienceError:
        raise fail(f"claim aud is not this agent ({audience})") from None
    except jwt.MissingRequiredClaimError as error:
        raise fail(f"must carry iss, sub, aud, iat and exp ({error})") from None
    except jwt.PyJWTError:
        raise fail("signature does not verify") from None
    iss, sub = claims.get("iss"), claims.get("sub")
    iat, exp = _number(claims.get("iat")), _number(claims.get("exp"))
    if not isinstance(sub, str) or not sub or iat is None or exp is None:
        raise fail("must carry iss, sub, aud, iat and exp")
    current = time.time() if now is None else now
    if exp <= current - TOKEN_CLOCK_TOLERANCE_SECONDS:
        raise fail("has expired")
    nbf = _number(claims.get("nbf"))
    if nbf is not None and nbf > current + TOKEN_CLOCK_TOLERANCE_SECONDS:
        raise fail("is not valid yet (nbf)")
    if iss != sub:
        raise fail("iss and sub must both be the caller's agent id")
    if iat > math.floor(current) + TOKEN_CLOCK_TOLERANCE_SECONDS:
        raise fail("iat is in the future")
    if exp <= iat:
        raise fail("exp must be after iat")
    if exp - iat > MAX_TOKEN_LIFETIME_SECONDS:
        raise fail(f"lifetime exceeds {MAX_TOKEN_LIFETIME_SECONDS} s")
    if trust.check(sub, kid, public_key) is not Verdict.TRUSTED:
        raise fail(f"agent {sub[:128]} with key {kid[:128]} is not trusted")
    trust.accepted(sub, kid, public_key)
    return Caller(sub, kid)


def bearer_of(metadata: Any) -> str:
    """The bearer token in a call's invocation metadata, or ""."""
    for key, value in metadata or ():
        if key.lower() == "authorization" and isinstance(value, str):
            scheme, _, rest = value.partition(" ")
            if scheme.lower() == "bearer":
                return rest.strip()
    return ""

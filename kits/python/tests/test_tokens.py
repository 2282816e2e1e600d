"""Bearer tokens: what make_token writes and every rule verify_token applies."""

from __future__ import annotations

import time

import jwt
import pytest

from synapse_kit import Identity, Peer, Refused, TrustStore, make_token, trust_on_first_use, verify_token
from synapse_kit.keys import b64url

NOW = 1_800_000_000
CALLER = Identity.generate()
OTHER = Identity.generate()


def craft(identity: Identity, claims: dict, **header: object) -> str:
    headers = {"typ": "JWT", "kid": CALLER.key_id, "jwk": {"kty": "OKP", "crv": "Ed25519", "x": b64url(CALLER.public_key)}}
    headers.update(header)
    headers = {k: v for k, v in headers.items() if v is not None}
    return jwt.encode(claims, identity.private_key, algorithm="EdDSA", headers=headers)


def claims(iat: int = NOW, exp: int = NOW + 60, **extra: object) -> dict:
    base = {"iss": CALLER.agent_id, "sub": CALLER.agent_id, "aud": "agent_server", "iat": iat, "exp": exp}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def test_round_trip_pins_the_caller() -> None:
    token = make_token(CALLER, "agent_server", 120)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "EdDSA" and header["kid"] == CALLER.key_id
    assert header["jwk"] == {"kty": "OKP", "crv": "Ed25519", "x": b64url(CALLER.public_key)}
    body = jwt.decode(token, options={"verify_signature": False})
    assert (body["iss"], body["sub"], body["aud"], body["exp"] - body["iat"]) == (CALLER.agent_id, CALLER.agent_id, "agent_server", 120)
    trust = trust_on_first_use()
    caller = verify_token(token, "agent_server", trust)
    assert (caller.agent_id, caller.key_id) == (CALLER.agent_id, CALLER.key_id)
    assert trust.key_for(CALLER.key_id) == CALLER.public_key


def test_lifetime_is_clamped_and_positive() -> None:
    body = jwt.decode(make_token(CALLER, "a", 3600), options={"verify_signature": False})
    assert body["exp"] - body["iat"] == 300
    with pytest.raises(ValueError):
        make_token(CALLER, "a", 0)
    with pytest.raises(ValueError):
        make_token(CALLER, "", 60)


CASES = [
    ("valid", craft(CALLER, claims()), None, True),
    ("aud as a list", craft(CALLER, claims(aud=["x", "agent_server"])), None, True),
    ("wrong audience", craft(CALLER, claims(aud="someone_else")), None, False),
    ("expired 59 s ago", craft(CALLER, claims(NOW - 119, NOW - 59)), None, True),
    ("expired 60 s ago", craft(CALLER, claims(NOW - 120, NOW - 60)), None, False),
    ("iat 60 s ahead", craft(CALLER, claims(NOW + 60, NOW + 120)), None, True),
    ("iat 61 s ahead", craft(CALLER, claims(NOW + 61, NOW + 121)), None, False),
    ("lifetime 300 s", craft(CALLER, claims(NOW, NOW + 300)), None, True),
    ("lifetime 301 s", craft(CALLER, claims(NOW, NOW + 301)), None, False),
    ("exp equal to iat", craft(CALLER, claims(NOW, NOW)), None, False),
    ("no iat", craft(CALLER, claims(iat=None)), None, False),
    ("iss differs from sub", craft(CALLER, claims(iss=OTHER.agent_id)), None, False),
    ("signed by another key", craft(OTHER, claims()), None, False),
    ("no jwk, unknown key", craft(CALLER, claims(), jwk=None), None, False),
    ("no jwk, known key", craft(CALLER, claims(), jwk=None), TrustStore(Peer(CALLER.agent_id, CALLER.public_key)), True),
    ("jwk of another key", craft(CALLER, claims(), jwk={"kty": "OKP", "crv": "Ed25519", "x": b64url(OTHER.public_key)}), None, False),
    ("an id not derived from the key", craft(CALLER, claims(iss="agent_alice", sub="agent_alice")), None, False),
    ("an id pinned to another key", craft(CALLER, claims()), TrustStore(Peer(CALLER.agent_id, OTHER.public_key)), False),
    ("not a JWT", "abc.def", None, False),
]


@pytest.mark.parametrize("token,trust,accept", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verify_rules(token: str, trust: TrustStore | None, accept: bool) -> None:
    trust = trust or trust_on_first_use()
    if accept:
        assert verify_token(token, "agent_server", trust, now=NOW).agent_id == CALLER.agent_id
    else:
        with pytest.raises(Refused) as refused:
            verify_token(token, "agent_server", trust, now=NOW)
        assert refused.value.code == "unauthenticated"


def test_alg_none_is_refused() -> None:
    unsigned = jwt.encode(claims(), key=None, algorithm="none", headers={"kid": CALLER.key_id})
    with pytest.raises(Refused):
        verify_token(unsigned, "agent_server", trust_on_first_use(), now=NOW)


def test_a_fresh_token_verifies_against_the_clock() -> None:
    assert verify_token(make_token(CALLER, "agent_server"), "agent_server", trust_on_first_use(), now=time.time()).key_id == CALLER.key_id

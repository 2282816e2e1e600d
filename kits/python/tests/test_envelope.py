"""Sealing, and open_envelope's refusals in the order of PROTOCOL.md §2.4."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from synapse.v1 import envelope_pb2, payloads_pb2

from synapse_kit import Identity, Peer, Refused, TrustStore, agent_id_for, is_self_certifying, new_uuid, open_envelope, seal, seal_header, trust_on_first_use

ALICE, BOB, MALLORY = Identity.generate(), Identity.generate(), Identity.generate()


def test_identity_ids() -> None:
    assert ALICE.agent_id == agent_id_for(ALICE.public_key) and len(ALICE.agent_id) == 38
    assert is_self_certifying(ALICE.agent_id, ALICE.public_key) and not is_self_certifying(BOB.agent_id, ALICE.public_key)
    back = Identity.from_pem(ALICE.to_pem())
    assert (back.agent_id, back.key_id, back.seed) == (ALICE.agent_id, ALICE.key_id, ALICE.seed)


def heartbeat(edit: Callable[[envelope_pb2.Header], None] | None = None, to: Peer | None = None) -> envelope_pb2.Envelope:
    envelope, header = seal(ALICE, envelope_pb2.MESSAGE_TYPE_HEARTBEAT, payloads_pb2.HeartbeatPayload(), to or Peer(BOB.agent_id, BOB.public_key))
    if edit is not None:
        edit(header)
        envelope = seal_header(ALICE, header, payloads_pb2.HeartbeatPayload(active_tasks=1))
    return envelope


def mutate(envelope: envelope_pb2.Envelope, fn: Callable[[envelope_pb2.Envelope], None]) -> envelope_pb2.Envelope:
    fn(envelope)
    return envelope


def flip_header(e: envelope_pb2.Envelope) -> None:
    data = bytearray(e.header)
    data[3] ^= 1
    e.header = bytes(data)


def set_(attr: str, value: object) -> Callable[[envelope_pb2.Header], None]:
    def edit(h: envelope_pb2.Header) -> None:
        target, _, name = attr.rpartition(".")
        obj = h
        for part in filter(None, target.split(".")):
            obj = getattr(obj, part)
        setattr(obj, name, value)
    return edit


def old(h: envelope_pb2.Header) -> None:
    h.sent_at.FromSeconds(int(time.time()) - 3600)
    h.expires_at.FromSeconds(int(time.time()) + 3600)


def expired(h: envelope_pb2.Header) -> None:
    h.expires_at.FromSeconds(int(time.time()) - 1)


def task_cancel_without_task(h: envelope_pb2.Header) -> None:
    h.message_type = envelope_pb2.MESSAGE_TYPE_TASK_CANCEL
    h.payload_type = "synapse.v1.TaskCancelPayload"


CASES = [
    ("accepted", lambda: heartbeat(), None, ""),
    ("unsigned", lambda: mutate(heartbeat(), lambda e: e.ClearField("signature")), None, "signature_invalid"),
    ("not Ed25519", lambda: mutate(heartbeat(), lambda e: setattr(e.signature, "algorithm", 0)), None, "signature_invalid"),
    ("no key at all", lambda: mutate(heartbeat(), lambda e: e.signature.ClearField("public_key")), None, "unknown_sender"),
    ("embedded key of another key id", lambda: mutate(heartbeat(), lambda e: setattr(e.signature, "public_key", MALLORY.public_key)), None, "signature_invalid"),
    ("tampered header", lambda: mutate(heartbeat(), flip_header), None, "signature_invalid"),
    ("header key id differs", lambda: heartbeat(set_("sender.key_id", MALLORY.key_id)), None, "signature_invalid"),
    ("an id not derived from the key", lambda: heartbeat(set_("sender.agent_id", "agent_alice")), None, "unknown_sender"),
    ("an id pinned to another key", lambda: heartbeat(), TrustStore(Peer(ALICE.agent_id, MALLORY.public_key)), "unknown_sender"),
    ("another receiver", lambda: heartbeat(to=Peer(MALLORY.agent_id, MALLORY.public_key)), None, "wrong_receiver"),
    ("another receiver key", lambda: heartbeat(to=Peer(BOB.agent_id, b"", MALLORY.key_id)), None, "wrong_receiver"),
    ("protocol 2", lambda: heartbeat(set_("protocol_version", "2.0.0")), None, "unsupported_version"),
    ("sent an hour ago", lambda: heartbeat(old), None, "message_expired"),
    ("expired", lambda: heartbeat(expired), None, "message_expired"),
    ("sent_at out of range", lambda: heartbeat(set_("sent_at.seconds", 1 << 40)), None, "message_format_invalid"),
    ("wrong payload type", lambda: heartbeat(set_("payload_type", "synapse.v1.AckPayload")), None, "message_format_invalid"),
    ("task message without task id", lambda: heartbeat(task_cancel_without_task), None, "message_format_invalid"),
]


@pytest.mark.parametrize("make,trust,code", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_open_refuses_in_order(make: Callable[[], envelope_pb2.Envelope], trust: TrustStore | None, code: str) -> None:
    trust = trust or trust_on_first_use()
    if not code:
        opened = open_envelope(make(), trust, self_id=BOB.agent_id, self_key_id=BOB.key_id)
        assert opened.header.sender.agent_id == ALICE.agent_id
        return
    with pytest.raises(Refused) as refused:
        open_envelope(make(), trust, self_id=BOB.agent_id, self_key_id=BOB.key_id)
    assert refused.value.code == code


def test_seal_checks_its_input() -> None:
    with pytest.raises(ValueError):
        seal(ALICE, envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.HeartbeatPayload(), BOB.agent_id, task_id="t")
    with pytest.raises(ValueError):
        seal(ALICE, envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(), BOB.agent_id)
    envelope, header = seal(ALICE, envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id="t"), BOB.agent_id, task_id="t", sequence=7)
    assert envelope_pb2.Header.FromString(envelope.header) == header
    assert (header.payload_type, header.sequence, header.sender.key_id) == ("synapse.v1.TaskCancelPayload", 7, ALICE.key_id)


V7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_new_uuid_is_version_7_in_time_order() -> None:
    ids = [new_uuid() for _ in range(1000)]
    assert all(V7.match(i) for i in ids) and len(set(ids)) == len(ids)
    assert new_uuid(0x0123456789AB / 1000).startswith("01234567-89ab-7")
    assert new_uuid(1_767_225_600.000) < new_uuid(1_767_225_600.001)
    _, header = seal(ALICE, envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id="t"), BOB.agent_id, task_id="t", sent_at=1_767_225_600.123)
    assert V7.match(header.message_id) and int(header.message_id.replace("-", "")[:12], 16) == 1_767_225_600_123

"""Confidential tasks (PROTOCOL.md §9) between the Client and the Agent over a
real loopback socket: what travels is sealed, both parties read it, nobody
else does, and plaintext is refused where confidentiality is owed."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from synapse.v1 import envelope_pb2, p2p_pb2, payloads_pb2

from synapse_kit import (
    Agent,
    Client,
    EncryptionKey,
    Identity,
    Peer,
    Refused,
    Task,
    TaskType,
    TrustStore,
    current_encryption_key,
    load_or_create_encryption_key,
    open_envelope,
    protocol_code,
    seal,
    seal_confidential,
    signing_input,
    verify_encryption_key,
)
from synapse_kit.confidential import message_key, open_sealed_payload
from synapse_kit.keys import pae

SECRET = "The merger closes on Friday; tell no one."


@pytest.fixture()
def agent() -> Iterator[tuple[Agent, str, threading.Event]]:
    release = threading.Event()

    def upper(task: Task) -> dict:
        task.progress(50, "half way: " + task.input["text"][:6])
        return {"text": task.input["text"].upper()}

    def slow(task: Task) -> str:
        while not task.cancelled.wait(0.01):
            if release.is_set():
                return "released"
        return "cancelled"

    agent = Agent(Identity.generate(), task_types=[
        TaskType("upper", upper), TaskType("secret_upper", upper, requires_confidentiality=True), TaskType("slow", slow)])
    server, port = agent.serve()
    yield agent, f"http://127.0.0.1:{port}", release
    release.set()
    server.stop(None)


def refused(call, status: grpc.StatusCode, code: str) -> None:
    with pytest.raises(grpc.RpcError) as error:
        call()
    assert error.value.code() == status and protocol_code(error.value) == code, error.value


def test_the_agent_publishes_a_bound_encryption_key(agent: tuple[Agent, str, threading.Event]) -> None:
    executor, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        caps = client.capabilities
        assert len(caps.encryption_keys) == 1
        binding = current_encryption_key(caps.encryption_keys, executor.identity.agent_id, executor.identity.public_key)
        assert binding.key_id == executor.encryption_keys.current.key_id
        assert bytes(binding.public_key) == executor.encryption_keys.current.public_key
        assert {t.type: t.requires_confidentiality for t in caps.supported_task_types} == {"secret_upper": True, "slow": False, "upper": False}
        # The binding does not speak for a key other than the identity's.
        with pytest.raises(Refused) as error:
            verify_encryption_key(caps.encryption_keys[0], executor.identity.agent_id, Identity.generate().public_key)
        assert error.value.code == "encryption_key_unknown"


def test_a_confidential_task_runs_sealed(agent: tuple[Agent, str, threading.Event]) -> None:
    executor, url, _ = agent
    requester, own_key = Identity.generate(), EncryptionKey.generate()
    with Client.connect(url, requester, encryption_key=own_key) as client:
        sent = client.submit("upper", {"text": SECRET}, confidential=True, wait=10, session_id="sess-1")
        task = sent.task
        assert sent.reply.confidential and sent.reply.type == envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM
        assert task.state == payloads_pb2.TASK_STATE_COMPLETED
        # GetTask shows the wrapped keys and none of the content.
        assert task.HasField("confidential") and not task.HasField("request") and not task.HasField("result")
        assert {w.agent_id for w in task.confidential.keys} == {executor.identity.agent_id, requester.agent_id}
        assert task.status_message == ""

        items = [i for i in client.watch(sent.task_id) if i.kind == "event"]
        kinds = [envelope_pb2.MessageType.Name(i.event.type) for i in items]
        assert kinds == ["MESSAGE_TYPE_TASK_CONFIRM", "MESSAGE_TYPE_TASK_STATUS_UPDATE", "MESSAGE_TYPE_TASK_COMPLETE"]
        assert all(i.event.confidential and i.event.envelope.signature.value == b"" for i in items)
        assert items[1].event.payload.message == "half way: The me"
        assert items[2].event.payload.result.output.struct_value["text"] == SECRET.upper()
        # Nothing of the content travels in the clear, nor in the typed views.
        stored = executor._tasks[sent.task_id]
        for event in stored.events:
            assert b"MERGER" not in event.message.envelope.payload and b"merger" not in event.message.envelope.payload
            assert not event.message.view.HasField("payload")
        assert envelope_pb2.Header.FromString(stored.events[0].message.envelope.header).session_id == "sess-1"

    # Another process of the same requester, holding its encryption key, reads it from GetTask's wrapped key.
    with Client.connect(url, requester, encryption_key=own_key) as later:
        events = [i.event for i in later.watch(sent.task_id) if i.kind == "event"]
        assert events[-1].payload.result.output.struct_value["text"] == SECRET.upper()
    # Without it, the events do not open.
    with Client.connect(url, requester) as stranger:
        with pytest.raises(Refused) as error:
            list(stranger.watch(sent.task_id))
        assert error.value.code == "encryption_key_unknown"


def test_a_confidential_cancel_and_a_refused_plaintext_one(agent: tuple[Agent, str, threading.Event]) -> None:
    _, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        sent = client.submit("slow", {}, confidential=True)
        plain = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id=sent.task_id), sent.task_id,
                            confidential=False)
        refused(lambda: client.send(plain), grpc.StatusCode.INVALID_ARGUMENT, "confidentiality_required")
        cancelled = client.cancel(sent.task_id, "no longer needed")
        assert cancelled.reply.confidential and cancelled.reply.payload.state == payloads_pb2.TASK_STATE_CANCELLED
        assert cancelled.task.state == payloads_pb2.TASK_STATE_CANCELLED and not cancelled.task.HasField("error")


def test_a_task_type_that_requires_confidentiality_refuses_plaintext(agent: tuple[Agent, str, threading.Event]) -> None:
    _, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        refused(lambda: client.submit("secret_upper", {"text": SECRET}, confidential=False), grpc.StatusCode.INVALID_ARGUMENT,
                "confidentiality_required")
        # Left to itself the client seals what the executor declares it requires.
        sent = client.submit("secret_upper", {"text": SECRET}, wait=10)
        assert sent.reply.confidential and sent.task.state == payloads_pb2.TASK_STATE_COMPLETED


def test_tampered_and_misdirected_confidential_requests(agent: tuple[Agent, str, threading.Event]) -> None:
    executor, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        task_key, keys = client.wrap_new_task_key("t-sealed")
        request = payloads_pb2.TaskRequestPayload(task=payloads_pb2.TaskSpec(id="t-sealed", type="upper"))
        request.task.payload.update({"text": SECRET})
        envelope, _ = seal_confidential(client.identity, envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, request, client.executor, task_key,
                                        keys=keys, task_id="t-sealed")
        tampered = envelope_pb2.Envelope()
        tampered.CopyFrom(envelope)
        tampered.payload = envelope.payload[:-1] + bytes([envelope.payload[-1] ^ 1])
        refused(lambda: client.send(tampered), grpc.StatusCode.INVALID_ARGUMENT, "decryption_failed")
        # Wrapped to the requester only: the executor holds no key for it.
        mine = [k for k in keys if k.agent_id == client.identity.agent_id]
        envelope2, _ = seal_confidential(client.identity, envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, request, client.executor, task_key,
                                         keys=mine, task_id="t-sealed")
        refused(lambda: client.send(envelope2), grpc.StatusCode.INVALID_ARGUMENT, "encryption_key_unknown")
        # A message sealed with a key for a task that is not confidential.
        plain = client.submit("upper", {"text": "hi"}, wait=10)
        ack, _ = seal_confidential(client.identity, envelope_pb2.MESSAGE_TYPE_TASK_ACK,
                                   payloads_pb2.TaskAckPayload(task_id=plain.task_id), client.executor, task_key, task_id=plain.task_id)
        refused(lambda: client.send(ack), grpc.StatusCode.INVALID_ARGUMENT, "encryption_key_unknown")
        # The untampered one still goes through, once.
        assert client.send(envelope).reply.confidential


def test_callbacks_of_a_confidential_task(agent: tuple[Agent, str, threading.Event]) -> None:
    """The kit's agent as a requester: pushed events open with the task key."""
    receiver, url, _ = agent
    executor = Identity.generate()
    task_key = bytes(range(32))
    box = receiver.expect_callbacks(Peer(executor.agent_id, executor.public_key), "t-cb", task_key)
    send = grpc.insecure_channel(url.removeprefix("http://")).unary_unary(
        "/synapse.v1.P2PService/Send", request_serializer=p2p_pb2.SendRequest.SerializeToString, response_deserializer=p2p_pb2.SendResponse.FromString)
    to = Peer(receiver.identity.agent_id, receiver.identity.public_key)
    update = payloads_pb2.TaskStatusUpdatePayload(task_id="t-cb", status=payloads_pb2.TASK_STATE_EXECUTING, message="sealed progress")
    plain, _ = seal(executor, envelope_pb2.MESSAGE_TYPE_TASK_STATUS_UPDATE, update, to, task_id="t-cb", sequence=1)
    refused(lambda: send(p2p_pb2.SendRequest(envelope=plain)), grpc.StatusCode.INVALID_ARGUMENT, "confidentiality_required")
    sealed, _ = seal_confidential(executor, envelope_pb2.MESSAGE_TYPE_TASK_STATUS_UPDATE, update, to, task_key, task_id="t-cb", sequence=1)
    reply = send(p2p_pb2.SendRequest(envelope=sealed)).reply
    assert envelope_pb2.Header.FromString(reply.envelope.header).message_type == envelope_pb2.MESSAGE_TYPE_ACK
    assert box.get(timeout=5).payload.message == "sealed progress"


def test_the_encryption_key_file(tmp_path) -> None:
    key = load_or_create_encryption_key(tmp_path)
    path = tmp_path / "encryption.key"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    again = load_or_create_encryption_key(tmp_path)
    assert again.key_id == key.key_id and again.public_key == key.public_key
    with pytest.raises(ValueError):
        EncryptionKey.from_pem(Identity.generate().to_pem())


def test_a_client_without_the_task_key_cannot_open_a_sealed_event(agent: tuple[Agent, str, threading.Event]) -> None:
    """open_envelope itself, with no keys: a sealed event is encryption_key_unknown."""
    executor, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        sent = client.submit("upper", {"text": SECRET}, confidential=True, wait=10)
        event = executor._tasks[sent.task_id].events[0].message.envelope
        with pytest.raises(Refused) as error:
            open_envelope(event, TrustStore(client.executor), self_id=client.identity.agent_id, records=True)
        assert error.value.code == "encryption_key_unknown"
        assert envelope_pb2.Header.FromString(event.header).confidential.task_key_id


def test_follow_ups_are_sealed_and_replays_recognised(agent: tuple[Agent, str, threading.Event]) -> None:
    _, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        sent = client.submit("slow", {}, confidential=True)
        # The answer is sealed, so it opens; this agent never asked, so it is out of turn.
        refused(lambda: client.provide_info(sent.task_id, {"max_sentences": 2}), grpc.StatusCode.FAILED_PRECONDITION, "illegal_transition")
        envelope = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id=sent.task_id), sent.task_id)
        assert envelope.signature.value == b"" and envelope_pb2.Header.FromString(envelope.header).HasField("confidential")
        first, again = client.send(envelope), client.send(envelope)
        assert again.reply.envelope == first.reply.envelope
        # The same message id with other sealed bytes is a replay.
        header = envelope_pb2.Header.FromString(envelope.header)
        other = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id=sent.task_id, reason="again"),
                            sent.task_id, message_id=header.message_id)
        refused(lambda: client.send(other), grpc.StatusCode.ALREADY_EXISTS, "replay_detected")
        # Another requester cannot tell the task exists, sealed or not.
        with Client.connect(url, Identity.generate()) as stranger:
            key = client.task_key(sent.task_id)
            forged, _ = seal_confidential(stranger.identity, envelope_pb2.MESSAGE_TYPE_TASK_CANCEL,
                                          payloads_pb2.TaskCancelPayload(task_id=sent.task_id), stranger.executor, key, task_id=sent.task_id)
            refused(lambda: stranger.send(forged), grpc.StatusCode.INVALID_ARGUMENT, "encryption_key_unknown")


def test_an_inner_signature_by_another_key_is_refused(agent: tuple[Agent, str, threading.Event]) -> None:
    _, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        sent = client.submit("slow", {}, confidential=True)
        envelope = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id=sent.task_id), sent.task_id)
        header = envelope_pb2.Header.FromString(envelope.header)
        key = client.task_key(sent.task_id)
        _, payload = open_sealed_payload(envelope.header, header, envelope.payload, key)
        forged_signature = Identity.generate().sign(signing_input(envelope.header, payload))
        envelope.payload = AESGCM(message_key(key, header.message_id)).encrypt(
            header.confidential.nonce, forged_signature + payload, pae([b"synapse.v1.Confidential", envelope.header]))
        refused(lambda: client.send(envelope), grpc.StatusCode.INVALID_ARGUMENT, "inner_signature_invalid")

"""The Client against the Agent over a real loopback socket, and read_result
against a fake server that drops its first stream."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from synapse.v1 import capabilities_pb2, envelope_pb2, p2p_pb2, payloads_pb2

from synapse_kit import (
    Agent,
    Client,
    Identity,
    Peer,
    Refused,
    Task,
    TaskFailure,
    TaskType,
    TrustStore,
    bearer_metadata,
    is_terminal_event,
    make_token,
    open_envelope,
    protocol_code,
    seal,
)


@pytest.fixture()
def agent() -> Iterator[tuple[Agent, str, threading.Event]]:
    release = threading.Event()

    def upper(task: Task) -> dict:
        task.progress(50, "half way")
        return {"text": task.input["text"].upper(), "requester": task.requester.agent_id}

    def fail(task: Task) -> None:
        raise TaskFailure("invalid_params", "no")

    def slow(task: Task) -> str:
        while not task.cancelled.wait(0.01):
            if release.is_set():
                return "released"
        return "cancelled"

    agent = Agent(Identity.generate(), name="test agent", task_types=[TaskType("upper", upper), TaskType("fail", fail), TaskType("slow", slow)])
    server, port = agent.serve()
    yield agent, f"http://127.0.0.1:{port}", release
    release.set()
    server.stop(None)


def test_a_task_runs_and_is_watched(agent: tuple[Agent, str, threading.Event]) -> None:
    executor, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        assert client.executor.agent_id == executor.identity.agent_id
        assert [t.type for t in client.capabilities.supported_task_types] == ["fail", "slow", "upper"]
        sent = client.submit("upper", {"text": "hello"}, wait=10)
        assert sent.reply is not None and sent.reply.type == envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM and sent.reply.header.sequence == 1
        assert sent.task.state == payloads_pb2.TASK_STATE_COMPLETED
        output = sent.task.result.output.struct_value.fields
        assert output["text"].string_value == "HELLO" and output["requester"].string_value == client.identity.agent_id

        items = list(client.watch(sent.task_id))
        assert items[0].kind == "snapshot"
        events = [i.event for i in items if i.kind == "event"]
        assert [e.type for e in events] == [envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM, envelope_pb2.MESSAGE_TYPE_TASK_STATUS_UPDATE, envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE]
        assert [i.sequence for i in items if i.kind == "event"] == [1, 2, 3]
        resumed = [i for i in client.watch(sent.task_id, from_sequence=3) if i.kind == "event"]
        assert [i.event.header.sequence for i in resumed] == [3]

        task = client.get_task(sent.task_id)
        assert task.last_sequence == 3 and task.requester.agent_id == client.identity.agent_id
        assert [t.task_id for t in client.list_tasks().tasks] == [sent.task_id]
        with pytest.raises(grpc.RpcError) as no_stream:
            client.read_result(sent.task_id)
        assert no_stream.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with Client.connect(url, Identity.generate()) as stranger:
        with pytest.raises(grpc.RpcError) as hidden:
            stranger.get_task(sent.task_id)
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND and protocol_code(hidden.value) == "task_not_found"


def test_refusals_and_rejections(agent: tuple[Agent, str, threading.Event]) -> None:
    _, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        rejected = client.submit("nope")
        assert rejected.reply.type == envelope_pb2.MESSAGE_TYPE_TASK_REJECT and rejected.task.state == payloads_pb2.TASK_STATE_REJECTED
        failed = client.submit("fail", wait=10)
        assert failed.task.state == payloads_pb2.TASK_STATE_FAILED and protocol_code_of_task(failed.task) == "ERROR_CODE_INVALID_PARAMS"

        def refused(call, status: grpc.StatusCode, code: str) -> None:
            with pytest.raises(grpc.RpcError) as error:
                call()
            assert error.value.code() == status and protocol_code(error.value) == code

        refused(lambda: client.submit("upper", callback_url="http://127.0.0.1:1"), grpc.StatusCode.INVALID_ARGUMENT, "invalid_params")
        refused(lambda: client.submit("upper", task_id=failed.task_id), grpc.StatusCode.ALREADY_EXISTS, "invalid_params")

        request = payloads_pb2.TaskRequestPayload(task=payloads_pb2.TaskSpec(id="t-replay", type="upper"))
        envelope = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, request, "t-replay")
        first, again = client.send(envelope), client.send(envelope)
        assert again.reply.envelope == first.reply.envelope
        message_id = envelope_pb2.Header.FromString(envelope.header).message_id
        other = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_CANCEL, payloads_pb2.TaskCancelPayload(task_id="t-replay"), "t-replay", message_id=message_id)
        refused(lambda: client.send(other), grpc.StatusCode.ALREADY_EXISTS, "replay_detected")
        tampered = envelope_pb2.Envelope()
        tampered.CopyFrom(envelope)
        tampered.payload = tampered.payload[:-1] + bytes([tampered.payload[-1] ^ 1])
        refused(lambda: client.send(tampered), grpc.StatusCode.UNAUTHENTICATED, "signature_invalid")

        stub = client.channel.unary_unary("/synapse.v1.P2PService/GetTask", request_serializer=p2p_pb2.GetTaskRequest.SerializeToString,
                                          response_deserializer=p2p_pb2.GetTaskResponse.FromString)
        refused(lambda: stub(p2p_pb2.GetTaskRequest(task_id="t-replay")), grpc.StatusCode.UNAUTHENTICATED, "unauthenticated")
        wrong = bearer_metadata(make_token(client.identity, "agent_someone_else"))
        refused(lambda: stub(p2p_pb2.GetTaskRequest(task_id="t-replay"), metadata=wrong), grpc.StatusCode.UNAUTHENTICATED, "unauthenticated")


def protocol_code_of_task(task: p2p_pb2.Task) -> str:
    from synapse.v1 import errors_pb2

    return errors_pb2.ErrorCode.Name(task.error.code)


def test_cancel_ends_the_task_and_signals_the_handler(agent: tuple[Agent, str, threading.Event]) -> None:
    _, url, _ = agent
    with Client.connect(url, Identity.generate()) as client:
        sent = client.submit("slow")
        assert sent.task.state == payloads_pb2.TASK_STATE_CONFIRMED
        cancelled = client.cancel(sent.task_id, "changed my mind")
        assert cancelled.reply.payload.state == payloads_pb2.TASK_STATE_CANCELLED and cancelled.reply.header.sequence == 2
        assert is_terminal_event(cancelled.reply)
        with pytest.raises(grpc.RpcError) as again:
            client.cancel(sent.task_id)
        assert protocol_code(again.value) == "task_already_completed"
        time.sleep(0.1)
        task = client.get_task(sent.task_id)
        assert task.state == payloads_pb2.TASK_STATE_CANCELLED and task.last_sequence == 2


def test_callbacks_are_taken_in_order(agent: tuple[Agent, str, threading.Event]) -> None:
    receiver, url, _ = agent
    executor = Identity.generate()
    box = receiver.expect_callbacks(Peer(executor.agent_id, executor.public_key), "t-1")
    channel = grpc.insecure_channel(url.removeprefix("http://"))
    send = channel.unary_unary("/synapse.v1.P2PService/Send", request_serializer=p2p_pb2.SendRequest.SerializeToString,
                               response_deserializer=p2p_pb2.SendResponse.FromString)
    to = Peer(receiver.identity.agent_id, receiver.identity.public_key)

    def push(sequence: int, kind: int, payload) -> p2p_pb2.SendResponse:
        envelope, _ = seal(executor, kind, payload, to, task_id="t-1", sequence=sequence)
        return send(p2p_pb2.SendRequest(envelope=envelope))

    confirm = payloads_pb2.TaskConfirmPayload(task_id="t-1", confirmed=True)
    ack = push(1, envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM, confirm)
    opened = open_envelope(ack.reply.envelope, TrustStore(to), self_id=executor.agent_id)
    assert opened.type == envelope_pb2.MESSAGE_TYPE_ACK
    push(1, envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM, confirm)  # received before: acknowledged again
    with pytest.raises(grpc.RpcError) as gap:
        push(3, envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, payloads_pb2.TaskCompletePayload(task_id="t-1"))
    assert protocol_code(gap.value) == "illegal_transition"
    push(2, envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, payloads_pb2.TaskCompletePayload(task_id="t-1"))
    assert [e.header.sequence for e in box] == [1, 2]
    stranger = Identity.generate()
    envelope, _ = seal(stranger, envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, payloads_pb2.TaskCompletePayload(task_id="t-2"), to, task_id="t-2", sequence=1)
    with pytest.raises(grpc.RpcError) as unknown:
        send(p2p_pb2.SendRequest(envelope=envelope))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    channel.close()


DATA = b"0123456789abcdefghij"


@pytest.fixture()
def result_server() -> Iterator[tuple[str, list[int]]]:
    """A fake agent whose ReadResult streams DATA in 4-byte chunks and drops its first stream after one chunk."""
    identity = Identity.generate()
    offsets: list[int] = []

    def capabilities(request, context):
        return capabilities_pb2.GetCapabilitiesResponse(capabilities=capabilities_pb2.AgentCapabilities(
            agent_id=identity.agent_id, key_id=identity.key_id, public_key=identity.public_key))

    def read_result(request, context):
        offsets.append(request.offset)
        for offset in range(request.offset, len(DATA), 4):
            data = DATA[offset:offset + 4]
            last = offset + len(data) == len(DATA)
            chunk = p2p_pb2.StreamChunk(stream_id=request.task_id, offset=offset, data=data, last=last)
            if last:
                chunk.sha256, chunk.total_size = hashlib.sha256(DATA).digest(), len(DATA)
            yield p2p_pb2.ReadResultResponse(chunk=chunk)
            if len(offsets) == 1:
                context.abort(grpc.StatusCode.UNAVAILABLE, "dropped")

    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler("synapse.v1.CapabilitiesService", {"GetCapabilities": grpc.unary_unary_rpc_method_handler(
            capabilities, request_deserializer=capabilities_pb2.GetCapabilitiesRequest.FromString,
            response_serializer=capabilities_pb2.GetCapabilitiesResponse.SerializeToString)}),
        grpc.method_handlers_generic_handler("synapse.v1.P2PService", {"ReadResult": grpc.unary_stream_rpc_method_handler(
            read_result, request_deserializer=p2p_pb2.ReadResultRequest.FromString,
            response_serializer=p2p_pb2.ReadResultResponse.SerializeToString)}),
    ))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"http://127.0.0.1:{port}", offsets
    server.stop(None)


def test_read_result_resumes_and_checks_the_signed_digest(result_server: tuple[str, list[int]]) -> None:
    url, offsets = result_server
    with Client.connect(url, Identity.generate(), retry_base_delay=0.01) as client:
        expected = payloads_pb2.ResultStream(total_size=len(DATA), sha256=hashlib.sha256(DATA).digest())
        assert client.read_result("t", expected=expected) == DATA
        assert offsets == [0, 4]
        assert client.read_result("t", received=DATA[:10]) == DATA
        with pytest.raises(Refused) as wrong:
            client.read_result("t", expected=payloads_pb2.ResultStream(total_size=len(DATA), sha256=hashlib.sha256(b"x").digest()))
        assert wrong.value.code == "signature_invalid"


def test_a_task_past_its_timeout_fails() -> None:
    release = threading.Event()
    agent = Agent(Identity.generate(), task_types={"stuck": lambda task: release.wait(10) and "late"}, task_timeout=0.1)
    server, port = agent.serve()
    try:
        with Client.connect(f"http://127.0.0.1:{port}", Identity.generate()) as client:
            sent = client.submit("stuck", wait=5)
            assert sent.task.state == payloads_pb2.TASK_STATE_FAILED
            assert protocol_code_of_task(sent.task) == "ERROR_CODE_EXECUTION_TIMEOUT" and sent.task.error.recoverable
    finally:
        release.set()
        server.stop(None)

"""Checks (b)-(f) against a running server over gRPC (HTTP/2 cleartext),
through the kit's Client: GetCapabilities, a signed task_request with wait
and its signed reply verified, a watch whose every event is verified and in
sequence, a tampered envelope refused with its ErrorDetail, GetTask with the
kit's bearer token (and one for another agent refused), and a result stream
read with read_result against the signed task_complete."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field

import grpc
from google.protobuf import json_format
from synapse.v1 import envelope_pb2, p2p_pb2, payloads_pb2

from report import CheckFailed, Reporter, require
from synapse_kit import Client, Identity, Refused, SendResult, bearer_metadata, make_token, protocol_code

TEXT = "Python speaks Synapse too. Every byte is signed."


def count_words(text: str) -> int:
    """Words are maximal runs of letters and digits."""
    return len(re.findall(r"[^\W_]+", text))


def count_sentences(text: str) -> int:
    """Segments ended by a run of . ! ? that contain a letter or digit."""
    return sum(1 for segment in re.split(r"[.!?。！？]+", text) if re.search(r"[^\W_]", segment))


def output_of(result: payloads_pb2.TaskResult) -> dict:
    require(result.HasField("output"), "the result has no output")
    output = json_format.MessageToDict(result.output)
    require(isinstance(output, dict), f"output is not an object: {output!r}")
    return output


def check_counts(output: dict) -> None:
    words, sentences = count_words(TEXT), count_sentences(TEXT)
    require((words, sentences) == (8, 2), f"this program counts {words} words and {sentences} sentences")
    require(output.get("words") == words, f"output words = {output.get('words')!r}, expected {words}")
    require(output.get("sentences") == sentences, f"output sentences = {output.get('sentences')!r}, expected {sentences}")


def expect_refusal(call, status: grpc.StatusCode, code: str) -> None:
    """The call fails with status and a synapse.v1.ErrorDetail carrying code."""
    try:
        call()
    except grpc.RpcError as error:
        require(error.code() == status, f"refused with {error.code()} ({error.details()}), expected {status}")
        require(protocol_code(error) == code, f"ErrorDetail protocol_code {protocol_code(error)!r}, expected {code!r}")
        return
    raise CheckFailed(f"accepted; expected {status}")


@dataclass
class State:
    client: Client | None = None
    sent: SendResult | None = None
    output: dict | None = None
    skipped: list[str] = field(default_factory=list)


def run(report: Reporter, url: str) -> None:
    state = State()

    def connect() -> None:
        state.client = Client.connect(url, Identity.generate())
        require(any(t.type == "text_analysis" for t in state.client.capabilities.supported_task_types), "text_analysis is not offered")

    if not report.check("live.get_capabilities", connect):
        for name in ("send.task_request", "watch.events", "tampered.refused", "get_task.bearer_token", "get_task.wrong_audience_refused", "read_result.stream"):
            report.skip(f"live.{name}", "GetCapabilities failed")
        return
    client = state.client
    with client:
        _send(report, state)
        if state.sent is None:
            report.skip("live.watch.events", "Send failed")
        else:
            report.check("live.watch.events", lambda: _watch(state))
        report.check("live.tampered.refused", lambda: _tampered(client))
        if state.sent is None:
            report.skip("live.get_task.bearer_token", "Send failed")
            report.skip("live.get_task.wrong_audience_refused", "Send failed")
        else:
            report.check("live.get_task.bearer_token", lambda: _get_task(state))
            report.check("live.get_task.wrong_audience_refused", lambda: _wrong_audience(state))
        report.check("live.read_result.stream", lambda: _read_result(client))


def _send(report: Reporter, state: State) -> None:
    client = state.client
    task_id = f"py-task-{uuid.uuid4()}"

    def send() -> None:
        sent = client.submit("text_analysis", {"text": TEXT}, task_id=task_id, wait=10)
        reply = sent.reply
        require(reply is not None, "the response carries no signed reply")
        require(reply.type == envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM, f"reply is {envelope_pb2.MessageType.Name(reply.type)}")
        require(reply.header.task_id == task_id and reply.payload.task_id == task_id and reply.payload.confirmed, "the confirm is for another task")
        require(reply.header.receiver.key_id in ("", client.identity.key_id), f"reply pins receiver key {reply.header.receiver.key_id!r}, not ours")
        require(sent.task is not None and sent.task.state == payloads_pb2.TASK_STATE_COMPLETED,
                f"state {payloads_pb2.TaskState.Name(sent.task.state) if sent.task else None} after waiting 10 s")
        state.output = output_of(sent.task.result)
        check_counts(state.output)
        state.sent = sent

    report.check("live.send.task_request", send)


def _watch(state: State) -> None:
    items = list(state.client.watch(state.sent.task_id))
    require(items and items[0].kind == "snapshot", f"the first item is {items[0].kind if items else None!r}")
    events = [i for i in items if i.kind == "event"]
    require([i.sequence for i in events] == list(range(1, len(events) + 1)), f"event sequences {[i.sequence for i in events]}")
    last = events[-1].event
    types = [envelope_pb2.MessageType.Name(i.event.type) for i in events]
    require(last.type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, f"event types {types}")
    output = output_of(last.payload.result)
    require(output == state.output, f"output {output} differs from Send's {state.output}")


def _tampered(client: Client) -> None:
    task_id = f"py-task-{uuid.uuid4()}"
    request = payloads_pb2.TaskRequestPayload(task=payloads_pb2.TaskSpec(id=task_id, type="text_analysis"))
    envelope = client.seal(envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, request, task_id)
    payload = bytearray(envelope.payload)
    payload[len(payload) // 2] ^= 0x01
    envelope.payload = bytes(payload)
    expect_refusal(lambda: client.send(envelope), grpc.StatusCode.UNAUTHENTICATED, "signature_invalid")


def _get_task(state: State) -> None:
    task = state.client.get_task(state.sent.task_id)
    require(task.requester.agent_id == state.client.identity.agent_id, f"requester {task.requester.agent_id!r}")
    require(task.state == payloads_pb2.TASK_STATE_COMPLETED, f"state {payloads_pb2.TaskState.Name(task.state)}")
    require(output_of(task.result) == state.output, "GetTask's output differs from Send's")


def _wrong_audience(state: State) -> None:
    client = state.client
    get_task = client.channel.unary_unary("/synapse.v1.P2PService/GetTask", request_serializer=p2p_pb2.GetTaskRequest.SerializeToString,
                                          response_deserializer=p2p_pb2.GetTaskResponse.FromString)
    metadata = bearer_metadata(make_token(client.identity, "someone_else", 120))
    expect_refusal(lambda: get_task(p2p_pb2.GetTaskRequest(task_id=state.sent.task_id), metadata=metadata, timeout=30),
                   grpc.StatusCode.UNAUTHENTICATED, "unauthenticated")


def _read_result(client: Client) -> None:
    csv = "n,square\n" + "".join(f"{i},{i * i}\n" for i in range(1, 201))
    sent = client.submit("data_analysis", {"csv": csv, "include_rows": True}, wait=30)
    complete = [i.event for i in client.watch(sent.task_id) if i.kind == "event"][-1]
    require(complete.type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, "the task did not complete")
    stream = complete.payload.result.stream
    require(stream.total_size > 0, "the signed task_complete offers no result stream")
    data = client.read_result(sent.task_id, expected=stream)
    require(client.read_result(sent.task_id, expected=stream, received=data[:100]) == data, "a resumed read differs")
    doc = json.loads(data)
    require(doc["rows"] == 200 and len(doc["parsed_rows"]) == 200, f"{doc['rows']} rows")
    require(str(doc["parsed_rows"][-1]["square"]) in ("40000", "40000.0"), f"the last row {doc['parsed_rows'][-1]}")
    try:
        client.read_result(sent.task_id, expected=payloads_pb2.ResultStream(total_size=stream.total_size, sha256=b"\0" * 32))
    except Refused as refused:
        require(refused.code == "signature_invalid", f"a wrong digest refused as {refused.code}")
    else:
        raise CheckFailed("a digest other than the signed one was accepted")

"""Checks (b)-(e) against a running server over gRPC (HTTP/2 cleartext):
GetCapabilities, a signed task_request through P2PService.Send with its
signed reply verified, Watch with every event verified and sequenced, a
tampered envelope refused with its ErrorDetail, and GetTask with bearer
tokens made with PyJWT."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc
import jwt
from google.protobuf import json_format, struct_pb2
from google.protobuf.duration_pb2 import Duration

from envelopes import Opened, new_header, open_envelope, seal
from report import CheckFailed, Reporter, require
from rpc_errors import error_details, status_of
from synapse.v1 import (
    capabilities_pb2,
    capabilities_pb2_grpc,
    envelope_pb2,
    errors_pb2,
    p2p_pb2,
    p2p_pb2_grpc,
    payloads_pb2,
)
from synapse_crypto import Identity, key_id_of, self_certifying_agent_id

TEXT = "Python speaks Synapse too. Every byte is signed."
RPC_TIMEOUT = 30.0
TERMINATORS = set(".!?。！？")


def count_words(text: str) -> int:
    """Words are maximal runs of letters and digits."""
    return len(re.findall(r"[^\W_]+", text))


def count_sentences(text: str) -> int:
    """Segments ended by a run of . ! ? that contain a letter or digit."""
    segments = re.split(r"[.!?。！？]+", text)
    return sum(1 for segment in segments if re.search(r"[^\W_]", segment))


def target_of(url: str) -> tuple[str, bool]:
    parts = urlsplit(url if "//" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url}")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", tls


@dataclass
class Executor:
    agent_id: str
    key_id: str
    public_key: bytes


@dataclass
class State:
    identity: Identity
    agent_id: str
    executor: Executor | None = None
    task_id: str = ""
    output: dict | None = None
    sent: bool = False


def bearer(state: State, audience: str, lifetime: int = 120) -> list[tuple[str, str]]:
    now = int(time.time())
    token = jwt.encode(
        {"iss": state.agent_id, "sub": state.agent_id, "aud": audience, "iat": now, "exp": now + lifetime},
        state.identity.private_key,
        algorithm="EdDSA",
        headers={"kid": state.identity.key_id, "typ": "JWT"},
    )
    return [("authorization", f"Bearer {token}")]


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


def open_from_executor(state: State, envelope: envelope_pb2.Envelope, check_times: bool = True) -> Opened:
    ex = state.executor
    return open_envelope(
        envelope, key_id=ex.key_id, public_key=ex.public_key,
        sender=ex.agent_id, receiver=state.agent_id, check_times=check_times,
    )


def task_request(state: State, task_id: str) -> envelope_pb2.Envelope:
    header = new_header(
        state.identity, state.agent_id, state.executor.agent_id,
        envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, task_id=task_id,
    )
    text = struct_pb2.Struct()
    text.update({"text": TEXT})
    payload = payloads_pb2.TaskRequestPayload(task=payloads_pb2.TaskSpec(id=task_id, type="text_analysis", payload=text))
    return seal(state.identity, header, payload)


def expect_refusal(call, code: grpc.StatusCode) -> grpc.RpcError:
    try:
        call()
    except grpc.RpcError as error:
        require(error.code() == code, f"refused with {error.code()} ({error.details()}), expected {code}")
        return error
    raise CheckFailed(f"accepted; expected {code}")


def detail_with(error: grpc.RpcError, protocol_code: str, status_code: grpc.StatusCode) -> None:
    status = status_of(error)
    require(status is not None, "no grpc-status-details-bin trailer")
    require(status.code == status_code.value[0], f"google.rpc.Status code {status.code}, expected {status_code.value[0]}")
    details = error_details(status)
    kinds = [d.type_url for d in status.details]
    require(details, f"no synapse.v1.ErrorDetail among the details {kinds}")
    codes = [d.protocol_code for d in details]
    require(protocol_code in codes, f"ErrorDetail protocol_code {codes}, expected {protocol_code!r}")
    detail = next(d for d in details if d.protocol_code == protocol_code)
    expected = "ERROR_CODE_" + protocol_code.upper()
    require(errors_name(detail.code) == expected, f"ErrorDetail code {errors_name(detail.code)}, expected {expected}")


def errors_name(code: int) -> str:
    try:
        return errors_pb2.ErrorCode.Name(code)
    except ValueError:
        return str(code)


def run(report: Reporter, url: str) -> None:
    identity = Identity.generate()
    # An id derived from the key: the server trusts it on first use (no trust store needed).
    state = State(identity=identity, agent_id=self_certifying_agent_id(identity.public_key))
    target, tls = target_of(url)
    channel = grpc.secure_channel(target, grpc.ssl_channel_credentials()) if tls else grpc.insecure_channel(target)
    with channel:
        capabilities = capabilities_pb2_grpc.CapabilitiesServiceStub(channel)
        p2p = p2p_pb2_grpc.P2PServiceStub(channel)
        _capabilities(report, state, capabilities)
        if state.executor is None:
            for name in ("send", "watch", "tampered", "get_task"):
                report.skip(f"live.{name}", "GetCapabilities failed")
            return
        _send(report, state, p2p)
        if not state.sent:
            report.skip("live.watch", "Send failed")
        else:
            _watch(report, state, p2p)
        _tampered(report, state, p2p)
        if not state.sent:
            report.skip("live.get_task", "Send failed")
        else:
            _get_task(report, state, p2p)


def _capabilities(report: Reporter, state: State, stub) -> None:
    def check() -> None:
        response = stub.GetCapabilities(capabilities_pb2.GetCapabilitiesRequest(), timeout=RPC_TIMEOUT)
        caps = response.capabilities
        require(caps.agent_id, "capabilities carry no agent_id")
        require(len(caps.public_key) == 32, f"public_key is {len(caps.public_key)} bytes")
        require(key_id_of(caps.public_key) == caps.key_id,
                f"key_id {caps.key_id} is not the thumbprint {key_id_of(caps.public_key)} of public_key")
        require(any(t.type == "text_analysis" for t in caps.supported_task_types), "text_analysis is not offered")
        state.executor = Executor(caps.agent_id, caps.key_id, bytes(caps.public_key))

    report.check("live.get_capabilities", check)


def _send(report: Reporter, state: State, stub) -> None:
    state.task_id = f"py-task-{uuid.uuid4()}"
    envelope = task_request(state, state.task_id)
    sent_header = envelope_pb2.Header.FromString(envelope.header)
    holder: dict = {}

    def send() -> None:
        holder["response"] = stub.Send(
            p2p_pb2.SendRequest(envelope=envelope, wait=Duration(seconds=10)), timeout=RPC_TIMEOUT
        )
        state.sent = True

    if not report.check("live.send.task_request", send):
        for name in ("reply_signature", "reply_task_confirm", "task_completed"):
            report.skip(f"live.send.{name}", "Send failed")
        return
    response: p2p_pb2.SendResponse = holder["response"]

    def reply_signature() -> None:
        require(response.HasField("reply") and response.reply.HasField("envelope"), "the response carries no signed reply")
        holder["opened"] = open_from_executor(state, response.reply.envelope)

    if report.check("live.send.reply_signature", reply_signature):
        def confirm() -> None:
            opened: Opened = holder["opened"]
            h = opened.header
            require(h.message_type == envelope_pb2.MESSAGE_TYPE_TASK_CONFIRM,
                    f"reply is {envelope_pb2.MessageType.Name(h.message_type)}")
            require(h.receiver.agent_id == state.agent_id, f"reply is addressed to {h.receiver.agent_id!r}")
            require(h.receiver.key_id in ("", state.identity.key_id), f"reply pins receiver key {h.receiver.key_id!r}, not ours")
            require(h.task_id == state.task_id, f"reply is about task {h.task_id!r}")
            require(h.reply_to in ("", sent_header.message_id), f"reply_to {h.reply_to!r} is not our message id")
            require(opened.payload.task_id == state.task_id, f"confirm payload task_id {opened.payload.task_id!r}")
            require(opened.payload.confirmed, "confirm payload has confirmed = false")

        report.check("live.send.reply_task_confirm", confirm)
    else:
        report.skip("live.send.reply_task_confirm", "the reply did not verify")

    def completed() -> None:
        require(response.HasField("task"), "the response carries no task")
        task = response.task
        require(task.task_id == state.task_id, f"task_id {task.task_id!r}")
        require(task.state == payloads_pb2.TASK_STATE_COMPLETED,
                f"state {payloads_pb2.TaskState.Name(task.state)} after waiting 10 s")
        output = output_of(task.result)
        check_counts(output)
        state.output = output

    report.check("live.send.task_completed", completed)


def _watch(report: Reporter, state: State, stub) -> None:
    holder: dict = {"events": [], "first": None, "heartbeats": 0}

    def stream() -> None:
        call = stub.Watch(
            p2p_pb2.WatchRequest(task_id=state.task_id, from_sequence=1),
            metadata=bearer(state, state.executor.agent_id), timeout=RPC_TIMEOUT,
        )
        for message in call:
            kind = message.WhichOneof("kind")
            if holder["first"] is None:
                holder["first"] = kind
            if kind == "event":
                holder["events"].append(message.event)
            elif kind == "heartbeat":
                open_from_executor(state, message.heartbeat.envelope)
                holder["heartbeats"] += 1

    if not report.check("live.watch.stream", stream):
        for name in ("snapshot_first", "event_signatures", "sequences", "task_complete"):
            report.skip(f"live.watch.{name}", "the stream failed")
        return
    events: list[p2p_pb2.TaskEvent] = holder["events"]
    opened: list[Opened] = []

    report.check("live.watch.snapshot_first", lambda: require(
        holder["first"] == "snapshot", f"the first message is {holder['first']!r}"))

    def signatures() -> None:
        require(events, "no events")
        for event in events:
            try:
                # Logged events are checked for authenticity, not freshness (as src/client/requester.ts does).
                opened.append(open_from_executor(state, event.message.envelope, check_times=False))
            except Exception as error:
                raise CheckFailed(f"event {event.sequence}: {error}") from None
            require(opened[-1].header.task_id == state.task_id, f"event {event.sequence} is about {opened[-1].header.task_id!r}")

    signed = report.check("live.watch.event_signatures", signatures)

    def sequences() -> None:
        got = [e.sequence for e in events]
        require(got == list(range(1, len(events) + 1)), f"event sequences {got}")
        for event, o in zip(events, opened):
            require(o.header.sequence == event.sequence, f"event {event.sequence} is signed as sequence {o.header.sequence}")

    if signed:
        report.check("live.watch.sequences", sequences)

        def complete() -> None:
            last = opened[-1]
            types = [envelope_pb2.MessageType.Name(o.header.message_type) for o in opened]
            require(last.header.message_type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, f"event types {types}")
            output = output_of(last.payload.result)
            require(state.output is None or output == state.output, f"output {output} differs from Send's {state.output}")
            check_counts(output)

        report.check("live.watch.task_complete", complete)
    else:
        report.skip("live.watch.sequences", "events did not verify")
        report.skip("live.watch.task_complete", "events did not verify")


def _tampered(report: Reporter, state: State, stub) -> None:
    envelope = task_request(state, f"py-task-{uuid.uuid4()}")
    payload = bytearray(envelope.payload)
    payload[len(payload) // 2] ^= 0x01
    envelope.payload = bytes(payload)
    holder: dict = {}

    def refused() -> None:
        holder["error"] = expect_refusal(
            lambda: stub.Send(p2p_pb2.SendRequest(envelope=envelope), timeout=RPC_TIMEOUT),
            grpc.StatusCode.UNAUTHENTICATED,
        )

    if report.check("live.tampered.refused_unauthenticated", refused):
        report.check("live.tampered.error_detail_signature_invalid",
                     lambda: detail_with(holder["error"], "signature_invalid", grpc.StatusCode.UNAUTHENTICATED))
    else:
        report.skip("live.tampered.error_detail_signature_invalid", "not refused as expected")


def _get_task(report: Reporter, state: State, stub) -> None:
    def own_token() -> None:
        response = stub.GetTask(
            p2p_pb2.GetTaskRequest(task_id=state.task_id),
            metadata=bearer(state, state.executor.agent_id), timeout=RPC_TIMEOUT,
        )
        task = response.task
        require(task.task_id == state.task_id, f"task_id {task.task_id!r}")
        require(task.requester.agent_id == state.agent_id, f"requester {task.requester.agent_id!r}")
        require(task.state == payloads_pb2.TASK_STATE_COMPLETED, f"state {payloads_pb2.TaskState.Name(task.state)}")
        output = output_of(task.result)
        require(state.output is None or output == state.output, f"output {output} differs from Send's {state.output}")

    report.check("live.get_task.bearer_token", own_token)
    holder: dict = {}

    def wrong_audience() -> None:
        holder["error"] = expect_refusal(
            lambda: stub.GetTask(
                p2p_pb2.GetTaskRequest(task_id=state.task_id),
                metadata=bearer(state, "someone_else"), timeout=RPC_TIMEOUT,
            ),
            grpc.StatusCode.UNAUTHENTICATED,
        )

    if report.check("live.get_task.wrong_audience_refused", wrong_audience):
        report.check("live.get_task.wrong_audience_error_detail",
                     lambda: detail_with(holder["error"], "unauthenticated", grpc.StatusCode.UNAUTHENTICATED))
    else:
        report.skip("live.get_task.wrong_audience_error_detail", "not refused as expected")

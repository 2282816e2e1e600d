"""A requester client over gRPC: it seals every message with its identity,
verifies every reply and event against the executor's key, resumes watches
and result reads after a dropped connection, and makes its bearer tokens.
Confidential tasks (PROTOCOL.md §9) are sealed to the executor's published
encryption key and to the client's own, so that their events, answers and
results are read only by the two parties."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import grpc
from google.protobuf import json_format, struct_pb2
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from . import _stubs
from .confidential import (
    ConfidentialKeys,
    EncryptionKey,
    EncryptionKeyRing,
    current_encryption_key,
    new_task_key,
    open_result,
    seal_confidential,
    unwrap_task_key,
    wrap_task_key,
    wrap_to_binding,
)
from .envelope import Opened, new_uuid, open_envelope, seal, type_name
from .errors import Refused
from .keys import Identity
from .tokens import bearer_metadata, make_token
from .trust import Peer, TrustStore

RESUMABLE = {
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED,
}
_TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELLED", "TASK_STATE_REJECTED"}


def channel_for(url: str) -> grpc.Channel:
    """A gRPC channel to an agent's base URL: http://host:port (HTTP/2 cleartext) or
    https://host:port (TLS with the system roots)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not a base URL like http://host:port")
    tls = parts.scheme == "https"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    target = f"{host}:{parts.port or (443 if tls else 80)}"
    return grpc.secure_channel(target, grpc.ssl_channel_credentials()) if tls else grpc.insecure_channel(target)


def is_terminal_state(state: int) -> bool:
    """Whether a TaskState never changes again."""
    return _stubs.payloads().TaskState.Name(state) in _TERMINAL


def is_terminal_event(event: Opened) -> bool:
    """Whether an event ends its task (task_complete, task_failed, task_reject, or a
    task_ack that leads to a terminal state)."""
    name = type_name(event.type)
    if name in ("TASK_COMPLETE", "TASK_FAILED", "TASK_REJECT"):
        return True
    return name == "TASK_ACK" and is_terminal_state(event.payload.state)


@dataclass
class SendResult:
    """The executor's answer to a Send."""

    task_id: str
    reply: Opened | None
    """The signed reply, verified (None when the message type has none)."""
    task: Message | None
    """The synapse.v1.Task after the message was applied (and after waiting)."""


@dataclass
class WatchItem:
    """One item of a watch. ``kind`` is "snapshot" (``task``), "event" (``event``,
    verified, and its ``sequence``), "heartbeat" (``event``) or "reconnecting"
    (``error``; the stream resumes from ``sequence``)."""

    kind: str
    task: Message | None = None
    event: Opened | None = None
    sequence: int = 0
    error: grpc.RpcError | None = None


def _rpc(channel: grpc.Channel, service: str, method: str, request: type[Message], response: type[Message], stream: bool = False) -> Any:
    make = channel.unary_stream if stream else channel.unary_unary
    return make(f"/synapse.v1.{service}/{method}", request_serializer=request.SerializeToString, response_deserializer=response.FromString)


class Client:
    """A requester talking to one executor over gRPC.

    ``Client.connect(url, identity)`` learns the executor's identity with
    GetCapabilities (checking its key id is its key's thumbprint); pass
    ``executor`` to insist on a key pinned earlier. ``max_retries`` bounds the
    resumptions of watch and read_result, ``send_retries`` how often send sends
    the same envelope again after UNAVAILABLE (a server shutting down, a stream
    it refused, or one that cannot be reached); both back off from
    ``retry_base_delay`` seconds, doubling each time. ``encryption_key`` is the
    requester's own X25519 key (or ring): every confidential task's key is
    wrapped to it too, so a client holding it reads the task from any process
    (without one, a fresh key serves this client only)."""

    def __init__(self, channel: grpc.Channel, identity: Identity, *, executor: Peer | None = None,
                 timeout: float = 30.0, max_retries: int = 5, retry_base_delay: float = 0.5, send_retries: int = 3,
                 encryption_key: EncryptionKey | EncryptionKeyRing | None = None) -> None:
        self.channel = channel
        self.identity = identity
        if not isinstance(encryption_key, EncryptionKeyRing):
            encryption_key = EncryptionKeyRing(encryption_key or EncryptionKey.generate())
        self.encryption_keys = encryption_key
        self._task_keys: dict[str, bytes] = {}
        self._plain_tasks: set[str] = set()
        self._keys_lock = threading.Lock()
        self._confidential = ConfidentialKeys(self.encryption_keys, self._task_key_of)
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.send_retries = send_retries
        caps, p2p = _stubs.capabilities(), _stubs.p2p()
        self._get_caps = _rpc(channel, "CapabilitiesService", "GetCapabilities", caps.GetCapabilitiesRequest, caps.GetCapabilitiesResponse)
        self.capabilities = self._get_caps(caps.GetCapabilitiesRequest(), timeout=timeout).capabilities
        declared = Peer.from_capabilities(self.capabilities)
        if executor is not None and (executor.agent_id != declared.agent_id or executor.public_key != declared.public_key):
            raise Refused("unknown_sender", f"the agent declares {declared.agent_id} with key {declared.key_id}, "
                                            f"but {executor.agent_id} with key {executor.key_id} is expected")
        self.executor = declared
        # The agent at the URL the caller chose is trusted, whatever its id's form.
        self._trust = TrustStore(declared)
        self._send = _rpc(channel, "P2PService", "Send", p2p.SendRequest, p2p.SendResponse)
        self._get_task = _rpc(channel, "P2PService", "GetTask", p2p.GetTaskRequest, p2p.GetTaskResponse)
        self._list_tasks = _rpc(channel, "P2PService", "ListTasks", p2p.ListTasksRequest, p2p.ListTasksResponse)
        self._watch = _rpc(channel, "P2PService", "Watch", p2p.WatchRequest, p2p.WatchResponse, stream=True)
        self._read_result = _rpc(channel, "P2PService", "ReadResult", p2p.ReadResultRequest, p2p.ReadResultResponse, stream=True)
        self._token_lock = threading.Lock()
        self._token: tuple[str, float] | None = None

    @classmethod
    def connect(cls, url: str, identity: Identity, **options: Any) -> "Client":
        """Opens a channel to ``url`` (see channel_for) and a client on it."""
        return cls(channel_for(url), identity, **options)

    def close(self) -> None:
        """Closes the channel."""
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def seal(self, message_type: int, payload: Message, task_id: str = "", *, confidential: bool | None = None, **header: Any) -> Message:
        """Seals a message to the executor (receiver key id pinned); returns the envelope.
        A message about a confidential task is sealed with its task key (``confidential``
        None: whenever the task is confidential, learnt from GetTask if need be)."""
        if confidential is None:
            request = message_type == _stubs.envelope().MESSAGE_TYPE_TASK_REQUEST
            confidential = bool(task_id) and not request and self.is_confidential(task_id)
        if confidential:
            envelope, _ = seal_confidential(self.identity, message_type, payload, self.executor, self.task_key(task_id), task_id=task_id, **header)
        else:
            envelope, _ = seal(self.identity, message_type, payload, self.executor, task_id=task_id, **header)
        return envelope

    def verify(self, envelope: Message, *, records: bool = False) -> Opened:
        """Opens a message the executor signed and addressed to this requester (a
        confidential one with its task's key); ``records`` skips the freshness check,
        for events read back."""
        opened = open_envelope(envelope, self._trust, self_id=self.identity.agent_id, records=records, confidential=self._confidential)
        if opened.header.sender.agent_id != self.executor.agent_id:
            raise Refused("unknown_sender", f"signed by {opened.header.sender.agent_id}, not the executor {self.executor.agent_id}")
        return opened

    def send(self, envelope: Message, wait: float | None = None) -> SendResult:
        """Delivers one sealed envelope; ``wait`` (seconds) holds the answer until the task
        is terminal or waits for input. The reply is verified before it is returned.
        After UNAVAILABLE the same envelope is sent again (at most ``send_retries``
        times): a Send is idempotent by message id, so a message the executor
        already processed gets its stored reply and has no second effect."""
        request = _stubs.p2p().SendRequest(envelope=envelope)
        if wait:
            request.wait.CopyFrom(Duration(seconds=int(wait), nanos=int((wait % 1) * 1e9)))
        attempt = 1
        while True:
            try:
                response = self._send(request, timeout=self.timeout + (wait or 0))
                break
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or attempt > self.send_retries:
                    raise
            self._backoff(attempt)
            attempt += 1
        reply = self.verify(response.reply.envelope) if response.reply.HasField("envelope") else None
        task = response.task if response.HasField("task") else None
        task_id = task.task_id if task is not None else (reply.header.task_id if reply else "")
        return SendResult(task_id, reply, task)

    def submit(self, task_type: str, input: dict[str, Any] | None = None, *, task_id: str = "", wait: float | None = None,
               idempotency_key: str = "", callback_url: str = "", session_id: str = "", confidential: bool | None = None) -> SendResult:
        """Sends a signed task_request for ``task_type`` with the JSON object ``input``.
        ``confidential`` (None: when the executor declares the task type
        requires_confidentiality) seals it as PROTOCOL.md §9.2 says: the executor's
        current encryption key is taken from fresh capabilities and its binding
        verified against the executor's identity key, a new task key is wrapped to
        the executor and to this client, and the request is signed, then sealed."""
        payloads, env = _stubs.payloads(), _stubs.envelope()
        task_id = task_id or new_uuid()
        struct = struct_pb2.Struct()
        struct.update(input or {})
        request = payloads.TaskRequestPayload(
            task=payloads.TaskSpec(id=task_id, type=task_type, priority=payloads.TASK_PRIORITY_NORMAL, payload=struct),
            callback_url=callback_url,
        )
        if session_id:
            request.context.session_id = session_id
        if confidential is None:
            confidential = any(t.type == task_type and t.requires_confidentiality for t in self.capabilities.supported_task_types)
        if confidential:
            task_key, keys = self.wrap_new_task_key(task_id)
            envelope, _ = seal_confidential(self.identity, env.MESSAGE_TYPE_TASK_REQUEST, request, self.executor, task_key, keys=keys,
                                            task_id=task_id, idempotency_key=idempotency_key, session_id=session_id)
        else:
            with self._keys_lock:
                self._plain_tasks.add(task_id)
            envelope = self.seal(env.MESSAGE_TYPE_TASK_REQUEST, request, task_id, confidential=False,
                                 idempotency_key=idempotency_key, session_id=session_id)
        result = self.send(envelope, wait)
        result.task_id = task_id
        return result

    def cancel(self, task_id: str, reason: str = "") -> SendResult:
        """Sends a signed task_cancel (sealed on a confidential task); the reply is the executor's task_ack."""
        payload = _stubs.payloads().TaskCancelPayload(task_id=task_id, reason=reason)
        return self.send(self.seal(_stubs.envelope().MESSAGE_TYPE_TASK_CANCEL, payload, task_id))

    def provide_info(self, task_id: str, fields: dict[str, Any], note: str = "", *, wait: float | None = None) -> SendResult:
        """Answers a task_need_info with a task_info_provided (sealed on a confidential task)."""
        struct = struct_pb2.Struct()
        struct.update(fields)
        payload = _stubs.payloads().TaskInfoProvidedPayload(task_id=task_id, fields=struct, note=note)
        return self.send(self.seal(_stubs.envelope().MESSAGE_TYPE_TASK_INFO_PROVIDED, payload, task_id), wait)

    # ── confidential tasks ───────────────────────────────────────────────

    def wrap_new_task_key(self, task_id: str) -> tuple[bytes, list[Message]]:
        """A task key for a new confidential task, wrapped to the executor's current key
        (from capabilities fetched now, its binding checked against the executor's
        identity key) and to this client's."""
        caps = _stubs.capabilities()
        fresh = self._get_caps(caps.GetCapabilitiesRequest(), timeout=self.timeout).capabilities
        if fresh.agent_id != self.executor.agent_id or bytes(fresh.public_key) != self.executor.public_key:
            raise Refused("unknown_sender", f"the agent now declares {fresh.agent_id[:128]}, not {self.executor.agent_id}")
        binding = current_encryption_key(fresh.encryption_keys, self.executor.agent_id, self.executor.public_key)
        task_key = new_task_key()
        own = self.encryption_keys.current
        keys = [wrap_to_binding(task_key, task_id, self.identity, binding),
                wrap_task_key(task_key, task_id, self.identity, self.identity.agent_id, own.key_id, own.public_key)]
        with self._keys_lock:
            self._task_keys[task_id] = task_key
        return task_key, keys

    def is_confidential(self, task_id: str) -> bool:
        """Whether a task is confidential: known here, or else told by GetTask."""
        with self._keys_lock:
            if task_id in self._task_keys:
                return True
            if task_id in self._plain_tasks:
                return False
        try:
            task = self.get_task(task_id)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return False  # the executor will say so itself
            raise
        if not task.HasField("confidential"):
            with self._keys_lock:
                self._plain_tasks.add(task_id)
            return False
        self._unwrap(task)
        return True

    def task_key(self, task_id: str) -> bytes:
        """A confidential task's key: held since the submit, or unwrapped from
        GetTask's Task.confidential with this client's encryption key. Refused
        with encryption_key_unknown when the task is not confidential."""
        key = self._task_key_of_id(task_id)
        if key is None:
            raise Refused("encryption_key_unknown", f"task {task_id[:128]} is not confidential, or not this requester's")
        return key

    def _task_key_of_id(self, task_id: str) -> bytes | None:
        with self._keys_lock:
            key = self._task_keys.get(task_id)
        if key is not None or not task_id:
            return key
        try:
            task = self.get_task(task_id)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return None  # no such task of ours: the key is unknown
            raise
        return self._unwrap(task) if task.HasField("confidential") else None

    def _task_key_of(self, header: Message) -> bytes | None:
        return self._task_key_of_id(header.task_id)

    def _unwrap(self, task: Message) -> bytes:
        """The task key wrapped to this client in a Task's ``confidential``; the
        wrap names the request's sender, this requester."""
        key = unwrap_task_key(task.confidential, task.task_id, task.requester.agent_id, task.requester.key_id,
                              self.identity.agent_id, self.encryption_keys)
        with self._keys_lock:
            self._task_keys[task.task_id] = key
        return key

    def read_confidential_result(self, task_id: str, *, expected: Message | None = None) -> bytes:
        """A confidential task's result, read (size and SHA-256 checked against
        ``expected``, the signed result.stream) and opened record by record."""
        return open_result(self.task_key(task_id), task_id, self.read_result(task_id, expected=expected))

    def token(self, lifetime: int = 180) -> str:
        """A fresh bearer token for the executor."""
        return make_token(self.identity, self.executor.agent_id, lifetime)

    def _auth(self) -> tuple[tuple[str, str], ...]:
        """One token serves every read until a minute before it expires."""
        with self._token_lock:
            if self._token is None or time.time() > self._token[1]:
                self._token = (self.token(180), time.time() + 120)
            return bearer_metadata(self._token[0])

    def get_task(self, task_id: str) -> Message:
        """A task's current state (a synapse.v1.Task)."""
        return self._get_task(_stubs.p2p().GetTaskRequest(task_id=task_id), metadata=self._auth(), timeout=self.timeout).task

    def list_tasks(self, page_size: int = 0, page_token: str = "") -> Message:
        """One page of this requester's tasks (a ListTasksResponse)."""
        request = _stubs.p2p().ListTasksRequest(page_size=page_size, page_token=page_token)
        return self._list_tasks(request, metadata=self._auth(), timeout=self.timeout)

    def _backoff(self, attempt: int) -> None:
        time.sleep(self.retry_base_delay * 2 ** (attempt - 1))

    def watch(self, task_id: str, from_sequence: int = 1, *, timeout: float | None = None) -> Iterator[WatchItem]:
        """Every event of a task from ``from_sequence``: each verified against the
        executor's key and addressed to this requester, carrying the next sequence
        in the stream and in its signed header; heartbeats verified as live
        messages. After a dropped connection the watch resumes from the next
        sequence (yielding a "reconnecting" item), so nothing is lost or repeated.
        It ends after the terminal event; ``timeout`` bounds each stream."""
        next_sequence = max(from_sequence, 1)
        saw_snapshot = False
        attempt = 0
        while True:
            call = self._watch(_stubs.p2p().WatchRequest(task_id=task_id, from_sequence=next_sequence), metadata=self._auth(), timeout=timeout)
            try:
                for message in call:
                    attempt = 0
                    kind = message.WhichOneof("kind")
                    if kind == "snapshot":
                        if not saw_snapshot:
                            saw_snapshot = True
                            yield WatchItem("snapshot", task=message.snapshot)
                    elif kind == "heartbeat":
                        yield WatchItem("heartbeat", event=self.verify(message.heartbeat.envelope))
                    elif kind == "event":
                        opened = self._check_event(message.event, next_sequence, task_id)
                        yield WatchItem("event", event=opened, sequence=next_sequence)
                        next_sequence += 1
                        if is_terminal_event(opened):
                            call.cancel()
                            return
                return
            except grpc.RpcError as error:
                if error.code() not in RESUMABLE or attempt >= self.max_retries:
                    raise
                attempt += 1
                yield WatchItem("reconnecting", sequence=next_sequence, error=error)
                self._backoff(attempt)

    def _check_event(self, event: Message, expected: int, task_id: str) -> Opened:
        if event.sequence != expected:
            raise Refused("message_format_invalid", f"event {event.sequence} arrived where {expected} was due")
        opened = self.verify(event.message.envelope, records=True)
        if opened.header.sequence != expected:
            raise Refused("signature_invalid", f"event {expected} is signed as sequence {opened.header.sequence}")
        if opened.header.task_id != task_id:
            raise Refused("message_format_invalid", f"event {expected} is about task {opened.header.task_id!r}, not {task_id!r}")
        return opened

    def read_result(self, task_id: str, *, received: bytes = b"", expected: Message | None = None) -> bytes:
        """A task's result stream, whole: reading starts after the bytes already
        ``received`` and resumes after a dropped connection; the size and SHA-256 are
        checked against ``expected`` (result.stream of the verified task_complete),
        else against the last chunk (which nobody signed)."""
        data = bytearray(received)
        attempt = 0
        while True:
            request = _stubs.p2p().ReadResultRequest(task_id=task_id, offset=len(data))
            try:
                last = None
                for message in self._read_result(request, metadata=self._auth(), timeout=self.timeout):
                    chunk = message.chunk
                    if chunk.offset != len(data):
                        raise Refused("message_format_invalid", f"chunk at {chunk.offset} where {len(data)} was due")
                    data += chunk.data
                    attempt = 0
                    if chunk.last:
                        last = chunk
                        break
                if last is None:
                    raise Refused("message_format_invalid", "the result stream ended without its last chunk")
            except grpc.RpcError as error:
                if error.code() not in RESUMABLE or attempt >= self.max_retries:
                    raise
                attempt += 1
                self._backoff(attempt)
                continue
            size, digest = (expected.total_size, expected.sha256) if expected is not None else (last.total_size, last.sha256)
            if len(data) != size:
                raise Refused("message_format_invalid", f"result is {len(data)} bytes, {size} were promised")
            if hashlib.sha256(data).digest() != bytes(digest):
                raise Refused("signature_invalid", "result SHA-256 does not match what the executor signed")
            return bytes(data)


def to_dict(value: Message) -> Any:
    """A google.protobuf.Struct or Value as plain Python (numbers are floats on the wire)."""
    return json_format.MessageToDict(value)

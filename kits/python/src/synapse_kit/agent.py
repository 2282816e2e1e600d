"""A minimal Synapse executor for a grpcio server.

It serves CapabilitiesService (GetCapabilities, GetSupportedInterfaces,
GetTaskTypeCapabilities) and P2PService: Send (task_request: verify, confirm
as event 1, run the handler in a thread, record task_status_update from
``Task.progress``, then task_complete or task_failed; task_cancel; task_ack;
heartbeat; capability_query; executor events pushed for tasks the agent
requested, see ``expect_callbacks``) and, with bearer tokens, GetTask,
ListTasks and Watch. Every event is sealed once and the same bytes go to
every reader.

Confidential tasks (PROTOCOL.md §9): the agent publishes its X25519 encryption
key in its capabilities, signed by its identity key; it opens a confidential
task_request with the task key wrapped to it, and every later message of the
task with that key; it seals every event of such a task with the task key, and
GetTask answers it with ``confidential`` and without its content. A plaintext
message on a confidential task, or a plaintext request for a task type with
``requires_confidentiality``, is refused with confidentiality_required.

What it does not do: everything is in memory (no durable store: a restart
forgets tasks, pins and the replay memory); it pushes no callbacks (a
task_request with callback_url is refused with invalid_params: the requester
watches or polls); it never asks for information or a human decision; it does
not validate inputs against the declared schemas; it produces no result
streams (ReadResult answers FAILED_PRECONDITION); it does not serve Handshake.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from . import _stubs
from .client import is_terminal_event, is_terminal_state
from .confidential import ConfidentialKeys, EncryptionKey, EncryptionKeyRing, seal_confidential, sign_encryption_key
from .envelope import DEFAULT_CLOCK_SKEW_SECONDS, PROTOCOL_VERSION, Opened, open_envelope, seal, type_name
from .errors import Refused
from .keys import Identity
from .tokens import bearer_of, verify_token
from .trust import Peer, TrustChain, TrustPolicy, TrustStore, trust_on_first_use


class TaskFailure(Exception):
    """Raised by a handler to fail its task with a protocol error code."""

    def __init__(self, code: str, message: str, recoverable: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.recoverable = recoverable


class Task:
    """A running task as its handler sees it."""

    def __init__(self, agent: "Agent", record: "_TaskRecord") -> None:
        self._agent = agent
        self._record = record
        self.id: str = record.id
        self.type: str = record.type
        self.requester: Peer = record.requester
        self.input: dict[str, Any] = json_format.MessageToDict(record.request.task.payload)
        """TaskSpec.payload as a dict (JSON numbers are floats)."""
        self.cancelled: threading.Event = record.cancelled
        """Set when the requester cancels the task or its time runs out."""

    def progress(self, percent: int, message: str = "") -> None:
        """Records a signed task_status_update event (percent 0-100)."""
        self._agent._progress(self._record, max(0, min(int(percent), 100)), message)


Handler = Callable[[Task], Any]
"""Runs one task and returns its output (any JSON value); raising fails the task
(TaskFailure keeps its code; anything else is execution_failed)."""


@dataclass
class TaskType:
    """A task type an Agent runs."""

    type: str
    handler: Handler
    name: str = ""
    description: str = ""
    input_schema: str = ""
    output_schema: str = ""
    requires_confidentiality: bool = False
    """Only confidential requests are taken (PROTOCOL.md §9)."""


BASIC_INTERFACES = [
    ("AgentIdentity", "INTERFACE_CATEGORY_CORE"),
    ("MessageHandler", "INTERFACE_CATEGORY_CORE"),
    ("CapabilitiesProvider", "INTERFACE_CATEGORY_CORE"),
    ("P2PTaskHandler", "INTERFACE_CATEGORY_P2P"),
    ("CallbackReceiver", "INTERFACE_CATEGORY_P2P"),
    ("HTTPTransport", "INTERFACE_CATEGORY_TRANSPORT"),
    ("Authenticator", "INTERFACE_CATEGORY_SECURITY"),
    ("IdempotencyHandler", "INTERFACE_CATEGORY_SECURITY"),
]
"""The 8 basic standard interfaces (PROTOCOL.md §4) a registry requires."""


@dataclass
class _TaskRecord:
    id: str
    type: str
    requester: Peer
    request: Message
    state: int
    created: float
    updated: float
    progress: int = 0
    status: str = ""
    events: list[Message] = field(default_factory=list)
    result: Message | None = None
    failure: Message | None = None
    rejection: Message | None = None
    first_reply: Message | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    session_id: str = ""
    task_key: bytes | None = field(default=None, repr=False)
    """Set on a confidential task: the key its events are sealed with."""
    confidentiality: Message | None = None
    """On a confidential task: the request's header.confidential (its wrapped keys)."""


@dataclass
class _Seen:
    digest: bytes
    reply: Message | None
    task_id: str
    expires: float


class Callbacks:
    """Events an executor pushes for one task this agent requested: iterate to get
    each verified event in order (the iteration ends after the terminal event), or
    ``get(timeout)``."""

    _END = object()

    def __init__(self, executor: Peer, task_key: bytes | None = None) -> None:
        self.executor = executor
        self.task_key = task_key
        self.last = 0
        self._queue: queue.Queue[Any] = queue.Queue()

    def _put(self, event: Opened) -> None:
        self._queue.put(event)
        if is_terminal_event(event):
            self._queue.put(self._END)

    def get(self, timeout: float | None = None) -> Opened | None:
        """The next event, or None after the terminal one; raises queue.Empty on timeout."""
        item = self._queue.get(timeout=timeout)
        if item is self._END:
            self._queue.put(item)
            return None
        return item

    def __iter__(self) -> Iterator[Opened]:
        while (event := self.get()) is not None:
            yield event


def _ts(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


class Agent:
    """A minimal executor: ``Agent(identity, task_types=[TaskType("echo", handler)])``,
    then ``agent.serve("127.0.0.1:0")`` or ``agent.add_to_server(server)``."""

    def __init__(self, identity: Identity, *, name: str = "Synapse Python agent",
                 task_types: Sequence[TaskType] | Mapping[str, Handler] = (), trust: TrustPolicy | None = None,
                 max_concurrent_tasks: int = 10, task_timeout: float = 300.0,
                 clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS, heartbeat_interval: float = 30.0,
                 encryption_key: EncryptionKey | EncryptionKeyRing | None = None) -> None:
        self.identity = identity
        if not isinstance(encryption_key, EncryptionKeyRing):
            encryption_key = EncryptionKeyRing(encryption_key or EncryptionKey.generate())
        self.encryption_keys = encryption_key
        """The X25519 keys confidential requests are wrapped to (a fresh one unless given)."""
        self._bindings: dict[tuple[str, float | None], Message] = {}
        self._confidential = ConfidentialKeys(self.encryption_keys, self._task_key_of)
        self.name = name
        if isinstance(task_types, Mapping):
            task_types = [TaskType(t, h) for t, h in task_types.items()]
        self.task_types = {t.type: t for t in task_types}
        self._vouched = TrustStore()
        self.trust = TrustChain(trust or trust_on_first_use(), self._vouched)
        self.max_concurrent_tasks = max_concurrent_tasks
        self.task_timeout = task_timeout
        self.clock_skew = clock_skew
        self.heartbeat_interval = heartbeat_interval
        self._lock = threading.Condition()
        self._tasks: dict[str, _TaskRecord] = {}
        self._seen: dict[str, _Seen] = {}
        self._idempotency: dict[tuple[str, str], str] = {}
        self._expected: dict[str, Callbacks] = {}

    # ── declarations ─────────────────────────────────────────────────────

    def capabilities(self) -> Message:
        """What GetCapabilities declares (an AgentCapabilities)."""
        caps = _stubs.capabilities()
        return caps.AgentCapabilities(
            agent_id=self.identity.agent_id, agent_name=self.name, protocol_version=PROTOCOL_VERSION,
            supported_task_types=[self._supported(t) for _, t in sorted(self.task_types.items())],
            supported_content_types=["application/json"],
            supported_transport_modes=[caps.TRANSPORT_MODE_SYNC, caps.TRANSPORT_MODE_POLLING],
            max_file_size=10 << 20, max_concurrent_tasks=self.max_concurrent_tasks,
            max_task_duration_seconds=int(self.task_timeout), support_progress_updates=True,
            public_key=self.identity.public_key, key_id=self.identity.key_id,
            encryption_keys=[self._binding(k) for k in self.encryption_keys.published()],
        )

    def _binding(self, key: EncryptionKey) -> Message:
        """Each key's binding is signed once."""
        name = (key.key_id, key.retired_until)
        if name not in self._bindings:
            self._bindings[name] = sign_encryption_key(self.identity, key)
        return self._bindings[name]

    @staticmethod
    def _supported(t: TaskType) -> Message:
        return _stubs.capabilities().SupportedTaskType(type=t.type, name=t.name, description=t.description,
                                                       input_schema=t.input_schema, output_schema=t.output_schema,
                                                       requires_confidentiality=t.requires_confidentiality)

    def interfaces(self) -> list[Message]:
        """What GetSupportedInterfaces declares: the 8 basic interfaces."""
        caps = _stubs.capabilities()
        return [caps.ImplementedInterface(name=n, category=caps.InterfaceCategory.Value(c), compliance_level=caps.COMPLIANCE_BASIC,
                                          version=PROTOCOL_VERSION) for n, c in BASIC_INTERFACES]

    # ── serving ──────────────────────────────────────────────────────────

    def add_to_server(self, server: grpc.Server) -> None:
        """Adds CapabilitiesService and P2PService to a grpcio server."""
        caps, p2p = _stubs.capabilities(), _stubs.p2p()

        def unary(fn: Callable[..., Any], req: type[Message], resp: type[Message]) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(self._guard(fn), request_deserializer=req.FromString, response_serializer=resp.SerializeToString)

        def stream(fn: Callable[..., Any], req: type[Message], resp: type[Message]) -> grpc.RpcMethodHandler:
            return grpc.unary_stream_rpc_method_handler(self._guard_stream(fn), request_deserializer=req.FromString, response_serializer=resp.SerializeToString)

        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler("synapse.v1.CapabilitiesService", {
                "GetCapabilities": unary(self._get_capabilities, caps.GetCapabilitiesRequest, caps.GetCapabilitiesResponse),
                "GetSupportedInterfaces": unary(self._get_interfaces, caps.GetSupportedInterfacesRequest, caps.GetSupportedInterfacesResponse),
                "GetTaskTypeCapabilities": unary(self._get_task_type, caps.GetTaskTypeCapabilitiesRequest, caps.GetTaskTypeCapabilitiesResponse),
            }),
            grpc.method_handlers_generic_handler("synapse.v1.P2PService", {
                "Send": unary(self._send, p2p.SendRequest, p2p.SendResponse),
                "GetTask": unary(self._get_task, p2p.GetTaskRequest, p2p.GetTaskResponse),
                "ListTasks": unary(self._list_tasks, p2p.ListTasksRequest, p2p.ListTasksResponse),
                "Watch": stream(self._watch, p2p.WatchRequest, p2p.WatchResponse),
                "ReadResult": stream(self._read_result, p2p.ReadResultRequest, p2p.ReadResultResponse),
            }),
        ))

    def serve(self, address: str = "127.0.0.1:0", max_workers: int = 16) -> tuple[grpc.Server, int]:
        """Starts a plaintext (h2c) grpcio server with this agent on ``address``;
        returns it (stop it with ``server.stop(None)``) and its port."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
        self.add_to_server(server)
        port = server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"could not listen on {address}")
        server.start()
        return server, port

    @staticmethod
    def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
        def handler(request: Message, context: grpc.ServicerContext) -> Any:
            try:
                return fn(request, context)
            except Refused as refused:
                refused.abort(context)
        return handler

    @staticmethod
    def _guard_stream(fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def handler(request: Message, context: grpc.ServicerContext) -> Iterator[Any]:
            try:
                yield from fn(request, context)
            except Refused as refused:
                refused.abort(context)
        return handler

    # ── CapabilitiesService ──────────────────────────────────────────────

    def _get_capabilities(self, request: Message, context: grpc.ServicerContext) -> Message:
        return _stubs.capabilities().GetCapabilitiesResponse(capabilities=self.capabilities())

    def _get_interfaces(self, request: Message, context: grpc.ServicerContext) -> Message:
        return _stubs.capabilities().GetSupportedInterfacesResponse(interfaces=self.interfaces())

    def _get_task_type(self, request: Message, context: grpc.ServicerContext) -> Message:
        t = self.task_types.get(request.task_type)
        if t is None:
            raise Refused("capability_lacking", f"task type {request.task_type[:128]!r} is not supported", status=grpc.StatusCode.NOT_FOUND)
        return _stubs.capabilities().GetTaskTypeCapabilitiesResponse(task_type=self._supported(t))

    # ── callbacks for tasks this agent requested ─────────────────────────

    def expect_callbacks(self, executor: Peer, task_id: str, task_key: bytes | None = None) -> Callbacks:
        """Prepares to receive the events ``executor`` pushes for a task this agent
        requests with callback_url set to its own endpoint (call it before submitting).
        The executor's key is trusted for its id from then on. Each pushed event must
        be signed by that executor, addressed to this agent and the next in sequence:
        it is delivered through the returned Callbacks and answered with a signed
        p2p:ack; one received before is acknowledged again without effect; a gap is
        refused with illegal_transition. For a confidential task, ``task_key`` opens
        the sealed events (and a plaintext one is refused with confidentiality_required)."""
        self._vouched.add(executor)
        box = Callbacks(executor, task_key)
        with self._lock:
            self._expected[task_id] = box
        return box

    # ── P2PService.Send ──────────────────────────────────────────────────

    def _send(self, request: Message, context: grpc.ServicerContext) -> Message:
        p2p = _stubs.p2p()
        opened = open_envelope(request.envelope, self.trust, self_id=self.identity.agent_id,
                               self_key_id=self.identity.key_id, clock_skew=self.clock_skew, confidential=self._confidential)
        message_id = opened.header.message_id
        with self._lock:
            prior = self._seen.get(message_id)
            if prior is not None:
                if prior.digest != opened.digest:
                    raise Refused("replay_detected", f"message id {message_id[:128]} was used for another message")
                response = p2p.SendResponse()
                if prior.reply is not None:
                    response.reply.CopyFrom(prior.reply)
                if prior.task_id in self._tasks:
                    response.task.CopyFrom(self._view(self._tasks[prior.task_id]))
                return response
            reply, record = self._dispatch(opened)
            self._remember(opened, reply, record)
        wait = request.wait.ToTimedelta().total_seconds() if request.HasField("wait") else 0.0
        if record is not None and wait > 0:
            deadline = time.monotonic() + min(wait, self.task_timeout + 1.0)  # a task ends by its timeout
            with self._lock:
                while not is_terminal_state(record.state) and context.is_active():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._lock.wait(min(remaining, 1.0))
        response = p2p.SendResponse()
        if reply is not None:
            response.reply.CopyFrom(reply)
        if record is not None:
            with self._lock:
                response.task.CopyFrom(self._view(record))
        return response

    def _remember(self, opened: Opened, reply: Message | None, record: _TaskRecord | None) -> None:
        now = time.time()
        for key in [k for k, v in self._seen.items() if v.expires < now]:
            del self._seen[key]
        h = opened.header
        expires = h.sent_at.ToNanoseconds() / 1e9 + self.clock_skew
        if h.HasField("expires_at"):
            expires = max(expires, h.expires_at.ToNanoseconds() / 1e9)
        self._seen[h.message_id] = _Seen(opened.digest, reply, record.id if record else "", expires + self.clock_skew)

    def _task_key_of(self, header: Message) -> bytes | None:
        """The key of a confidential task this message may speak of: its requester's
        messages, or the events of a task this agent requested."""
        record = self._tasks.get(header.task_id)
        if record is not None and record.requester.agent_id == header.sender.agent_id:
            return record.task_key
        box = self._expected.get(header.task_id)
        if box is not None and box.executor.agent_id == header.sender.agent_id:
            return box.task_key
        return None

    def _dispatch(self, opened: Opened) -> tuple[Message | None, _TaskRecord | None]:
        """Acts on an opened message (the lock is held)."""
        payloads = _stubs.payloads()
        name = type_name(opened.type)
        if name == "TASK_REQUEST":
            return self._accept(opened)
        if name == "TASK_CANCEL":
            record = self._own_task(opened)
            if is_terminal_state(record.state):
                raise Refused("task_already_completed", f"task {record.id} is already {payloads.TaskState.Name(record.state)}")
            record.cancelled.set()
            errors = _stubs.errors()
            record.failure = payloads.TaskError(code=errors.ERROR_CODE_TASK_CANCELLED, message=f"cancelled by the requester: {opened.payload.reason}")
            ack = payloads.TaskAckPayload(task_id=record.id, acknowledged_message_id=opened.header.message_id,
                                          acknowledged_type=opened.type, state=payloads.TASK_STATE_CANCELLED, message="task cancelled")
            return self._record_event(record, "TASK_ACK", ack, payloads.TASK_STATE_CANCELLED, reply_to=opened.header.message_id), record
        if name == "TASK_ACK":
            record = self._own_task(opened)
            if not is_terminal_state(record.state):
                raise self._illegal(record, opened)
            ack = payloads.AckPayload(acknowledged_message_id=opened.header.message_id, message=f"task is {payloads.TaskState.Name(record.state)}")
            return self._reply(opened, "ACK", ack), record
        if name in ("TASK_INFO_PROVIDED", "HUMAN_DECISION"):
            raise self._illegal(self._own_task(opened), opened)
        if name == "HEARTBEAT":
            return self._reply(opened, "HEARTBEAT", self._heartbeat()), None
        if name == "CAPABILITY_QUERY":
            caps = self.capabilities()
            wanted = set(opened.payload.task_types)
            if wanted:
                kept = [t for t in caps.supported_task_types if t.type in wanted]
                del caps.supported_task_types[:]
                caps.supported_task_types.extend(kept)
            response = payloads.CapabilityResponsePayload(capabilities=caps, interfaces=self.interfaces() if opened.payload.include_interfaces else [])
            return self._reply(opened, "CAPABILITY_RESPONSE", response), None
        if name in ("ACK", "NACK", "CAPABILITY_RESPONSE"):
            return None, None
        if name.startswith("REGISTRY_"):
            raise Refused("message_format_invalid", f"registry:{name[9:].lower()} is sent to RegistryService, not to P2PService.Send")
        return self._callback(opened), None

    def _own_task(self, opened: Opened) -> _TaskRecord:
        """The task of a requester's message; to anyone else it does not exist."""
        record = self._tasks.get(opened.header.task_id)
        if record is None or record.requester.agent_id != opened.header.sender.agent_id:
            raise Refused("task_not_found", f"no task {opened.header.task_id[:128]}")
        if record.task_key is not None and not opened.confidential:
            raise Refused("confidentiality_required", f"task {record.id} is confidential: its requester's messages must be sealed")
        return record

    def _illegal(self, record: _TaskRecord, opened: Opened) -> Refused:
        state = _stubs.payloads().TaskState.Name(record.state)
        kind = _stubs.envelope().MessageType.Name(opened.type)
        code = "task_already_completed" if is_terminal_state(record.state) else "illegal_transition"
        return Refused(code, f"{kind} is not allowed in {state}", details={"state": state, "message_type": kind})

    def _heartbeat(self) -> Message:
        payloads = _stubs.payloads()
        active = sum(1 for r in self._tasks.values() if not is_terminal_state(r.state))
        return payloads.HeartbeatPayload(status=payloads.AGENT_STATUS_READY, active_tasks=active, max_concurrent_tasks=self.max_concurrent_tasks)

    def _signed(self, envelope: Message, header: Message, payload: Message) -> Message:
        view = Opened(envelope, header, payload, self.identity.public_key, b"").view()
        return _stubs.p2p().SignedMessage(envelope=envelope, view=view)

    def _reply(self, opened: Opened, kind: str, payload: Message) -> Message:
        """A signed reply that is not a task event."""
        to = Peer(opened.header.sender.agent_id, b"", opened.header.sender.key_id)
        envelope, header = seal(self.identity, _stubs.envelope().MessageType.Value("MESSAGE_TYPE_" + kind), payload, to,
                                task_id=opened.header.task_id, reply_to=opened.header.message_id)
        return self._signed(envelope, header, payload)

    def _record_event(self, record: _TaskRecord, kind: str, payload: Message, state: int, reply_to: str = "") -> Message:
        """Seals the next event of a task (the lock is held) and wakes its readers;
        a confidential task's with its task key."""
        p2p = _stubs.p2p()
        message_type = _stubs.envelope().MessageType.Value("MESSAGE_TYPE_" + kind)
        options = dict(task_id=record.id, reply_to=reply_to, sequence=len(record.events) + 1, session_id=record.session_id)
        if record.task_key is not None:
            envelope, header = seal_confidential(self.identity, message_type, payload, record.requester, record.task_key, **options)
        else:
            envelope, header = seal(self.identity, message_type, payload, record.requester, **options)
        signed = self._signed(envelope, header, payload)
        record.events.append(p2p.TaskEvent(sequence=header.sequence, message=signed))
        record.state = state
        record.updated = time.time()
        self._lock.notify_all()
        return signed

    def _view(self, record: _TaskRecord) -> Message:
        p2p, env = _stubs.p2p(), _stubs.envelope()
        task = p2p.Task(
            task_id=record.id, task_type=record.type, state=record.state, progress=record.progress, status_message=record.status,
            requester=env.AgentRef(agent_id=record.requester.agent_id, key_id=record.requester.key_id),
            executor=env.AgentRef(agent_id=self.identity.agent_id, key_id=self.identity.key_id),
            created_at=_ts(record.created), updated_at=_ts(record.updated), last_sequence=len(record.events), request=record.request,
        )
        if record.confidentiality is not None:
            # The content is read from the sealed events (§9.4).
            for name in ("status_message", "request"):
                task.ClearField(name)
            task.confidential.CopyFrom(record.confidentiality)
            return task
        for name in ("result", "failure", "rejection"):
            value = getattr(record, name)
            if value is not None:
                getattr(task, {"failure": "error"}.get(name, name)).CopyFrom(value)
        return task

    def _accept(self, opened: Opened) -> tuple[Message, _TaskRecord]:
        """Admits a task_request: task_confirm (event 1) and the handler starts, or
        task_reject (event 1) for a task type this agent does not run."""
        payloads, errors = _stubs.payloads(), _stubs.errors()
        request, header = opened.payload, opened.header
        task_id = header.task_id
        requester = Peer(header.sender.agent_id, opened.public_key, header.sender.key_id)
        key = (requester.agent_id, header.idempotency_key)
        if header.idempotency_key and self._idempotency.get(key) in self._tasks:
            prior = self._tasks[self._idempotency[key]]
            return prior.first_reply, prior
        if request.task.id and request.task.id != task_id:
            raise Refused("invalid_params", f"task.id {request.task.id[:128]!r} differs from header.task_id {task_id[:128]!r}")
        if request.callback_url:
            raise Refused("invalid_params", "callback_url is not supported by this agent: watch or poll the task instead")
        if task_id in self._tasks:
            raise Refused("invalid_params", f"task id {task_id[:128]} is already in use", status=grpc.StatusCode.ALREADY_EXISTS)
        task_type = self.task_types.get(request.task.type)
        if task_type is not None and task_type.requires_confidentiality and not opened.confidential:
            raise Refused("confidentiality_required", f"task type {task_type.type!r} takes only confidential requests")
        if self._heartbeat().active_tasks >= self.max_concurrent_tasks:
            raise Refused("concurrency_limit", f"this agent runs at most {self.max_concurrent_tasks} tasks at once")
        request.task.id = task_id
        now = time.time()
        record = _TaskRecord(task_id, request.task.type, requester, request, payloads.TASK_STATE_PENDING, now, now)
        if opened.confidential:
            record.task_key = opened.task_key
            record.confidentiality = opened.header.confidential
            # What the request's clear header showed already; its context stays sealed.
            record.session_id = header.session_id
        else:
            record.session_id = request.context.session_id
        self._tasks[task_id] = record
        if header.idempotency_key:
            self._idempotency[key] = task_id
        reason = None
        if task_type is None:
            reason = payloads.Reason(code=errors.ERROR_CODE_CAPABILITY_LACKING, message=f"task type {record.type[:128]!r} is not supported")
        elif request.task.HasField("deadline") and request.task.deadline.ToNanoseconds() / 1e9 <= now:
            reason = payloads.Reason(code=errors.ERROR_CODE_INVALID_PARAMS, message="the task's deadline has passed")
        if reason is not None:
            record.rejection = payloads.TaskRejectPayload(task_id=task_id, reason=reason)
            record.first_reply = self._record_event(record, "TASK_REJECT", record.rejection, payloads.TASK_STATE_REJECTED, reply_to=header.message_id)
            return record.first_reply, record
        confirm = payloads.TaskConfirmPayload(task_id=task_id, confirmed=True)
        record.first_reply = self._record_event(record, "TASK_CONFIRM", confirm, payloads.TASK_STATE_CONFIRMED, reply_to=header.message_id)
        threading.Thread(target=self._run, args=(record, task_type), name=f"synapse-task-{task_id[:32]}", daemon=True).start()
        timer = threading.Timer(self.task_timeout, self._time_out, args=(record,))
        timer.daemon = True
        timer.start()
        return record.first_reply, record

    def _fail(self, record: _TaskRecord, code: str, message: str, recoverable: bool = False) -> None:
        payloads, errors = _stubs.payloads(), _stubs.errors()
        try:
            number = errors.ErrorCode.Value("ERROR_CODE_" + code.upper())
        except ValueError:
            number = errors.ERROR_CODE_EXECUTION_FAILED
        record.failure = payloads.TaskError(code=number, message=message, recoverable=recoverable)
        self._record_event(record, "TASK_FAILED", payloads.TaskFailedPayload(task_id=record.id, error=record.failure), payloads.TASK_STATE_FAILED)

    def _time_out(self, record: _TaskRecord) -> None:
        with self._lock:
            if not is_terminal_state(record.state):
                record.cancelled.set()
                self._fail(record, "execution_timeout", f"the task ran past {self.task_timeout:g} s", recoverable=True)

    def _run(self, record: _TaskRecord, task_type: TaskType) -> None:
        payloads = _stubs.payloads()
        try:
            output = task_type.handler(Task(self, record))
            value = struct_pb2.Value()
            try:
                json_format.ParseDict(output, value)
            except (json_format.ParseError, TypeError, ValueError) as error:
                raise TaskFailure("output_invalid", f"the output is not a JSON value: {error}") from None
        except TaskFailure as failure:
            with self._lock:
                if not is_terminal_state(record.state):
                    self._fail(record, failure.code, failure.message, failure.recoverable)
            return
        except Exception as error:  # noqa: BLE001 - any handler error fails its task
            with self._lock:
                if not is_terminal_state(record.state):
                    self._fail(record, "execution_failed", f"{type(error).__name__}: {error}")
            return
        with self._lock:
            if is_terminal_state(record.state):
                return  # cancelled or timed out meanwhile
            record.result = payloads.TaskResult(output_type="json", output=value)
            record.progress = 100
            complete = payloads.TaskCompletePayload(task_id=record.id, result=record.result)
            self._record_event(record, "TASK_COMPLETE", complete, payloads.TASK_STATE_COMPLETED)

    def _progress(self, record: _TaskRecord, percent: int, message: str) -> None:
        payloads = _stubs.payloads()
        with self._lock:
            if is_terminal_state(record.state):
                raise RuntimeError(f"task {record.id} is over")
            record.progress, record.status = percent, message
            update = payloads.TaskStatusUpdatePayload(task_id=record.id, status=payloads.TASK_STATE_EXECUTING, progress=percent, message=message)
            self._record_event(record, "TASK_STATUS_UPDATE", update, payloads.TASK_STATE_EXECUTING)

    def _callback(self, opened: Opened) -> Message:
        """An executor's event pushed for a task this agent requested (the lock is held)."""
        header = opened.header
        box = self._expected.get(header.task_id)
        if box is None or box.executor.agent_id != header.sender.agent_id:
            record = self._tasks.get(header.task_id)
            if record is not None and record.requester.agent_id == header.sender.agent_id:
                raise Refused("permission_denied", f"{type_name(opened.type).lower()} is sent by a task's executor, and this agent is the executor of task {record.id}")
            raise Refused("task_not_found", f"no task {header.task_id[:128]}")
        if box.task_key is not None and not opened.confidential:
            raise Refused("confidentiality_required", f"task {header.task_id[:128]} is confidential: its events must be sealed")
        if header.sequence == box.last + 1:
            box.last = header.sequence
            box._put(opened)
            if is_terminal_event(opened):
                del self._expected[header.task_id]
        elif not (header.sequence and header.sequence <= box.last):
            raise Refused("illegal_transition", f"event {header.sequence} arrived where {box.last + 1} was due",
                          details={"expected_sequence": str(box.last + 1)})
        return self._reply(opened, "ACK", _stubs.payloads().AckPayload(acknowledged_message_id=header.message_id))

    # ── reads ────────────────────────────────────────────────────────────

    def _caller(self, context: grpc.ServicerContext) -> str:
        token = bearer_of(context.invocation_metadata())
        if not token:
            raise Refused("unauthenticated", "this call needs Authorization: Bearer <token> (PROTOCOL.md §5.4)")
        return verify_token(token, self.identity.agent_id, self.trust).agent_id

    def _readable(self, task_id: str, context: grpc.ServicerContext) -> tuple[_TaskRecord, str]:
        caller = self._caller(context)
        with self._lock:
            record = self._tasks.get(task_id)
        if record is None or record.requester.agent_id != caller:
            raise Refused("task_not_found", f"no task {task_id[:128]}")
        return record, caller

    def _get_task(self, request: Message, context: grpc.ServicerContext) -> Message:
        record, _ = self._readable(request.task_id, context)
        with self._lock:
            return _stubs.p2p().GetTaskResponse(task=self._view(record))

    def _list_tasks(self, request: Message, context: grpc.ServicerContext) -> Message:
        caller = self._caller(context)
        size = min(request.page_size if request.page_size > 0 else 50, 500)
        try:
            start = int(request.page_token or "0")
        except ValueError:
            raise Refused("invalid_params", "page_token is not one this agent gave") from None
        states = set(request.states)
        with self._lock:
            mine = sorted((r for r in self._tasks.values() if r.requester.agent_id == caller and (not states or r.state in states)),
                          key=lambda r: (-r.created, r.id))
            response = _stubs.p2p().ListTasksResponse(tasks=[self._view(r) for r in mine[start:start + size]])
        if start + size < len(mine):
            response.next_page_token = str(start + size)
        return response

    def _watch(self, request: Message, context: grpc.ServicerContext) -> Iterator[Message]:
        p2p = _stubs.p2p()
        record, caller = self._readable(request.task_id, context)
        with self._lock:
            snapshot = self._view(record)
        yield p2p.WatchResponse(snapshot=snapshot)
        next_sequence = max(request.from_sequence, 1)
        while context.is_active():
            heartbeat = None
            with self._lock:
                deadline = time.monotonic() + self.heartbeat_interval
                while len(record.events) < next_sequence and not is_terminal_state(record.state) and context.is_active():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._lock.wait(min(remaining, 1.0))
                pending = record.events[next_sequence - 1:]
                over = is_terminal_state(record.state)
                if not pending and not over:
                    payload = self._heartbeat()
                    envelope, header = seal(self.identity, _stubs.envelope().MESSAGE_TYPE_HEARTBEAT, payload, Peer(caller, b"", ""))
                    heartbeat = self._signed(envelope, header, payload)
            if heartbeat is not None:
                if context.is_active():
                    yield p2p.WatchResponse(heartbeat=heartbeat)
                continue
            for event in pending:
                yield p2p.WatchResponse(event=event)
                next_sequence = event.sequence + 1
            if over:
                return

    def _read_result(self, request: Message, context: grpc.ServicerContext) -> Iterator[Message]:
        self._readable(request.task_id, context)
        raise Refused("illegal_transition", f"task {request.task_id[:128]} has no result stream", status=grpc.StatusCode.FAILED_PRECONDITION)
        yield  # pragma: no cover - makes this a generator

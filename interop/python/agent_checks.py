"""Check (f): a Python agent that serves gRPC only (a plain grpcio server on
127.0.0.1: no Connect, no HTTP/1.1) registers at the server's registry and
receives the signed callbacks of a task it requested. Its endpoint URL says
"#protocol=grpc" (docs/PROTOCOL.md §1.1), so the server calls it with gRPC
from the start. Every pushed envelope is verified with the `cryptography`
package's Ed25519 against the executor's key."""

from __future__ import annotations

import threading
import uuid
from concurrent import futures

import grpc
from google.protobuf import struct_pb2

from envelopes import Opened, new_header, open_envelope, seal
from live_checks import RPC_TIMEOUT, TEXT, Executor, check_counts, output_of, target_of
from report import Reporter, require
from synapse.v1 import (
    capabilities_pb2,
    capabilities_pb2_grpc,
    envelope_pb2,
    p2p_pb2,
    p2p_pb2_grpc,
    payloads_pb2,
    registry_pb2,
    registry_pb2_grpc,
)
from synapse_crypto import Identity, self_certifying_agent_id

# The 8 basic standard interfaces (PROTOCOL.md §4): what a registry requires.
BASIC_INTERFACES = [
    ("AgentIdentity", capabilities_pb2.INTERFACE_CATEGORY_CORE),
    ("MessageHandler", capabilities_pb2.INTERFACE_CATEGORY_CORE),
    ("CapabilitiesProvider", capabilities_pb2.INTERFACE_CATEGORY_CORE),
    ("P2PTaskHandler", capabilities_pb2.INTERFACE_CATEGORY_P2P),
    ("CallbackReceiver", capabilities_pb2.INTERFACE_CATEGORY_P2P),
    ("HTTPTransport", capabilities_pb2.INTERFACE_CATEGORY_TRANSPORT),
    ("Authenticator", capabilities_pb2.INTERFACE_CATEGORY_SECURITY),
    ("IdempotencyHandler", capabilities_pb2.INTERFACE_CATEGORY_SECURITY),
]
CALLBACK_WAIT_SECONDS = 20.0


class GrpcAgent(capabilities_pb2_grpc.CapabilitiesServiceServicer, p2p_pb2_grpc.P2PServiceServicer):
    """The agent's side: what it declares, and every envelope pushed to its Send."""

    def __init__(self, identity: Identity, agent_id: str) -> None:
        self.identity = identity
        self.agent_id = agent_id
        self.pushed: list[envelope_pb2.Envelope] = []
        self.lock = threading.Lock()
        self.completed = threading.Event()

    def capabilities(self) -> capabilities_pb2.AgentCapabilities:
        return capabilities_pb2.AgentCapabilities(
            agent_id=self.agent_id,
            agent_name="Python interop agent (grpcio only)",
            protocol_version="1.0.0",
            public_key=self.identity.public_key,
            key_id=self.identity.key_id,
            supported_transport_modes=[capabilities_pb2.TRANSPORT_MODE_CALLBACK],
        )

    def interfaces(self) -> list[capabilities_pb2.ImplementedInterface]:
        return [
            capabilities_pb2.ImplementedInterface(name=name, category=category, compliance_level=capabilities_pb2.COMPLIANCE_BASIC, version="1.0.0")
            for name, category in BASIC_INTERFACES
        ]

    def GetCapabilities(self, request, context):  # noqa: N802 - the RPC's name
        return capabilities_pb2.GetCapabilitiesResponse(capabilities=self.capabilities())

    def GetSupportedInterfaces(self, request, context):  # noqa: N802
        return capabilities_pb2.GetSupportedInterfacesResponse(interfaces=self.interfaces())

    def Send(self, request, context):  # noqa: N802
        """Keeps the pushed envelope; the check verifies them all afterwards."""
        with self.lock:
            self.pushed.append(request.envelope)
            header = envelope_pb2.Header.FromString(request.envelope.header)
            if header.message_type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE:
                self.completed.set()
        return p2p_pb2.SendResponse()


def run(report: Reporter, url: str) -> None:
    names = ["grpc_agent.serve", "grpc_agent.register", "grpc_agent.callbacks_signed", "grpc_agent.deregister"]
    identity = Identity.generate()
    agent = GrpcAgent(identity, self_certifying_agent_id(identity.public_key))
    target, tls = target_of(url)
    channel = grpc.secure_channel(target, grpc.ssl_channel_credentials()) if tls else grpc.insecure_channel(target)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    state: dict = {}

    def serve() -> None:
        caps = capabilities_pb2_grpc.CapabilitiesServiceStub(channel).GetCapabilities(
            capabilities_pb2.GetCapabilitiesRequest(), timeout=RPC_TIMEOUT
        ).capabilities
        state["executor"] = Executor(caps.agent_id, caps.key_id, bytes(caps.public_key))
        capabilities_pb2_grpc.add_CapabilitiesServiceServicer_to_server(agent, server)
        p2p_pb2_grpc.add_P2PServiceServicer_to_server(agent, server)
        port = server.add_insecure_port("127.0.0.1:0")
        require(port > 0, "could not bind a loopback port")
        server.start()
        state["endpoint"] = f"http://127.0.0.1:{port}#protocol=grpc"

    with channel:
        try:
            if not report.check(names[0], serve):
                for name in names[1:]:
                    report.skip(name, "no agent")
                return
            registry = registry_pb2_grpc.RegistryServiceStub(channel)
            executor: Executor = state["executor"]
            if not report.check(names[1], lambda: _register(agent, registry, executor, state["endpoint"])):
                for name in names[2:]:
                    report.skip(name, "not registered")
                return
            report.check(names[2], lambda: _callbacks(agent, p2p_pb2_grpc.P2PServiceStub(channel), executor, state["endpoint"]))
            report.check(names[3], lambda: _deregister(agent, registry, executor))
        finally:
            server.stop(grace=None)


def _registry_envelope(agent: GrpcAgent, executor: Executor, message_type: int, payload) -> envelope_pb2.Envelope:
    header = new_header(agent.identity, agent.agent_id, executor.agent_id, message_type)
    # Registry payloads are not named after their message type (PROTOCOL.md §2.5).
    header.payload_type = payload.DESCRIPTOR.full_name
    return seal(agent.identity, header, payload)


def _register(agent: GrpcAgent, registry, executor: Executor, endpoint: str) -> None:
    payload = registry_pb2.AgentRegistrationPayload(
        capabilities=agent.capabilities(), interfaces=agent.interfaces(), endpoint_url=endpoint, public_key=agent.identity.public_key
    )
    envelope = _registry_envelope(agent, executor, envelope_pb2.MESSAGE_TYPE_REGISTRY_REGISTER, payload)
    response = registry.Register(registry_pb2.RegisterRequest(envelope=envelope), timeout=RPC_TIMEOUT)
    registered = response.agent
    require(registered.capabilities.agent_id == agent.agent_id, f"registered as {registered.capabilities.agent_id!r}")
    require(registered.endpoint_url == endpoint, f"registered at {registered.endpoint_url!r}")
    require(registered.compliance_level == capabilities_pb2.COMPLIANCE_BASIC,
            f"compliance level {capabilities_pb2.Compliance.Name(registered.compliance_level)}")


def _callbacks(agent: GrpcAgent, p2p, executor: Executor, endpoint: str) -> None:
    task_id = f"py-task-{uuid.uuid4()}"
    header = new_header(agent.identity, agent.agent_id, executor.agent_id, envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, task_id=task_id)
    text = struct_pb2.Struct()
    text.update({"text": TEXT})
    payload = payloads_pb2.TaskRequestPayload(
        task=payloads_pb2.TaskSpec(id=task_id, type="text_analysis", payload=text), callback_url=endpoint
    )
    p2p.Send(p2p_pb2.SendRequest(envelope=seal(agent.identity, header, payload)), timeout=RPC_TIMEOUT)
    require(agent.completed.wait(CALLBACK_WAIT_SECONDS),
            f"no task_complete pushed within {CALLBACK_WAIT_SECONDS:.0f} s ({len(agent.pushed)} envelopes pushed)")
    with agent.lock:
        pushed = list(agent.pushed)
    opened: list[Opened] = []
    for index, envelope in enumerate(pushed, start=1):
        o = open_envelope(envelope, key_id=executor.key_id, public_key=executor.public_key,
                          sender=executor.agent_id, receiver=agent.agent_id, check_times=True)
        require(o.header.task_id == task_id, f"pushed envelope {index} is about {o.header.task_id!r}")
        require(o.header.sequence == index, f"pushed envelope {index} has sequence {o.header.sequence}")
        opened.append(o)
    last = opened[-1]
    require(last.header.message_type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE,
            f"the last pushed envelope is {envelope_pb2.MessageType.Name(last.header.message_type)}")
    check_counts(output_of(last.payload.result))


def _deregister(agent: GrpcAgent, registry, executor: Executor) -> None:
    payload = registry_pb2.AgentDeregistrationPayload(reason="interop run done")
    envelope = _registry_envelope(agent, executor, envelope_pb2.MESSAGE_TYPE_REGISTRY_DEREGISTER, payload)
    registry.Deregister(registry_pb2.DeregisterRequest(envelope=envelope), timeout=RPC_TIMEOUT)

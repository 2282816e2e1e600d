"""Checks (g) and (h), the kit's Agent on a plain grpcio server (HTTP/2 only:
no Connect, no HTTP/1.1):

(g) it registers at the server's registry (which calls it back) and receives
the signed callbacks of a task it requested there; its endpoint URL says
"#protocol=grpc" (docs/PROTOCOL.md §1.1), so the server calls it with gRPC
from the start;

(h) it serves a task type of its own, "reverse": the kit's Client submits to
it and watches, and, with --cli, so does the TypeScript command line."""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import uuid

from synapse.v1 import capabilities_pb2, envelope_pb2, registry_pb2

from live_checks import TEXT, check_counts, output_of
from report import Reporter, require
from synapse_kit import Agent, Client, Identity, Task, TaskType, seal

CALLBACK_WAIT_SECONDS = 20.0


def run(report: Reporter, url: str) -> None:
    names = ["grpc_agent.serve", "grpc_agent.register", "grpc_agent.callbacks_signed", "grpc_agent.deregister"]
    state: dict = {}

    def serve() -> None:
        identity = Identity.generate()
        state["client"] = Client.connect(url, identity)
        state["agent"] = agent = Agent(identity, name="Python interop agent (grpcio only)")
        state["server"], port = agent.serve("127.0.0.1:0")
        state["endpoint"] = f"http://127.0.0.1:{port}#protocol=grpc"

    try:
        if not report.check(names[0], serve):
            for name in names[1:]:
                report.skip(name, "no agent")
            return
        client, agent, endpoint = state["client"], state["agent"], state["endpoint"]
        registry = client.channel.unary_unary("/synapse.v1.RegistryService/Register", request_serializer=registry_pb2.RegisterRequest.SerializeToString,
                                              response_deserializer=registry_pb2.RegisterResponse.FromString)
        if not report.check(names[1], lambda: _register(client, agent, registry, endpoint)):
            for name in names[2:]:
                report.skip(name, "not registered")
            return
        report.check(names[2], lambda: _callbacks(client, agent, endpoint))
        report.check(names[3], lambda: _deregister(client))
    finally:
        if "server" in state:
            state["server"].stop(None)
        if "client" in state:
            state["client"].close()


def _register(client: Client, agent: Agent, registry, endpoint: str) -> None:
    payload = registry_pb2.AgentRegistrationPayload(capabilities=agent.capabilities(), interfaces=agent.interfaces(),
                                                    endpoint_url=endpoint, public_key=agent.identity.public_key)
    envelope, _ = seal(agent.identity, envelope_pb2.MESSAGE_TYPE_REGISTRY_REGISTER, payload, client.executor)
    registered = registry(registry_pb2.RegisterRequest(envelope=envelope), timeout=30).agent
    require(registered.capabilities.agent_id == agent.identity.agent_id, f"registered as {registered.capabilities.agent_id!r}")
    require(registered.endpoint_url == endpoint, f"registered at {registered.endpoint_url!r}")
    require(registered.compliance_level == capabilities_pb2.COMPLIANCE_BASIC,
            f"compliance level {capabilities_pb2.Compliance.Name(registered.compliance_level)}")


def _callbacks(client: Client, agent: Agent, endpoint: str) -> None:
    task_id = f"py-task-{uuid.uuid4()}"
    pushed = agent.expect_callbacks(client.executor, task_id)
    client.submit("text_analysis", {"text": TEXT}, task_id=task_id, callback_url=endpoint)
    events = []
    try:
        while (event := pushed.get(timeout=CALLBACK_WAIT_SECONDS)) is not None:
            events.append(event)
    except queue.Empty:
        require(False, f"no task_complete pushed within {CALLBACK_WAIT_SECONDS:.0f} s ({len(events)} envelopes pushed)")
    require([e.header.sequence for e in events] == list(range(1, len(events) + 1)), f"pushed sequences {[e.header.sequence for e in events]}")
    require(all(e.header.task_id == task_id for e in events), "an event about another task was pushed")
    last = events[-1]
    require(last.type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, f"the last pushed envelope is {envelope_pb2.MessageType.Name(last.type)}")
    check_counts(output_of(last.payload.result))


def _deregister(client: Client) -> None:
    deregister = client.channel.unary_unary("/synapse.v1.RegistryService/Deregister", request_serializer=registry_pb2.DeregisterRequest.SerializeToString,
                                            response_deserializer=registry_pb2.DeregisterResponse.FromString)
    envelope, _ = seal(client.identity, envelope_pb2.MESSAGE_TYPE_REGISTRY_DEREGISTER, registry_pb2.AgentDeregistrationPayload(reason="interop run done"), client.executor)
    deregister(registry_pb2.DeregisterRequest(envelope=envelope), timeout=30)


def reverse(task: Task) -> dict:
    """The own agent's task type: reverses input.text."""
    task.progress(50, "reversing")
    return {"reversed": task.input.get("text", "")[::-1]}


def run_own_agent(report: Reporter, cli: str | None) -> None:
    agent = Agent(Identity.generate(), name="Python kit agent", task_types=[TaskType("reverse", reverse, name="Reverse a text")])
    server, port = agent.serve("127.0.0.1:0")
    url = f"http://127.0.0.1:{port}"
    try:
        report.check("kit_agent.python_client", lambda: _python_client(url))
        if cli:
            report.check("kit_agent.typescript_cli", lambda: _cli(cli, url))
        else:
            report.skip("kit_agent.typescript_cli", "no --cli")
    finally:
        server.stop(None)


def _python_client(url: str) -> None:
    with Client.connect(url, Identity.generate()) as client:
        sent = client.submit("reverse", {"text": "Synapse"})
        events = [i.event for i in client.watch(sent.task_id) if i.kind == "event"]
        types = [envelope_pb2.MessageType.Name(e.type) for e in events]
        require(types == ["MESSAGE_TYPE_TASK_CONFIRM", "MESSAGE_TYPE_TASK_STATUS_UPDATE", "MESSAGE_TYPE_TASK_COMPLETE"], f"events {types}")
        require(output_of(events[-1].payload.result) == {"reversed": "espanyS"}, "the output differs")


def _cli(cli: str, url: str) -> None:
    """`synapse submit URL --protocol grpc --type reverse --watch --json`: the TypeScript
    client, which checks every event's signature and the state machine."""
    with tempfile.TemporaryDirectory(prefix="synapse-cli-home-") as home:
        done = subprocess.run(["node", cli, "submit", url, "--protocol", "grpc", "--type", "reverse", "--payload", '{"text":"Python kit"}',
                               "--watch", "--json", "--home", home], capture_output=True, text=True, timeout=60)
    require(done.returncode == 0, f"exit {done.returncode}: {done.stdout} {done.stderr}")
    states = [json.loads(line).get("state") for line in done.stdout.splitlines() if line.startswith("{") and '"kind":"event"' in line]
    require(states and states[-1] == "COMPLETED", f"the command line saw states {states}: {done.stdout}")
    require("tik nohtyP" in done.stdout, f"no reversed text in {done.stdout}")

"""Confidential tasks (docs/PROTOCOL.md §9) against the server's reference agent,
through the kit's Client: the request sealed to the server's published X25519
key (its binding verified against the server's identity key) and to our own,
every event opened with the task key.

(a) a summarization without max_sentences: a sealed need-info, answered sealed
    with max_sentences 2; the task completes and the opened result has a summary;
(b) a data_analysis whose result is a sealed stream: read with ReadResult,
    checked against the signed size and SHA-256, opened record by record;
(c) GetTask answers with Task.confidential and no request or result in the clear;
(d) a confidential request with one ciphertext bit flipped is refused with
    decryption_failed.

And the reverse direction, to the kit's Agent (a task type that requires
confidentiality): the kit's Client, the TypeScript SynapseClient
(ts_confidential_submit.mjs) and, when its submit offers --confidential, the
TypeScript command line."""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import json_format
from synapse.v1 import envelope_pb2, payloads_pb2

from live_checks import expect_refusal, output_of
from report import CheckFailed, Reporter, require
from synapse_kit import Agent, Client, EncryptionKey, Identity, Task, TaskType, protocol_code, seal_confidential

TEXT = ("Agents sign every message they send. A confidential task is sealed as well. "
        "Only its requester and its executor can read it. Relays see the header and nothing else. "
        "The result is sealed in records.")
WAIT_SECONDS = 15.0


@dataclass
class State:
    client: Client
    summary_task: str = ""


def run(report: Reporter, url: str) -> None:
    names = ["confidential.need_info_answered", "confidential.result_stream", "confidential.get_task_sealed", "confidential.tampered_refused"]
    state: list[State] = []

    def connect() -> None:
        client = Client.connect(url, Identity.generate(), encryption_key=EncryptionKey.generate())
        require(len(client.capabilities.encryption_keys) > 0, "the server publishes no encryption key")
        state.append(State(client))

    if not report.check("confidential.encryption_key", connect):
        for name in names:
            report.skip(name, "no encryption key")
        return
    s = state[0]
    with s.client:
        report.check(names[0], lambda: _need_info(s))
        report.check(names[1], lambda: _result_stream(s))
        if s.summary_task:
            report.check(names[2], lambda: _get_task(s))
        else:
            report.skip(names[2], "the summarization did not run")
        report.check(names[3], lambda: _tampered(s.client))


def _events(client: Client, task_id: str, from_sequence: int = 1, until: int | None = None) -> list:
    """The task's events from ``from_sequence``, each opened; up to the first of type
    ``until`` (else to the terminal one)."""
    events = []
    watch = client.watch(task_id, from_sequence, timeout=WAIT_SECONDS * 2)
    try:
        for item in watch:
            if item.kind != "event":
                continue
            require(item.event.confidential, f"event {item.sequence} ({envelope_pb2.MessageType.Name(item.event.type)}) is not sealed")
            require(item.event.envelope.signature.value == b"", f"event {item.sequence} carries a signature in the clear")
            events.append(item)
            if until is not None and item.event.type == until:
                break
    finally:
        watch.close()
    return events


def _need_info(s: State) -> None:
    client = s.client
    sent = client.submit("summarization", {"text": TEXT}, confidential=True, wait=WAIT_SECONDS)
    require(sent.reply is not None and sent.reply.confidential, "the reply to a confidential request is not sealed")
    require(sent.task is not None and sent.task.state == payloads_pb2.TASK_STATE_INFO_NEEDED,
            f"state {payloads_pb2.TaskState.Name(sent.task.state) if sent.task else None}, expected TASK_STATE_INFO_NEEDED")
    asked = _events(client, sent.task_id, until=envelope_pb2.MESSAGE_TYPE_TASK_NEED_INFO)
    need = asked[-1].event
    require(need.type == envelope_pb2.MESSAGE_TYPE_TASK_NEED_INFO, f"events {[envelope_pb2.MessageType.Name(i.event.type) for i in asked]}")
    fields = [f.field for f in need.payload.missing_fields]
    require("max_sentences" in fields, f"the need-info asks for {fields}")
    require(b"max_sentences" not in need.envelope.payload, "the question travels in the clear")
    s.summary_task = sent.task_id

    answered = client.provide_info(sent.task_id, {"max_sentences": 2}, wait=WAIT_SECONDS)
    require(answered.reply is None or answered.reply.confidential, "the reply to the answer is not sealed")
    rest = _events(client, sent.task_id, asked[-1].sequence + 1)
    last = rest[-1].event
    require(last.type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, f"events after the answer {[envelope_pb2.MessageType.Name(i.event.type) for i in rest]}")
    output = output_of(last.payload.result)
    require(isinstance(output.get("summary"), str) and output["summary"], f"no summary in {output}")
    require(len(output.get("sentences", [])) == 2, f"{len(output.get('sentences', []))} sentences kept, 2 asked for")


def _result_stream(s: State) -> None:
    client = s.client
    sent = client.submit("data_analysis", {"csv": "a,b\n1,2\n3,4\n", "include_rows": True}, confidential=True, wait=WAIT_SECONDS)
    events = _events(client, sent.task_id)
    complete = events[-1].event
    require(complete.type == envelope_pb2.MESSAGE_TYPE_TASK_COMPLETE, f"the last event is {envelope_pb2.MessageType.Name(complete.type)}")
    stream = complete.payload.result.stream
    require(stream.total_size > 0, "the sealed task_complete offers no result stream")
    sealed = client.read_result(sent.task_id, expected=stream)
    require(b"parsed_rows" not in sealed, "the result stream travels in the clear")
    doc = json.loads(client.read_confidential_result(sent.task_id, expected=stream))
    require("parsed_rows" in doc, f"no parsed_rows in {sorted(doc)}")
    rows = [{k: str(v) for k, v in row.items()} for row in doc["parsed_rows"]]
    require([r.get("a") for r in rows] in (["1", "3"], ["1.0", "3.0"]), f"parsed_rows {doc['parsed_rows']}")


def _get_task(s: State) -> None:
    task = s.client.get_task(s.summary_task)
    require(task.HasField("confidential"), "GetTask does not say the task is confidential")
    require(any(w.agent_id == s.client.identity.agent_id for w in task.confidential.keys), "no task key is wrapped to the requester")
    clear = [name for name in ("request", "result", "error", "rejection", "pending_info") if task.HasField(name)]
    require(not clear, f"GetTask shows {clear} in the clear")
    require(task.status_message == "", f"GetTask shows the status line {task.status_message!r}")
    require(TEXT[:20] not in json.dumps(json_format.MessageToDict(task)), "the text is in GetTask's answer")


def _tampered(client: Client) -> None:
    task_id = f"py-task-{uuid.uuid4()}"
    task_key, keys = client.wrap_new_task_key(task_id)
    request = payloads_pb2.TaskRequestPayload(task=payloads_pb2.TaskSpec(id=task_id, type="text_analysis"))
    request.task.payload.update({"text": TEXT})
    envelope, _ = seal_confidential(client.identity, envelope_pb2.MESSAGE_TYPE_TASK_REQUEST, request, client.executor, task_key,
                                    keys=keys, task_id=task_id)
    payload = bytearray(envelope.payload)
    payload[len(payload) // 2] ^= 0x01
    envelope.payload = bytes(payload)
    expect_refusal(lambda: client.send(envelope), grpc.StatusCode.INVALID_ARGUMENT, "decryption_failed")


# ── the TypeScript command line to the kit's Agent ───────────────────────


def _shout(task: Task) -> dict:
    return {"shouted": task.input.get("text", "").upper()}


def run_own_agent(report: Reporter, cli: str | None) -> None:
    agent = Agent(Identity.generate(), name="Python kit agent (confidential)",
                  task_types=[TaskType("shout", _shout, name="Upper-case a text", requires_confidentiality=True)])
    server, port = agent.serve("127.0.0.1:0")
    url = f"http://127.0.0.1:{port}"
    try:
        report.check("confidential.kit_agent.python_client", lambda: _python_client(url, agent))
        if not cli:
            report.skip("confidential.kit_agent.typescript_client", "no --cli")
            return
        report.check("confidential.kit_agent.typescript_client", lambda: _ts_client(cli, url, agent))
        # The command line's own flag, once it has one.
        if "--confidential" in subprocess.run(["node", cli, "submit", "--help"], capture_output=True, text=True, timeout=60).stdout:
            report.check("confidential.kit_agent.typescript_cli", lambda: _cli(cli, url, agent))
    finally:
        server.stop(None)


def _python_client(url: str, agent: Agent) -> None:
    with Client.connect(url, Identity.generate()) as client:
        try:
            client.submit("shout", {"text": "hush"}, confidential=False)
        except grpc.RpcError as error:
            require(protocol_code(error) == "confidentiality_required", f"a plaintext request refused as {protocol_code(error)!r}")
        else:
            raise CheckFailed("a plaintext request for a type that requires confidentiality was accepted")
        sent = client.submit("shout", {"text": "hush"})
        events = [i.event for i in client.watch(sent.task_id) if i.kind == "event"]
        require(all(e.confidential for e in events), "an event is not sealed")
        require(output_of(events[-1].payload.result) == {"shouted": "HUSH"}, "the output differs")


def _new_confidential_task(agent: Agent, before: set[str]) -> None:
    new = [agent._tasks[t] for t in set(agent._tasks) - before]
    require(len(new) == 1 and new[0].task_key is not None, "the kit's agent did not take one confidential task")
    for event in new[0].events:
        require(b"QUIET" not in event.message.envelope.payload and b"quiet" not in event.message.envelope.payload,
                "an event carries the text in the clear")


def _ts_client(cli: str, url: str, agent: Agent) -> None:
    """The TypeScript SynapseClient (the command line's) with confidential: true: it
    verifies the kit agent's binding, wraps the task key, and opens the sealed events."""
    dist = Path(cli).resolve().parents[2]
    before = set(agent._tasks)
    with tempfile.TemporaryDirectory(prefix="synapse-ts-home-") as home:
        done = subprocess.run(["node", str(Path(__file__).with_name("ts_confidential_submit.mjs")), str(dist), url, "shout",
                               '{"text":"quiet please"}', home], capture_output=True, text=True, timeout=60)
    require(done.returncode == 0, f"exit {done.returncode}: {done.stdout} {done.stderr}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    events = [line for line in lines if "type" in line]
    require([e["type"] for e in events] == ["TASK_CONFIRM", "TASK_COMPLETE"], f"events {events}")
    require(all(e["sealed"] for e in events), f"an event was not sealed: {events}")
    require(events[-1].get("output") == {"shouted": "QUIET PLEASE"}, f"the opened output is {events[-1].get('output')!r}")
    require(lines[-1].get("confidential") is True and lines[-1].get("result") is True, f"GetTask as the client read it: {lines[-1]}")
    _new_confidential_task(agent, before)


def _cli(cli: str, url: str, agent: Agent) -> None:
    """`synapse submit URL --protocol grpc --type shout --confidential --watch --json`."""
    before = set(agent._tasks)
    with tempfile.TemporaryDirectory(prefix="synapse-cli-home-") as home:
        done = subprocess.run(["node", cli, "submit", url, "--protocol", "grpc", "--type", "shout", "--payload", '{"text":"quiet please"}',
                               "--confidential", "--watch", "--json", "--home", home], capture_output=True, text=True, timeout=60)
    require(done.returncode == 0, f"exit {done.returncode}: {done.stdout} {done.stderr}")
    require("QUIET PLEASE" in done.stdout, f"the command line did not open the result: {done.stdout}")
    _new_confidential_task(agent, before)

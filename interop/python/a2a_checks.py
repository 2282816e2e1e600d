"""A2A v1.0 checks with the official Python SDK (a2a-sdk) as the client:
against the server's A2A face, over JSON-RPC and over gRPC, it sends a
message and gets the completed task, streams one, answers an input-required
task with a follow-up message, cancels a running task, and takes up a task's
updates with SubscribeToTask. The caller authenticates with a bearer token
made by the kit, as any Synapse reader does."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable

import grpc
import httpx
from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as a2a
from google.protobuf import json_format, struct_pb2

from report import Reporter, require
from synapse_kit import Client, Identity, make_token

BINDINGS = ("JSONRPC", "GRPC")
# The card of `synapse serve` lists its gRPC interface only so far; the JSON-RPC one it serves is here.
JSONRPC_PATH = "/a2a/jsonrpc"
TEXT = "The quick brown fox jumps over the lazy dog. The dog sleeps. A fox runs."
CSV = "n,square\n" + "\n".join(f"{i},{i * i}" for i in range(20))
CALL_TIMEOUT_SECONDS = 30.0


class Session:
    """One SDK client on one binding, with the caller's token on every call."""

    def __init__(self, url: str, binding: str, token: str) -> None:
        self.url, self.binding = url, binding
        self.context = ClientCallContext(service_parameters={"authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT_SECONDS)
        self.http = httpx.AsyncClient(timeout=CALL_TIMEOUT_SECONDS)
        self.client: Any = None

    async def open(self, streaming: bool) -> None:
        raw = (await self.http.get(f"{self.url}/.well-known/agent-card.json")).json()
        card = json_format.ParseDict(raw, a2a.AgentCard(), ignore_unknown_fields=True)
        require(any(i.protocol_binding == "GRPC" for i in card.supported_interfaces), f"the card lists no gRPC interface: {raw.get('supportedInterfaces')}")
        if not any(i.protocol_binding == "JSONRPC" for i in card.supported_interfaces):
            card.supported_interfaces.append(a2a.AgentInterface(url=f"{self.url}{JSONRPC_PATH}", protocol_binding="JSONRPC", protocol_version="1.0"))
        config = ClientConfig(
            streaming=streaming,
            httpx_client=self.http,
            grpc_channel_factory=lambda target: grpc.aio.insecure_channel(target.removeprefix("http://").rstrip("/")),
            supported_protocol_bindings=[self.binding],
            use_client_preference=True,
        )
        self.client = ClientFactory(config).create(card)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        await self.http.aclose()

    async def send(self, message: a2a.Message, return_immediately: bool = False) -> list[a2a.StreamResponse]:
        request = a2a.SendMessageRequest(message=message, configuration=a2a.SendMessageConfiguration(return_immediately=return_immediately))
        return [item async for item in self.client.send_message(request, context=self.context)]

    async def get(self, task_id: str) -> a2a.Task:
        return await self.client.get_task(a2a.GetTaskRequest(id=task_id), context=self.context)


def _message(text: str | None = None, data: dict[str, Any] | None = None, task_type: str | None = None, task_id: str = "") -> a2a.Message:
    message = a2a.Message(message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, task_id=task_id)
    if text is not None:
        message.parts.append(a2a.Part(text=text))
    if data is not None:
        value = struct_pb2.Value()
        value.struct_value.update(data)
        message.parts.append(a2a.Part(data=value))
    if task_type is not None:
        message.metadata.update({"taskType": task_type})
    return message


def _state(item: a2a.StreamResponse) -> int | None:
    if item.HasField("task"):
        return item.task.status.state
    if item.HasField("status_update"):
        return item.status_update.status.state
    return None


def _result(task: a2a.Task) -> dict[str, Any]:
    for artifact in task.artifacts:
        for part in artifact.parts:
            if part.HasField("data"):
                return json_format.MessageToDict(part.data)
    return {}


async def _send(session: Session) -> None:
    items = await session.send(_message(text=TEXT, task_type="text_analysis"))
    require(len(items) == 1 and items[0].HasField("task"), f"want one task, got {items}")
    task = items[0].task
    require(task.status.state == a2a.TASK_STATE_COMPLETED, f"state {a2a.TaskState.Name(task.status.state)}")
    require(_result(task).get("words", 0) > 0, f"no word count in {_result(task)}")
    read = await session.get(task.id)
    require(read.id == task.id and read.status.state == a2a.TASK_STATE_COMPLETED, "GetTask does not show the completed task")


async def _stream(session: Session) -> None:
    items = await session.send(_message(text=TEXT, task_type="text_analysis"))
    require(len(items) >= 2 and items[0].HasField("task"), f"want the task first, got {[i.WhichOneof('payload') for i in items]}")
    require(any(item.HasField("artifact_update") for item in items), "no artifact update in the stream")
    require(_state(items[-1]) == a2a.TASK_STATE_COMPLETED, f"the stream ends in {_state(items[-1])}")


async def _input_required(session: Session) -> None:
    items = await session.send(_message(text=TEXT, task_type="summarization"))
    task = items[0].task
    require(task.status.state == a2a.TASK_STATE_INPUT_REQUIRED, f"state {a2a.TaskState.Name(task.status.state)}")
    answered = await session.send(_message(data={"max_sentences": 1}, task_id=task.id))
    done = answered[0].task
    require(done.id == task.id and done.status.state == a2a.TASK_STATE_COMPLETED, f"after the answer: {a2a.TaskState.Name(done.status.state)}")
    require("summary" in _result(done), f"no summary in {_result(done)}")


async def _running(session: Session) -> a2a.Task:
    items = await session.send(_message(data={"csv": CSV, "delay_ms_per_row": 100}, task_type="data_analysis"), return_immediately=True)
    require(items and items[0].HasField("task"), "no task")
    return items[0].task


async def _cancel(session: Session) -> None:
    task = await _running(session)
    canceled = await session.client.cancel_task(a2a.CancelTaskRequest(id=task.id), context=session.context)
    require(canceled.status.state == a2a.TASK_STATE_CANCELED, f"state {a2a.TaskState.Name(canceled.status.state)}")
    require((await session.get(task.id)).status.state == a2a.TASK_STATE_CANCELED, "GetTask does not show it canceled")


async def _resubscribe(session: Session) -> None:
    # A stream dropped after its first item (the task), then taken up again.
    request = a2a.SendMessageRequest(message=_message(data={"csv": CSV, "delay_ms_per_row": 100}, task_type="data_analysis"))
    stream = session.client.send_message(request, context=session.context)
    first = await anext(stream)
    await stream.aclose()
    require(first.HasField("task"), f"the stream starts with {first.WhichOneof('payload')}")
    task = first.task
    require(task.status.state not in (a2a.TASK_STATE_COMPLETED, a2a.TASK_STATE_FAILED), "the task ended before the stream was dropped")
    items = [item async for item in session.client.subscribe(a2a.SubscribeToTaskRequest(id=task.id), context=session.context)]
    require(items and items[0].HasField("task") and items[0].task.id == task.id, "the subscription does not start with the task")
    require(_state(items[-1]) == a2a.TASK_STATE_COMPLETED, f"the subscription ends in {_state(items[-1])}")
    require(_result((await session.get(task.id))).get("rows") == 20, "the task's result has not 20 rows")


FLOWS: tuple[tuple[str, bool, Callable[[Session], Awaitable[None]]], ...] = (
    ("send", False, _send),
    ("stream", True, _stream),
    ("input_required", False, _input_required),
    ("cancel", False, _cancel),
    ("resubscribe", True, _resubscribe),
)


async def _flow(url: str, binding: str, token: str, streaming: bool, flow: Callable[[Session], Awaitable[None]]) -> None:
    session = Session(url, binding, token)
    try:
        await session.open(streaming)
        await flow(session)
    finally:
        await session.close()


def run(report: Reporter, url: str) -> None:
    url = url.rstrip("/")
    identity = Identity.generate()
    with Client.connect(url, identity) as synapse:
        token = make_token(identity, synapse.executor.agent_id, 600)
    for binding in BINDINGS:
        for name, streaming, flow in FLOWS:
            report.check(f"a2a.{binding.lower()}.{name}", lambda: asyncio.run(_flow(url, binding, token, streaming, flow)))

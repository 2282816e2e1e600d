"""Client.send after UNAVAILABLE (how a gRPC client sees a server shutting down,
and a stream it refused with HTTP/2 REFUSED_STREAM): the same envelope is sent
again, a bounded number of times, and other errors are not retried."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from synapse.v1 import payloads_pb2

from synapse_kit import Agent, Client, Identity, Task, TaskType


class RefusingAgent(Agent):
    """An agent whose first ``refuse`` Sends fail with ``code``."""

    def __init__(self, refuse: int, code: grpc.StatusCode) -> None:
        super().__init__(Identity.generate(), name="refusing agent", task_types=[TaskType("upper", self._upper)])
        self.refuse = refuse
        self.code = code
        self.seen: list[bytes] = []

    @staticmethod
    def _upper(task: Task) -> dict:
        return {"text": task.input["text"].upper()}

    def _send(self, request, context):  # type: ignore[override]
        self.seen.append(request.envelope.SerializeToString(deterministic=True))
        if self.refuse > 0:
            self.refuse -= 1
            context.abort(self.code, "the agent is shutting down")
        return super()._send(request, context)


@pytest.fixture()
def serve() -> Iterator:
    servers: list[grpc.Server] = []

    def start(refuse: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> tuple[RefusingAgent, str]:
        agent = RefusingAgent(refuse, code)
        server, port = agent.serve()
        servers.append(server)
        return agent, f"http://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


def test_send_is_sent_again_after_unavailable(serve) -> None:
    agent, url = serve(2)
    with Client.connect(url, Identity.generate(), retry_base_delay=0.01) as client:
        sent = client.submit("upper", {"text": "again"}, wait=5)
    assert sent.task.state == payloads_pb2.TASK_STATE_COMPLETED
    assert len(agent.seen) == 3  # two refused, one answered
    assert all(body == agent.seen[0] for body in agent.seen)


def test_send_gives_up_after_send_retries(serve) -> None:
    agent, url = serve(10)
    with Client.connect(url, Identity.generate(), retry_base_delay=0.01, send_retries=2) as client:
        with pytest.raises(grpc.RpcError) as refused:
            client.submit("upper", {"text": "never"})
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert len(agent.seen) == 3


@pytest.mark.parametrize("code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED])
def test_send_is_not_sent_again_after_other_errors(serve, code: grpc.StatusCode) -> None:
    agent, url = serve(1, code)
    with Client.connect(url, Identity.generate(), retry_base_delay=0.01) as client:
        with pytest.raises(grpc.RpcError) as refused:
            client.submit("upper", {"text": "once"})
    assert refused.value.code() == code
    assert len(agent.seen) == 1

// CallbackSender and CallbackReceiver between two real agents: the
// executor pushes every signed event to the requester's agent, in order,
// retrying while that agent is unreachable.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient } from "../src/client/requester.js";
import { connectClient, startTestServer } from "./helpers/server.js";

describe("callbacks", () => {
  it("pushes every event of a task to the requester's agent, which checks and keeps them", async () => {
    const executor = await startTestServer({ agentId: "executor_cb" });
    const requester = await startTestServer();
    try {
      const client = await SynapseClient.connect({
        baseUrl: executor.url,
        identity: requester.agent.identity,
        callback: { url: requester.url, inbox: requester.agent.inbox },
      });
      const { taskId } = await client.submit("data_analysis", { csv: "a\n1\n2\n3", delay_ms_per_row: 20 });
      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_cb", taskId)) pushed.push(item);
      expect(pushed.map((p) => p.event.sequence)).toEqual(pushed.map((_, i) => i + 1));
      expect(pushed.at(-1)?.event.header.messageType).toBe(MessageType.TASK_COMPLETE);
      expect(pushed.at(-1)?.state).toBe(TaskState.COMPLETED);
      // The pushed envelopes are the executor's own signed events.
      const watched = [];
      for await (const item of client.watch(taskId)) if (item.kind === "event") watched.push(item.event.envelope);
      expect(watched.map((e) => Buffer.from(e.payload).toString("hex"))).toEqual(pushed.map((p) => Buffer.from(p.event.envelope.payload).toString("hex")));
      expect((await requester.agent.inbox.get("executor_cb", taskId))?.state).toBe(TaskState.COMPLETED);

      const interfaces = (await createClient(CapabilitiesService, createGrpcTransport({ baseUrl: requester.url })).getSupportedInterfaces({})).interfaces.map((i) => i.name);
      expect(interfaces).toContain("CallbackReceiver");
      expect(interfaces).toContain("CallbackSender");
    } finally {
      await executor.close();
      await requester.close();
    }
  });

  it("pushes the executor's task_ack of a need-info round like any other event", async () => {
    const executor = await startTestServer({ agentId: "executor_cb_ack" });
    const requester = await startTestServer();
    try {
      const client = await SynapseClient.connect({ baseUrl: executor.url, identity: requester.agent.identity, callback: { url: requester.url, inbox: requester.agent.inbox } });
      const { taskId } = await client.submit("summarization", { text: "One sentence here. Another one there." }, { waitMs: 5000 });
      expect((await client.provideInfo(taskId, { max_sentences: 1 }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_cb_ack", taskId)) pushed.push(item);
      expect(pushed.map((p) => p.event.header.messageType)).toEqual([MessageType.TASK_NEED_INFO, MessageType.TASK_ACK, MessageType.TASK_CONFIRM, MessageType.TASK_COMPLETE]);
      expect(pushed.map((p) => p.state)).toEqual([TaskState.INFO_NEEDED, TaskState.INFO_PROVIDED, TaskState.CONFIRMED, TaskState.COMPLETED]);
    } finally {
      await executor.close();
      await requester.close();
    }
  });

  it("refuses pushed events for tasks the agent did not request", async () => {
    const executor = await startTestServer();
    const bystander = await startTestServer();
    try {
      // The executor signs events for a task requested by the bystander's identity, without the bystander expecting them.
      const client = await SynapseClient.connect({ baseUrl: executor.url, identity: bystander.agent.identity });
      const { taskId } = await client.submit("text_analysis", { text: "x." }, { waitMs: 5000 });
      const events = [];
      for await (const item of client.watch(taskId)) if (item.kind === "event") events.push(item.event.envelope);
      const pushToBystander = await connectClient(bystander);
      const error = await pushToBystander.sendEnvelope(events[0]!).catch((e: unknown) => ConnectError.from(e));
      expect((error as ConnectError).code).toBe(Code.NotFound);
    } finally {
      await executor.close();
      await bystander.close();
    }
  });

  it("retries while the requester's agent is unreachable and delivers once it is back", async () => {
    const executor = await startTestServer({ agentId: "executor_cb3", config: { retryBaseDelayMs: 100, maxRetries: 6 } });
    const requester = await startTestServer();
    // A gate in front of the requester's agent that refuses connections at first.
    let open = false;
    const gate = net.createServer((socket) => {
      if (!open) return socket.destroy();
      const upstream = net.connect(requester.port, "127.0.0.1");
      socket.pipe(upstream).pipe(socket);
      upstream.on("error", () => socket.destroy());
      socket.on("error", () => upstream.destroy());
    });
    await new Promise<void>((resolve) => gate.listen(0, "127.0.0.1", resolve));
    const gateUrl = `http://127.0.0.1:${(gate.address() as net.AddressInfo).port}`;
    try {
      const client = await SynapseClient.connect({ baseUrl: executor.url, identity: requester.agent.identity, callback: { url: gateUrl, inbox: requester.agent.inbox } });
      const { taskId } = await client.submit("text_analysis", { text: "Delivered late." }, { waitMs: 5000 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await requester.agent.inbox.get("executor_cb3", taskId))?.lastSequence).toBe(0);
      open = true;
      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_cb3", taskId)) pushed.push(item.event.sequence);
      expect(pushed).toEqual([1, 2]); // confirm, complete
    } finally {
      gate.close();
      await executor.close();
      await requester.close();
    }
  });
});

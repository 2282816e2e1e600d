// OpenTelemetry spans exported over OTLP/HTTP to a receiver in the test:
// one trace spans the client's submit, the executor's receipt, the handler
// run, the transitions to completion, and the callback that carries the
// same trace to the requester's agent. Incoming traceparent headers name
// the parent of a call's span; an invalid one is ignored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler, TaskTrace } from "../src/agent/handler.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import { SynapseClient } from "../src/client/requester.js";
import { tracingActive } from "../src/observability/trace-context.js";
import { installTracing, otlpTracesUrl, type Tracing } from "../src/observability/tracing.js";
import { OTLP_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "./helpers/otlp.js";
import { taskRequest } from "./helpers/requests.js";
import { connectClient, startTestServer } from "./helpers/server.js";

let receiver: OtlpReceiver;
let tracing: Tracing;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  expect(tracingActive()).toBe(false);
  tracing = await installTracing({ url: otlpTracesUrl(receiver.url)!, serviceName: "synapse-test", scheduledDelayMs: 20 });
  expect(tracingActive()).toBe(true);
});

afterAll(async () => {
  await tracing.shutdown();
  expect(tracingActive()).toBe(false);
  await receiver.close();
});

/** Exports what has ended, until `check` finds what it looks for. */
async function spansUntil(check: (spans: ReceivedSpan[]) => boolean, what: string): Promise<ReceivedSpan[]> {
  for (let i = 0; i < 100; i++) {
    await tracing.flush();
    if (check(receiver.spans)) return receiver.spans;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the receiver never got ${what}`);
}

function only(spans: ReceivedSpan[], match: (span: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(match);
  expect(found, what).toHaveLength(1);
  return found[0]!;
}

describe("OpenTelemetry traces over OTLP", () => {
  it("follow a task in one trace from the client's submit through the handler to the callback at another agent", async () => {
    const seen = new Map<string, TaskTrace>();
    const handlers = referenceHandlers();
    const inner: TaskHandler = handlers.get("text_analysis")!;
    handlers.set("text_analysis", { ...inner, executeTask: (ctx) => (seen.set(ctx.taskId, ctx.trace), inner.executeTask(ctx)) });
    const executor = await startTestServer({ agentId: "executor_traced", handlers });
    const requester = await startTestServer();
    try {
      const client = await SynapseClient.connect({ baseUrl: executor.url, identity: requester.agent.identity, callback: { url: requester.url, inbox: requester.agent.inbox } });
      const { taskId, task, reply } = await client.submit("text_analysis", { text: "Traced once. Traced everywhere." }, { waitMs: 5000 });
      expect(task?.state).toBe(TaskState.COMPLETED);
      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_traced", taskId)) pushed.push(item.event.header);

      // The trace the client started: the request's traceparent, carried in every event.
      const traceparent = reply!.header.trace!.traceparent;
      const [, traceId, clientSpanId] = traceparent.split("-") as [string, string, string];
      expect(seen.get(taskId)?.traceId).toBe(traceId);
      for (const header of pushed) expect(header.trace?.traceparent).toBe(traceparent);

      const completeAt = (agentId: string) => (s: ReceivedSpan) => s.name === "receive p2p:task_complete" && s.attributes["synapse.agent.id"] === agentId;
      // Spans end when their work does, some after the requester's agent kept the last event: wait for every push's call there.
      const whole = (all: ReceivedSpan[]) => {
        const inTrace = all.filter((s) => s.traceId === traceId);
        const pushes = inTrace.filter((s) => s.name.startsWith("deliver "));
        return (
          pushes.length === pushed.length &&
          pushes.every((d) => inTrace.some((s) => s.parentSpanId === d.spanId && s.kind === OTLP_KIND.server)) &&
          inTrace.some(completeAt(requester.agent.identity.agentId)) &&
          inTrace.some((s) => s.name === "handler text_analysis")
        );
      };
      const spans = (await spansUntil(whole, "the whole task")).filter((s) => s.traceId === traceId);

      // The client's submit is the root; the executor's call, its receipt of the message and the handler run follow it.
      const submit = only(spans, (s) => s.name === "send p2p:task_request", "the client's submit");
      expect(submit).toMatchObject({ spanId: clientSpanId, parentSpanId: "", kind: OTLP_KIND.client });
      expect(submit.attributes["synapse.task.id"]).toBe(taskId);
      const sendCalls = spans.filter((s) => s.name === "synapse.v1.P2PService/Send" && s.kind === OTLP_KIND.server);
      const call = only(sendCalls, (s) => s.parentSpanId === submit.spanId, "the executor's Send call");
      expect(call.attributes).toMatchObject({ "rpc.system": "connect_rpc", "rpc.service": "synapse.v1.P2PService", "rpc.method": "Send" });
      const receipt = only(spans, (s) => s.name === "receive p2p:task_request", "the executor's receipt");
      expect(receipt).toMatchObject({ parentSpanId: call.spanId, kind: OTLP_KIND.consumer });
      expect(receipt.attributes).toMatchObject({ "synapse.agent.id": "executor_traced", "synapse.task.id": taskId, "synapse.message.type": "p2p:task_request", "synapse.state": "confirmed" });
      const handler = only(spans, (s) => s.name === "handler text_analysis", "the handler run");
      expect(handler.attributes).toMatchObject({ "synapse.task.id": taskId, "synapse.task.type": "text_analysis" });

      // The transitions, the completion signed, and its push to the requester's agent.
      const completion = only(spans, (s) => s.name === "transition completed", "the transition to completed");
      expect(completion.attributes).toMatchObject({ "synapse.task.id": taskId, "synapse.state.to": "completed" });
      expect(spans.some((s) => s.name === "transition confirmed")).toBe(true);
      only(spans, (s) => s.name === "send p2p:task_complete" && s.kind === OTLP_KIND.producer, "the completion signed");
      const push = only(spans, (s) => s.name === "deliver p2p:task_complete", "the completion pushed");
      expect(push.kind).toBe(OTLP_KIND.client);
      expect(push.attributes["synapse.callback.url"]).toBe(requester.url);

      // At the requester's agent: the pushed call is a child of the push, in the same trace.
      const pushedCall = only(sendCalls, (s) => s.parentSpanId === push.spanId, "the requester's agent's Send call");
      const taken = only(spans, completeAt(requester.agent.identity.agentId), "the requester's agent taking the completion");
      expect(taken.parentSpanId).toBe(pushedCall.spanId);
      expect(taken.attributes["synapse.state"]).toBe("completed");
      expect(spans.filter((s) => s.name.startsWith("deliver "))).toHaveLength(pushed.length);

      // One trace: every span of the task descends from the client's submit.
      const byId = new Map(spans.map((s) => [s.spanId, s]));
      for (const span of spans) {
        let at: ReceivedSpan | undefined = span;
        while (at !== undefined && at.parentSpanId !== "") at = byId.get(at.parentSpanId);
        expect(at?.spanId, `${span.name} descends from the submit`).toBe(submit.spanId);
      }
      for (const span of receiver.spans.filter((s) => s.attributes["synapse.task.id"] === taskId)) expect(span.traceId).toBe(traceId);
      expect(submit.resource["service.name"]).toBe("synapse-test");
      expect(receiver.paths.every((path) => path === "/v1/traces")).toBe(true);
    } finally {
      await executor.close();
      await requester.close();
    }
  });

  it("makes a call's span a child of the traceparent its request carries, and ignores one that is invalid", async () => {
    const server = await startTestServer();
    const earlier = receiver.spans.length;
    try {
      const get = (traceparent: string) =>
        fetch(`${server.url}/synapse.v1.CapabilitiesService/GetCapabilities?encoding=json&message=%7B%7D`, { headers: { traceparent } });
      expect((await get("00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01")).status).toBe(200);
      expect((await get("00-not-a-trace-01")).status).toBe(200);
      const isCall = (s: ReceivedSpan) => s.name === "synapse.v1.CapabilitiesService/GetCapabilities";
      const calls = (await spansUntil((all) => all.slice(earlier).filter(isCall).length >= 2, "both calls")).slice(earlier).filter(isCall);
      expect(calls).toHaveLength(2);
      const [named, invalid] = calls[0]!.traceId === "5b8aa5a2d2c872e8321cf37308d69df2" ? [calls[0]!, calls[1]!] : [calls[1]!, calls[0]!];
      expect(named).toMatchObject({ traceId: "5b8aa5a2d2c872e8321cf37308d69df2", parentSpanId: "051581bf3cb55c13", kind: OTLP_KIND.server });
      expect(invalid.parentSpanId).toBe("");
      expect(invalid.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(invalid.traceId).not.toBe("5b8aa5a2d2c872e8321cf37308d69df2");
    } finally {
      await server.close();
    }
  });

  it("marks a refused message's call with its protocol error code", async () => {
    const server = await startTestServer();
    try {
      const client = await connectClient(server);
      const envelope = client.envelope(...taskRequest("traced-tampered"));
      const tampered = { ...envelope, payload: Uint8Array.from(envelope.payload, (b, i) => (i === 0 ? b ^ 1 : b)) };
      await expect(client.sendEnvelope(tampered)).rejects.toThrow();
      const refused = (await spansUntil((all) => all.some((s) => s.attributes["synapse.error.code"] === "signature_invalid"), "the refused call")).filter(
        (s) => s.attributes["synapse.error.code"] === "signature_invalid",
      );
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ name: "synapse.v1.P2PService/Send", kind: OTLP_KIND.server });
    } finally {
      await server.close();
    }
  });
});

// Trace context, session and correlation ids through real sockets, with no
// tracer installed: every event, reply, heartbeat and callback of a task
// carries the ids of its task_request unchanged (envelope.proto), also after
// the agent restarts on SQLite; handlers see them; the client starts a trace
// for each task it submits and sends the messages about it in that trace;
// the log line of each Send names its message.
import { create, fromBinary } from "@bufbuild/protobuf";
import { Writable } from "node:stream";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HeaderSchema, MessageType, type Header } from "../gen/synapse/v1/envelope_pb.js";
import { HeartbeatPayloadSchema, TaskCancelPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler, TaskTrace } from "../src/agent/handler.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import { SynapseClient } from "../src/client/requester.js";
import { createLogger } from "../src/log.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import { taskRequest } from "./helpers/requests.js";
import { connectClient, requesterIdentity, startTestServer, tempDir } from "./helpers/server.js";

const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TEXT = "Ids travel with the task. Every event carries them. Nothing is lost.";

/** The ids a header carries. */
function ids(header: Header | undefined) {
  return { traceparent: header?.trace?.traceparent, tracestate: header?.trace?.tracestate, sessionId: header?.sessionId, correlationId: header?.correlationId };
}

/** A logger destination that keeps every line written to it, parsed. */
function collectedLog(): { lines: Array<Record<string, unknown>>; destination: Writable } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, destination };
}

/** Every event of a task, read through Watch. */
async function eventHeaders(client: SynapseClient, taskId: string): Promise<Header[]> {
  const headers = [];
  for await (const item of client.watch(taskId)) if (item.kind === "event") headers.push(item.event.header);
  return headers;
}

/** text_analysis, recording the trace its context shows. */
function recordingHandlers(seen: Map<string, TaskTrace>): Map<string, TaskHandler> {
  const handlers = referenceHandlers();
  const inner = handlers.get("text_analysis")!;
  handlers.set("text_analysis", {
    ...inner,
    executeTask: (ctx) => {
      seen.set(ctx.taskId, ctx.trace);
      return inner.executeTask(ctx);
    },
  });
  return handlers;
}


/** Whether `name` is a getter of `object` or of its prototypes (a value made when first read). */
function accessorOf(object: object, name: string): boolean {
  for (let at: object | null = object; at !== null; at = Object.getPrototypeOf(at)) {
    const descriptor = Object.getOwnPropertyDescriptor(at, name);
    if (descriptor !== undefined) return descriptor.get !== undefined;
  }
  return false;
}

describe("trace context, session and correlation ids", () => {
  it("are carried from a task_request into every event, reply, heartbeat and callback of its task, and shown to its handler", async () => {
    const seen = new Map<string, TaskTrace>();
    const executor = await startTestServer({ agentId: "executor_ids", handlers: recordingHandlers(seen), config: { heartbeatIntervalMs: 100 } });
    const requester = await startTestServer();
    try {
      const client = await SynapseClient.connect({ baseUrl: executor.url, identity: requester.agent.identity, callback: { url: requester.url, inbox: requester.agent.inbox } });
      const carried = { traceparent: TRACEPARENT, tracestate: "vendor=abc", sessionId: "session-7", correlationId: "correlation-7" };
      const [type, payload, extra] = taskRequest("ids-1", TEXT);
      payload.task!.payload = { text: TEXT, require_approval: true };
      payload.callbackUrl = requester.url;
      await requester.agent.inbox.expect(client.executor, "ids-1");
      const sent = await client.sendEnvelope(client.envelope(type, payload, { ...extra, ...carried }), 5000);
      expect(sent.task?.state).toBe(TaskState.NEED_HUMAN);
      expect(ids(sent.reply?.header)).toEqual(carried);

      // A heartbeat on the Watch of a waiting task carries the task's ids.
      let heartbeat: Header | undefined;
      for await (const item of client.watch("ids-1")) {
        if (item.kind === "heartbeat") {
          heartbeat = item.heartbeat.header;
          break;
        }
      }
      expect(ids(heartbeat)).toEqual(carried);

      // The decision goes out with the task's session and correlation ids; its reply and what follows carry the request's.
      const decided = await client.decide("ids-1", { action: "approve" }, { waitMs: 5000 });
      expect(decided.task?.state).toBe(TaskState.COMPLETED);
      expect(ids(decided.reply?.header)).toEqual(carried);
      const events = await eventHeaders(client, "ids-1");
      expect(events.map((h) => h.messageType)).toContain(MessageType.TASK_COMPLETE);
      for (const header of events) expect(ids(header)).toEqual(carried);
      const pushed = [];
      for await (const item of requester.agent.inbox.events("executor_ids", "ids-1")) pushed.push(ids(item.event.header));
      expect(pushed).toEqual(events.map(() => carried));
      expect(seen.get("ids-1")).toEqual({ ...carried, traceId: "0af7651916cd43dd8448eb211c80319c" });

      // A reply that is not a task event carries the ids of the message it answers.
      const other = { traceparent: "00-11111111111111111111111111111111-2222222222222222-01", tracestate: "", sessionId: "s-hb", correlationId: "c-hb" };
      const answered = await client.sendEnvelope(client.envelope(MessageType.HEARTBEAT, create(HeartbeatPayloadSchema), other));
      expect(answered.reply?.type).toBe(MessageType.HEARTBEAT);
      expect(ids(answered.reply?.header)).toEqual(other);
    } finally {
      await executor.close();
      await requester.close();
    }
  });

  it("the client starts a new trace for each task it submits and sends the messages about it in that trace", async () => {
    const seen = new Map<string, TaskTrace>();
    const executor = await startTestServer({ handlers: recordingHandlers(seen) });
    try {
      const client = await connectClient(executor);
      const first = await client.submit("text_analysis", { text: TEXT }, { waitMs: 5000, sessionId: "session-a", correlationId: "correlation-a" });
      const second = await client.submit("text_analysis", { text: TEXT }, { waitMs: 5000 });
      const firstIds = ids(first.reply?.header);
      expect(firstIds.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(firstIds).toMatchObject({ sessionId: "session-a", correlationId: "correlation-a" });
      expect(ids(second.reply?.header).traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(ids(second.reply?.header).traceparent!.slice(3, 35)).not.toBe(firstIds.traceparent!.slice(3, 35));
      for (const header of await eventHeaders(client, first.taskId)) expect(ids(header)).toEqual(firstIds);
      expect(seen.get(first.taskId)?.traceId).toBe(firstIds.traceparent!.slice(3, 35));

      // What the client seals about the task later carries the task's ids.
      const cancel = client.envelope(MessageType.TASK_CANCEL, create(TaskCancelPayloadSchema, { taskId: first.taskId }), { taskId: first.taskId });
      expect(ids(fromBinary(HeaderSchema, cancel.header))).toEqual(firstIds);
    } finally {
      await executor.close();
    }
  });

  it("are kept with the task across a restart on SQLite: events sealed after it carry them", async () => {
    const dir = await tempDir();
    const identity = await requesterIdentity("executor_restart_ids");
    const requester = await requesterIdentity();
    const carried = { traceparent: TRACEPARENT, tracestate: "", sessionId: "session-r", correlationId: "correlation-r" };
    const first = sqliteStorage(join(dir, "state.db"));
    const before = await startTestServer({ identity, storage: first });
    try {
      const client = await connectClient(before, { identity: requester });
      const [type, payload, extra] = taskRequest("ids-restart", TEXT);
      payload.task!.type = "summarization";
      const sent = await client.sendEnvelope(client.envelope(type, payload, { ...extra, ...carried }), 5000);
      expect(sent.task?.state).toBe(TaskState.INFO_NEEDED);
    } finally {
      await before.close();
      await first.close();
    }

    const second = sqliteStorage(join(dir, "state.db"));
    const after = await startTestServer({ identity, storage: second });
    try {
      const client = await connectClient(after, { identity: requester });
      expect((await client.provideInfo("ids-restart", { max_sentences: 1 }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
      const events = await eventHeaders(client, "ids-restart");
      expect(events.map((h) => h.messageType)).toEqual([MessageType.TASK_NEED_INFO, MessageType.TASK_ACK, MessageType.TASK_CONFIRM, MessageType.TASK_COMPLETE]);
      for (const header of events) expect(ids(header)).toEqual(carried);
    } finally {
      await after.close();
      await second.close();
    }
  });

  it("a handler's logger names its task and trace, and a handler that logs nothing makes none", async () => {
    const { lines, destination } = collectedLog();
    const made: string[] = [];
    const logs: TaskHandler = {
      async executeTask(ctx) {
        if (ctx.payload.log) ctx.logger.info({ step: 1 }, "handler says");
        else made.push(accessorOf(ctx, "logger") ? "lazy" : "eager");
        return { output: { ok: true } };
      },
    };
    const executor = await startTestServer({
      logger: createLogger({ level: "info", destination }),
      handlers: new Map([["logs", logs]]),
      capabilities: { supportedTaskTypes: [{ type: "logs", name: "logs" }] },
    });
    try {
      const client = await connectClient(executor);
      const quiet = await client.submit("logs", {}, { waitMs: 5000 });
      expect(quiet.task?.state).toBe(TaskState.COMPLETED);
      expect(made).toEqual(["lazy"]);
      const sent = await client.submit("logs", { log: true }, { waitMs: 5000 });
      expect(sent.task?.state).toBe(TaskState.COMPLETED);
      const said = lines.filter((line) => line.msg === "handler says");
      expect(said).toHaveLength(1);
      expect(said[0]).toMatchObject({ step: 1, task_id: sent.taskId, trace_id: ids(sent.reply?.header).traceparent!.slice(3, 35) });
    } finally {
      await executor.close();
    }
  });

  it("log lines about a message name it: trace id, message id and type, task, sender, receiver and state", async () => {
    const { lines, destination } = collectedLog();
    const executor = await startTestServer({ logger: createLogger({ level: "info", destination }) });
    const bystander = await startTestServer();
    try {
      const client = await connectClient(executor);
      const sent = await client.submit("text_analysis", { text: TEXT }, { waitMs: 5000 });
      const envelope = client.envelope(...taskRequest("log-tampered"));
      const tampered = { ...envelope, payload: Uint8Array.from(envelope.payload, (b, i) => (i === 0 ? b ^ 1 : b)) };
      await expect(client.sendEnvelope(tampered)).rejects.toThrow();
      // A call's line is written when its response is, which the client may see first.
      const sendLines = () => lines.filter((line) => line.msg === "call" && line.procedure === "/synapse.v1.P2PService/Send");
      for (let i = 0; i < 100 && sendLines().length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      const sends = sendLines();
      expect(sends).toHaveLength(2);
      expect(sends[0]).toMatchObject({
        status: "ok",
        trace_id: ids(sent.reply?.header).traceparent!.slice(3, 35),
        message_id: expect.stringMatching(/.+/),
        message_type: "p2p:task_request",
        task_id: sent.taskId,
        sender: client.agentId,
        receiver: executor.agent.identity.agentId,
        state: "completed",
      });
      // A refused envelope's bytes are not trusted: its line says why, not what it claims to be.
      expect(sends[1]).toMatchObject({ status: "unauthenticated", error_code: "signature_invalid" });
      expect(sends[1]).not.toHaveProperty("message_id");

      // A push the requester's agent refuses (it expects no such task) is given up, and the line names the event.
      const stranger = await startTestServer();
      try {
        const pushing = await SynapseClient.connect({ baseUrl: executor.url, identity: stranger.agent.identity, callback: { url: stranger.url, inbox: bystander.agent.inbox } });
        const pushed = await pushing.submit("text_analysis", { text: TEXT }, { waitMs: 5000 });
        const givenUp = () => lines.find((line) => line.msg === "giving up on the callback endpoint for this task");
        for (let i = 0; i < 100 && givenUp() === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(givenUp()).toMatchObject({
          trace_id: ids(pushed.reply?.header).traceparent!.slice(3, 35),
          message_id: pushed.reply?.header.messageId,
          message_type: "p2p:task_confirm",
          task_id: pushed.taskId,
          sender: executor.agent.identity.agentId,
          receiver: stranger.agent.identity.agentId,
          state: "confirmed",
          sequence: 1,
          code: "NotFound",
        });
      } finally {
        await stranger.close();
      }
    } finally {
      await executor.close();
      await bystander.close();
    }
  });
});

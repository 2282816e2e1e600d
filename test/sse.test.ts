// StreamingTransport over SSE, with curl -N as the client: a task's signed
// events as text/event-stream (id = sequence, data = the signed message as
// JSON, the same events Watch gives), a disconnect and a reconnect with
// Last-Event-ID that loses and repeats nothing, heartbeat comments while
// idle, the end after the terminal event (and 204 for a reconnect after
// it), the token in the query for browsers without it reaching the request
// log, and the refusals: no token, another requester's task.
import { fromJson } from "@bufbuild/protobuf";
import { spawn, type ChildProcess } from "node:child_process";
import { PassThrough } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { SignedMessageSchema } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/** curl -N, its output parsed into SSE events (and comment lines) as they arrive. */
function curlEvents(url: string, headers: string[] = []): { child: ChildProcess; events: SseEvent[]; comments: string[]; closed: Promise<number | null>; next(count: number): Promise<void> } {
  const child = spawn("curl", ["-sS", "-N", ...headers.flatMap((header) => ["-H", header]), url]);
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let buffer = "";
  let waiters: Array<() => void> = [];
  child.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString();
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event: SseEvent = { data: "" };
      let isEvent = false;
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) comments.push(line);
        else if (line.startsWith("id: ")) event.id = line.slice(4);
        else if (line.startsWith("event: ")) event.event = line.slice(7);
        else if (line.startsWith("data: ")) {
          event.data += line.slice(6);
          isEvent = true;
        }
      }
      if (isEvent) events.push(event);
      for (const wake of waiters) wake();
      waiters = [];
    }
  });
  const closed = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return {
    child,
    events,
    comments,
    closed,
    async next(count) {
      while (events.filter((event) => event.id !== undefined).length < count) {
        await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), closed.then(() => Promise.reject(new Error("curl ended early")))]);
      }
    },
  };
}

function curlStatus(url: string, headers: string[] = []): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const child = spawn("curl", ["-sS", "-w", "\n%{http_code}", ...headers.flatMap((header) => ["-H", header]), url]);
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("close", () => {
      const at = out.lastIndexOf("\n");
      resolve({ status: Number(out.slice(at + 1)), body: out.slice(0, at) });
    });
  });
}

describe("a task's events as Server-Sent Events (curl -N)", () => {
  let server: TestServer;
  let client: SynapseClient;
  const log = new PassThrough();
  let logged = "";
  log.on("data", (d: Buffer) => (logged += d.toString()));

  beforeAll(async () => {
    server = await startTestServer({ sseHeartbeatMs: 100, logger: pino({ level: "info" }, log) });
    client = await connectClient(server);
  });
  afterAll(async () => {
    await server?.close();
  });

  /** A data_analysis task that reports one row every `delayMs`. */
  const slowTask = (rows: number, delayMs: number) =>
    client.submit("data_analysis", { csv: ["v", ...Array.from({ length: rows }, (_, i) => String(i))].join("\n"), delay_ms_per_row: delayMs });

  it("streams the signed events, resumes with Last-Event-ID after a disconnect, and ends after the terminal event", async () => {
    const { taskId } = await slowTask(6, 250);
    const url = `${server.url}/tasks/${taskId}/events`;
    const auth = `Authorization: Bearer ${await client.token()}`;
    const first = curlEvents(url, [auth]);
    await first.next(2);
    first.child.kill("SIGTERM"); // the connection drops
    await first.closed;
    const seen = first.events.filter((event) => event.id !== undefined);
    expect(first.events[0]).toMatchObject({ event: "snapshot" });
    const lastId = seen.at(-1)!.id!;

    const second = curlEvents(url, [auth, `Last-Event-ID: ${lastId}`]);
    expect(await second.closed).toBe(0); // the server ends the stream after the terminal event
    const resumed = second.events.filter((event) => event.id !== undefined);
    const ids = [...seen, ...resumed].map((event) => Number(event.id));
    const task = await client.getTask(taskId);
    expect(task.state).toBe(TaskState.COMPLETED);
    // Nothing lost, nothing repeated.
    expect(ids).toEqual(Array.from({ length: Number(task.lastSequence) }, (_, i) => i + 1));
    expect(second.events.at(-1)).toEqual({ event: "end", data: JSON.stringify({ state: "TASK_STATE_COMPLETED", lastSequence: String(task.lastSequence) }) });
    // Idle moments between rows carried heartbeat comments.
    expect([...first.comments, ...second.comments]).toContain(": heartbeat");

    // Each data is the signed message as JSON, the same envelope Watch gives, and it verifies.
    const watched = [];
    for await (const item of client.watch(taskId)) if (item.kind === "event") watched.push(item);
    for (const [index, event] of [...seen, ...resumed].entries()) {
      const signed = fromJson(SignedMessageSchema, JSON.parse(event.data));
      expect(Buffer.from(signed.envelope!.header).equals(Buffer.from(watched[index]!.event.envelope.header))).toBe(true);
      const verified = await client.verify(signed.envelope!, { record: true });
      expect(Number(verified.header.sequence)).toBe(Number(event.id));
      expect(signed.view?.header?.messageType).toBe(verified.type);
    }
    expect(watched.at(-1)?.event.type).toBe(MessageType.TASK_COMPLETE);

    // Reconnecting after the end gets 204: an EventSource stops there.
    const after = await curlStatus(url, [auth, `Last-Event-ID: ${task.lastSequence}`]);
    expect(after.status).toBe(204);
  }, 30_000);

  it("takes the token in the query (for EventSource) and never logs it", async () => {
    const { taskId } = await slowTask(2, 0);
    await client.waitFor(taskId);
    const token = await client.token(60);
    const stream = curlEvents(`${server.url}/tasks/${taskId}/events?access_token=${token}&last_event_id=1`);
    expect(await stream.closed).toBe(0);
    expect(Number(stream.events.find((event) => event.id !== undefined)?.id)).toBe(2);
    expect(stream.events.at(-1)?.event).toBe("end");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(logged).toContain(`/tasks/${taskId}/events`);
    expect(logged).not.toContain(token);
    expect(logged).not.toContain("access_token");
  });

  it("refuses without a token, and answers another requester's task as absent", async () => {
    const { taskId } = await slowTask(1, 0);
    const url = `${server.url}/tasks/${taskId}/events`;
    const anonymous = await curlStatus(url);
    expect(anonymous.status).toBe(401);
    expect(JSON.parse(anonymous.body)).toMatchObject({ code: "unauthenticated" });
    const stranger = await connectClient(server);
    const other = await curlStatus(url, [`Authorization: Bearer ${await stranger.token()}`]);
    const missing = await curlStatus(`${server.url}/tasks/no-such-task/events`, [`Authorization: Bearer ${await stranger.token()}`]);
    expect(other.status).toBe(404);
    // Exactly the answer for a task that does not exist, but for the id it names.
    const shape = (body: string, id: string) => {
      const error = JSON.parse(body) as { code: string; message: string; details: Array<{ debug: { protocolCode: string } }> };
      return { code: error.code, message: error.message.replace(id, "ID"), protocolCode: error.details[0]?.debug.protocolCode };
    };
    expect(shape(other.body, taskId)).toEqual(shape(missing.body, "no-such-task"));
    expect(shape(other.body, taskId)).toEqual({ code: "not_found", message: "no task ID", protocolCode: "task_not_found" });
    const badResume = await curlStatus(url, [`Authorization: Bearer ${await client.token()}`, "Last-Event-ID: nope"]);
    expect(badResume.status).toBe(400);
  });
});

// Reading tasks: Watch (resumed after a dropped connection, from any
// sequence, with heartbeats), ReadResult (resumed from an offset, checked
// against the signed size and SHA-256), ListTasks, and many tasks at once.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState, type TaskCompletePayload } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler } from "../src/agent/handler.js";
import { referenceHandlers } from "../src/agent/reference/index.js";
import type { SynapseClient } from "../src/client/requester.js";
import { fromValue } from "../src/protocol/json-values.js";
import { refusal } from "./helpers/protocols.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const csvOf = (rows: number) => ["id,value,label", ...Array.from({ length: rows }, (_, i) => `${i},${(i * 7) % 13},row ${i}`)].join("\n");

/** A TCP proxy whose connections can all be cut at once, as a flaky network would. */
async function flakyProxy(target: string): Promise<{ url: string; cut(): void; close(): Promise<void> }> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => sockets.forEach((socket) => socket.destroy()),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        sockets.forEach((socket) => socket.destroy());
      }),
  };
}

describe("watch", () => {
  let server: TestServer;
  let client: SynapseClient;
  beforeAll(async () => {
    server = await startTestServer({ agentId: "executor_watch", config: { heartbeatIntervalMs: 150 } });
    client = await connectClient(server);
  });
  afterAll(() => server.close());

  it("sends the snapshot first, then every event from any sequence", async () => {
    const { taskId } = await client.submit("text_analysis", { text: "A. B. C." }, { waitMs: 5000 });
    const items = [];
    for await (const item of client.watch(taskId, { fromSequence: 2 })) items.push(item);
    expect(items[0]?.kind).toBe("snapshot");
    const events = items.filter((item) => item.kind === "event");
    expect(events.map((e) => e.sequence)).toEqual([2]);
    expect(events.at(-1)?.event.type).toBe(MessageType.TASK_COMPLETE);
  });

  it("resumes after a dropped connection with nothing lost or repeated", async () => {
    const proxy = await flakyProxy(server.url);
    try {
      const viaProxy = await connectClient(server, { baseUrl: proxy.url });
      const rows = 40;
      const { taskId } = await viaProxy.submit("data_analysis", { csv: csvOf(rows), delay_ms_per_row: 15 });
      const seen: number[] = [];
      let reconnects = 0;
      let cut = false;
      for await (const item of viaProxy.watch(taskId)) {
        if (item.kind === "reconnecting") reconnects++;
        if (item.kind !== "event") continue;
        seen.push(item.sequence);
        if (!cut && item.sequence === 5) {
          cut = true;
          proxy.cut();
        }
      }
      expect(reconnects).toBeGreaterThanOrEqual(1);
      const task = await client.getTask(taskId).catch(() => viaProxy.getTask(taskId));
      expect(task.state).toBe(TaskState.COMPLETED);
      expect(seen).toEqual(Array.from({ length: Number(task.lastSequence) }, (_, i) => i + 1));
    } finally {
      await proxy.close();
    }
  });

  it("resumes by hand from the last sequence seen plus one", async () => {
    const { taskId } = await client.submit("data_analysis", { csv: csvOf(20), delay_ms_per_row: 10 });
    const first: number[] = [];
    const stop = new AbortController();
    try {
      for await (const item of client.watch(taskId, { signal: stop.signal })) {
        if (item.kind !== "event") continue;
        first.push(item.sequence);
        if (item.sequence === 4) stop.abort();
      }
    } catch (error) {
      expect(ConnectError.from(error).code).toBe(Code.Canceled);
    }
    const rest: number[] = [];
    for await (const item of client.watch(taskId, { fromSequence: first.at(-1)! + 1 })) if (item.kind === "event") rest.push(item.sequence);
    const all = [...first, ...rest];
    expect(all).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
    expect((await client.getTask(taskId)).lastSequence).toBe(BigInt(all.length));
  });

  it("sends signed heartbeats on an idle stream", async () => {
    const { taskId } = await client.submit("summarization", { text: "One. Two." });
    const stop = new AbortController();
    const heartbeats = [];
    try {
      for await (const item of client.watch(taskId, { signal: stop.signal })) {
        if (item.kind === "heartbeat") heartbeats.push(item.heartbeat);
        if (heartbeats.length === 2) stop.abort();
      }
    } catch {
      // aborted on purpose
    }
    expect(heartbeats).toHaveLength(2);
    expect(heartbeats[0]?.type).toBe(MessageType.HEARTBEAT);
    expect(heartbeats[0]?.header.sender?.agentId).toBe("executor_watch");
    await client.cancel(taskId);
  });

  it("ends at once for a finished task watched past its end", async () => {
    const { taskId, task } = await client.submit("text_analysis", { text: "Hi." }, { waitMs: 5000 });
    const items = [];
    for await (const item of client.watch(taskId, { fromSequence: Number(task!.lastSequence) + 1 })) items.push(item.kind);
    expect(items).toEqual(["snapshot"]);
  });
});

describe("results as streams", () => {
  let server: TestServer;
  let client: SynapseClient;
  const big: TaskHandler = {
    async executeTask(ctx) {
      const count = Number(ctx.payload.count);
      // Numbers are larger as a protobuf Value (11 bytes each) than as JSON ("7,": 2 bytes).
      const items = ctx.payload.numbers ? Array.from({ length: count }, (_, i) => i % 10) : Array.from({ length: count }, (_, i) => `item-${i}`);
      return { output: { items }, summary: `${count} items` };
    },
  };
  beforeAll(async () => {
    const handlers = new Map([...referenceHandlers(), ["big_output", big]]);
    server = await startTestServer({
      agentId: "executor_results",
      maxFileSize: 256 * 1024,
      handlers,
      capabilities: { supportedTaskTypes: [...(await import("../src/agent/reference/task-types.js")).REFERENCE_TASK_TYPES, { type: "big_output", name: "big" }], maxConcurrentTasks: 250 },
    });
    client = await connectClient(server);
  });
  afterAll(() => server.close());

  it("streams data_analysis rows in chunks, with size and SHA-256 in the signed task_complete", async () => {
    const { task, taskId } = await client.submit("data_analysis", { csv: csvOf(5000), include_rows: true }, { waitMs: 10_000 });
    expect(task?.state).toBe(TaskState.COMPLETED);
    const stream = task!.result!.stream!;
    expect(Number(stream.totalSize)).toBeGreaterThan(3 * 64 * 1024);
    expect(stream.contentType).toBe("application/json");
    // The signed event carries the same size and hash the snapshot shows.
    let signed: TaskCompletePayload | undefined;
    for await (const item of client.watch(taskId)) if (item.kind === "event" && item.event.type === MessageType.TASK_COMPLETE) signed = item.event.payload as TaskCompletePayload;
    expect(signed?.result?.stream?.sha256).toEqual(stream.sha256);

    const bytes = await client.readResult(taskId, { expected: signed!.result!.stream });
    const parsed = JSON.parse(Buffer.from(bytes).toString("utf8")) as { rows: number; parsed_rows: unknown[] };
    expect(parsed.rows).toBe(5000);
    expect(parsed.parsed_rows).toHaveLength(5000);
    const inline = fromValue(task!.result!.output) as { rows: number; parsed_rows?: unknown };
    expect(inline.rows).toBe(5000);
    expect(inline.parsed_rows).toBeUndefined();

    const offset = 100_000;
    const tail = await client.readResult(taskId, { offset });
    expect(Buffer.from(tail).equals(Buffer.from(bytes.subarray(offset)))).toBe(true);
  });

  it("refuses a result whose bytes do not match the signed SHA-256", async () => {
    const { task, taskId } = await client.submit("data_analysis", { csv: csvOf(100), include_rows: true }, { waitMs: 10_000 });
    const forged = { ...task!.result!.stream!, sha256: new Uint8Array(32) };
    await expect(client.readResult(taskId, { expected: forged })).rejects.toThrow(/SHA-256/);
  });

  it("offers an output too large for one message as a stream", async () => {
    const { task, taskId } = await client.submit("big_output", { count: 20_000 }, { waitMs: 10_000 });
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(task?.result?.output).toBeUndefined();
    const bytes = await client.readResult(taskId, { expected: task!.result!.stream });
    expect((JSON.parse(Buffer.from(bytes).toString()) as { items: string[] }).items).toHaveLength(20_000);
  });

  it("offers as a stream an output whose JSON would fit but whose signed protobuf form would not", async () => {
    // 64 KiB inline at most (a quarter of max_file_size): about 20 KB of JSON, about 220 KB as Values.
    const { task } = await client.submit("big_output", { count: 20_000, numbers: true }, { waitMs: 10_000 });
    expect(task?.state).toBe(TaskState.COMPLETED);
    expect(task?.result?.output).toBeUndefined();
    const stream = task!.result!.stream!;
    expect(stream.contentType).toBe("application/json");
    expect(Number(stream.totalSize)).toBeLessThan(64 * 1024);
    const bytes = await client.readResult(task!.taskId, { expected: stream });
    expect((JSON.parse(Buffer.from(bytes).toString("utf8")) as { items: number[] }).items).toHaveLength(20_000);
  });

  it("refuses ReadResult for a task without a result stream, and past the end", async () => {
    const { task, taskId } = await client.submit("text_analysis", { text: "Hi." }, { waitMs: 5000 });
    expect(task?.result?.stream).toBeUndefined();
    await expect(client.readResult(taskId)).rejects.toMatchObject({ code: Code.FailedPrecondition });
    const streamed = await client.submit("data_analysis", { csv: csvOf(10), include_rows: true }, { waitMs: 5000 });
    await expect(client.readResult(streamed.taskId, { offset: 10_000_000 })).rejects.toMatchObject({ code: Code.OutOfRange });
  });

  it("ReadResult at offset == total_size answers one empty last chunk with size and SHA-256; past it, OUT_OF_RANGE (invalid_params)", async () => {
    const { task, taskId } = await client.submit("data_analysis", { csv: csvOf(10), include_rows: true }, { waitMs: 5000 });
    const stream = task!.result!.stream!;
    const rpc = createClient(P2PService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    const auth = { headers: { Authorization: `Bearer ${await client.token()}` } };
    const chunks = [];
    for await (const response of rpc.readResult({ taskId, offset: stream.totalSize }, auth)) chunks.push(response.chunk!);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({ streamId: taskId, offset: stream.totalSize, last: true, totalSize: stream.totalSize, sha256: stream.sha256 });
    expect(chunks[0]!.data.byteLength).toBe(0);

    const past = await refusal(rpc.readResult({ taskId, offset: stream.totalSize + 1n }, auth));
    expect({ code: past.code, protocolCode: past.protocolCode }).toEqual({ code: Code.OutOfRange, protocolCode: "invalid_params" });
    const inline = await client.submit("text_analysis", { text: "Hi." }, { waitMs: 5000 });
    const none = await refusal(rpc.readResult({ taskId: inline.taskId, offset: 0n }, auth));
    expect({ code: none.code, protocolCode: none.protocolCode }).toEqual({ code: Code.FailedPrecondition, protocolCode: "invalid_params" });
  });

  it("runs 200 concurrent tasks to a terminal state with none lost, and pages through them", async () => {
    const other = await connectClient(server);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => other.submit("text_analysis", { text: `Task number ${i}. It is short.` }, { waitMs: 20_000 })),
    );
    expect(results.every((r) => r.task?.state === TaskState.COMPLETED)).toBe(true);
    const ids = new Set<string>();
    let pageToken = "";
    let pages = 0;
    do {
      const page = await other.listTasks({ pageSize: 64, pageToken });
      page.tasks.forEach((t) => ids.add(t.taskId));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken);
    expect(ids.size).toBe(200);
    expect(pages).toBe(4);
    for (const r of results) expect(ids.has(r.taskId)).toBe(true);
    const completed = await other.listTasks({ states: [TaskState.COMPLETED], pageSize: 500 });
    expect(completed.tasks).toHaveLength(200);
    const failed = await other.listTasks({ states: [TaskState.FAILED] });
    expect(failed.tasks).toHaveLength(0);
    // The first requester sees none of them.
    const mine = await client.listTasks({ pageSize: 500 });
    expect(mine.tasks.some((t) => ids.has(t.taskId))).toBe(false);
  });
});

// Server streams take a short path (src/server/server-stream.ts) unless
// something about them is unusual; clients must not be able to tell. Through
// raw HTTP/2 and HTTP/1.1 requests: the short and the standard path send the
// same frames and the same end, an error before the first message arrives as
// the status, a deadline ends an open stream as DEADLINE_EXCEEDED, and a
// client that goes away closes the stream at the server.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import http from "node:http";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WatchRequestSchema, WatchResponseSchema } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { scrape } from "./helpers/metrics.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const WATCH = "/synapse.v1.P2PService/Watch";

let server: TestServer;
let session: http2.ClientHttp2Session;
let client: SynapseClient;
let token: string;
let finished: string;
beforeAll(async () => {
  server = await startTestServer({ agentId: "agent_streams" });
  session = http2.connect(server.url);
  client = await connectClient(server);
  token = await client.token();
  const sent = await client.submit("text_analysis", { text: "One. Two three." }, { waitMs: 5000 });
  expect(sent.task?.state).toBe(TaskState.COMPLETED);
  finished = sent.taskId;
});
afterAll(async () => {
  session.close();
  await server.close();
});

function frame(flags: number, data: Uint8Array): Buffer {
  const head = Buffer.from([flags, 0, 0, 0, 0]);
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}

/** The frames of a body: [flags, data]. */
function frames(body: Buffer): Array<[number, Buffer]> {
  const out: Array<[number, Buffer]> = [];
  for (let at = 0; at < body.byteLength; ) {
    const size = body.readUInt32BE(at + 1);
    out.push([body[at]!, body.subarray(at + 5, at + 5 + size)]);
    at += 5 + size;
  }
  return out;
}

const watchRequest = (taskId: string, fromSequence = 1n) => Buffer.from(toBinary(WatchRequestSchema, create(WatchRequestSchema, { taskId, fromSequence })));

interface GrpcAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
}

function grpcStream(body: Buffer, headers: http2.OutgoingHttpHeaders = {}, onStream?: (stream: http2.ClientHttp2Stream) => void): Promise<GrpcAnswer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": WATCH, "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${token}`, ...headers });
    const answer: GrpcAnswer = { headers: {}, trailers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (answer.headers = h));
    stream.on("trailers", (t) => (answer.trailers = t));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => resolve({ ...answer, body: Buffer.concat(chunks) }));
    stream.end(body);
    onStream?.(stream);
  });
}

const status = (answer: GrpcAnswer) => answer.trailers["grpc-status"] ?? answer.headers["grpc-status"];

describe("server streams", () => {
  it("send the same frames and end over gRPC whether the request takes the short path or the standard one (compressed)", async () => {
    const short = await grpcStream(frame(0, watchRequest(finished)));
    const standard = await grpcStream(frame(1, gzipSync(watchRequest(finished))), { "grpc-encoding": "gzip" });
    for (const answer of [short, standard]) {
      expect(answer.headers[":status"]).toBe(200);
      expect(answer.headers["content-type"]).toBe("application/grpc+proto");
      expect(answer.trailers["grpc-status"]).toBe("0");
    }
    expect(short.body.equals(standard.body)).toBe(true);
    const items = frames(short.body).map(([flags, data]) => {
      expect(flags).toBe(0);
      return fromBinary(WatchResponseSchema, data).kind.case;
    });
    // The snapshot, then the task's signed events to the terminal one.
    expect(items[0]).toBe("snapshot");
    expect(items.slice(1).every((kind) => kind === "event")).toBe(true);
    expect(items.length).toBeGreaterThanOrEqual(3);
  });

  it("answer a task that is not there with NOT_FOUND as the status, before any message, on both paths", async () => {
    const short = await grpcStream(frame(0, watchRequest("no-such-task")));
    const standard = await grpcStream(frame(1, gzipSync(watchRequest("no-such-task"))), { "grpc-encoding": "gzip" });
    for (const answer of [short, standard]) {
      expect(status(answer)).toBe("5");
      expect(answer.body.byteLength).toBe(0);
    }
    expect(short.trailers["grpc-status-details-bin"]).toBe(standard.trailers["grpc-status-details-bin"]);
    const unauthenticated = await grpcStream(frame(0, watchRequest(finished)), { authorization: "Bearer nonsense" });
    expect(status(unauthenticated)).toBe("16");
  });

  it("send the same Connect stream (JSON, HTTP/1.1) on both paths, the end-stream message last", async () => {
    const post = (body: Buffer, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; type: string; body: Buffer }>((resolve, reject) => {
        const req = http.request(
          `${server.url}${WATCH}`,
          { method: "POST", headers: { "content-type": "application/connect+json", authorization: `Bearer ${token}`, ...headers } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (chunk: Buffer) => chunks.push(chunk));
            res.on("end", () => resolve({ status: res.statusCode!, type: String(res.headers["content-type"]), body: Buffer.concat(chunks) }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const json = Buffer.from(JSON.stringify({ taskId: finished, fromSequence: "1" }));
    const short = await post(frame(0, json));
    const standard = await post(frame(1, gzipSync(json)), { "connect-content-encoding": "gzip" });
    for (const answer of [short, standard]) expect(answer).toMatchObject({ status: 200, type: "application/connect+json" });
    expect(short.body.equals(standard.body)).toBe(true);
    const parts = frames(short.body);
    expect(parts.at(-1)![0]).toBe(2); // end-stream
    expect(JSON.parse(parts.at(-1)![1].toString())).toEqual({});
    expect(JSON.parse(parts[0]![1].toString()).snapshot.taskId).toBe(finished);

    const missing = await post(frame(0, Buffer.from(JSON.stringify({ taskId: "no-such-task" }))));
    const end = frames(missing.body);
    expect(end).toHaveLength(1);
    expect(JSON.parse(end[0]![1].toString()).error.code).toBe("not_found");
  });

  it("send every watcher of a task the same event frames as the standard path, when one event reaches them all", async () => {
    const waiting = await client.submit("text_analysis", { text: "Hold on.", require_approval: true }, { waitMs: 5000 });
    const open = () => scrape(server.url).then((metrics) => metrics.samples.get("synapse_watch_streams") ?? 0);
    const before = await open();
    // Three on the short path, one on the standard path (a compressed request).
    const answers = Promise.all([
      grpcStream(frame(0, watchRequest(waiting.taskId))),
      grpcStream(frame(0, watchRequest(waiting.taskId))),
      grpcStream(frame(0, watchRequest(waiting.taskId))),
      grpcStream(frame(1, gzipSync(watchRequest(waiting.taskId))), { "grpc-encoding": "gzip" }),
    ]);
    for (let i = 0; i < 100 && (await open()) !== before + 4; i++) await new Promise((done) => setTimeout(done, 20));
    expect(await open()).toBe(before + 4);
    await client.cancel(waiting.taskId, "done");
    const [first, ...others] = await answers;
    for (const answer of [first!, ...others]) expect(answer.trailers["grpc-status"]).toBe("0");
    const events = frames(first!.body).slice(1);
    expect(events.length).toBeGreaterThanOrEqual(1);
    for (const [, data] of events) expect(fromBinary(WatchResponseSchema, data).kind.case).toBe("event");
    for (const answer of others) expect(answer.body.equals(first!.body)).toBe(true);
  });

  it("end an open stream when its deadline passes, as DEADLINE_EXCEEDED", async () => {
    const waiting = await client.submit("text_analysis", { text: "Hold on.", require_approval: true }, { waitMs: 5000 });
    expect(waiting.task?.state).toBe(TaskState.NEED_HUMAN);
    const answer = await grpcStream(frame(0, watchRequest(waiting.taskId)), { "grpc-timeout": "300m" });
    expect(status(answer)).toBe("4");
    expect(fromBinary(WatchResponseSchema, frames(answer.body)[0]![1]).kind.case).toBe("snapshot");
    await client.cancel(waiting.taskId, "done");
  });

  it("close the stream at the server when the client goes away", async () => {
    const waiting = await client.submit("text_analysis", { text: "Hold on.", require_approval: true }, { waitMs: 5000 });
    const open = () => scrape(server.url).then((metrics) => metrics.samples.get("synapse_watch_streams"));
    const before = await open();
    let stream: http2.ClientHttp2Stream | undefined;
    const ended = grpcStream(frame(0, watchRequest(waiting.taskId)), {}, (s) => (stream = s)).catch(() => undefined);
    for (let i = 0; i < 100 && (await open()) !== before! + 1; i++) await new Promise((done) => setTimeout(done, 20));
    expect(await open()).toBe(before! + 1);
    stream!.close(http2.constants.NGHTTP2_CANCEL);
    await ended;
    for (let i = 0; i < 100 && (await open()) !== before; i++) await new Promise((done) => setTimeout(done, 20));
    expect(await open()).toBe(before);
    await client.cancel(waiting.taskId, "done");
  });
});

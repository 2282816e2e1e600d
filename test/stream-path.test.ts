// Server streams take a short path (src/server/server-stream.ts), which
// frames an event once for every watcher it reaches. One event told to many
// watchers reaches each of them as the same bytes, and as the standard path
// (here: a compressed request) sends them. What else the short path must
// keep of connect-es's pipeline is compared in short-path-parity.test.ts.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WatchRequestSchema, WatchResponseSchema } from "../gen/synapse/v1/p2p_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { scrape } from "./helpers/metrics.js";
import { frame, frames, grpcStatus, h2Call, type RawAnswer } from "./helpers/raw-calls.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

const WATCH = "/synapse.v1.P2PService/Watch";

let server: TestServer;
let session: http2.ClientHttp2Session;
let client: SynapseClient;
let token: string;
beforeAll(async () => {
  server = await startTestServer({ agentId: "agent_streams" });
  session = http2.connect(server.url);
  client = await connectClient(server);
  token = await client.token();
});
afterAll(async () => {
  session.close();
  await server.close();
});

const watchRequest = (taskId: string) => Buffer.from(toBinary(WatchRequestSchema, create(WatchRequestSchema, { taskId, fromSequence: 1n })));

function grpcWatch(body: Buffer, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return h2Call(session, WATCH, { headers: { "content-type": "application/grpc", authorization: `Bearer ${token}`, ...headers }, body });
}

describe("server streams", () => {
  it("send every watcher of a task the same event frames as the standard path, when one event reaches them all", async () => {
    const waiting = await client.submit("text_analysis", { text: "Hold on.", require_approval: true }, { waitMs: 5000 });
    const open = () => scrape(server.url).then((metrics) => metrics.samples.get("synapse_watch_streams") ?? 0);
    const before = await open();
    // Three on the short path, one on the standard path (a compressed request).
    const answers = Promise.all([
      grpcWatch(frame(0, watchRequest(waiting.taskId))),
      grpcWatch(frame(0, watchRequest(waiting.taskId))),
      grpcWatch(frame(0, watchRequest(waiting.taskId))),
      grpcWatch(frame(1, gzipSync(watchRequest(waiting.taskId))), { "grpc-encoding": "gzip" }),
    ]);
    for (let i = 0; i < 100 && (await open()) !== before + 4; i++) await new Promise((done) => setTimeout(done, 20));
    expect(await open()).toBe(before + 4);
    await client.cancel(waiting.taskId, "done");
    const [first, ...others] = await answers;
    for (const answer of [first!, ...others]) expect(grpcStatus(answer)).toBe("0");
    const events = frames(first!.body).slice(1);
    expect(events.length).toBeGreaterThanOrEqual(1);
    for (const [, data] of events) expect(fromBinary(WatchResponseSchema, data).kind.case).toBe("event");
    for (const answer of others) expect(answer.body.equals(first!.body)).toBe(true);
  });
});

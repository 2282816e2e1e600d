// What the fuzz suite found at the edges of the protocols, each through a
// real socket: very long deadlines, compressed frames the server cannot
// decompress, and refused request bodies on an HTTP/2 connection that carries
// other calls.
import { create } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { frame } from "./helpers/raw-calls.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ agentId: "agent_edges", maxFileSize: 1024 });
});
afterAll(() => server.close());

const PATH = "/synapse.v1.CapabilitiesService/GetCapabilities";

/** One gRPC call on `session`: its status, or how its stream ended without one. */
function grpcCall(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers", ...headers });
    let status: string | undefined;
    let http: number | undefined;
    stream.on("response", (h) => {
      http = Number(h[":status"]);
      status ??= h["grpc-status"] as string | undefined;
    });
    stream.on("trailers", (t) => (status = t["grpc-status"] as string | undefined));
    stream.on("error", () => undefined);
    stream.on("close", () => resolve(status ?? (http === undefined ? `reset ${stream.rstCode}` : `http ${http}`)));
    stream.resume();
    stream.end(body);
  });
}

describe("deadlines", () => {
  it("longer than a timer holds are taken as the longest it holds, not as already past", async () => {
    const client = await connectClient(server);
    const task = (id: string) => client.envelope(MessageType.TASK_REQUEST, create(TaskRequestPayloadSchema, { task: { id, type: "data_analysis", payload: { csv: "n\n1\n2\n3", delay_ms_per_row: 20 } } }), { taskId: id });
    // 99999999 hours, and 9999999999 ms: both valid, both beyond a timer's 2^31-1 ms. The calls
    // wait some 60 ms for their task: with the deadline taken as 1 ms they would be cut off.
    const grpc = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    const connect = createClient(P2PService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    const viaGrpc = await grpc.send({ envelope: task("t-deadline-grpc"), wait: { seconds: 5n } }, { headers: { "grpc-timeout": "99999999H" } });
    const viaConnect = await connect.send({ envelope: task("t-deadline-connect"), wait: { seconds: 5n } }, { headers: { "connect-timeout-ms": "9999999999" } });
    expect([viaGrpc.task?.state, viaConnect.task?.state]).toEqual([TaskState.COMPLETED, TaskState.COMPLETED]);
  });
});

describe("compressed frames the server cannot read", () => {
  it("are INVALID_ARGUMENT, not INTERNAL", async () => {
    const session = http2.connect(server.url);
    try {
      // The compressed flag with no grpc-encoding, and gzip that ends half-way.
      expect(await grpcCall(session, {}, frame(1, new Uint8Array([1, 2, 3])))).toBe(String(Code.InvalidArgument));
      const truncated = gzipSync(Buffer.alloc(100, 7)).subarray(0, 12);
      expect(await grpcCall(session, { "grpc-encoding": "gzip" }, frame(1, truncated))).toBe(String(Code.InvalidArgument));
    } finally {
      session.close();
    }
  });
});

describe("refused request bodies", () => {
  it("do not cost an HTTP/2 client its connection", async () => {
    const session = http2.connect(server.url); // a Node client with its default 10 MB session memory
    try {
      const oversize = frame(0, new Uint8Array(256 * 1024)); // over the limit: refused before it is read
      const unread = Buffer.alloc(256 * 1024); // an unsupported content type: never read at all
      const statuses = new Map<string, number>();
      // 160 refused uploads of 256 KiB, 8 at a time: 40 MB the server does not read.
      await Promise.all(
        Array.from({ length: 8 }, async (_, worker) => {
          for (let i = worker; i < 160; i += 8) {
            const status = i % 4 ? await grpcCall(session, {}, oversize) : await grpcCall(session, { "content-type": "text/plain" }, unread);
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
          }
        }),
      );
      expect(Object.fromEntries(statuses)).toEqual({ [String(Code.ResourceExhausted)]: 120, "http 415": 40 });
      // And the connection still carries calls.
      expect(await grpcCall(session, {}, frame(0, new Uint8Array(0)))).toBe("0");
    } finally {
      session.close();
    }
  });
});

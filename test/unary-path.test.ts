// Unary calls take a short path (src/server/unary.ts) unless something about
// them is unusual; clients must not be able to tell. Through raw HTTP/2 and
// HTTP/1.1 requests: the short and the standard path give the same answer,
// requests handed over mid-read are answered in full, and a call's deadline
// still ends its wait.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import http from "node:http";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetCapabilitiesRequestSchema, GetCapabilitiesResponseSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { SendRequestSchema, SendResponseSchema } from "../gen/synapse/v1/p2p_pb.js";
import { TaskRequestPayloadSchema, TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

let server: TestServer;
let session: http2.ClientHttp2Session;
beforeAll(async () => {
  server = await startTestServer({ agentId: "agent_unary", maxFileSize: 4096 });
  session = http2.connect(server.url);
});
afterAll(async () => {
  session.close();
  await server.close();
});

const CAPABILITIES = "/synapse.v1.CapabilitiesService/GetCapabilities";

function frame(flags: number, data: Uint8Array): Buffer {
  const head = Buffer.from([flags, 0, 0, 0, 0]);
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}

interface GrpcAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
  ms: number;
}

function grpcCall(path: string, body: Buffer, headers: http2.OutgoingHttpHeaders = {}): Promise<GrpcAnswer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    const answer: GrpcAnswer = { headers: {}, trailers: {}, body: Buffer.alloc(0), ms: 0 };
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (answer.headers = h));
    stream.on("trailers", (t) => (answer.trailers = t));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => resolve({ ...answer, body: Buffer.concat(chunks), ms: performance.now() - started }));
    stream.end(body);
  });
}

const capabilitiesRequest = () => Buffer.from(toBinary(GetCapabilitiesRequestSchema, create(GetCapabilitiesRequestSchema)));

describe("unary calls", () => {
  it("answer the same over gRPC whether the request takes the short path or the standard one (compressed)", async () => {
    const message = capabilitiesRequest();
    const short = await grpcCall(CAPABILITIES, frame(0, message));
    const standard = await grpcCall(CAPABILITIES, frame(1, gzipSync(message)), { "grpc-encoding": "gzip" });
    for (const answer of [short, standard]) {
      expect(answer.headers[":status"]).toBe(200);
      expect(answer.headers["content-type"]).toBe("application/grpc+proto");
      expect(answer.trailers["grpc-status"]).toBe("0");
    }
    // One uncompressed frame holding the same capabilities.
    expect(short.body.equals(standard.body)).toBe(true);
    expect(short.body[0]).toBe(0);
    expect(short.body.readUInt32BE(1)).toBe(short.body.byteLength - 5);
    const capabilities = fromBinary(GetCapabilitiesResponseSchema, short.body.subarray(5)).capabilities;
    expect(capabilities?.agentId).toBe("agent_unary");
  });

  it("hand a body that is not exactly one frame to the standard path, which refuses it typed; the connection stays usable", async () => {
    const message = capabilitiesRequest();
    const twice = await grpcCall(CAPABILITIES, Buffer.concat([frame(0, message), frame(0, message)]));
    expect(twice.trailers["grpc-status"] ?? twice.headers["grpc-status"]).toBe("3"); // INVALID_ARGUMENT
    const cut = await grpcCall(CAPABILITIES, frame(0, message).subarray(0, 3));
    expect(cut.trailers["grpc-status"] ?? cut.headers["grpc-status"]).toBe("3");
    const after = await grpcCall(CAPABILITIES, frame(0, message));
    expect(after.trailers["grpc-status"]).toBe("0");
  });

  it("hand an oversize body over mid-read; it is refused as message_too_large, and the next call on the connection is answered", async () => {
    const big = frame(0, Buffer.alloc(4096 + 65 * 1024, 1)); // past max_file_size and the envelope allowance
    const refused = await grpcCall("/synapse.v1.P2PService/Send", big);
    expect(refused.trailers["grpc-status"] ?? refused.headers["grpc-status"]).toBe("8"); // RESOURCE_EXHAUSTED
    expect(decodeURIComponent(String(refused.trailers["grpc-message"] ?? refused.headers["grpc-message"]))).toMatch(/readMaxBytes/);
    const after = await grpcCall(CAPABILITIES, frame(0, capabilitiesRequest()));
    expect(after.trailers["grpc-status"]).toBe("0");
  });

  it("answer the same over Connect JSON on HTTP/1.1 as the typed client reads it, with a typed error body for a bad request", async () => {
    const post = (body: string, contentType = "application/json") =>
      new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
        const req = http.request(`${server.url}${CAPABILITIES}`, { method: "POST", headers: { "content-type": contentType } }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (text += chunk));
          res.on("end", () => resolve({ status: res.statusCode!, type: String(res.headers["content-type"]), body: text }));
        });
        req.on("error", reject);
        req.end(body);
      });
    const ok = await post("{}");
    expect(ok).toMatchObject({ status: 200, type: "application/json" });
    expect(JSON.parse(ok.body).capabilities.agentId).toBe("agent_unary");
    const bad = await post("{not json");
    expect(bad).toMatchObject({ status: 400, type: "application/json" });
    expect(JSON.parse(bad.body)).toMatchObject({ code: "invalid_argument" });
  });

  it("end a waiting Send when the call's deadline passes, not when the wait does", async () => {
    const client = await connectClient(server);
    // A task that takes 20 s: Send would wait for it to end.
    const envelope = await client.envelope(
      MessageType.TASK_REQUEST,
      create(TaskRequestPayloadSchema, { task: { id: "t-deadline", type: "data_analysis", payload: { csv: "n\n1\n2", delay_ms_per_row: 10_000 } } }),
      { taskId: "t-deadline" },
    );
    const request = Buffer.from(toBinary(SendRequestSchema, create(SendRequestSchema, { envelope, wait: { seconds: 20n } })));
    const answer = await grpcCall("/synapse.v1.P2PService/Send", frame(0, request), { "grpc-timeout": "500m" });
    expect(answer.ms).toBeLessThan(10_000);
    expect(answer.trailers["grpc-status"]).toBe("0");
    const response = fromBinary(SendResponseSchema, answer.body.subarray(5));
    expect(response.task?.state).toBe(TaskState.EXECUTING);
    await client.cancel("t-deadline", "done");
  });
});

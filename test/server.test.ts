// The one-port server through real sockets: every protocol and HTTP version,
// GET, errors, limits, TLS and graceful shutdown.
import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService, HandshakeRequestSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { TransportOptions } from "../src/client/transport.js";
import { pino } from "pino";
import { findErrorDetail } from "../src/protocol/errors.js";
import type { RunningServer } from "../src/server/server.js";
import { connectClient, startTestServer, tempDir } from "./helpers/server.js";
import { GROUP_INTERFACES, UNGROUPED_INTERFACES } from "./helpers/interfaces.js";

type Variant = { name: string; transport: (baseUrl: string) => Transport; client?: TransportOptions };

const variants: Variant[] = [
  { name: "Connect JSON over HTTP/1.1", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" }), client: { protocol: "connect", httpVersion: "1.1" } },
  { name: "Connect binary over HTTP/1.1", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }), client: { protocol: "connect", binary: true, httpVersion: "1.1" } },
  { name: "Connect JSON over h2c", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2" }), client: { protocol: "connect", httpVersion: "2" } },
  { name: "Connect binary over h2c", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true }), client: { protocol: "connect", binary: true, httpVersion: "2" } },
  { name: "gRPC over h2c", transport: (baseUrl) => createGrpcTransport({ baseUrl }), client: { protocol: "grpc" } },
  { name: "gRPC-web over HTTP/1.1", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }), client: { protocol: "grpc-web", binary: true, httpVersion: "1.1" } },
  { name: "gRPC-web over h2c", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "2" }), client: { protocol: "grpc-web", binary: true, httpVersion: "2" } },
];

function logSink(): { lines: Array<Record<string, unknown>>; stream: Writable } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, stream };
}

describe("one port, every protocol", () => {
  let server: RunningServer;
  const log = logSink();
  beforeAll(async () => {
    server = await startTestServer({ agentId: "agent_under_test", logger: pino({ level: "info" }, log.stream) });
  });
  afterAll(() => server.close());

  for (const variant of variants) {
    it(`GetCapabilities: ${variant.name}`, async () => {
      const client = createClient(CapabilitiesService, variant.transport(server.url));
      const { capabilities } = await client.getCapabilities({});
      expect(capabilities?.agentId).toBe("agent_under_test");
      expect(capabilities?.protocolVersion).toBe("1.0.0");
      expect(capabilities?.maxFileSize).toBe(10_485_760n);
      expect(capabilities?.maxConcurrentTasks).toBe(10);
      expect(capabilities?.supportedTaskTypes.map((t) => t.type)).toEqual(["text_analysis", "summarization", "data_analysis"]);
    });

    it(`a waited Send answers with the signed reply and the finished task: ${variant.name}`, async () => {
      const client = await connectClient(server, { transport: variant.client });
      const sent = await client.submit("text_analysis", { text: "One sentence. Two sentences here." }, { waitMs: 5000 });
      expect(sent.reply?.header.messageType).toBe(MessageType.TASK_CONFIRM);
      const task = sent.task!;
      expect(task).toMatchObject({ taskId: sent.taskId, taskType: "text_analysis", state: TaskState.COMPLETED, progress: 100, lastSequence: 2n });
      expect(task.requester?.agentId).toBe(client.agentId);
      expect(task.executor?.agentId).toBe("agent_under_test");
      expect(task.request).toBeUndefined();
      expect(task.updatedAt!.seconds).toBeGreaterThanOrEqual(task.createdAt!.seconds);
      expect(toJson(ValueSchema, task.result!.output!)).toMatchObject({ words: 5, sentences: 2, characters: 33 });
      // The same task as GetTask shows it, less the request the sender has.
      const polled = await client.getTask(sent.taskId);
      expect({ ...task, request: undefined }).toEqual({ ...polled, request: undefined });
    });

    it(`NOT_FOUND with an ErrorDetail for an unknown task type: ${variant.name}`, async () => {
      const client = createClient(CapabilitiesService, variant.transport(server.url));
      const error = await client.getTaskTypeCapabilities({ taskType: "poetry" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.NotFound);
      const detail = findErrorDetail(error);
      expect(detail?.protocolCode).toBe("capability_lacking");
      expect(detail?.details).toMatchObject({ task_type: "poetry" });
    });
  }

  it("serves task types with real JSON Schemas", async () => {
    const client = createClient(CapabilitiesService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    const { taskType } = await client.getTaskTypeCapabilities({ taskType: "summarization" });
    const input = JSON.parse(taskType!.inputSchema) as { required: string[]; properties: Record<string, unknown> };
    expect(input.required).toEqual(["text"]);
    expect(Object.keys(input.properties)).toContain("max_sentences");
    expect(JSON.parse(taskType!.outputSchema)).toMatchObject({ type: "object" });
  });

  it("reports only interfaces that are wired", async () => {
    const client = createClient(CapabilitiesService, createGrpcTransport({ baseUrl: server.url }));
    const { interfaces } = await client.getSupportedInterfaces({});
    expect(interfaces.map((i) => i.name)).toEqual(UNGROUPED_INTERFACES);
    // Served without a group host, none of the group interfaces is claimed.
    for (const name of GROUP_INTERFACES) expect(interfaces.map((i) => i.name)).not.toContain(name);
  });

  it("answers GET for side-effect-free methods", async () => {
    const message = encodeURIComponent(JSON.stringify({ taskType: "text_analysis" }));
    const res = await fetch(`${server.url}/synapse.v1.CapabilitiesService/GetTaskTypeCapabilities?encoding=json&message=${message}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { taskType: { type: string } }).taskType.type).toBe("text_analysis");
  });

  it("answers curl-style JSON with snake_case accepted and 404 for an unknown type", async () => {
    const res = await fetch(`${server.url}/synapse.v1.CapabilitiesService/GetTaskTypeCapabilities`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ task_type: "nope" }),
    });
    expect(res.status).toBe(404);
    const body = (await res.json()) as { code: string; details: Array<{ type: string; debug?: unknown }> };
    expect(body.code).toBe("not_found");
    expect(body.details[0]?.type).toBe("synapse.v1.ErrorDetail");
  });

  it("refuses malformed JSON with INVALID_ARGUMENT and keeps serving", async () => {
    const res = await fetch(`${server.url}/synapse.v1.CapabilitiesService/GetTaskTypeCapabilities`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "{not json",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("invalid_argument");
    const client = createClient(CapabilitiesService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    expect((await client.getCapabilities({})).capabilities?.agentId).toBe("agent_under_test");
  });

  it("refuses malformed binary with INVALID_ARGUMENT over Connect and gRPC and keeps serving", async () => {
    const res = await fetch(`${server.url}/synapse.v1.CapabilitiesService/GetTaskTypeCapabilities`, {
      method: "POST",
      headers: { "Content-Type": "application/proto" },
      body: new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0x0f]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("invalid_argument");

    const status = await rawGrpcCall(server.url, "/synapse.v1.CapabilitiesService/GetTaskTypeCapabilities", Buffer.from([0x0a, 0xff, 0xff]));
    expect(status).toBe(String(Code.InvalidArgument));

    const web = await fetch(`${server.url}/synapse.v1.CapabilitiesService/GetTaskTypeCapabilities`, {
      method: "POST",
      headers: { "Content-Type": "application/grpc-web+proto" },
      body: new Uint8Array([0, 0, 0, 0, 3, 0x0a, 0xff, 0xff]),
    });
    const trailer = Buffer.from(await web.arrayBuffer());
    expect(trailer[0]).toBe(0x80);
    expect(trailer.subarray(5).toString()).toContain(`grpc-status: ${Code.InvalidArgument}`);
    const client = createClient(CapabilitiesService, createGrpcTransport({ baseUrl: server.url }));
    expect((await client.getCapabilities({})).capabilities?.agentId).toBe("agent_under_test");
  });

  it("serves an HTTP/1.1 request that arrives one byte at a time", async () => {
    const url = new URL(server.url);
    const request = `POST /synapse.v1.CapabilitiesService/GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`;
    const response = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname);
      let out = "";
      socket.on("data", (d) => (out += d.toString()));
      socket.on("end", () => resolve(out));
      socket.on("error", reject);
      let i = 0;
      const tick = setInterval(() => {
        socket.write(request[i++]!);
        if (i === request.length) clearInterval(tick);
      }, 1);
    });
    expect(response).toMatch(/^HTTP\/1\.1 200/);
    expect(response).toContain("agent_under_test");
  });

  it("answers P2PService reads without a bearer token with UNAUTHENTICATED", async () => {
    const client = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    await expect(client.getTask({ taskId: "x" })).rejects.toMatchObject({ code: Code.Unauthenticated });
  });

  it("logs one structured line per call, refused calls included", async () => {
    const before = log.lines.length;
    const client = createClient(CapabilitiesService, createGrpcTransport({ baseUrl: server.url }));
    await client.getCapabilities({});
    await fetch(`${server.url}/synapse.v1.CapabilitiesService/GetCapabilities`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{" });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const calls = log.lines.slice(before).filter((line) => line.msg === "call");
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({ procedure: "/synapse.v1.CapabilitiesService/GetCapabilities", protocol: "grpc", http: "2.0", status: "ok" });
    expect(calls[1]).toMatchObject({ protocol: "connect", http: "1.1", status: "invalid_argument", http_status: 400 });
    expect(typeof calls[0]!.duration_ms).toBe("number");
  });
});

/** A gRPC call with a hand-made (possibly malformed) message; resolves to grpc-status. */
function rawGrpcCall(baseUrl: string, path: string, message: Buffer): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
    let status: string | undefined;
    stream.on("response", (headers) => (status ??= headers["grpc-status"] as string | undefined));
    stream.on("trailers", (trailers) => (status = trailers["grpc-status"] as string | undefined));
    stream.on("close", () => {
      session.close();
      resolve(status);
    });
    stream.resume();
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    message.copy(frame, 5);
    stream.end(frame);
  });
}

describe("limits", () => {
  it("refuses a request larger than max_file_size allows with RESOURCE_EXHAUSTED", async () => {
    const server = await startTestServer({ maxFileSize: 1024 });
    try {
      const big = create(HandshakeRequestSchema, { protocolVersion: "1.0.0", interfaces: [{ name: "x".repeat(200_000) }] });
      expect(toBinary(HandshakeRequestSchema, big).byteLength).toBeGreaterThan(1024 + 64 * 1024);
      for (const transport of [createGrpcTransport({ baseUrl: server.url }), createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" })]) {
        const client = createClient(CapabilitiesService, transport);
        await expect(client.handshake(big)).rejects.toMatchObject({ code: Code.ResourceExhausted });
        expect((await client.handshake({ protocolVersion: "1.0.0" })).compatible).toBe(true);
      }
    } finally {
      await server.close();
    }
  });
});

describe("TLS", () => {
  let server: RunningServer;
  let cert: Buffer;
  beforeAll(async () => {
    const dir = await tempDir();
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
      "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    cert = readFileSync(join(dir, "cert.pem"));
    server = await startTestServer({ tls: { cert, key: readFileSync(join(dir, "key.pem")) }, agentId: "tls_agent" });
  });
  afterAll(() => server.close());

  it("serves https URLs", () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  const tlsVariants: Variant[] = [
    { name: "Connect over h2 (ALPN)", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2", nodeOptions: { ca: cert } }) },
    { name: "Connect over HTTP/1.1 (ALPN)", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { ca: cert } }) },
    { name: "gRPC over h2", transport: (baseUrl) => createGrpcTransport({ baseUrl, nodeOptions: { ca: cert } }) },
    { name: "gRPC-web over HTTP/1.1", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { ca: cert } }) },
  ];
  for (const variant of tlsVariants) {
    it(`GetCapabilities: ${variant.name}`, async () => {
      const client = createClient(CapabilitiesService, variant.transport(server.url));
      expect((await client.getCapabilities({})).capabilities?.agentId).toBe("tls_agent");
    });
  }
});

describe("graceful shutdown", () => {
  it("lets an in-flight call finish, then stops accepting", async () => {
    const server = await startTestServer({ agentId: "draining_agent" });
    const url = new URL(server.url);
    const body = JSON.stringify({ taskType: "text_analysis" });
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise((resolve) => socket.once("connect", resolve));
    let response = "";
    socket.on("data", (d) => (response += d.toString()));
    const ended = new Promise((resolve) => socket.once("close", resolve));
    // Headers and half the body: the call is in flight when shutdown starts.
    socket.write(
      `POST /synapse.v1.CapabilitiesService/GetTaskTypeCapabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closing = server.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const refused = await new Promise<boolean>((resolve) => {
      const probe = net.connect(Number(url.port), url.hostname);
      probe.once("connect", () => {
        probe.destroy();
        resolve(false);
      });
      probe.once("error", () => resolve(true));
    });
    expect(refused).toBe(true);
    socket.write(body.slice(5));
    await closing;
    await ended;
    expect(response).toMatch(/^HTTP\/1\.1 200/);
    expect(response).toContain('"type":"text_analysis"');
  });
});

describe("a Watch open when shutdown begins", () => {
  it("ends with UNAVAILABLE and says where to resume", async () => {
    const server = await startTestServer({ agentId: "draining_watch_agent" });
    const client = await connectClient(server);
    const { taskId, task } = await client.submit("text_analysis", { text: "One.", require_approval: true }, { waitMs: 5000 });
    const from = task!.lastSequence + 1n;
    const p2p = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    const items: string[] = [];
    let snapshot!: () => void;
    const opened = new Promise<void>((resolve) => (snapshot = resolve));
    const watching = (async () => {
      for await (const item of p2p.watch({ taskId, fromSequence: from }, { headers: { authorization: `Bearer ${await client.token(60)}` } })) {
        items.push(item.kind.case ?? "");
        if (item.kind.case === "snapshot") snapshot();
      }
    })();
    await opened;
    const closing = server.close();
    const ended = await watching.then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    await closing;
    expect(items).toEqual(["snapshot"]);
    expect(ended?.code).toBe(Code.Unavailable);
    expect(ended?.rawMessage).toBe(`the agent is shutting down; resume with from_sequence ${from}`);
  });
});

describe("HTTP/1.1 requests the parser refuses", () => {
  let served: RunningServer;
  beforeAll(async () => {
    served = await startTestServer();
  });
  afterAll(() => served.close());

  /** Writes raw bytes and reads until the server closes the connection. */
  const exchange = (bytes: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect(served.port, "127.0.0.1", () => socket.write(bytes));
      let answer = "";
      socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")));
      socket.on("close", () => resolve(answer));
      socket.on("error", reject);
      socket.setTimeout(5000, () => socket.destroy());
    });

  it("answers a malformed request 400 and closes", async () => {
    expect(await exchange("GARBAGE / NOT-HTTP\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
  });

  it("answers headers over the limit 431 and closes", async () => {
    expect(await exchange(`GET /console HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 431 /);
  });

  it("finishes the answer to a valid request before closing on the garbage that follows it", async () => {
    const body = "{}";
    const valid = `POST /synapse.v1.CapabilitiesService/GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const answer = await exchange(`${valid}\x00\x01garbage that is not a request\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer).toContain('"agentId"');
  });
});

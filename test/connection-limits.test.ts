// Header, body, idle and write timeouts and the connection cap, through real
// loopback sockets against a real server with short limits: each closes
// what it should, and a long server stream outlives them all.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import type http from "node:http";
import http2 from "node:http2";
import { join } from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { defaultMaxConnections, MAX_CONNECTIONS_CEILING } from "../src/server/connection-limits.js";
import { createListener, type Listener, type RequestHandler } from "../src/server/listener.js";
import type { RunningServer } from "../src/server/server.js";
import { startTestServer, tempDir } from "./helpers/server.js";
import { connectRaw, getCapabilitiesRequest, sleep, trickle } from "./helpers/sockets.js";

const LIMIT_MS = 300;
const SHORT = { headerTimeoutMs: LIMIT_MS, bodyTimeoutMs: LIMIT_MS, idleTimeoutMs: LIMIT_MS, writeTimeoutMs: LIMIT_MS };
/** A timeout must not fire early, and must fire soon after it is due (generous for a loaded machine). */
const expectTimedOut = (ms: number, limit = LIMIT_MS) => {
  expect(ms).toBeGreaterThanOrEqual(limit - 50);
  expect(ms).toBeLessThan(limit + 2000);
};
const SLOW_HEADERS = "POST /synapse.v1.CapabilitiesService/GetCapabilities HTTP/1.1\r\nHost: x\r\nX-Slow: ";
const SLOW_BODY = "POST /synapse.v1.CapabilitiesService/GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";

function h2Connect(url: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.once("connect", () => resolve(session));
    session.once("error", reject);
  });
}

/** One gRPC GetCapabilities call on an open session; resolves to grpc-status. */
function grpcCall(session: http2.ClientHttp2Session): Promise<string | undefined> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": "/synapse.v1.CapabilitiesService/GetCapabilities", "content-type": "application/grpc", te: "trailers" });
    let status: string | undefined;
    stream.on("trailers", (trailers) => (status = trailers["grpc-status"] as string | undefined));
    stream.on("close", () => resolve(status));
    stream.on("error", () => undefined);
    stream.resume();
    stream.end(Buffer.alloc(5));
  });
}

describe("timeouts over plaintext", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startTestServer(SHORT);
  });
  afterAll(() => server.close());

  it("closes a connection that never sends a byte", async () => {
    const client = await connectRaw(server.url);
    expectTimedOut(await client.whenClosed());
    expect(client.received()).toBe("");
  });

  it("answers 408 and closes when HTTP/1.1 headers trickle in, however steadily", async () => {
    const client = await connectRaw(server.url);
    client.socket.write(SLOW_HEADERS);
    trickle(client.socket, "a".repeat(1000), 20);
    expectTimedOut(await client.whenClosed());
    expect(client.received()).toMatch(/^HTTP\/1\.1 408/);
  });

  it("closes when an HTTP/1.1 request body trickles in", async () => {
    const client = await connectRaw(server.url);
    client.socket.write(SLOW_BODY);
    trickle(client.socket, " ".repeat(999), 20);
    expectTimedOut(await client.whenClosed());
    expect(client.received()).not.toMatch(/200/);
  });

  it("closes a kept-alive HTTP/1.1 connection once idle, and times the headers of a next request", async () => {
    const idle = await connectRaw(server.url);
    const slow = await connectRaw(server.url);
    for (const client of [idle, slow]) client.socket.write(getCapabilitiesRequest());
    while (!idle.received().includes("agentId") || !slow.received().includes("agentId")) await sleep(10);
    const answered = performance.now();
    expect(idle.received()).toMatch(/^HTTP\/1\.1 200/);
    slow.socket.write(SLOW_HEADERS);
    trickle(slow.socket, "a".repeat(1000), 20);
    expectTimedOut(await idle.whenClosed(answered));
    // Up to one sweep to see the next request begin, then the header timeout.
    expectTimedOut(await slow.whenClosed(answered));
    expect(slow.received()).toMatch(/HTTP\/1\.1 408/);
  });

  it("closes an HTTP/2 session that opens no stream", async () => {
    const session = await h2Connect(server.url);
    const opened = performance.now();
    await new Promise((resolve) => session.once("close", resolve));
    expectTimedOut(performance.now() - opened);
  });

  it("sends GOAWAY to an HTTP/2 session once idle", async () => {
    const session = await h2Connect(server.url);
    expect(await grpcCall(session)).toBe("0");
    const answered = performance.now();
    const goaway = new Promise((resolve) => session.once("goaway", resolve));
    await new Promise((resolve) => session.once("close", resolve));
    expectTimedOut(performance.now() - answered);
    await goaway;
  });

  it("resets an HTTP/2 stream whose body trickles in; the session serves on", async () => {
    const session = await h2Connect(server.url);
    session.on("error", () => undefined);
    const stream = session.request({ ":method": "POST", ":path": "/synapse.v1.CapabilitiesService/GetCapabilities", "content-type": "application/grpc" });
    stream.on("error", () => undefined);
    stream.resume();
    const started = performance.now();
    stream.write(Buffer.from([0, 0, 0, 0, 100]));
    const timer = setInterval(() => stream.write(Buffer.from([0x0a])), 20);
    await new Promise((resolve) => stream.once("close", resolve));
    clearInterval(timer);
    expectTimedOut(performance.now() - started);
    expect(stream.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(await grpcCall(session)).toBe("0");
    session.close();
  });
});

describe("timeouts over TLS", () => {
  let server: RunningServer;
  let ca: Buffer;
  beforeAll(async () => {
    const dir = await tempDir();
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
      "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    ca = readFileSync(join(dir, "cert.pem"));
    server = await startTestServer({ ...SHORT, tls: { cert: ca, key: readFileSync(join(dir, "key.pem")) } });
  });
  afterAll(() => server.close());

  it("closes a connection that never starts its handshake", async () => {
    const client = await connectRaw(server.url.replace("https:", "http:"));
    expectTimedOut(await client.whenClosed());
  });

  it("answers 408 and closes when HTTP/1.1 headers trickle in over TLS", async () => {
    const url = new URL(server.url);
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca, ALPNProtocols: ["http/1.1"] });
    await new Promise((resolve) => socket.once("secureConnect", resolve));
    const secured = performance.now();
    let received = "";
    socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
    socket.on("error", () => undefined);
    socket.write(SLOW_HEADERS);
    trickle(socket, "a".repeat(1000), 20);
    await new Promise((resolve) => socket.once("close", resolve));
    expectTimedOut(performance.now() - secured);
    expect(received).toMatch(/^HTTP\/1\.1 408/);
  });

  it("serves a client over TLS with HTTP/2 and HTTP/1.1", async () => {
    for (const transport of [createGrpcTransport({ baseUrl: server.url, nodeOptions: { ca } }), createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", nodeOptions: { ca } })]) {
      expect((await createClient(CapabilitiesService, transport).getCapabilities({})).capabilities?.agentId).toBeTruthy();
    }
  });
});

describe("long server streams", () => {
  it("a Watch stream outlives the header, body, idle and write timeouts, over HTTP/2 and HTTP/1.1", async () => {
    const server = await startTestServer({ ...SHORT, shutdownGraceMs: 5_000 });
    const transports = [
      createGrpcTransport({ baseUrl: server.url }),
      createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }),
      createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }),
    ];
    const seen = transports.map(() => [] as ServingStatus[]);
    const watches = transports.map(async (transport, i) => {
      try {
        for await (const response of createClient(Health, transport).watch({ service: "" })) seen[i]!.push(response.status);
      } catch {
        // Ends with UNAVAILABLE once the server shuts down.
      }
    });
    while (seen.some((statuses) => statuses.length === 0)) await sleep(10);
    await sleep(LIMIT_MS * 5);
    await server.close();
    await Promise.all(watches);
    // Still open after five timeouts: each saw the shutdown's NOT_SERVING.
    for (const statuses of seen) expect(statuses).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
  });
});

describe("write timeout", () => {
  /**
   * A listener whose one handler writes more than a client that does not read
   * can take: as a stream that waits for 'drain', or as one ended response.
   */
  async function floodingListener(style: "stream" | "end"): Promise<{ url: string; listener: Listener; cut: Promise<number> }> {
    let resolveCut: (ms: number) => void = () => undefined;
    const cut = new Promise<number>((resolve) => (resolveCut = resolve));
    const handler: RequestHandler = (req, response) => {
      const res = response as http.ServerResponse; // the same calls exist on Http2ServerResponse
      const started = performance.now();
      res.once("close", () => resolveCut(performance.now() - started));
      res.writeHead(200, { "content-type": "application/octet-stream" });
      req.resume();
      if (style === "end") return void res.end(Buffer.alloc(32 * 1024 * 1024, 0x61));
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const write = () => {
        while (!res.destroyed && res.write(chunk));
      };
      res.on("drain", write);
      write();
    };
    const listener = createListener({ handler, ...SHORT });
    const { port } = await listener.listen(0, "127.0.0.1");
    return { url: `http://127.0.0.1:${port}`, listener, cut };
  }

  it("cuts an HTTP/2 response stream whose client stopped reading", async () => {
    const { url, listener, cut } = await floodingListener("stream");
    const session = await h2Connect(url);
    session.on("error", () => undefined);
    const stream = session.request({ ":path": "/" });
    stream.on("error", () => undefined);
    stream.pause();
    expectTimedOut(await cut);
    session.destroy();
    listener.destroyAll();
  });

  it("cuts an ended HTTP/1.1 response whose client stopped reading", async () => {
    const { url, listener, cut } = await floodingListener("end");
    const client = await connectRaw(url, { read: false });
    client.socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    expectTimedOut(await cut);
    client.socket.destroy();
    listener.destroyAll();
  });
});

describe("a call's listeners", () => {
  it("leaves no listener of its own on an HTTP/2 stream once the call is over", async () => {
    let seen!: { stream: http2.ServerHttp2Stream; during: number };
    const handler: RequestHandler = (req, res) => {
      const stream = (req as http2.Http2ServerRequest).stream;
      seen = { stream, during: stream.listenerCount("drain") };
      res.end("ok");
    };
    const listener = createListener({ handler, ...SHORT });
    const { port } = await listener.listen(0, "127.0.0.1");
    const session = await h2Connect(`http://127.0.0.1:${port}`);
    const stream = session.request({ ":path": "/" });
    stream.resume();
    await new Promise((resolve) => stream.on("close", resolve));
    await sleep(50);
    // The connection table's write-progress listener is gone; Node's own stay.
    expect(seen.stream.closed).toBe(true);
    expect(seen.stream.listenerCount("drain")).toBe(seen.during - 1);
    session.destroy();
    listener.destroyAll();
  });
});

describe("connection cap", () => {
  it("sheds the connection that has waited longest for its headers, not a busy or idle one", async () => {
    const server = await startTestServer({ maxConnections: 6 });
    try {
      const body = await connectRaw(server.url);
      body.socket.write(SLOW_BODY);
      const idle = await connectRaw(server.url);
      idle.socket.write(getCapabilitiesRequest());
      while (!idle.received().includes("agentId")) await sleep(10);
      const headers = [];
      for (let i = 0; i < 4; i++) {
        headers.push(await connectRaw(server.url));
        headers[i]!.socket.write(SLOW_HEADERS);
        await sleep(20);
      }
      const client = createClient(CapabilitiesService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
      expect((await client.getCapabilities({})).capabilities?.agentId).toBeTruthy();
      await sleep(100);
      expect(headers.map((h) => h.closed())).toEqual([true, false, false, false]);
      expect([body.closed(), idle.closed()]).toEqual([false, false]);
      for (const raw of [body, idle, ...headers]) raw.socket.destroy();
    } finally {
      await server.close();
    }
  });

  it("closes new connections at once while every connection is being answered", async () => {
    const server = await startTestServer({ maxConnections: 3, shutdownGraceMs: 1000 });
    const aborts = [0, 1, 2].map(() => new AbortController());
    try {
      let started = 0;
      const watches = aborts.map(async (abort) => {
        const client = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
        try {
          for await (const _ of client.watch({ service: "" }, { signal: abort.signal })) started++;
        } catch {
          // aborted below
        }
      });
      while (started < 3) await sleep(10);
      const refused = await connectRaw(server.url);
      expect(await refused.whenClosed()).toBeLessThan(1000);
      expect(refused.received()).toBe("");
      // One stream ends: its idle session is shed for the next client.
      aborts[0]!.abort();
      await watches[0];
      await sleep(200); // for the server to see the stream end
      const client = createClient(CapabilitiesService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
      expect((await client.getCapabilities({})).capabilities?.agentId).toBeTruthy();
    } finally {
      aborts.forEach((abort) => abort.abort());
      await server.close();
    }
  });

  it("defaults to three quarters of the open-file limit, at most 10,000", async () => {
    const dir = await tempDir();
    const limits = (soft: number) => {
      const file = join(dir, `limits-${soft}`);
      writeFileSync(file, `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 ${soft}                 files\n`);
      return file;
    };
    expect(defaultMaxConnections(limits(1024))).toBe(768);
    expect(defaultMaxConnections(limits(1_048_576))).toBe(MAX_CONNECTIONS_CEILING);
    expect(defaultMaxConnections(join(dir, "missing"))).toBe(MAX_CONNECTIONS_CEILING);
  });
});

// The short call paths (src/server/short-call.ts lists what they keep of
// connect-es's handler pipeline) against connect-es's own pipeline: the same
// calls, over real sockets, to a server with its short paths and to one
// without (`shortPaths: false`, every call through connect-es's handlers),
// in each of Connect JSON, Connect binary, gRPC and gRPC-web, must give the
// same status, headers, trailers and body bytes. Each behaviour that list
// names is asserted here at least once, so a connect-es upgrade that changes
// its pipeline fails this file instead of making the paths drift apart.
//
// Two pairs of servers: the agent's own services, one agent served twice;
// and a probe service whose methods do what the agent's never do (set
// headers and trailers, throw a bug, answer with more than the write limit)
// under an interceptor that replaces what it is given.
import { create, toBinary, toJsonString, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetCapabilitiesRequestSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode, ErrorDetailSchema } from "../gen/synapse/v1/errors_pb.js";
import { GetTaskRequestSchema, GetTaskResponseSchema, P2PService, SendRequestSchema, TaskSchema, WatchRequestSchema } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../src/client/requester.js";
import { silentLogger } from "../src/log.js";
import { fromEncodedFields } from "../src/protocol/encoded.js";
import { errorDetail } from "../src/protocol/errors.js";
import { createRequestHandler } from "../src/server/adapter.js";
import { callAbortKey } from "../src/server/call-abort.js";
import { shapeErrors } from "../src/server/error-shape.js";
import { createListener, type Listener } from "../src/server/listener.js";
import { withRequestLog } from "../src/server/request-log.js";
import { startServer, type RunningServer } from "../src/server/server.js";
import { scrape } from "./helpers/metrics.js";
import { frame, frames, grpcStatus, h1Call, h2Call, type RawAnswer, type RawRequest } from "./helpers/raw-calls.js";
import { taskRequest } from "./helpers/requests.js";
import { connectClient, startTestServer, type TestServer } from "./helpers/server.js";

// ---- the four wire protocols, spoken by hand -------------------------------------------------

type WireKind = "connect-json" | "connect-proto" | "grpc" | "grpc-web";
const WIRES: WireKind[] = ["connect-json", "connect-proto", "grpc", "grpc-web"];

interface Target {
  url: string;
  session: http2.ClientHttp2Session;
}

interface CallOptions {
  /** The method streams its answer (Connect frames its request then). */
  stream?: boolean;
  /** Send the request gzip-compressed. */
  gzip?: boolean;
  /** Accept gzip-compressed answers. */
  acceptGzip?: boolean;
  headers?: Record<string, string>;
  /** The body as it goes, instead of the message encoded. */
  body?: Buffer;
  onStart?: RawRequest["onStart"];
}

const grpcFamily = (wire: WireKind) => wire === "grpc" || wire === "grpc-web";

/** The deadline header of `wire`'s protocol, `value` in the words of either. */
const deadline = (wire: WireKind, grpc: string, connect: string): Record<string, string> => (grpcFamily(wire) ? { "grpc-timeout": grpc } : { "connect-timeout-ms": connect });

function encode<D extends DescMessage>(wire: WireKind, schema: D, init: MessageInitShape<D>): Buffer {
  const message = create(schema, init);
  return wire === "connect-json" ? Buffer.from(toJsonString(schema, message)) : Buffer.from(toBinary(schema, message));
}

function contentType(wire: WireKind, stream: boolean): string {
  switch (wire) {
    case "connect-json":
      return stream ? "application/connect+json" : "application/json";
    case "connect-proto":
      return stream ? "application/connect+proto" : "application/proto";
    case "grpc":
      return "application/grpc";
    case "grpc-web":
      return "application/grpc-web+proto";
  }
}

/** The request `wire` makes of a message's bytes: framed where the protocol frames, headers named as it names them. */
function rawRequest(wire: WireKind, bytes: Buffer, o: CallOptions): RawRequest {
  const stream = o.stream === true;
  const framed = grpcFamily(wire) || stream;
  const data = o.gzip ? gzipSync(bytes) : bytes;
  const headers: Record<string, string> = { "content-type": contentType(wire, stream) };
  const [encoding, accept] = grpcFamily(wire) ? ["grpc-encoding", "grpc-accept-encoding"] : stream ? ["connect-content-encoding", "connect-accept-encoding"] : ["content-encoding", "accept-encoding"];
  if (o.gzip) headers[encoding] = "gzip";
  if (o.acceptGzip) headers[accept] = "gzip";
  return { headers: { ...headers, ...o.headers }, body: o.body ?? (framed ? frame(o.gzip ? 1 : 0, data) : data), onStart: o.onStart };
}

/** gRPC over HTTP/2 (it needs it); Connect and gRPC-web over HTTP/1.1, as browsers and curl send them. */
function call(target: Target, wire: WireKind, path: string, request: RawRequest): Promise<RawAnswer> {
  return wire === "grpc" ? h2Call(target.session, path, request) : h1Call(target.url, path, request);
}

/** The same call to the short path's server, then to the stock one. */
async function onBoth(short: Target, stock: Target, run: (target: Target) => Promise<RawAnswer>): Promise<[RawAnswer, RawAnswer]> {
  const first = await run(short);
  const second = await run(stock);
  return [first, second];
}

/** What a client observes of an answer: all of it but the time it took. */
const observed = ({ ms: _ms, ...answer }: RawAnswer) => ({ ...answer, body: answer.body.toString("base64") });

function expectSame([short, stock]: [RawAnswer, RawAnswer]): RawAnswer {
  expect(observed(short)).toEqual(observed(stock));
  return short;
}

/** The call's outcome in the words of its protocol: a gRPC status, a Connect error code, or "ok". */
function outcome(wire: WireKind, answer: RawAnswer, stream = false): string {
  if (grpcFamily(wire)) {
    if (wire === "grpc") return grpcStatus(answer) ?? `http ${answer.status}`;
    const trailer = frames(answer.body).find(([flags]) => flags & 0x80);
    return trailer ? /grpc-status:\s*(\d+)/.exec(trailer[1].toString())![1]! : (answer.headers["grpc-status"] ?? `http ${answer.status}`);
  }
  if (stream) {
    const end = frames(answer.body).find(([flags]) => flags & 0x02);
    const error = end && (JSON.parse(end[1].toString()) as { error?: { code: string } }).error;
    return error?.code ?? (end ? "ok" : `http ${answer.status}`);
  }
  if (answer.status === 200) return "ok";
  try {
    return (JSON.parse(answer.body.toString()) as { code: string }).code;
  } catch {
    return `http ${answer.status}`;
  }
}

// ---- the agent's services, served twice -----------------------------------------------------

const MAX_FILE_SIZE = 48 * 1024;
const CAPABILITIES = "/synapse.v1.CapabilitiesService/GetCapabilities";
const SEND = "/synapse.v1.P2PService/Send";
const GET_TASK = "/synapse.v1.P2PService/GetTask";
const WATCH = "/synapse.v1.P2PService/Watch";

let server: TestServer;
let stockServer: RunningServer;
/** A third door to the same agent, for the client that sets tasks up: the calls compared are the only ones the other two count. */
let setupServer: RunningServer;
let short: Target;
let stock: Target;
let client: SynapseClient;
let token: string;
let finished: string;
let large: string;

beforeAll(async () => {
  server = await startTestServer({ agentId: "agent_parity", maxFileSize: MAX_FILE_SIZE });
  // The same agent behind connect-es's own pipeline: the same tasks, the same bytes.
  stockServer = await startServer({ agent: server.agent, shortPaths: false, port: 0, host: "127.0.0.1" });
  setupServer = await startServer({ agent: server.agent, port: 0, host: "127.0.0.1" });
  short = { url: server.url, session: http2.connect(server.url) };
  stock = { url: stockServer.url, session: http2.connect(stockServer.url) };
  client = await connectClient(setupServer);
  token = await client.token();
  finished = (await client.submit("text_analysis", { text: "One. Two three." }, { waitMs: 5000 })).taskId;
  // A task whose view (it echoes the request) is past the size replies are compressed from (32 KiB).
  const big = await client.submit("text_analysis", { text: "Words and more words. ".repeat(1800) }, { waitMs: 5000 });
  large = big.taskId;
});
afterAll(async () => {
  short.session.close();
  stock.session.close();
  await setupServer.close();
  await stockServer.close();
  await server.close();
});

const bearer = () => ({ authorization: `Bearer ${token}` });

describe.each(WIRES)("over %s, the short path and connect-es's answer the same", (wire) => {
  it("to a call that succeeds (GetCapabilities)", async () => {
    const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, CAPABILITIES, rawRequest(wire, encode(wire, GetCapabilitiesRequestSchema, {}), {}))));
    expect(outcome(wire, answer)).toMatch(/^(ok|0)$/);
  });

  it("to a refusal with a synapse.v1.ErrorDetail: HTTP status, JSON error or trailers, details", async () => {
    // An envelope whose signature does not verify.
    const envelope = await client.envelope(...taskRequest("t-parity-forged"));
    envelope.signature!.value[0]! ^= 1;
    const body = encode(wire, SendRequestSchema, { envelope });
    const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, SEND, rawRequest(wire, body, {}))));
    expect(outcome(wire, answer)).toMatch(/^(permission_denied|unauthenticated|invalid_argument|7|16|3)$/);
    if (wire === "grpc") expect(answer.trailers["grpc-status-details-bin"]).toBeTruthy();
    if (!grpcFamily(wire)) expect(JSON.parse(answer.body.toString()).details[0].type).toBe(ErrorDetailSchema.typeName);
  });

  it("to a request that does not parse (typed INVALID_ARGUMENT, not INTERNAL)", async () => {
    const garbage = wire === "connect-json" ? Buffer.from("{not json") : Buffer.from([0xff, 0xff, 0xff]);
    const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, garbage, { headers: bearer() }))));
    expect(outcome(wire, answer)).toMatch(/^(invalid_argument|3)$/);
  });

  it("to a request past the read limit, declared or found mid-read (message_too_large)", async () => {
    const oversize = Buffer.alloc(MAX_FILE_SIZE + 65 * 1024 + 10, 1);
    const body = rawRequest(wire, oversize, {}).body as Buffer;
    const declared = expectSame(await onBoth(short, stock, (t) => call(t, wire, SEND, rawRequest(wire, oversize, { headers: { "content-length": String(body.byteLength) } }))));
    expect(outcome(wire, declared)).toMatch(/^(resource_exhausted|8)$/);
    // Without a length the short path reads up to the limit, then hands what it read over.
    const chunked = expectSame(await onBoth(short, stock, (t) => call(t, wire, SEND, rawRequest(wire, oversize, {}))));
    expect(outcome(wire, chunked)).toMatch(/^(resource_exhausted|8)$/);
    // And the connection (an HTTP/2 session for gRPC) answers the next call.
    const after = expectSame(await onBoth(short, stock, (t) => call(t, wire, CAPABILITIES, rawRequest(wire, encode(wire, GetCapabilitiesRequestSchema, {}), {}))));
    expect(outcome(wire, after)).toMatch(/^(ok|0)$/);
  });


  it("to a path no service serves, and to a content type no protocol takes", async () => {
    const unknown = expectSame(await onBoth(short, stock, (t) => call(t, wire, "/synapse.v1.P2PService/NoSuchMethod", rawRequest(wire, Buffer.alloc(0), {}))));
    expect(unknown.status).toBe(404);
    const badType = expectSame(await onBoth(short, stock, (t) => call(t, wire, CAPABILITIES, rawRequest(wire, Buffer.alloc(0), { headers: { "content-type": "text/plain" } }))));
    expect(badType.status).toBe(415);
  });

  it("to a deadline header that does not parse", async () => {
    const header = deadline(wire, "soon", "soon");
    const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, CAPABILITIES, rawRequest(wire, encode(wire, GetCapabilitiesRequestSchema, {}), { headers: header }))));
    expect(outcome(wire, answer)).toMatch(/^(invalid_argument|3)$/);
  });

  it("to a task read: the same view, and compressed alike when large and the client accepts gzip", async () => {
    const small = expectSame(await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, encode(wire, GetTaskRequestSchema, { taskId: finished }), { headers: bearer(), acceptGzip: true }))));
    expect(outcome(wire, small)).toMatch(/^(ok|0)$/);
    const big = expectSame(await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, encode(wire, GetTaskRequestSchema, { taskId: large }), { headers: bearer(), acceptGzip: true }))));
    expect(outcome(wire, big)).toMatch(/^(ok|0)$/);
    if (grpcFamily(wire)) expect(big.body[0]).toBe(1); // a compressed frame
    else expect(big.headers["content-encoding"]).toBe("gzip");
    const plain = expectSame(await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, encode(wire, GetTaskRequestSchema, { taskId: large }), { headers: bearer() }))));
    expect(plain.body.byteLength).toBeGreaterThan(big.body.byteLength);
  });

  it("to a compressed request, which the short path leaves to connect-es, and to an encoding the server lacks", async () => {
    const message = encode(wire, GetTaskRequestSchema, { taskId: finished });
    const [plainShort] = await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, message, { headers: bearer() })));
    const gzipped = expectSame(await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, message, { headers: bearer(), gzip: true }))));
    expect(gzipped.body.equals(plainShort.body)).toBe(true);
    const encoding = grpcFamily(wire) ? "grpc-encoding" : "content-encoding";
    const unknown = expectSame(await onBoth(short, stock, (t) => call(t, wire, GET_TASK, rawRequest(wire, message, { headers: { ...bearer(), [encoding]: "snappy" } }))));
    expect(outcome(wire, unknown)).toMatch(/^(unimplemented|12)$/);
  });

  it("to a stream: the same frames and end (Watch of a finished task), and a refusal before its first message", async () => {
    const watch = (taskId: string) => encode(wire, WatchRequestSchema, { taskId, fromSequence: 1n });
    const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, WATCH, rawRequest(wire, watch(finished), { stream: true, headers: bearer() }))));
    expect(outcome(wire, answer, true)).toMatch(/^(ok|0)$/);
    expect(frames(answer.body).length).toBeGreaterThanOrEqual(3);
    const gzipped = expectSame(await onBoth(short, stock, (t) => call(t, wire, WATCH, rawRequest(wire, watch(finished), { stream: true, gzip: true, headers: bearer() }))));
    expect(gzipped.body.equals(answer.body)).toBe(true);
    const missing = expectSame(await onBoth(short, stock, (t) => call(t, wire, WATCH, rawRequest(wire, watch("no-such-task"), { stream: true, headers: bearer() }))));
    expect(outcome(wire, missing, true)).toMatch(/^(not_found|5)$/);
    const stranger = expectSame(await onBoth(short, stock, (t) => call(t, wire, WATCH, rawRequest(wire, watch(finished), { stream: true, headers: { authorization: "Bearer nonsense" } }))));
    expect(outcome(wire, stranger, true)).toMatch(/^(unauthenticated|16)$/);
  });

  it("to a stream past its deadline: DEADLINE_EXCEEDED after the snapshot", async () => {
    const waiting = await client.submit("text_analysis", { text: "Hold on.", require_approval: true }, { waitMs: 5000 });
    expect(waiting.task?.state).toBe(TaskState.NEED_HUMAN);
    const body = encode(wire, WatchRequestSchema, { taskId: waiting.taskId, fromSequence: 1n });
    const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, WATCH, rawRequest(wire, body, { stream: true, headers: { ...bearer(), ...deadline(wire, "300m", "300") } }))));
    expect(outcome(wire, answer, true)).toMatch(/^(deadline_exceeded|4)$/);
    await client.cancel(waiting.taskId, "done");
  });

  it("to a waited Send past its deadline: the task as it stands when the deadline passes", async () => {
    const answers: RawAnswer[] = [];
    for (const target of [short, stock]) {
      const id = `t-parity-wait-${wire}-${target === short ? "short" : "stock"}`;
      const [type, payload] = taskRequest(id);
      payload.task!.type = "data_analysis";
      payload.task!.payload = { csv: "n\n1\n2", delay_ms_per_row: 10_000 };
      const envelope = await client.envelope(type, payload, { taskId: id });
      const answer = await call(target, wire, SEND, rawRequest(wire, encode(wire, SendRequestSchema, { envelope, wait: { seconds: 20n } }), { headers: deadline(wire, "300m", "300") }));
      await client.cancel(id, "done");
      answers.push(answer);
    }
    // The replies hold each task's own signed events: alike in all but those bytes.
    const [a, b] = answers.map(({ status, headers, trailers, ms, body }) => ({ status, headers: { ...headers, "content-length": "-" }, trailers, ms, size: body.byteLength > 0 }));
    for (const answer of [a!, b!]) expect(answer.ms).toBeLessThan(10_000);
    expect({ ...a, ms: 0 }).toEqual({ ...b, ms: 0 });
    expect(outcome(wire, answers[0]!)).toMatch(/^(ok|0)$/);
  });
});

describe.each(["grpc", "grpc-web"] as const)("over %s, a unary body that is not exactly one frame", (wire) => {
  it("(two messages, or a frame cut short) is refused alike on both paths", async () => {
    const message = encode(wire, GetCapabilitiesRequestSchema, {});
    for (const body of [Buffer.concat([frame(0, message), frame(0, message)]), frame(0, message).subarray(0, 3)]) {
      const answer = expectSame(await onBoth(short, stock, (t) => call(t, wire, CAPABILITIES, rawRequest(wire, message, { body }))));
      expect(outcome(wire, answer)).toBe("3"); // INVALID_ARGUMENT
    }
  });
});

describe("both paths, beyond one protocol", () => {
  it("answer a GET of a read-only method (Connect) the same", async () => {
    const query = `?encoding=json&message=${encodeURIComponent("{}")}`;
    const answer = expectSame(await onBoth(short, stock, (t) => h1Call(t.url, CAPABILITIES + query, { method: "GET" })));
    expect(answer.status).toBe(200);
  });

  it("answer content types the short path does not name exactly by connect-es's rules", async () => {
    for (const type of ["application/json;charset=utf-8", "application/grpc+json", "application/connect+json; charset=utf-8"]) {
      const body = type.includes("grpc") ? frame(0, Buffer.from("{}")) : type.includes("connect+") ? frame(0, Buffer.from("{}")) : Buffer.from("{}");
      const transport = (t: Target) => (type.includes("grpc") ? h2Call(t.session, CAPABILITIES, { headers: { "content-type": type }, body }) : h1Call(t.url, CAPABILITIES, { headers: { "content-type": type }, body }));
      expectSame(await onBoth(short, stock, transport));
    }
  });

  it("close a stream at the server when its client goes away", async () => {
    const waiting = await client.submit("text_analysis", { text: "Hold on.", require_approval: true }, { waitMs: 5000 });
    for (const target of [short, stock]) {
      const url = target === short ? server.url : stockServer.url;
      const open = () => scrape(url).then((metrics) => metrics.samples.get("synapse_watch_streams") ?? 0);
      const before = await open();
      let cancel: (() => void) | undefined;
      const ended = call(target, "grpc", WATCH, rawRequest("grpc", encode("grpc", WatchRequestSchema, { taskId: waiting.taskId }), { headers: bearer(), onStart: (c) => (cancel = c) }));
      for (let i = 0; i < 100 && (await open()) !== before + 1; i++) await new Promise((done) => setTimeout(done, 20));
      expect(await open()).toBe(before + 1);
      cancel!();
      await ended;
      for (let i = 0; i < 100 && (await open()) !== before; i++) await new Promise((done) => setTimeout(done, 20));
      expect(await open()).toBe(before);
    }
    await client.cancel(waiting.taskId, "done");
  });

  it("record the same final status of each call for the request log and the metrics", async () => {
    const counts = async (url: string) => {
      const metrics = await scrape(url);
      return [...metrics.samples].filter(([name]) => name.startsWith("synapse_rpc_requests_total{")).sort();
    };
    const [a, b] = [await counts(server.url), await counts(stockServer.url)];
    expect(a.length).toBeGreaterThan(10);
    expect(a).toEqual(b);
  });
});

describe("a service without an implementation", () => {
  let bare: RunningServer[] = [];
  afterAll(() => Promise.all(bare.map((s) => s.close())));

  it.each(WIRES)("answers UNIMPLEMENTED alike on both paths over %s", async (wire) => {
    if (bare.length === 0) {
      const capabilities = server.agent.provider.getCapabilities();
      bare = [await startServer({ capabilities, port: 0 }), await startServer({ capabilities, port: 0, shortPaths: false })];
    }
    const targets = bare.map((s) => ({ url: s.url, session: http2.connect(s.url) }));
    try {
      const answer = expectSame(await onBoth(targets[0]!, targets[1]!, (t) => call(t, wire, GET_TASK, rawRequest(wire, encode(wire, GetTaskRequestSchema, { taskId: "t" }), {}))));
      expect(outcome(wire, answer)).toMatch(/^(unimplemented|12)$/);
    } finally {
      for (const target of targets) target.session.close();
    }
  });
});

// ---- a probe service: what the pipeline does with what a handler does ----------------------

const WRITE_MAX_BYTES = 64 * 1024;
const path = (method: string) => `/synapse.v1.P2PService/${method}`;

/** Which path answered each probe call, in order. */
const answeredOn: string[] = [];
const pathOf = (ctx: HandlerContext) => (ctx.values.get(callAbortKey) !== undefined ? "short" : "stock");

const untilAborted = (ctx: HandlerContext) => new Promise<void>((resolve) => (ctx.signal.aborted ? resolve() : ctx.signal.addEventListener("abort", () => resolve())));

const probe: Partial<ServiceImpl<typeof P2PService>> = {
  async getTask(request, ctx) {
    answeredOn.push(pathOf(ctx));
    ctx.responseHeader.set("x-probe-header", ctx.requestHeader.get("x-probe") ?? "none");
    ctx.responseTrailer.set("x-probe-trailer", "after");
    switch (request.taskId) {
      case "refuse":
        throw new ConnectError("refused by the probe", Code.FailedPrecondition, { "x-error-meta": "kept" }, [{ desc: ErrorDetailSchema, value: errorDetail(ErrorCode.ILLEGAL_TRANSITION, "refused by the probe") }]);
      case "bug":
        throw new Error("a bug in the handler");
      case "large":
        return { task: { taskId: "x".repeat(40 * 1024) } };
      case "over-limit":
        return { task: { taskId: "x".repeat(WRITE_MAX_BYTES) } };
      case "over-limit-known": {
        // A reply made of bytes already encoded, as a Send reply is.
        const task = toBinary(TaskSchema, create(TaskSchema, { taskId: "y".repeat(WRITE_MAX_BYTES) }));
        return fromEncodedFields(create(GetTaskResponseSchema), [[1, task]]);
      }
      case "deadline-now":
        return { task: { taskId: `aborted at once: ${ctx.signal.aborted}` } };
      case "wait":
        await untilAborted(ctx);
        throw ctx.signal.reason;
    }
    return { task: { taskId: request.taskId } };
  },
  async *watch(request, ctx) {
    answeredOn.push(pathOf(ctx));
    ctx.responseHeader.set("x-probe-header", "streaming");
    yield { kind: { case: "snapshot", value: { taskId: request.taskId === "large" ? "x".repeat(40 * 1024) : request.taskId } } };
    ctx.responseTrailer.set("x-probe-trailer", "after");
    if (request.taskId === "fail-midway") throw new ConnectError("failed after one message", Code.DataLoss);
    if (request.taskId === "wait") await untilAborted(ctx);
  },
};

/**
 * Replaces what it is given, as interceptors may: the request (with a header
 * added), the response's headers, and a unary response's trailers. (A
 * stream's are left alone: connect-es merges trailers replaced before the
 * stream runs with those its method sets by how its copy happens to iterate.)
 */
const replacing: Interceptor = (next) => async (req) => {
  const header = new Headers(req.header);
  header.set("x-probe", `${req.header.get("x-probe") ?? "none"}, seen by the interceptor`);
  const res = await next({ ...req, header });
  const replaced = new Headers(res.header);
  replaced.set("x-intercepted", req.method.name);
  replaced.append("x-order", "inner");
  if (res.stream) return { ...res, header: replaced };
  const trailer = new Headers(res.trailer);
  trailer.set("x-intercepted-trailer", "yes");
  return { ...res, header: replaced, trailer };
};

/** Put first: the outermost, it sees the response last. */
const outer: Interceptor = (next) => async (req) => {
  const res = await next(req);
  res.header.append("x-order", "outer");
  return res;
};

const probeListeners: Listener[] = [];
let probeShort: Target;
let probeStock: Target;

async function probeServer(shortPaths: boolean, shutdown = new AbortController()): Promise<Target> {
  const handler = createRequestHandler({
    routes: (router: ConnectRouter) => router.service(P2PService, probe),
    logger: silentLogger,
    readMaxBytes: 8 * 1024,
    writeMaxBytes: WRITE_MAX_BYTES,
    interceptors: [shapeErrors(silentLogger), outer, replacing],
    shutdownSignal: shutdown.signal,
    shortPaths,
  });
  const listener = createListener({ handler: withRequestLog(handler, { logger: silentLogger }), logger: silentLogger });
  probeListeners.push(listener);
  const { port } = await listener.listen(0, "127.0.0.1");
  const url = `http://127.0.0.1:${port}`;
  return { url, session: http2.connect(url) };
}

describe("a probe service under an interceptor", () => {
  beforeAll(async () => {
    probeShort = await probeServer(true);
    probeStock = await probeServer(false);
  });
  afterAll(() => {
    for (const target of [probeShort, probeStock]) target.session.close();
    for (const listener of probeListeners) listener.destroyAll();
  });

  const getTask = (wire: WireKind, taskId: string, o: CallOptions = {}) => (t: Target) => call(t, wire, path("GetTask"), rawRequest(wire, encode(wire, GetTaskRequestSchema, { taskId }), o));
  const watch = (wire: WireKind, taskId: string, o: CallOptions = {}) => (t: Target) => call(t, wire, path("Watch"), rawRequest(wire, encode(wire, WatchRequestSchema, { taskId }), { ...o, stream: true }));

  it.each(WIRES)("the handler's and the interceptor's headers and trailers, on a success (%s)", async (wire) => {
    answeredOn.length = 0;
    const answer = expectSame(await onBoth(probeShort, probeStock, getTask(wire, "plain", { headers: { "x-probe": "client" } })));
    expect(answer.headers["x-probe-header"] ?? answer.trailers["x-probe-header"]).toBe("client, seen by the interceptor");
    expect(answer.headers["x-intercepted"]).toBe("GetTask");
    expect(answer.headers["x-order"]).toBe("inner, outer");
    // The short path answers all but gRPC-web; connect-es's pipeline answers every call on the other server.
    expect(answeredOn).toEqual([wire === "grpc-web" ? "stock" : "short", "stock"]);
  });

  it.each(WIRES)("an error with metadata and details, and a bug (INTERNAL, its text kept from the client) (%s)", async (wire) => {
    const refused = expectSame(await onBoth(probeShort, probeStock, getTask(wire, "refuse")));
    expect(outcome(wire, refused)).toMatch(/^(failed_precondition|9)$/);
    const bug = expectSame(await onBoth(probeShort, probeStock, getTask(wire, "bug")));
    expect(outcome(wire, bug)).toMatch(/^(internal|13)$/);
    expect(bug.body.toString() + JSON.stringify(bug.trailers)).not.toContain("a bug in the handler");
  });

  it.each(WIRES)("a reply compressed when large, and one past the write limit refused, bytes known or not (%s)", async (wire) => {
    const compressed = expectSame(await onBoth(probeShort, probeStock, getTask(wire, "large", { acceptGzip: true })));
    if (!grpcFamily(wire)) expect(gunzipSync(compressed.body).byteLength).toBeGreaterThan(40 * 1024);
    // Accepting gzip, a small reply is sent as it is (the negotiated encoding still named where the protocol names it).
    expectSame(await onBoth(probeShort, probeStock, getTask(wire, "small", { acceptGzip: true })));
    for (const taskId of ["over-limit", "over-limit-known"]) {
      const refused = expectSame(await onBoth(probeShort, probeStock, getTask(wire, taskId)));
      // JSON leaves out the fields a message holds as encoded bytes: that reply is small there.
      expect(outcome(wire, refused)).toMatch(wire === "connect-json" && taskId === "over-limit-known" ? /^ok$/ : /^(resource_exhausted|8)$/);
    }
  });

  it.each(WIRES)("a deadline: already passed when the call begins, and passing while the handler waits (%s)", async (wire) => {
    const atOnce = expectSame(await onBoth(probeShort, probeStock, getTask(wire, "deadline-now", { headers: deadline(wire, "0m", "0") })));
    expect(atOnce.body.toString()).toContain("aborted at once: true");
    const waited = expectSame(await onBoth(probeShort, probeStock, getTask(wire, "wait", { headers: deadline(wire, "200m", "200") })));
    expect(outcome(wire, waited)).toMatch(/^(deadline_exceeded|4)$/);
  });

  it.each(WIRES)("a stream's headers with its first message, its trailers at its end, an error midway, a deadline (%s)", async (wire) => {
    const ok = expectSame(await onBoth(probeShort, probeStock, watch(wire, "plain")));
    expect(ok.headers["x-probe-header"]).toBe("streaming");
    expect(ok.headers["x-intercepted"]).toBe("Watch");
    const failed = expectSame(await onBoth(probeShort, probeStock, watch(wire, "fail-midway")));
    expect(outcome(wire, failed, true)).toMatch(/^(data_loss|15)$/);
    const timedOut = expectSame(await onBoth(probeShort, probeStock, watch(wire, "wait", { headers: deadline(wire, "200m", "200") })));
    expect(outcome(wire, timedOut, true)).toMatch(/^(deadline_exceeded|4)$/);
  });

  it.each(WIRES)("a call open when the server shuts down: its handler told why (%s)", async (wire) => {
    const answers: RawAnswer[] = [];
    for (const shortPaths of [true, false]) {
      const shutdown = new AbortController();
      const target = await probeServer(shortPaths, shutdown);
      try {
        const answer = getTask(wire, "wait")(target);
        await new Promise((done) => setTimeout(done, 100));
        shutdown.abort(new ConnectError("server is shutting down", Code.Unavailable));
        answers.push(await answer);
      } finally {
        target.session.close();
      }
    }
    const answer = expectSame([answers[0]!, answers[1]!]);
    expect(outcome(wire, answer)).toMatch(/^(unavailable|14)$/);
  });

  it.each(WIRES)("a stream's messages compressed when large and the client accepts gzip (%s)", async (wire) => {
    const answer = expectSame(await onBoth(probeShort, probeStock, watch(wire, "large", { acceptGzip: true })));
    expect(frames(answer.body)[0]![0]).toBe(1);
    expectSame(await onBoth(probeShort, probeStock, watch(wire, "plain", { acceptGzip: true })));
  });
});

// Errors and replies stay within bounds in every protocol: refusals that
// would echo huge caller strings, oversize requests (plain and compressed),
// and requests exactly at the limit, whose replies echo the task's request.
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { CapabilitiesService, HandshakeRequestSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { HeaderSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { P2PService, SendRequestSchema } from "../gen/synapse/v1/p2p_pb.js";
import { TaskCancelPayloadSchema, TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { RegistryService } from "../gen/synapse/v1/registry_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { buildHeader, seal, signParts } from "../src/envelope/seal.js";
import { MAX_ERROR_MESSAGE_CHARS, protocolError } from "../src/protocol/errors.js";
import { ErrorCode, ErrorDetailSchema } from "../gen/synapse/v1/errors_pb.js";
import { MESSAGE_OVERHEAD_BYTES } from "../src/server/server.js";
import { shapeError } from "../src/server/error-shape.js";
import { clientFor, PROTOCOLS, refusal, type Protocol } from "./helpers/protocols.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

const EXECUTOR = "executor_limits";
const MAX_FILE_SIZE = 64 * 1024; // the limit, 128 KiB, lets 66 KiB echoes in, even as base64 in JSON
const LIMIT = MAX_FILE_SIZE + MESSAGE_OVERHEAD_BYTES;
const HUGE = "h".repeat(66 * 1024);

let server: TestServer;
let sender: AgentIdentity;
let token: string;

beforeAll(async () => {
  server = await startTestServer({ agentId: EXECUTOR, maxFileSize: MAX_FILE_SIZE, registry: {} });
  sender = await requesterIdentity();
  token = await (await connectClient(server, { identity: sender })).token();
});
afterAll(() => server.close());

describe("errors echo callers' strings only in part", () => {
  const header = (edit: (h: ReturnType<typeof buildHeader>) => void) => {
    const payload = create(TaskCancelPayloadSchema);
    const h = buildHeader({ messageType: MessageType.TASK_CANCEL, payload, sender: { agentId: sender.agentId }, receiver: { agentId: EXECUTOR }, taskId: "t" }, sender.key);
    edit(h);
    return signParts(toBinary(HeaderSchema, h), new Uint8Array(), sender.key);
  };
  const echoes: Array<[string, (p: Protocol) => Promise<unknown> | AsyncIterable<unknown>]> = [
    ["Send, receiver 70 KB", (p) => clientFor(P2PService, p, server.url).send({ envelope: header((h) => (h.receiver!.agentId = HUGE)) })],
    ["Send, protocol_version 70 KB", (p) => clientFor(P2PService, p, server.url).send({ envelope: header((h) => (h.protocolVersion = HUGE)) })],
    ["Send, task_id 70 KB", (p) => clientFor(P2PService, p, server.url).send({ envelope: header((h) => (h.taskId = HUGE)) })],
    ["GetTaskTypeCapabilities", (p) => clientFor(CapabilitiesService, p, server.url).getTaskTypeCapabilities({ taskType: HUGE })],
    ["Handshake", (p) => clientFor(CapabilitiesService, p, server.url).handshake({ protocolVersion: HUGE })],
    ["GetTask", (p) => clientFor(P2PService, p, server.url).getTask({ taskId: HUGE }, { headers: { authorization: `Bearer ${token}` } })],
    ["Watch (a stream)", (p) => clientFor(P2PService, p, server.url).watch({ taskId: HUGE }, { headers: { authorization: `Bearer ${token}` } })],
    ["ReadResult (a stream)", (p) => clientFor(P2PService, p, server.url).readResult({ taskId: HUGE }, { headers: { authorization: `Bearer ${token}` } })],
    ["GetCapability", (p) => clientFor(RegistryService, p, server.url).getCapability({ id: HUGE })],
  ];
  for (const protocol of PROTOCOLS) {
    it(`over ${protocol.name}: every refusal is typed, with a bounded message`, async () => {
      for (const [name, attempt] of echoes) {
        const answer = await refusal(attempt(protocol));
        expect({ name, internal: [Code.Internal, Code.Unknown].includes(answer.code), typed: answer.detail !== undefined }).toEqual({ name, internal: false, typed: true });
        expect(answer.protocolCode).not.toBe("message_too_large");
        expect(answer.message.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_CHARS);
      }
    });
  }

  it("health checks echo the service name only in part, over every protocol", async () => {
    for (const protocol of PROTOCOLS) {
      const answer = await refusal(clientFor(Health, protocol, server.url).check({ service: HUGE }));
      expect({ protocol: protocol.name, code: answer.code }).toEqual({ protocol: protocol.name, code: Code.NotFound });
      expect(answer.message.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_CHARS);
    }
  });

  it("protocolError and shapeError bound messages and details whoever builds them", () => {
    const built = protocolError(ErrorCode.INVALID_PARAMS, HUGE, { details: { echo: HUGE, list: Array.from({ length: 1000 }, () => HUGE) } });
    expect(built.rawMessage.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_CHARS);
    expect(JSON.stringify(built.findDetails(ErrorDetailSchema)[0]?.details).length).toBeLessThanOrEqual(4096);
    const foreign = shapeError(new ConnectError(HUGE, Code.FailedPrecondition));
    expect(foreign.rawMessage.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_CHARS);
    expect(shapeError(new ConnectError("\ud800 lone", Code.NotFound)).rawMessage).toBe("\ufffd lone");
  });
});

describe("oversize requests", () => {
  const big = create(HandshakeRequestSchema, { protocolVersion: "1.0.0", interfaces: [{ name: "x".repeat(200_000) }] });
  for (const protocol of PROTOCOLS) {
    for (const gzip of [false, true]) {
      it(`are message_too_large over ${protocol.name}${gzip ? ", gzip-compressed" : ""}, unary and streaming`, async () => {
        const capabilities = clientFor(CapabilitiesService, protocol, server.url, { gzip });
        const p2p = clientFor(P2PService, protocol, server.url, { gzip });
        for (const attempt of [capabilities.handshake(big), p2p.watch({ taskId: "w".repeat(200_000) }, { headers: { authorization: `Bearer ${token}` } })]) {
          const answer = await refusal(attempt);
          expect(answer).toMatchObject({ code: Code.ResourceExhausted, protocolCode: "message_too_large" });
          expect(answer.detail?.details).toEqual({ max_bytes: LIMIT });
        }
        expect((await capabilities.handshake({ protocolVersion: "1.0.0" })).compatible).toBe(true);
      });
    }
  }
});

describe("a request exactly at the limit", () => {
  /** A task_request whose SendRequest encodes to at most LIMIT bytes in the protocol's format, and as close as it gets. */
  function atLimit(protocol: Protocol, taskId: string) {
    const make = (n: number) => {
      // Control characters: six bytes each in a JSON reply, so the echo could never fit.
      const payload = create(TaskRequestPayloadSchema, { task: { id: taskId, type: "text_analysis", payload: { text: "\u0001".repeat(n) } } });
      const { envelope } = seal({ messageType: MessageType.TASK_REQUEST, payload, sender: { agentId: sender.agentId }, receiver: { agentId: EXECUTOR }, taskId }, sender.key);
      const request = create(SendRequestSchema, { envelope });
      const size = protocol.json ? Buffer.byteLength(toJsonString(SendRequestSchema, request)) : toBinary(SendRequestSchema, request).byteLength;
      return { request, size };
    };
    let n = protocol.json ? Math.floor((LIMIT * 3) / 4) - 1200 : LIMIT - 1200;
    let best = make(n);
    while (best.size < LIMIT - (protocol.json ? 3 : 0)) {
      const next = make(++n);
      if (next.size > LIMIT) break;
      best = next;
    }
    return best;
  }

  for (const protocol of PROTOCOLS) {
    it(`is applied and answered over ${protocol.name}; GetTask and ListTasks answer too`, async () => {
      const taskId = `t-limit-${protocol.name.replace(/\W/g, "")}`;
      const { request, size } = atLimit(protocol, taskId);
      expect(size).toBeLessThanOrEqual(LIMIT);
      expect(size).toBeGreaterThan(LIMIT - 4);
      const p2p = clientFor(P2PService, protocol, server.url);
      const sent = await p2p.send(request);
      expect(sent.task?.taskId).toBe(taskId);
      expect(sent.reply?.view?.header?.taskId).toBe(taskId);
      // The reply leaves out what the requester sent itself, rather than not fit.
      expect(sent.task?.request).toBeUndefined();
      const headers = { authorization: `Bearer ${token}` };
      expect((await p2p.getTask({ taskId }, { headers })).task?.taskId).toBe(taskId);
      expect((await p2p.listTasks({}, { headers })).tasks.map((t) => t.taskId)).toContain(taskId);
      const watched = [];
      for await (const item of p2p.watch({ taskId }, { headers })) {
        watched.push(item.kind.case);
        if (item.kind.case === "snapshot") break;
      }
      expect(watched).toEqual(["snapshot"]);
    });
  }

  it("keeps Task.request in the replies that show a task to a reader, when they fit; Send leaves it out (the sender has it)", async () => {
    const client = await connectClient(server, { identity: sender });
    const { task, taskId } = await client.submit("text_analysis", { text: "Small." });
    expect(task?.request).toBeUndefined();
    expect((await client.getTask(taskId)).request?.task?.payload).toEqual({ text: "Small." });
  });
});

import { create, toBinary } from "@bufbuild/protobuf";
import { ConnectError, Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, HeaderSchema, MessageType, type Header } from "../gen/synapse/v1/envelope_pb.js";
import { AckPayloadSchema, TaskCancelPayloadSchema, TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { generateKey, type AgentKey } from "../src/crypto/keys.js";
import { MAX_HEADER_STRING_CHARS, open, type OpenOptions } from "../src/envelope/open.js";
import { buildHeader, seal, signParts, type SealInput } from "../src/envelope/seal.js";
import type { TrustPolicy } from "../src/envelope/trust.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { parseMessageType, ALL_MESSAGE_TYPES, wireName } from "../src/protocol/message-types.js";

const alice = generateKey();
const mallory = generateKey();

function trusting(agentId: string, key: AgentKey): TrustPolicy {
  return {
    publicKeyFor: (id) => (id === key.keyId ? key.publicKey : undefined),
    check: (agent, id) =>
      agent !== agentId ? { kind: "unknown" } : id === key.keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: key.keyId },
  };
}

const request = (overrides: Partial<SealInput> = {}): SealInput => ({
  messageType: MessageType.TASK_REQUEST,
  payload: create(TaskRequestPayloadSchema, { task: { id: "t1", type: "text_analysis", payload: { text: "hi" } } }),
  sender: { agentId: "alice" },
  receiver: { agentId: "bob" },
  taskId: "t1",
  ...overrides,
});

const options = (overrides: Partial<OpenOptions> = {}): OpenOptions => ({ trust: trusting("alice", alice), self: "bob", ...overrides });

async function refusal(attempt: Promise<unknown>): Promise<{ code: Code; protocolCode: string | undefined }> {
  const error = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConnectError);
  return { code: (error as ConnectError).code, protocolCode: findErrorDetail(error)?.protocolCode };
}

describe("seal and open", () => {
  it("round-trips header and typed payload", async () => {
    const { envelope, header } = seal(request({ correlationId: "c-1", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }), alice);
    const opened = await open(envelope, options());
    expect(opened.header.messageId).toBe(header.messageId);
    expect(opened.header.sender?.keyId).toBe(alice.keyId);
    expect(opened.header.correlationId).toBe("c-1");
    expect(opened.header.trace?.traceparent).toMatch(/^00-/);
    expect(opened.info.wireName).toBe("p2p:task_request");
    expect(opened.payload.$typeName).toBe("synapse.v1.TaskRequestPayload");
    expect(opened.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("refuses to seal a payload of the wrong type", () => {
    expect(() => seal(request({ payload: create(AckPayloadSchema) }), alice)).toThrow(/carries synapse.v1.TaskRequestPayload/);
  });

  it("refuses an unsigned envelope as UNAUTHENTICATED", async () => {
    const { envelope } = seal(request(), alice);
    const unsigned = create(EnvelopeSchema, { header: envelope.header, payload: envelope.payload });
    expect(await refusal(open(unsigned, options()))).toEqual({ code: Code.Unauthenticated, protocolCode: "signature_invalid" });
  });

  it("refuses tampered bytes as UNAUTHENTICATED", async () => {
    const { envelope } = seal(request(), alice);
    const payload = Uint8Array.from(envelope.payload);
    payload[payload.length - 1]! ^= 1;
    const tampered = create(EnvelopeSchema, { ...envelope, payload });
    expect(await refusal(open(tampered, options()))).toEqual({ code: Code.Unauthenticated, protocolCode: "signature_invalid" });
  });

  it("refuses a trusted agent speaking with another key", async () => {
    const { envelope } = seal(request(), mallory);
    expect(await refusal(open(envelope, options()))).toEqual({ code: Code.Unauthenticated, protocolCode: "unknown_sender" });
  });

  it("refuses an embedded public key that does not match the key id", async () => {
    const { envelope } = seal(request(), mallory);
    envelope.signature!.publicKey = alice.publicKey;
    expect(await refusal(open(envelope, options({ trust: trusting("alice", generateKey()) })))).toEqual({
      code: Code.Unauthenticated,
      protocolCode: "signature_invalid",
    });
  });

  it("refuses a header whose sender key id differs from the signature's", async () => {
    const header = buildHeader(request(), alice);
    header.sender!.keyId = mallory.keyId;
    const envelope = signParts(toBinary(HeaderSchema, header), toBinary(TaskRequestPayloadSchema, request().payload as never), alice);
    expect((await refusal(open(envelope, options()))).protocolCode).toBe("signature_invalid");
  });

  it("refuses every header string past its limit, naming the field, and takes one at the limit", async () => {
    const fields: Array<[string, (header: Header, value: string) => void, number]> = [
      ["message_id", (h, v) => (h.messageId = v), MAX_HEADER_STRING_CHARS],
      ["protocol_version", (h, v) => (h.protocolVersion = v), MAX_HEADER_STRING_CHARS],
      ["sender.agent_id", (h, v) => (h.sender!.agentId = v), MAX_HEADER_STRING_CHARS],
      ["sender.system_id", (h, v) => (h.sender!.systemId = v), MAX_HEADER_STRING_CHARS],
      ["sender.key_id", (h, v) => (h.sender!.keyId = v), MAX_HEADER_STRING_CHARS],
      ["receiver.agent_id", (h, v) => (h.receiver!.agentId = v), MAX_HEADER_STRING_CHARS],
      ["receiver.system_id", (h, v) => (h.receiver!.systemId = v), MAX_HEADER_STRING_CHARS],
      ["receiver.key_id", (h, v) => (h.receiver!.keyId = v), MAX_HEADER_STRING_CHARS],
      ["reply_to", (h, v) => (h.replyTo = v), MAX_HEADER_STRING_CHARS],
      ["task_id", (h, v) => (h.taskId = v), MAX_HEADER_STRING_CHARS],
      ["session_id", (h, v) => (h.sessionId = v), MAX_HEADER_STRING_CHARS],
      ["correlation_id", (h, v) => (h.correlationId = v), MAX_HEADER_STRING_CHARS],
      ["trace.traceparent", (h, v) => (h.trace = { $typeName: "synapse.v1.TraceContext", traceparent: v, tracestate: "" }), MAX_HEADER_STRING_CHARS],
      ["trace.tracestate", (h, v) => (h.trace = { $typeName: "synapse.v1.TraceContext", traceparent: "", tracestate: v }), 512],
      ["idempotency_key", (h, v) => (h.idempotencyKey = v), MAX_HEADER_STRING_CHARS],
      ["payload_type", (h, v) => (h.payloadType = v), MAX_HEADER_STRING_CHARS],
    ];
    const signed = (set: (header: Header) => void) => {
      const header = buildHeader(request(), alice);
      set(header);
      return signParts(toBinary(HeaderSchema, header), toBinary(TaskRequestPayloadSchema, request().payload as never), alice);
    };
    for (const [name, set, max] of fields) {
      const error = await open(signed((h) => set(h, "x".repeat(max + 1))), options()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, name).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).rawMessage, name).toBe(`header.${name} is longer than ${max} characters`);
      expect(findErrorDetail(error)?.protocolCode, name).toBe("message_format_invalid");
      // At the limit the length check passes: whatever refuses the message then is not it.
      const atLimit = await open(signed((h) => set(h, "x".repeat(max))), options()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(atLimit instanceof ConnectError ? atLimit.rawMessage : "", name).not.toMatch(/is longer than/);
    }
  });

  it("refuses a message for another receiver as PERMISSION_DENIED", async () => {
    const { envelope } = seal(request({ receiver: { agentId: "carol" } }), alice);
    expect(await refusal(open(envelope, options()))).toEqual({ code: Code.PermissionDenied, protocolCode: "wrong_receiver" });
  });

  it("refuses expired messages and messages outside the clock skew", async () => {
    const { envelope } = seal(request({ ttlMs: 1000 }), alice);
    expect((await refusal(open(envelope, options({ now: () => Date.now() + 2000 })))).protocolCode).toBe("message_expired");
    const { envelope: future } = seal(request({ sentAtMs: Date.now() + 10 * 60_000 }), alice);
    expect((await refusal(open(future, options()))).protocolCode).toBe("message_expired");
    const { envelope: tight } = seal(request({ sentAtMs: Date.now() - 3000 }), alice);
    expect((await refusal(open(tight, options({ clockSkewMs: 1000 })))).protocolCode).toBe("message_expired");
  });

  it("refuses a task message without a task id", async () => {
    const { envelope } = seal(request({ messageType: MessageType.TASK_CANCEL, payload: create(TaskCancelPayloadSchema), taskId: "" }), alice);
    expect(await refusal(open(envelope, options()))).toEqual({ code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
  });

  it("refuses payload bytes that do not parse", async () => {
    const header = toBinary(HeaderSchema, buildHeader(request(), alice));
    const envelope = signParts(header, new Uint8Array([0xff, 0xff, 0xff]), alice);
    expect(await refusal(open(envelope, options()))).toEqual({ code: Code.InvalidArgument, protocolCode: "message_format_invalid" });
  });

  it("refuses an incompatible protocol major version", async () => {
    const header = buildHeader(request(), alice);
    header.protocolVersion = "2.0.0";
    const envelope = signParts(toBinary(HeaderSchema, header), toBinary(TaskRequestPayloadSchema, request().payload as never), alice);
    expect(await refusal(open(envelope, options()))).toEqual({ code: Code.FailedPrecondition, protocolCode: "unsupported_version" });
  });
});

describe("message types", () => {
  it("cover all 17 p2p types with their spelling", () => {
    expect(ALL_MESSAGE_TYPES.filter((entry) => entry.wireName.startsWith("p2p:"))).toHaveLength(17);
    expect(parseMessageType("registry:register")?.type).toBe(MessageType.REGISTRY_REGISTER);
    expect(wireName(MessageType.TASK_NEED_HUMAN)).toBe("p2p:task_need_human");
    expect(parseMessageType("p2p:human_decision")?.type).toBe(MessageType.HUMAN_DECISION);
    expect(parseMessageType("MESSAGE_TYPE_ACK")?.type).toBe(MessageType.ACK);
    expect(parseMessageType("task_cancel")?.type).toBe(MessageType.TASK_CANCEL);
    for (const entry of ALL_MESSAGE_TYPES) {
      expect(entry.payloadSchema.typeName).toMatch(/^synapse\.v1\..+Payload$/);
    }
  });
});

// The direct Header encoder writes what protobuf-es writes, for any header
// (empty and long strings with multi-byte length prefixes, any text, every
// optional message present or not, enum values and sequences near their
// limits), and leaves what it does not cover to protobuf-es.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HeaderSchema, MessageType, type Header } from "../gen/synapse/v1/envelope_pb.js";
import { TaskAckPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { generateKey } from "../src/crypto/keys.js";
import { seal } from "../src/envelope/seal.js";
import { encodeHeader } from "../src/protocol/header-codec.js";

// Strings of any UTF-16 code units (lone surrogates too, which travel as U+FFFD), of any Unicode
// text, and some past 127 bytes (two-byte length prefixes).
const codeUnits = fc
  .array(fc.oneof(fc.integer({ min: 0xd800, max: 0xdfff }), fc.integer({ min: 0, max: 0xffff })), { maxLength: 40 })
  .map((units) => String.fromCharCode(...units));
const text = fc.oneof(codeUnits, fc.string({ unit: "binary", maxLength: 40 }), fc.string({ minLength: 120, maxLength: 300 }), fc.constant(""));
const agent = fc.option(fc.record({ agentId: text, systemId: text, keyId: text }), { nil: undefined });
const timestamp = fc.option(
  fc.record({ seconds: fc.bigInt({ min: 0n, max: 2n ** 32n - 1n }), nanos: fc.integer({ min: 0, max: 999_999_999 }) }),
  { nil: undefined },
);
const header = fc.record({
  messageId: text,
  messageType: fc.oneof(fc.constantFrom(0, MessageType.TASK_REQUEST, MessageType.TASK_COMPLETE), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
  protocolVersion: text,
  sender: agent,
  receiver: agent,
  sentAt: timestamp,
  expiresAt: timestamp,
  replyTo: text,
  taskId: text,
  sessionId: text,
  correlationId: text,
  trace: fc.option(fc.record({ traceparent: text, tracestate: text }), { nil: undefined }),
  idempotencyKey: text,
  payloadType: text,
  sequence: fc.oneof(fc.constantFrom(0n, 1n, 127n, 128n, 2n ** 32n - 1n), fc.bigInt({ min: 0n, max: 2n ** 32n - 1n })),
  // A confidential header: suite, key id, nonce, and wrapped keys (some long enough for two-byte lengths).
  confidential: fc.option(
    fc.record({
      suite: fc.constantFrom(0, 1, 7),
      taskKeyId: text,
      nonce: fc.uint8Array({ maxLength: 12 }),
      keys: fc.array(fc.record({ agentId: text, keyId: text, enc: fc.uint8Array({ maxLength: 32 }), ciphertext: fc.uint8Array({ maxLength: 200 }) }), { maxLength: 3 }),
    }),
    { nil: undefined },
  ),
});

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

describe("encodeHeader", () => {
  it("writes the bytes protobuf-es writes for the same Header", () => {
    fc.assert(
      fc.property(header, (init) => {
        const message = create(HeaderSchema, init as Parameters<typeof create<typeof HeaderSchema>>[1]);
        expect(hex(encodeHeader(message))).toBe(hex(toBinary(HeaderSchema, message)));
      }),
      { numRuns: 500 },
    );
  });

  it("leaves to protobuf-es what it does not cover: the same bytes, or the same refusal", () => {
    const base = { messageId: "m", sender: { agentId: "a" }, sentAt: { seconds: 1n } };
    const cases: Header[] = [
      create(HeaderSchema, { ...base, messageType: -1 as MessageType }),
      create(HeaderSchema, { ...base, messageType: 2 ** 31 as MessageType }),
      create(HeaderSchema, { ...base, sentAt: { seconds: 1n, nanos: 2 ** 31 } }),
      create(HeaderSchema, { ...base, sequence: 2n ** 32n }),
      create(HeaderSchema, { ...base, sequence: 2n ** 64n - 1n }),
      create(HeaderSchema, { ...base, sequence: -1n }),
      create(HeaderSchema, { ...base, sentAt: { seconds: -5n, nanos: 3 } }),
      create(HeaderSchema, { ...base, expiresAt: { seconds: 2n ** 40n } }),
      create(HeaderSchema, { ...base, expiresAt: { seconds: 1n, nanos: -1 } }),
    ];
    const unknownOnHeader = create(HeaderSchema, base);
    unknownOnHeader.$unknown = [{ no: 99, wireType: 0, data: new Uint8Array([7]) }];
    const unknownOnSender = create(HeaderSchema, base);
    unknownOnSender.sender!.$unknown = [{ no: 9, wireType: 0, data: new Uint8Array([1]) }];
    for (const message of [...cases, unknownOnHeader, unknownOnSender]) {
      let expected: string;
      try {
        expected = hex(toBinary(HeaderSchema, message));
      } catch (error) {
        // What protobuf-es refuses to encode (an int32 out of range), the encoder refuses the same way.
        expect(() => encodeHeader(message)).toThrow((error as Error).message);
        continue;
      }
      expect(hex(encodeHeader(message))).toBe(expected);
    }
  });

  it("is what seal signs: the sealed header bytes read back as the header it returns", () => {
    const key = generateKey();
    const { envelope, header: sealedHeader } = seal(
      {
        messageType: MessageType.TASK_ACK,
        payload: create(TaskAckPayloadSchema, { taskId: "t" }),
        sender: { agentId: "a", systemId: "s" },
        receiver: { agentId: "b" },
        taskId: "t",
        sequence: 3n,
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      },
      key,
    );
    expect(hex(envelope.header)).toBe(hex(toBinary(HeaderSchema, sealedHeader)));
    expect(fromBinary(HeaderSchema, envelope.header)).toEqual(sealedHeader);
    expect(envelope.header.buffer.byteLength).toBe(envelope.header.byteLength); // its own memory, not a slice of a shared pool
  });
});

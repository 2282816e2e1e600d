// The direct encoders write what protobuf-es writes: an Envelope for any
// envelope (empty and long fields with multi-byte length prefixes, any key
// id text, with and without a signature), and length-delimited fields for
// any field numbers and lengths.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, MessageType, SignatureAlgorithm, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import { generateKey } from "../src/crypto/keys.js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { delimitedFields, knownEncoding } from "../src/protocol/encoded.js";
import { encodeEnvelope, envelopeEncoding } from "../src/protocol/envelope-codec.js";
import { seal } from "../src/envelope/seal.js";
import { TaskAckPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";

// Lengths around 16,384 take a three-byte length prefix.
const bytes = fc.oneof(
  fc.uint8Array({ maxLength: 200 }),
  fc.tuple(fc.integer({ min: 16_000, max: 17_000 }), fc.integer({ min: 0, max: 255 })).map(([length, fill]) => new Uint8Array(length).fill(fill)),
);
const envelope = fc.record({
  header: bytes,
  payload: bytes,
  signature: fc.option(
    fc.record({
      algorithm: fc.oneof(fc.constantFrom(0, 1), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
      keyId: fc.string({ unit: "binary", maxLength: 60 }),
      value: fc.uint8Array({ maxLength: 64 }),
      publicKey: fc.uint8Array({ maxLength: 40 }),
    }),
    { nil: undefined },
  ),
});

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

describe("encodeEnvelope", () => {
  it("writes the bytes protobuf-es writes for the same Envelope", () => {
    fc.assert(
      fc.property(envelope, (init) => {
        const message = create(EnvelopeSchema, init);
        expect(hex(encodeEnvelope(message))).toBe(hex(toBinary(EnvelopeSchema, message)));
      }),
      { numRuns: 400 },
    );
  });

  it("leaves what it does not cover to protobuf-es: unknown fields, a negative enum", () => {
    const withUnknown = create(EnvelopeSchema, { header: new Uint8Array([1]), signature: { algorithm: SignatureAlgorithm.ED25519 } });
    withUnknown.$unknown = [{ no: 9, wireType: 0, data: new Uint8Array([5]) }];
    expect(hex(encodeEnvelope(withUnknown))).toBe(hex(toBinary(EnvelopeSchema, withUnknown)));
    const negative = create(EnvelopeSchema, { signature: { algorithm: -3 as SignatureAlgorithm, keyId: "k" } });
    expect(hex(encodeEnvelope(negative))).toBe(hex(toBinary(EnvelopeSchema, negative)));
  });

  it("encodes a sealed envelope once, and its bytes read back as the same envelope", () => {
    const key = generateKey();
    const { envelope: sealed } = seal(
      { messageType: MessageType.TASK_ACK, payload: create(TaskAckPayloadSchema, { taskId: "t" }), sender: { agentId: "a" }, receiver: { agentId: "b" }, taskId: "t" },
      key,
    );
    expect(knownEncoding(sealed)).toBeUndefined();
    const first = envelopeEncoding(sealed);
    expect(envelopeEncoding(sealed)).toBe(first);
    const back: Envelope = fromBinary(EnvelopeSchema, first);
    expect(Buffer.from(back.header)).toEqual(Buffer.from(sealed.header));
    expect(Buffer.from(back.signature!.value)).toEqual(Buffer.from(sealed.signature!.value));
    expect(first.buffer.byteLength).toBe(first.byteLength); // its own memory, not a slice of a shared pool
  });
});

describe("delimitedFields", () => {
  it("writes what BinaryWriter's tag().bytes() chain writes, for any field number and length", () => {
    const field = fc.tuple(fc.option(fc.integer({ min: 1, max: 2 ** 29 - 1 }), { nil: undefined }), bytes);
    fc.assert(
      fc.property(fc.array(field, { maxLength: 4 }), (fields) => {
        const writer = new BinaryWriter();
        for (const [no, value] of fields) {
          if (no !== undefined) writer.tag(no, WireType.LengthDelimited);
          writer.bytes(value);
        }
        expect(hex(delimitedFields(fields))).toBe(hex(writer.finish()));
      }),
      { numRuns: 300 },
    );
  });
});

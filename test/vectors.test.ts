// Every committed vector, through every Ed25519 implementation and through
// open(): the same files other languages check against.
import { fromJson, toBinary, create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EnvelopeSchema, HeaderSchema, SignatureAlgorithm } from "../gen/synapse/v1/envelope_pb.js";
import { ed25519Implementations } from "../src/crypto/ed25519.js";
import { fromHex, toHex } from "../src/crypto/encoding.js";
import { keyFromSeed, keyIdOf } from "../src/crypto/keys.js";
import { envelopeSigningInput } from "../src/envelope/pae.js";
import { open } from "../src/envelope/open.js";
import type { TrustPolicy } from "../src/envelope/trust.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { messageTypeInfo } from "../src/protocol/message-types.js";

interface RfcVector {
  name: string;
  secret_key: string;
  public_key: string;
  message: string;
  signature: string;
}
const rfc = JSON.parse(readFileSync(new URL("./vectors/rfc8032-ed25519.json", import.meta.url), "utf8")) as { vectors: RfcVector[] };
const envelopes = JSON.parse(readFileSync(new URL("./vectors/envelopes.json", import.meta.url), "utf8")) as {
  signing_domain: string;
  clock_skew_seconds: number;
  positive: Array<Record<string, unknown> & { name: string; seed: string; public_key: string; key_id: string; header_hex: string; payload_hex: string; signing_input_hex: string; signature_hex: string; receiver: string; verify_at: string; header: unknown; payload: unknown; payload_type: string; envelope: unknown }>;
  negative: Array<{ name: string; header_hex: string; payload_hex: string; signature_hex: string; verify_public_key: string; verify_at: string; expected_error: string }>;
};

/** Trusts exactly one key, as a receiver with a trust store would. */
function trustOnly(publicKeyHex: string): TrustPolicy {
  const publicKey = fromHex(publicKeyHex);
  const keyId = keyIdOf(publicKey);
  return {
    publicKeyFor: (id) => (id === keyId ? publicKey : undefined),
    check: (_agent, id) => (id === keyId ? { kind: "trusted" } : { kind: "unknown" }),
  };
}

describe("RFC 8032 Ed25519 vectors", () => {
  it("has all five vectors of section 7.1", () => {
    expect(rfc.vectors.map((v) => v.name)).toEqual(["TEST 1", "TEST 2", "TEST 3", "TEST 1024", "TEST SHA(abc)"]);
  });
  for (const ed of ed25519Implementations) {
    for (const vector of rfc.vectors) {
      it(`${ed.name}: ${vector.name}`, () => {
        const seed = fromHex(vector.secret_key);
        const message = fromHex(vector.message);
        expect(toHex(ed.publicKeyFromSeed(seed))).toBe(vector.public_key);
        expect(toHex(ed.sign(message, seed))).toBe(vector.signature);
        expect(ed.verify(message, fromHex(vector.signature), fromHex(vector.public_key))).toBe(true);
        const tampered = fromHex(vector.signature);
        tampered[0]! ^= 1;
        expect(ed.verify(message, tampered, fromHex(vector.public_key))).toBe(false);
      });
    }
  }
});

describe("envelope vectors", () => {
  it("uses the documented domain and skew", () => {
    expect(envelopes.signing_domain).toBe("synapse.v1.Envelope");
    expect(envelopes.clock_skew_seconds).toBe(300);
  });

  for (const vector of envelopes.positive) {
    describe(vector.name, () => {
      it("reproduces header and payload bytes from their JSON", () => {
        const header = fromJson(HeaderSchema, vector.header as never);
        expect(toHex(toBinary(HeaderSchema, header))).toBe(vector.header_hex);
        const info = messageTypeInfo(header.messageType)!;
        expect(info.payloadSchema.typeName).toBe(vector.payload_type);
        expect(toHex(toBinary(info.payloadSchema, fromJson(info.payloadSchema, vector.payload as never)))).toBe(vector.payload_hex);
      });

      it("reproduces the signing input, key id and signature with both implementations", () => {
        const signingInput = envelopeSigningInput(fromHex(vector.header_hex), fromHex(vector.payload_hex));
        expect(toHex(signingInput)).toBe(vector.signing_input_hex);
        const key = keyFromSeed(fromHex(vector.seed));
        expect(toHex(key.publicKey)).toBe(vector.public_key);
        expect(key.keyId).toBe(vector.key_id);
        for (const ed of ed25519Implementations) {
          expect(toHex(ed.sign(signingInput, key.seed))).toBe(vector.signature_hex);
          expect(ed.verify(signingInput, fromHex(vector.signature_hex), key.publicKey)).toBe(true);
        }
      });

      it("opens, from its JSON envelope, at verify_at", async () => {
        const envelope = fromJson(EnvelopeSchema, vector.envelope as never);
        const opened = await open(envelope, {
          trust: trustOnly(vector.public_key),
          self: vector.receiver,
          now: () => Date.parse(vector.verify_at),
        });
        expect(opened.header.messageId).toBe((vector.header as { messageId: string }).messageId);
        expect(opened.payload.$typeName).toBe(vector.payload_type);
      });
    });
  }

  for (const vector of envelopes.negative) {
    it(`refuses ${vector.name} with ${vector.expected_error}`, async () => {
      const publicKey = fromHex(vector.verify_public_key);
      const envelope = create(EnvelopeSchema, {
        header: fromHex(vector.header_hex),
        payload: fromHex(vector.payload_hex),
        signature: { algorithm: SignatureAlgorithm.ED25519, keyId: keyIdOf(publicKey), value: fromHex(vector.signature_hex) },
      });
      const attempt = open(envelope, {
        trust: trustOnly(vector.verify_public_key),
        self: "agent_executor",
        now: () => Date.parse(vector.verify_at),
      });
      await expect(attempt).rejects.toBeInstanceOf(ConnectError);
      const error = await attempt.catch((e: unknown) => e);
      expect(findErrorDetail(error)?.protocolCode).toBe(vector.expected_error);
      // The signature check alone gives the same verdict in every implementation.
      const signingInput = envelopeSigningInput(envelope.header, envelope.payload);
      const valid = vector.expected_error !== "signature_invalid";
      for (const ed of ed25519Implementations) expect(ed.verify(signingInput, fromHex(vector.signature_hex), publicKey), ed.name).toBe(valid);
    });
  }
});

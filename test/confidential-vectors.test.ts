// The confidential vectors (test/vectors/confidential.json) open as they
// should, and each negative one is refused with its code, through the same
// open() a server uses.
import { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SignedEncryptionKeySchema } from "../gen/synapse/v1/confidential_pb.js";
import { EnvelopeSchema, HeaderSchema, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorDetailSchema } from "../gen/synapse/v1/errors_pb.js";
import { nodeEd25519 } from "../src/crypto/ed25519.js";
import { encryptionKeyOf, EncryptionKeyRing } from "../src/crypto/encryption-keys.js";
import { aesGcmSeal, hkdfExpand, hkdfExtract, x25519PrivateKey } from "../src/crypto/hpke.js";
import { openResult, openSealedPayload, sealResult, unwrapRequestKey } from "../src/envelope/confidential.js";
import { verifyEncryptionKey } from "../src/envelope/encryption-binding.js";
import { open } from "../src/envelope/open.js";
import { envelopeSigningInput, pae } from "../src/envelope/pae.js";
import type { TrustPolicy } from "../src/envelope/trust.js";
import { messageTypeInfo } from "../src/protocol/message-types.js";

interface Party { agent_id: string; ed25519_seed: string; ed25519_public_key: string; key_id: string; x25519_private_key: string; x25519_public_key: string; encryption_key_id: string; encryption_key_binding_hex: string }
const vectors = JSON.parse(readFileSync(new URL("./vectors/confidential.json", import.meta.url), "utf8")) as {
  verify_at: string; task_id: string; task_key_hex: string; task_key_id: string;
  parties: Record<string, Party>;
  positive: Array<{ name: string; opener: string; envelope_hex: string; plaintext_payload_hex: string; inner_signature_hex: string; payload_type: string; payload: unknown }>;
  negative: Array<{ name: string; opener: string; envelope_hex: string; expected_error: string; zero_signature?: boolean; resign_with_seed?: string }>;
  result: { task_id: string; result_size: number; result_sha256: string; sealed_size: number; sealed_sha256: string; last_record_hex: string };
};
const hex = (text: string) => new Uint8Array(Buffer.from(text, "hex"));
const taskKey = hex(vectors.task_key_hex);
const at = Date.parse(vectors.verify_at);

/** Trust exactly the three parties' keys. */
const trust: TrustPolicy = {
  publicKeyFor: async (keyId) => Object.values(vectors.parties).find((p) => p.key_id === keyId) && hex(Object.values(vectors.parties).find((p) => p.key_id === keyId)!.ed25519_public_key),
  check: async (agentId, keyId) => {
    const party = Object.values(vectors.parties).find((p) => p.agent_id === agentId);
    if (party === undefined) return { kind: "unknown" };
    return party.key_id === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: party.key_id };
  },
} as TrustPolicy;

function openAs(opener: string, envelope: Envelope) {
  const party = vectors.parties[opener]!;
  const ring = new EncryptionKeyRing(encryptionKeyOf(hex(party.x25519_private_key), 0));
  return open(envelope, {
    trust,
    self: party.agent_id,
    now: () => at,
    confidential: { taskKey: (header) => (header.confidential!.keys.length > 0 ? unwrapRequestKey(header, party.agent_id, ring, at) : taskKey) },
  });
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    const detail = ConnectError.from(error).findDetails(ErrorDetailSchema)[0];
    return detail?.protocolCode ?? String(error);
  }
  return "opened";
}

/** The message re-sealed with the task key, its inner signature replaced (as one who holds the task key could). */
function resealed(envelope: Envelope, signature: Uint8Array): Envelope {
  const header = fromBinary(HeaderSchema, envelope.header);
  const { payload } = openSealedPayload(envelope.header, header, envelope.payload, taskKey);
  const key = hkdfExpand(hkdfExtract(new Uint8Array(0), taskKey), pae([new TextEncoder().encode("synapse.v1.MessageKey"), new TextEncoder().encode(header.messageId)]), 16);
  const sealed = aesGcmSeal(key, header.confidential!.nonce, pae([new TextEncoder().encode("synapse.v1.Confidential"), envelope.header]), Buffer.concat([signature, payload]));
  return create(EnvelopeSchema, { ...envelope, payload: sealed });
}

describe("confidential vectors", () => {
  for (const vector of vectors.positive) {
    it(`opens ${vector.name} and finds the signature inside`, async () => {
      const opened = await openAs(vector.opener, fromBinary(EnvelopeSchema, hex(vector.envelope_hex)));
      const schema = messageTypeInfo(opened.header.messageType)!.payloadSchema;
      expect(Buffer.from(toBinary(schema, opened.payload)).toString("hex")).toBe(vector.plaintext_payload_hex);
      expect(toJson(schema, opened.payload)).toEqual(vector.payload);
      expect(nodeEd25519.verify(envelopeSigningInput(opened.envelope.header, hex(vector.plaintext_payload_hex)), hex(vector.inner_signature_hex), opened.publicKey)).toBe(true);
      expect(opened.header.confidential?.taskKeyId).toBe(vectors.task_key_id);
      expect(timestampMs(opened.header.sentAt!)).toBeLessThan(at);
    });
  }

  for (const vector of vectors.negative) {
    it(`refuses ${vector.name} with ${vector.expected_error}`, async () => {
      let envelope = fromBinary(EnvelopeSchema, hex(vector.envelope_hex));
      if (vector.zero_signature) envelope = resealed(envelope, new Uint8Array(64));
      if (vector.resign_with_seed !== undefined) {
        const header = fromBinary(HeaderSchema, envelope.header);
        const { payload } = openSealedPayload(envelope.header, header, envelope.payload, taskKey);
        envelope = resealed(envelope, nodeEd25519.sign(envelopeSigningInput(envelope.header, payload), hex(vector.resign_with_seed)));
      }
      expect(await refusal(openAs(vector.opener, envelope))).toBe(vector.expected_error);
    });
  }

  it("verifies each party's encryption key binding, and refuses one moved to another agent", () => {
    for (const party of Object.values(vectors.parties)) {
      const signed = fromBinary(SignedEncryptionKeySchema, hex(party.encryption_key_binding_hex));
      const binding = verifyEncryptionKey(signed, party.agent_id, hex(party.ed25519_public_key));
      expect(binding.keyId).toBe(party.encryption_key_id);
      expect(() => verifyEncryptionKey(signed, "agent_someone_else", hex(party.ed25519_public_key))).toThrow(/bound to/);
    }
    const executor = vectors.parties.executor!;
    const outsider = vectors.parties.outsider!;
    expect(() => verifyEncryptionKey(fromBinary(SignedEncryptionKeySchema, hex(executor.encryption_key_binding_hex)), executor.agent_id, hex(outsider.ed25519_public_key))).toThrow(/signing key/);
  });

  it("opens the sealed result records and refuses a cut stream", () => {
    const plaintext = Buffer.from(Array.from({ length: vectors.result.result_size }, (_, i) => i % 251));
    expect(createHash("sha256").update(plaintext).digest("hex")).toBe(vectors.result.result_sha256);
    const sealed = sealResult(taskKey, vectors.result.task_id, plaintext);
    expect(sealed.byteLength).toBe(vectors.result.sealed_size);
    expect(createHash("sha256").update(sealed).digest("hex")).toBe(vectors.result.sealed_sha256);
    expect(Buffer.from(sealed.subarray(65_552)).toString("hex")).toBe(vectors.result.last_record_hex);
    expect(Buffer.from(openResult(taskKey, vectors.result.task_id, sealed)).equals(plaintext)).toBe(true);
    expect(() => openResult(taskKey, vectors.result.task_id, sealed.subarray(0, 65_552))).toThrow(/does not open/);
    expect(() => openResult(taskKey, "another-task", sealed)).toThrow(/does not open/);
  });
});

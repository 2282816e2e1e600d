// Verifying a signed envelope the way another language would, from
// docs/PROTOCOL.md alone: PAE over the exact header and payload bytes,
// Ed25519 with node:crypto, and the self-certifying agent id of a key.
import { createHash, createPublicKey, verify } from "node:crypto";

const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

const le64 = (n: number) => {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64LE(BigInt(n));
  return bytes;
};

/** PAE(["synapse.v1.Envelope", header, payload]) (docs/PROTOCOL.md §2.1). */
export function signingInput(header: Uint8Array, payload: Uint8Array): Buffer {
  const pieces = [Buffer.from("synapse.v1.Envelope"), Buffer.from(header), Buffer.from(payload)];
  return Buffer.concat([le64(pieces.length), ...pieces.flatMap((piece) => [le64(piece.length), piece])]);
}

export function verifies(envelope: { header: Uint8Array; payload: Uint8Array; signature?: { value: Uint8Array } }, publicKey: Uint8Array): boolean {
  const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519, publicKey]), format: "der", type: "spki" });
  return verify(null, signingInput(envelope.header, envelope.payload), key, envelope.signature!.value);
}

/** "agent_" and the first 32 hex digits of SHA-256 of the raw public key (docs/PROTOCOL.md §2.3). */
export const derivedId = (publicKey: Uint8Array) => `agent_${createHash("sha256").update(publicKey).digest("hex").slice(0, 32)}`;

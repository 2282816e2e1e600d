// A requester key in the browser: the identity the console acts as (agent
// id, key id, public key) and a signer. The agent id is always the
// self-certifying one derived from the key (docs/PROTOCOL.md §2.3), the key
// id its RFC 7638 thumbprint, both hashed with WebCrypto. How the private
// key is held is the signer's business: a non-extractable WebCrypto key
// (webcrypto-keys.ts) or, where the browser has no Ed25519 in WebCrypto, a
// tweetnacl key pair from a seed (here). No DOM here, so Node tests can
// check these against the server's own implementation.
import nacl from "tweetnacl";
import { sha256, toBase64Url, toHex, utf8 } from "./bytes.js";

/** How the private key is held. */
export type KeyBackend = "webcrypto" | "tweetnacl";

export interface ConsoleIdentity {
  readonly agentId: string;
  readonly systemId: string;
  /** The raw 32-byte public key. */
  readonly publicKey: Uint8Array;
  readonly keyId: string;
  readonly backend: KeyBackend;
  /** Ed25519 (RFC 8032, pure) over `data`: 64 bytes. */
  sign(data: Uint8Array): Promise<Uint8Array>;
}

export const CONSOLE_SYSTEM_ID = "synapse-console";

/** The OKP JWK of an Ed25519 public key (RFC 8037). */
export function publicJwk(publicKey: Uint8Array): { kty: "OKP"; crv: "Ed25519"; x: string } {
  return { kty: "OKP", crv: "Ed25519", x: toBase64Url(publicKey) };
}

/** RFC 7638 thumbprint: SHA-256 over exactly this member order, no whitespace. */
export async function keyIdOf(publicKey: Uint8Array): Promise<string> {
  return toBase64Url(await sha256(utf8(`{"crv":"Ed25519","kty":"OKP","x":"${toBase64Url(publicKey)}"}`)));
}

/** The self-certifying agent id of a public key: "agent_" and 32 hex digits of SHA-256(public key). */
export async function agentIdOf(publicKey: Uint8Array): Promise<string> {
  return `agent_${toHex(await sha256(Uint8Array.from(publicKey))).slice(0, 32)}`;
}

/** An identity for a public key and a signer: the ids are derived from the key. */
export async function identityOf(publicKey: Uint8Array, backend: KeyBackend, sign: (data: Uint8Array) => Promise<Uint8Array>): Promise<ConsoleIdentity> {
  if (publicKey.byteLength !== 32) throw new Error("an Ed25519 public key is 32 bytes");
  return { agentId: await agentIdOf(publicKey), systemId: CONSOLE_SYSTEM_ID, publicKey, keyId: await keyIdOf(publicKey), backend, sign };
}

/** The public key of a 32-byte seed. */
export function publicKeyOfSeed(seed: Uint8Array): Uint8Array {
  if (seed.byteLength !== nacl.sign.seedLength) throw new Error(`an Ed25519 private key (seed) is ${nacl.sign.seedLength} bytes`);
  return nacl.sign.keyPair.fromSeed(seed).publicKey;
}

/** The identity of a 32-byte seed, signing with tweetnacl (the portable implementation). */
export async function identityFromSeed(seed: Uint8Array): Promise<ConsoleIdentity> {
  const { publicKey, secretKey } = nacl.sign.keyPair.fromSeed(Uint8Array.from(seed));
  return identityOf(publicKey, "tweetnacl", async (data) => nacl.sign.detached(data, secretKey));
}

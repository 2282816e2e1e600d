// A requester key in the browser: the Ed25519 key pair (tweetnacl), its key
// id (the RFC 7638 thumbprint, docs/PROTOCOL.md §2.3, hashed with WebCrypto)
// and an agent id derived from the key. No DOM here, so Node tests can check
// these against the server's own implementation.
import nacl from "tweetnacl";
import { sha256, toBase64Url, toHex, utf8 } from "./bytes.js";

export interface ConsoleIdentity {
  readonly agentId: string;
  readonly systemId: string;
  /** tweetnacl's 64-byte secret key (seed followed by the public key). */
  readonly secretKey: Uint8Array;
  /** The raw 32-byte public key. */
  readonly publicKey: Uint8Array;
  readonly keyId: string;
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

/** The identity of a 32-byte seed; without an agent id, one derived from the key. */
export async function identityFromSeed(seed: Uint8Array, agentId?: string): Promise<ConsoleIdentity> {
  const { publicKey, secretKey } = nacl.sign.keyPair.fromSeed(seed);
  // Self-certifying, as the Node side's defaultAgentId: "agent_" and 32 hex digits of SHA-256(public key).
  const id = agentId ?? `agent_${toHex(await sha256(Uint8Array.from(publicKey))).slice(0, 32)}`;
  return { agentId: id, systemId: CONSOLE_SYSTEM_ID, secretKey, publicKey, keyId: await keyIdOf(publicKey) };
}

// An agent's Ed25519 identity key: generation, the stable key id, and the
// on-disk form (PKCS#8 PEM, mode 0600) that openssl and every language read.
import { createHash, createPrivateKey, randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { defaultEd25519, pkcs8FromSeed, PUBLIC_KEY_LENGTH, SEED_LENGTH, type Ed25519 } from "./ed25519.js";
import { fromBase64Url, toBase64Url } from "./encoding.js";

/** An Ed25519 key pair, as an agent signs with it. */
export interface AgentKey {
  /** The 32-byte private seed. Never leaves the process except to its key file. */
  readonly seed: Uint8Array;
  /** The raw 32-byte public key. */
  readonly publicKey: Uint8Array;
  /** RFC 7638 JWK thumbprint of the public key; see keyIdOf. */
  readonly keyId: string;
}

/** The public key as an OKP JWK (RFC 8037). */
export function publicJwk(publicKey: Uint8Array): { kty: "OKP"; crv: "Ed25519"; x: string } {
  return { kty: "OKP", crv: "Ed25519", x: toBase64Url(publicKey) };
}

/**
 * The key id: the RFC 7638 thumbprint of the OKP JWK, i.e. base64url (no
 * padding) of SHA-256 over `{"crv":"Ed25519","kty":"OKP","x":"<x>"}`
 * (members in lexicographic order, no whitespace). Any JOSE library computes
 * the same value, and it doubles as the JWT `kid`.
 */
export function keyIdOf(publicKey: Uint8Array): string {
  if (publicKey.byteLength !== PUBLIC_KEY_LENGTH) {
    throw new RangeError(`Ed25519 public key must be ${PUBLIC_KEY_LENGTH} bytes`);
  }
  const canonical = `{"crv":"Ed25519","kty":"OKP","x":"${toBase64Url(publicKey)}"}`;
  return createHash("sha256").update(canonical).digest("base64url");
}

/** Hex digits of SHA-256(public key) in a self-certifying agent id: 128 bits. */
const SELF_CERTIFYING_HEX = 32;

/**
 * The agent id derived from a public key: "agent_" and the first 32 hex
 * digits (128 bits) of SHA-256 over the raw 32-byte key. No other key
 * yields it (finding one is a 2^128 search), so a receiver may trust it on
 * first use without anyone vouching for the name.
 */
export function selfCertifyingAgentId(publicKey: Uint8Array): string {
  return `agent_${createHash("sha256").update(publicKey).digest("hex").slice(0, SELF_CERTIFYING_HEX)}`;
}

/** Whether an agent id is the one derived from this public key. */
export function isSelfCertifying(agentId: string, publicKey: Uint8Array): boolean {
  return publicKey.byteLength === PUBLIC_KEY_LENGTH && agentId === selfCertifyingAgentId(publicKey);
}

/** The key whose private seed (32 bytes) is `seed`. */
export function keyFromSeed(seed: Uint8Array, ed: Ed25519 = defaultEd25519): AgentKey {
  if (seed.byteLength !== SEED_LENGTH) {
    throw new RangeError(`Ed25519 seed must be ${SEED_LENGTH} bytes`);
  }
  const publicKey = ed.publicKeyFromSeed(seed);
  return { seed: Uint8Array.from(seed), publicKey, keyId: keyIdOf(publicKey) };
}

/** A new random key. */
export function generateKey(): AgentKey {
  return keyFromSeed(new Uint8Array(randomBytes(SEED_LENGTH)));
}

/** The private key as PKCS#8 PEM, the form `openssl` and every language read (keep it secret). */
export function keyToPem(key: AgentKey): string {
  const der = pkcs8FromSeed(key.seed).toString("base64");
  return `-----BEGIN PRIVATE KEY-----\n${der}\n-----END PRIVATE KEY-----\n`;
}

/** Reads an Ed25519 private key in PKCS#8 PEM (as {@link keyToPem} writes it, or `openssl genpkey -algorithm ed25519`). */
export function keyFromPem(pem: string): AgentKey {
  const keyObject = createPrivateKey({ key: pem, format: "pem" });
  if (keyObject.asymmetricKeyType !== "ed25519") {
    throw new TypeError(`not an Ed25519 key: ${keyObject.asymmetricKeyType ?? "unknown"}`);
  }
  const jwk = keyObject.export({ format: "jwk" });
  if (typeof jwk.d !== "string") throw new TypeError("private key has no seed");
  return keyFromSeed(fromBase64Url(jwk.d));
}

/** Writes the key so that only its owner can read it. */
export async function saveKey(path: string, key: AgentKey): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFile(path, keyToPem(key), { mode: 0o600 });
  await chmod(path, 0o600); // writeFile's mode applies only to new files
}

export async function loadKey(path: string): Promise<AgentKey> {
  return keyFromPem(await readFile(path, "utf8"));
}

/** Loads the key at path, creating and saving a new one if there is none. */
export async function loadOrCreateKey(path: string): Promise<{ key: AgentKey; created: boolean }> {
  try {
    return { key: await loadKey(path), created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const key = generateKey();
  await saveKey(path, key);
  return { key, created: true };
}

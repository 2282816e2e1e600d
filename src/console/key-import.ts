// Reads a private key the user imports into the console, in the forms the
// `synapse` command and JOSE libraries write: a PKCS#8 PEM ("-----BEGIN
// PRIVATE KEY-----", the agent.key of `synapse keygen`, RFC 8410) or an OKP
// JWK with "d" (RFC 8037). Returns the 32-byte seed; nothing else is kept.
import { bytesEqual, fromBase64Url } from "./bytes.js";
import { publicKeyOfSeed } from "./keys.js";

/** 1.3.101.112, id-Ed25519 (RFC 8410), DER-encoded. */
const ED25519_OID = Uint8Array.of(0x2b, 0x65, 0x70);

export class KeyImportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeyImportError";
  }
}

interface Tlv {
  tag: number;
  value: Uint8Array;
  /** Offset just past this element. */
  end: number;
}

/** One DER element at `offset` (definite lengths only, as DER requires). */
function readTlv(bytes: Uint8Array, offset: number): Tlv {
  const tag = bytes[offset];
  let length = bytes[offset + 1];
  if (tag === undefined || length === undefined) throw new KeyImportError("the key's DER is cut short");
  let start = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 2) throw new KeyImportError("the key's DER has an unsupported length");
    length = 0;
    for (let i = 0; i < count; i++) length = (length << 8) | (bytes[start + i] ?? 0);
    start += count;
  }
  const end = start + length;
  if (end > bytes.byteLength) throw new KeyImportError("the key's DER is cut short");
  return { tag, value: bytes.subarray(start, end), end };
}

/** The seed inside a PKCS#8 OneAsymmetricKey (v1 or v2) for Ed25519. */
export function seedFromPkcs8(der: Uint8Array): Uint8Array {
  const outer = readTlv(der, 0);
  if (outer.tag !== 0x30) throw new KeyImportError("not a PKCS#8 private key (no SEQUENCE)");
  const body = outer.value;
  const version = readTlv(body, 0);
  if (version.tag !== 0x02) throw new KeyImportError("not a PKCS#8 private key (no version)");
  const algorithm = readTlv(body, version.end);
  if (algorithm.tag !== 0x30) throw new KeyImportError("not a PKCS#8 private key (no algorithm)");
  const oid = readTlv(algorithm.value, 0);
  if (oid.tag !== 0x06 || !bytesEqual(oid.value, ED25519_OID)) throw new KeyImportError("not an Ed25519 key (the algorithm is another)");
  const privateKey = readTlv(body, algorithm.end);
  if (privateKey.tag !== 0x04) throw new KeyImportError("not a PKCS#8 private key (no private key)");
  const seed = readTlv(privateKey.value, 0);
  if (seed.tag !== 0x04 || seed.value.byteLength !== 32) throw new KeyImportError("the Ed25519 private key is not 32 bytes");
  return Uint8Array.from(seed.value);
}

function base64Decode(text: string): Uint8Array {
  try {
    return Uint8Array.from(atob(text.replace(/\s+/g, "")), (char) => char.charCodeAt(0));
  } catch {
    throw new KeyImportError("the PEM body is not base64");
  }
}

function seedFromPem(text: string): Uint8Array {
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----/.test(text)) {
    throw new KeyImportError("the key is encrypted: decrypt it first (openssl pkcs8 -in KEY -out PLAIN.pem)");
  }
  const match = /-----BEGIN PRIVATE KEY-----([\s\S]*?)-----END PRIVATE KEY-----/.exec(text);
  if (match === null) throw new KeyImportError("a PEM key must be a PKCS#8 \"PRIVATE KEY\" (as agent.key is)");
  return seedFromPkcs8(base64Decode(match[1] ?? ""));
}

function seedFromJwk(text: string): Uint8Array {
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new KeyImportError("the key is neither a PEM nor a JSON Web Key");
  }
  if (typeof jwk !== "object" || jwk === null) throw new KeyImportError("a JSON Web Key is a JSON object");
  const { kty, crv, d, x } = jwk as Record<string, unknown>;
  if (kty !== "OKP" || crv !== "Ed25519") throw new KeyImportError('a JSON Web Key must have "kty": "OKP" and "crv": "Ed25519"');
  if (typeof d !== "string") throw new KeyImportError('the JSON Web Key has no private part ("d"): a public key cannot sign');
  let seed: Uint8Array;
  try {
    seed = fromBase64Url(d);
  } catch {
    throw new KeyImportError('"d" is not base64url');
  }
  if (seed.byteLength !== 32) throw new KeyImportError('"d" is not 32 bytes');
  if (x !== undefined) {
    if (typeof x !== "string" || !bytesEqual(fromBase64Url(x), publicKeyOfSeed(seed))) throw new KeyImportError('"x" is not the public key of "d"');
  }
  return seed;
}

/** The 32-byte seed of a PEM or JWK private key, or a KeyImportError saying what is wrong. */
export function parsePrivateKey(text: string): Uint8Array {
  const trimmed = text.trim();
  if (trimmed === "") throw new KeyImportError("paste a key, or choose its file");
  return trimmed.startsWith("-----") ? seedFromPem(trimmed) : seedFromJwk(trimmed);
}

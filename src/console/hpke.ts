// HPKE (RFC 9180) in the browser, the one suite confidential tasks use: base
// mode, single shot, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM,
// composed from WebCrypto's X25519 (deriveBits), HMAC-SHA256 and AES-GCM as
// RFC 9180 §4.1, §5.1 and §6.1 lay down; the same bytes as
// src/crypto/hpke.ts computes with node:crypto. Also the HKDF and AES-GCM
// that seal a confidential task's messages and results (§9.2). No DOM here.

/** A WebCrypto key (spelled without DOM type names, so Node's tests compile this file too). */
export type WebKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;
type KeyPair = { privateKey: WebKey; publicKey: WebKey };

const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
const AEAD_ID = 0x0001;
const N_SECRET = 32;
const N_KEY = 16;
const N_NONCE = 12;
const TAG_BYTES = 16;
export const X25519_KEY_BYTES = 32;
const X25519 = { name: "X25519" } as const;

const ascii = (text: string) => new TextEncoder().encode(text);
const i2osp2 = (value: number) => Uint8Array.of(value >> 8, value & 0xff);
const EMPTY = new Uint8Array(0);

/** The pieces, one after the other (in a fresh ArrayBuffer, as WebCrypto wants). */
export function concat(...pieces: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(pieces.reduce((sum, piece) => sum + piece.byteLength, 0));
  let at = 0;
  for (const piece of pieces) {
    out.set(piece, at);
    at += piece.byteLength;
  }
  return out;
}

const KEM_SUITE = concat(ascii("KEM"), i2osp2(KEM_ID));
const HPKE_SUITE = concat(ascii("HPKE"), i2osp2(KEM_ID), i2osp2(KDF_ID), i2osp2(AEAD_ID));
const VERSION = ascii("HPKE-v1");

async function hmac(key: Uint8Array, data: Uint8Array): Promise<Uint8Array> {
  // An empty HMAC key is HashLen zero bytes (RFC 5869's empty salt); WebCrypto refuses a zero-length key.
  const raw = key.byteLength === 0 ? new Uint8Array(32) : concat(key);
  const imported = await crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", imported, concat(data)));
}

/** HKDF-Extract (RFC 5869 §2.2). */
export const hkdfExtract = (salt: Uint8Array, ikm: Uint8Array) => hmac(salt, ikm);

/** HKDF-Expand (RFC 5869 §2.3). */
export async function hkdfExpand(prk: Uint8Array, info: Uint8Array, length: number): Promise<Uint8Array> {
  const blocks: Uint8Array[] = [];
  let previous: Uint8Array = EMPTY;
  for (let i = 1, have = 0; have < length; i++) {
    previous = await hmac(prk, concat(previous, info, Uint8Array.of(i)));
    blocks.push(previous);
    have += previous.byteLength;
  }
  return concat(...blocks).subarray(0, length);
}

/** HKDF-SHA256 with an empty salt, as one WebCrypto deriveBits. */
export async function hkdf(ikm: Uint8Array, info: Uint8Array, length: number): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", concat(ikm), "HKDF", false, ["deriveBits"]);
  return new Uint8Array(await crypto.subtle.deriveBits({ name: "HKDF", hash: "SHA-256", salt: EMPTY, info: concat(info) }, key, length * 8));
}

const labeledExtract = (suite: Uint8Array, salt: Uint8Array, label: string, ikm: Uint8Array) => hkdfExtract(salt, concat(VERSION, suite, ascii(label), ikm));
const labeledExpand = (suite: Uint8Array, prk: Uint8Array, label: string, info: Uint8Array, length: number) =>
  hkdfExpand(prk, concat(i2osp2(length), VERSION, suite, ascii(label), info), length);

/** AES-128-GCM seal: ciphertext followed by the 16-byte tag. */
export async function aesGcmSeal(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, plaintext: Uint8Array): Promise<Uint8Array> {
  const imported = await crypto.subtle.importKey("raw", concat(key), "AES-GCM", false, ["encrypt"]);
  return new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv: concat(nonce), additionalData: concat(aad), tagLength: 128 }, imported, concat(plaintext)));
}

/** AES-128-GCM open; undefined when the tag does not verify. */
export async function aesGcmOpen(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, sealed: Uint8Array): Promise<Uint8Array | undefined> {
  if (sealed.byteLength < TAG_BYTES || nonce.byteLength !== N_NONCE) return undefined;
  const imported = await crypto.subtle.importKey("raw", concat(key), "AES-GCM", false, ["decrypt"]);
  try {
    return new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: concat(nonce), additionalData: concat(aad), tagLength: 128 }, imported, concat(sealed)));
  } catch {
    return undefined;
  }
}

// X25519 private keys as WebCrypto imports them: raw bytes behind the fixed PKCS#8 prefix (RFC 8410).
const PKCS8_PREFIX = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20]);

/** Whether this browser does X25519 in WebCrypto (tried once, with throwaway keys). */
export async function webCryptoHasX25519(): Promise<boolean> {
  try {
    const pair = (await crypto.subtle.generateKey(X25519, false, ["deriveBits"])) as KeyPair;
    await crypto.subtle.deriveBits({ name: "X25519", public: pair.publicKey }, pair.privateKey, 256);
    return true;
  } catch {
    return false;
  }
}

/** An X25519 key pair; the private half non-extractable unless `extractable`. */
export async function generateX25519(extractable = false): Promise<{ privateKey: WebKey; publicKey: Uint8Array }> {
  const pair = (await crypto.subtle.generateKey(X25519, extractable, ["deriveBits"])) as KeyPair;
  return { privateKey: pair.privateKey, publicKey: new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)) };
}

/** Imports a raw 32-byte X25519 private key (non-extractable). */
export function importX25519Private(raw: Uint8Array): Promise<WebKey> {
  if (raw.byteLength !== X25519_KEY_BYTES) throw new RangeError(`an X25519 private key is ${X25519_KEY_BYTES} bytes`);
  return crypto.subtle.importKey("pkcs8", concat(PKCS8_PREFIX, raw), X25519, false, ["deriveBits"]);
}

/** X25519(private, public); undefined for a public key WebCrypto refuses or a low-order point (RFC 9180 §7.1.4: abort). */
async function dh(privateKey: WebKey, publicKey: Uint8Array): Promise<Uint8Array | undefined> {
  try {
    const imported = await crypto.subtle.importKey("raw", concat(publicKey), X25519, false, []);
    const shared = new Uint8Array(await crypto.subtle.deriveBits({ name: "X25519", public: imported }, privateKey, 256));
    return shared.every((byte) => byte === 0) ? undefined : shared;
  } catch {
    return undefined;
  }
}

async function sharedSecret(dhValue: Uint8Array, enc: Uint8Array, pkR: Uint8Array): Promise<Uint8Array> {
  const prk = await labeledExtract(KEM_SUITE, EMPTY, "eae_prk", dhValue);
  return labeledExpand(KEM_SUITE, prk, "shared_secret", concat(enc, pkR), N_SECRET);
}

async function keySchedule(shared: Uint8Array, info: Uint8Array): Promise<{ key: Uint8Array; nonce: Uint8Array }> {
  const pskIdHash = await labeledExtract(HPKE_SUITE, EMPTY, "psk_id_hash", EMPTY);
  const infoHash = await labeledExtract(HPKE_SUITE, EMPTY, "info_hash", info);
  const context = concat(Uint8Array.of(0), pskIdHash, infoHash); // mode_base = 0
  const secret = await labeledExtract(HPKE_SUITE, shared, "secret", EMPTY);
  return { key: await labeledExpand(HPKE_SUITE, secret, "key", context, N_KEY), nonce: await labeledExpand(HPKE_SUITE, secret, "base_nonce", context, N_NONCE) };
}

/** SealBase (RFC 9180 §6.1) to a raw X25519 public key, with a fresh ephemeral key. */
export async function hpkeSeal(recipient: Uint8Array, info: Uint8Array, aad: Uint8Array, plaintext: Uint8Array): Promise<{ enc: Uint8Array; ciphertext: Uint8Array }> {
  if (recipient.byteLength !== X25519_KEY_BYTES) throw new RangeError(`an X25519 public key is ${X25519_KEY_BYTES} bytes`);
  const ephemeral = await generateX25519();
  const shared = await dh(ephemeral.privateKey, recipient);
  if (shared === undefined) throw new Error("the recipient's X25519 key is not a usable public key");
  const { key, nonce } = await keySchedule(await sharedSecret(shared, ephemeral.publicKey, recipient), info);
  return { enc: ephemeral.publicKey, ciphertext: await aesGcmSeal(key, nonce, aad, plaintext) };
}

/** OpenBase (RFC 9180 §6.1) with the recipient's private key and its raw public key; undefined when it does not open. */
export async function hpkeOpen(recipient: WebKey, recipientPublicKey: Uint8Array, enc: Uint8Array, info: Uint8Array, aad: Uint8Array, ciphertext: Uint8Array): Promise<Uint8Array | undefined> {
  if (enc.byteLength !== X25519_KEY_BYTES) return undefined;
  const shared = await dh(recipient, enc);
  if (shared === undefined) return undefined;
  const { key, nonce } = await keySchedule(await sharedSecret(shared, enc, recipientPublicKey), info);
  return aesGcmOpen(key, nonce, aad, ciphertext);
}

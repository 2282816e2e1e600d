// HPKE (RFC 9180), the one suite confidential tasks use: base mode, single
// shot, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM. The primitives
// (X25519, HMAC-SHA256, AES-GCM) are node:crypto's; this file only composes
// them as RFC 9180 §4.1, §5.1 and §6.1 lay down, on raw 32-byte keys.
// @hpke/core computes the same bytes (the tests check both ways) but costs
// about 1.5 ms of CPU per open on Node 20 (each step an asynchronous
// WebCrypto call) against about 0.1 ms here, once per confidential task on
// the executor; X25519 key objects alone (node:crypto's import and export)
// cost 0.1 ms each, hence libsodium's X25519 where its addon loads.
import { createCipheriv, createDecipheriv, createHmac, createPrivateKey, createPublicKey, diffieHellman, randomBytes, type KeyObject } from "node:crypto";
import { sodiumNative } from "./sodium.js";

const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
const AEAD_ID = 0x0001;
const N_SECRET = 32;
const N_KEY = 16;
const N_NONCE = 12;
const TAG_BYTES = 16;
/** Length of an X25519 key and of HPKE's `enc` for it. */
export const X25519_KEY_BYTES = 32;

const ascii = (text: string) => Buffer.from(text, "latin1");
const i2osp2 = (value: number) => Buffer.from([value >> 8, value & 0xff]);
const KEM_SUITE = Buffer.concat([ascii("KEM"), i2osp2(KEM_ID)]);
const HPKE_SUITE = Buffer.concat([ascii("HPKE"), i2osp2(KEM_ID), i2osp2(KDF_ID), i2osp2(AEAD_ID)]);
const VERSION = ascii("HPKE-v1");
const EMPTY = Buffer.alloc(0);

const hmac = (key: Uint8Array, data: Uint8Array) => createHmac("sha256", key).update(data).digest();

/** HKDF-Extract (RFC 5869 §2.2); an empty salt is HashLen zero bytes, which HMAC pads alike. */
export const hkdfExtract = (salt: Uint8Array, ikm: Uint8Array): Buffer => hmac(salt, ikm);

/** HKDF-Expand (RFC 5869 §2.3) for at most 255 blocks. */
export function hkdfExpand(prk: Uint8Array, info: Uint8Array, length: number): Buffer {
  const blocks: Buffer[] = [];
  let previous = EMPTY;
  for (let i = 1, have = 0; have < length; i++) {
    previous = hmac(prk, Buffer.concat([previous, info, Buffer.from([i])]));
    blocks.push(previous);
    have += previous.byteLength;
  }
  return Buffer.concat(blocks).subarray(0, length);
}

const labeledExtract = (suite: Buffer, salt: Uint8Array, label: string, ikm: Uint8Array) => hkdfExtract(salt, Buffer.concat([VERSION, suite, ascii(label), ikm]));
const labeledExpand = (suite: Buffer, prk: Uint8Array, label: string, info: Uint8Array, length: number) =>
  hkdfExpand(prk, Buffer.concat([i2osp2(length), VERSION, suite, ascii(label), info]), length);

// X25519 keys as node:crypto takes them: raw bytes behind fixed DER prefixes (RFC 8410).
const PKCS8_PREFIX = Buffer.from("302e020100300506032b656e04220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b656e032100", "hex");

/** An X25519 private key as a node:crypto KeyObject (for PEM files), from its 32 raw bytes. */
export function x25519PrivateKey(raw: Uint8Array): KeyObject {
  if (raw.byteLength !== X25519_KEY_BYTES) throw new RangeError(`an X25519 private key is ${X25519_KEY_BYTES} bytes`);
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, raw]), format: "der", type: "pkcs8" });
}

/** The raw 32 bytes of an X25519 private KeyObject. */
export function rawPrivateKey(key: KeyObject): Uint8Array {
  return new Uint8Array(key.export({ format: "der", type: "pkcs8" }).subarray(PKCS8_PREFIX.byteLength));
}

/** X25519 on raw 32-byte keys: libsodium's when its addon loads (no key objects to build), else node:crypto's. */
interface X25519 {
  publicKeyOf(secret: Uint8Array): Uint8Array;
  /** The shared secret; undefined for a low-order point (an all-zero result). */
  shared(secret: Uint8Array, publicKey: Uint8Array): Uint8Array | undefined;
}

interface SodiumX25519 {
  crypto_scalarmult(q: Uint8Array, n: Uint8Array, p: Uint8Array): void;
  crypto_scalarmult_base(q: Uint8Array, n: Uint8Array): void;
}

function sodiumX25519(): X25519 | undefined {
  const sodium = sodiumNative<SodiumX25519>();
  if (sodium === undefined) return undefined;
  return {
    publicKeyOf(secret) {
      const out = new Uint8Array(X25519_KEY_BYTES);
      sodium.crypto_scalarmult_base(out, secret);
      return out;
    },
    shared(secret, publicKey) {
      const out = new Uint8Array(X25519_KEY_BYTES);
      try {
        sodium.crypto_scalarmult(out, secret, publicKey);
      } catch {
        return undefined; // libsodium refuses an all-zero result
      }
      return out;
    },
  };
}

const nodeX25519: X25519 = {
  publicKeyOf(secret) {
    return new Uint8Array(createPublicKey(x25519PrivateKey(secret)).export({ format: "der", type: "spki" }).subarray(SPKI_PREFIX.byteLength));
  },
  shared(secret, publicKey) {
    try {
      return new Uint8Array(diffieHellman({ privateKey: x25519PrivateKey(secret), publicKey: createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: "der", type: "spki" }) }));
    } catch {
      return undefined; // OpenSSL refuses an all-zero result
    }
  },
};

/** The X25519 in use. */
export const x25519: X25519 = sodiumX25519() ?? nodeX25519;

/** A new random X25519 private key (RFC 9180 §7.1.3: 32 random bytes; X25519 clamps them). */
export function generateX25519(): Uint8Array {
  return new Uint8Array(randomBytes(X25519_KEY_BYTES));
}

/** DeriveKeyPair for X25519 (RFC 9180 §7.1.3): the private key made from input keying material. */
export function deriveX25519(ikm: Uint8Array): Uint8Array {
  const prk = labeledExtract(KEM_SUITE, EMPTY, "dkp_prk", ikm);
  return new Uint8Array(labeledExpand(KEM_SUITE, prk, "sk", EMPTY, 32));
}

function sharedSecret(dh: Buffer, enc: Uint8Array, pkR: Uint8Array): Buffer {
  const prk = labeledExtract(KEM_SUITE, EMPTY, "eae_prk", dh);
  return labeledExpand(KEM_SUITE, prk, "shared_secret", Buffer.concat([enc, pkR]), N_SECRET);
}

// psk_id_hash for the base mode (no PSK): the same for every message.
const PSK_ID_HASH = labeledExtract(HPKE_SUITE, EMPTY, "psk_id_hash", EMPTY);

function keySchedule(shared: Buffer, info: Uint8Array): { key: Buffer; nonce: Buffer } {
  const infoHash = labeledExtract(HPKE_SUITE, EMPTY, "info_hash", info);
  const context = Buffer.concat([Buffer.from([0]), PSK_ID_HASH, infoHash]); // mode_base = 0
  const secret = labeledExtract(HPKE_SUITE, shared, "secret", EMPTY);
  return { key: labeledExpand(HPKE_SUITE, secret, "key", context, N_KEY), nonce: labeledExpand(HPKE_SUITE, secret, "base_nonce", context, N_NONCE) };
}

/** AES-128-GCM seal: ciphertext followed by the 16-byte tag. */
export function aesGcmSeal(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, plaintext: Uint8Array): Buffer {
  const cipher = createCipheriv("aes-128-gcm", key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
}

/** AES-128-GCM open; undefined when the tag does not verify (or the input is shorter than a tag). */
export function aesGcmOpen(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, sealed: Uint8Array): Buffer | undefined {
  if (sealed.byteLength < TAG_BYTES || nonce.byteLength !== N_NONCE) return undefined;
  const decipher = createDecipheriv("aes-128-gcm", key, nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(sealed.byteLength - TAG_BYTES));
  const body = decipher.update(sealed.subarray(0, sealed.byteLength - TAG_BYTES));
  try {
    return Buffer.concat([body, decipher.final()]);
  } catch {
    return undefined;
  }
}

export interface HpkeSealed {
  /** The encapsulated key: the ephemeral X25519 public key, 32 bytes. */
  enc: Buffer;
  /** The AEAD ciphertext and tag. */
  ciphertext: Buffer;
}

/**
 * SealBase (RFC 9180 §6.1) to `recipient` (its raw public key). `ephemeral`
 * fixes the ephemeral private key, for test vectors only; by default it is fresh.
 */
export function hpkeSeal(recipient: Uint8Array, info: Uint8Array, aad: Uint8Array, plaintext: Uint8Array, ephemeral: Uint8Array = generateX25519()): HpkeSealed {
  if (recipient.byteLength !== X25519_KEY_BYTES) throw new RangeError(`an X25519 public key is ${X25519_KEY_BYTES} bytes`);
  const dh = x25519.shared(ephemeral, recipient);
  if (dh === undefined) throw new RangeError("the recipient's X25519 key is a low-order point");
  const enc = Buffer.from(x25519.publicKeyOf(ephemeral));
  const { key, nonce } = keySchedule(sharedSecret(Buffer.from(dh), enc, recipient), info);
  return { enc, ciphertext: aesGcmSeal(key, nonce, aad, plaintext) };
}

/** OpenBase (RFC 9180 §6.1) with the recipient's raw private and public keys; undefined when it does not open. */
export function hpkeOpen(secret: Uint8Array, publicKey: Uint8Array, enc: Uint8Array, info: Uint8Array, aad: Uint8Array, ciphertext: Uint8Array): Buffer | undefined {
  if (enc.byteLength !== X25519_KEY_BYTES) return undefined;
  const dh = x25519.shared(secret, enc);
  if (dh === undefined) return undefined; // a low-order point: RFC 9180 §7.1.4 says to abort
  const { key, nonce } = keySchedule(sharedSecret(Buffer.from(dh), enc, publicKey), info);
  return aesGcmOpen(key, nonce, aad, ciphertext);
}

// Ed25519 (RFC 8032) behind one small interface, with three implementations
// that produce identical signatures: libsodium (sodium-native, the fastest)
// where its prebuilt addon loads, node:crypto (OpenSSL) otherwise, and
// tweetnacl (pure JS) as the portable reference for browsers.
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import nacl from "tweetnacl";
import { KeyCache } from "./key-cache.js";
import { PUBLIC_KEY_LENGTH, SEED_LENGTH, SIGNATURE_LENGTH, type Ed25519 } from "./ed25519-interface.js";
import { loadSodiumEd25519 } from "./sodium.js";

export { PUBLIC_KEY_LENGTH, SEED_LENGTH, SIGNATURE_LENGTH, type Ed25519 };

// DER prefixes that turn raw Ed25519 keys into PKCS#8 / SPKI structures
// (RFC 8410), the only raw-key import node:crypto offers.
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

export function pkcs8FromSeed(seed: Uint8Array): Buffer {
  return Buffer.concat([PKCS8_PREFIX, seed]);
}

function checkLength(bytes: Uint8Array, length: number, what: string): void {
  if (bytes.byteLength !== length) {
    throw new RangeError(`${what} must be ${length} bytes, got ${bytes.byteLength}`);
  }
}

const privateKeys = new KeyCache<KeyObject>(64);
// tweetnacl expands a seed into its 64-byte secret key with a SHA-512 and a
// scalar multiplication; doing that once per seed halves the cost of a signature.
const naclSecretKeys = new KeyCache<Uint8Array>(64);
const publicKeys = new KeyCache<KeyObject>(4096);

/** The node:crypto key of a seed, cached (for other node:crypto users such as JWT signing). */
export function privateKeyObject(seed: Uint8Array): KeyObject {
  checkLength(seed, SEED_LENGTH, "Ed25519 seed");
  return privateKeys.get(Buffer.from(seed).toString("base64"), () =>
    createPrivateKey({ key: pkcs8FromSeed(seed), format: "der", type: "pkcs8" }),
  );
}

/** The node:crypto key of a raw public key, cached. */
export function publicKeyObject(publicKey: Uint8Array): KeyObject {
  return publicKeys.get(Buffer.from(publicKey).toString("base64"), () =>
    createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: "der", type: "spki" }),
  );
}

export const nodeEd25519: Ed25519 = {
  name: "node:crypto",
  publicKeyFromSeed(seed) {
    const spki = createPublicKey(privateKeyObject(seed)).export({ format: "der", type: "spki" });
    return new Uint8Array(spki.subarray(SPKI_PREFIX.length));
  },
  sign(message, seed) {
    return new Uint8Array(sign(null, message, privateKeyObject(seed)));
  },
  verify(message, signature, publicKey) {
    if (signature.byteLength !== SIGNATURE_LENGTH || publicKey.byteLength !== PUBLIC_KEY_LENGTH) {
      return false;
    }
    try {
      return verify(null, message, publicKeyObject(publicKey), signature);
    } catch {
      return false; // a public key that is not a curve point
    }
  },
};

export const naclEd25519: Ed25519 = {
  name: "tweetnacl",
  publicKeyFromSeed(seed) {
    checkLength(seed, SEED_LENGTH, "Ed25519 seed");
    return nacl.sign.keyPair.fromSeed(seed).publicKey;
  },
  sign(message, seed) {
    checkLength(seed, SEED_LENGTH, "Ed25519 seed");
    const secretKey = naclSecretKeys.get(Buffer.from(seed).toString("base64"), () => nacl.sign.keyPair.fromSeed(seed).secretKey);
    return nacl.sign.detached(message, secretKey);
  },
  verify(message, signature, publicKey) {
    if (signature.byteLength !== SIGNATURE_LENGTH || publicKey.byteLength !== PUBLIC_KEY_LENGTH) {
      return false;
    }
    try {
      return nacl.sign.detached.verify(message, signature, publicKey);
    } catch {
      return false;
    }
  },
};

/** libsodium's, or undefined where sodium-native's addon does not load on this platform. */
export const sodiumEd25519: Ed25519 | undefined = loadSodiumEd25519();

/**
 * The implementation library code uses by default: libsodium signs and
 * verifies 1.3-2x as fast as node:crypto (`npm run bench` shows both).
 */
export const defaultEd25519: Ed25519 = sodiumEd25519 ?? nodeEd25519;

/** Every implementation this process has, the default first: for tests and benchmarks that compare them. */
export const ed25519Implementations: readonly Ed25519[] = [...(sodiumEd25519 ? [sodiumEd25519] : []), nodeEd25519, naclEd25519];

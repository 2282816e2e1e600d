// Ed25519 through libsodium (sodium-native's prebuilt addon). Its signatures
// are the same bytes as node:crypto's and tweetnacl's (RFC 8032 is
// deterministic); its verification refuses everything theirs refuses, and
// also keys and signature points of small order, which no honest signer
// produces. The addon is loaded at run time: a platform without a prebuilt
// binary keeps node:crypto.
import { createRequire } from "node:module";
import type { Ed25519 } from "./ed25519-interface.js";
import { KeyCache } from "./key-cache.js";

interface Sodium {
  crypto_sign_SEEDBYTES: number;
  crypto_sign_PUBLICKEYBYTES: number;
  crypto_sign_SECRETKEYBYTES: number;
  crypto_sign_BYTES: number;
  crypto_sign_seed_keypair(publicKey: Uint8Array, secretKey: Uint8Array, seed: Uint8Array): void;
  crypto_sign_detached(signature: Uint8Array, message: Uint8Array, secretKey: Uint8Array): void;
  crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
}

/** sodium-native's module, seen as the part of it the caller uses; undefined where the addon does not load (or SYNAPSE_ED25519=node rules it out). */
export function sodiumNative<T>(): T | undefined {
  if (process.env.SYNAPSE_ED25519 === "node") return undefined; // to compare, or to rule the addon out
  try {
    return createRequire(import.meta.url)("sodium-native") as T;
  } catch {
    return undefined;
  }
}

export function loadSodiumEd25519(): Ed25519 | undefined {
  const sodium = sodiumNative<Sodium>();
  if (sodium === undefined) return undefined;
  const { crypto_sign_SEEDBYTES: seedBytes, crypto_sign_PUBLICKEYBYTES: publicKeyBytes, crypto_sign_BYTES: signatureBytes } = sodium;
  const keyPair = (seed: Uint8Array) => {
    if (seed.byteLength !== seedBytes) throw new RangeError(`Ed25519 seed must be ${seedBytes} bytes, got ${seed.byteLength}`);
    const publicKey = new Uint8Array(publicKeyBytes);
    const secretKey = new Uint8Array(sodium.crypto_sign_SECRETKEYBYTES); // the seed, then the public key
    sodium.crypto_sign_seed_keypair(publicKey, secretKey, seed);
    return { publicKey, secretKey };
  };
  // Expanding a seed costs a SHA-512 and a scalar multiplication: once per seed.
  const secretKeys = new KeyCache<Uint8Array>(64);
  return {
    name: "libsodium",
    publicKeyFromSeed(seed) {
      return keyPair(seed).publicKey;
    },
    sign(message, seed) {
      const secretKey = secretKeys.get(Buffer.from(seed.buffer, seed.byteOffset, seed.byteLength).toString("base64"), () => keyPair(seed).secretKey);
      const signature = new Uint8Array(signatureBytes);
      sodium.crypto_sign_detached(signature, message, secretKey);
      return signature;
    },
    verify(message, signature, publicKey) {
      if (signature.byteLength !== signatureBytes || publicKey.byteLength !== publicKeyBytes) return false;
      try {
        return sodium.crypto_sign_verify_detached(signature, message, publicKey);
      } catch {
        return false;
      }
    },
  };
}

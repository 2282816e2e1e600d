// What every Ed25519 implementation offers, apart from the implementations
// themselves, so that each of them can be written against it.
export const SEED_LENGTH = 32;
export const PUBLIC_KEY_LENGTH = 32;
export const SIGNATURE_LENGTH = 64;

export interface Ed25519 {
  readonly name: string;
  /** The public key belonging to a 32-byte private seed. */
  publicKeyFromSeed(seed: Uint8Array): Uint8Array;
  sign(message: Uint8Array, seed: Uint8Array): Uint8Array;
  /** False (never a throw) for any malformed key or signature. */
  verify(message: Uint8Array, signature: Uint8Array, publicKey: Uint8Array): boolean;
}

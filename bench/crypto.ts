// Ed25519 sign and verify throughput of a 256-byte message, for libsodium,
// node:crypto and tweetnacl, through the project's Ed25519 interface (as
// library code uses them).
import { randomBytes } from "node:crypto";
import { ed25519Implementations, type Ed25519 } from "../src/crypto/ed25519.js";
import { opsPerSecond } from "./measure.js";

export const MESSAGE_BYTES = 256;

export interface CryptoResult {
  implementation: string;
  sign_ops: number;
  verify_ops: number;
}

function measure(impl: Ed25519, seconds: number, warmupSeconds: number): CryptoResult {
  const seed = new Uint8Array(randomBytes(32));
  const message = new Uint8Array(randomBytes(MESSAGE_BYTES));
  const publicKey = impl.publicKeyFromSeed(seed);
  const signature = impl.sign(message, seed);
  // A verify that returned false would be measuring the wrong thing.
  if (!impl.verify(message, signature, publicKey)) throw new Error(`${impl.name} does not verify its own signature`);
  const sign = () => void impl.sign(message, seed);
  const verify = () => {
    if (!impl.verify(message, signature, publicKey)) throw new Error(`${impl.name} verify failed`);
  };
  opsPerSecond(sign, warmupSeconds * 1000);
  const signOps = opsPerSecond(sign, seconds * 1000);
  opsPerSecond(verify, warmupSeconds * 1000);
  const verifyOps = opsPerSecond(verify, seconds * 1000);
  return { implementation: impl.name, sign_ops: signOps, verify_ops: verifyOps };
}

export function cryptoBench(seconds: number, warmupSeconds: number): CryptoResult[] {
  return ed25519Implementations.map((impl) => measure(impl, seconds, warmupSeconds));
}

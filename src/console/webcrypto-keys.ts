// Ed25519 in WebCrypto: a private key the page can use but never read
// (non-extractable), kept as a CryptoKey in IndexedDB. Chromium has shipped
// Ed25519 in WebCrypto since version 137; where a browser lacks it, the
// console falls back to tweetnacl (keys.ts), and says so.
import { toBase64Url } from "./bytes.js";
import { identityOf, publicKeyOfSeed, type ConsoleIdentity } from "./keys.js";

const ED25519 = { name: "Ed25519" } as const;

/** A WebCrypto key (spelled without DOM type names, so Node's tests compile this file too). */
export type SigningKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;
type KeyPair = { privateKey: SigningKey; publicKey: SigningKey };

/** Whether this browser signs Ed25519 in WebCrypto (tried once, with a throwaway key). */
export async function webCryptoHasEd25519(): Promise<boolean> {
  try {
    const pair = (await crypto.subtle.generateKey(ED25519, false, ["sign", "verify"])) as KeyPair;
    await crypto.subtle.sign(ED25519, pair.privateKey, new Uint8Array(1));
    return true;
  } catch {
    return false;
  }
}

/** An identity signing with a non-extractable private key. */
export function identityFromCryptoKey(privateKey: SigningKey, publicKey: Uint8Array): Promise<ConsoleIdentity> {
  return identityOf(publicKey, "webcrypto", async (data) => new Uint8Array(await crypto.subtle.sign(ED25519, privateKey, Uint8Array.from(data))));
}

/** A new key pair whose private half cannot be exported: only its public key is read out. */
export async function generateNonExtractable(): Promise<{ privateKey: SigningKey; publicKey: Uint8Array }> {
  const pair = (await crypto.subtle.generateKey(ED25519, false, ["sign", "verify"])) as KeyPair;
  return { privateKey: pair.privateKey, publicKey: new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)) };
}

/**
 * Imports a seed as a non-extractable private key. The caller should drop
 * (and zero) the seed afterwards: from then on only the CryptoKey signs.
 */
export async function importSeedNonExtractable(seed: Uint8Array): Promise<{ privateKey: SigningKey; publicKey: Uint8Array }> {
  const publicKey = publicKeyOfSeed(seed);
  const privateKey = await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", d: toBase64Url(seed), x: toBase64Url(publicKey) }, ED25519, false, ["sign"]);
  return { privateKey, publicKey };
}

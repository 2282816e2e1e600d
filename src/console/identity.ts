// The console's requester identity, kept in this browser's IndexedDB and
// shared by its tabs: made on first use, or imported by the user (a key
// `synapse keygen` wrote). With Ed25519 in WebCrypto the private key is a
// non-extractable CryptoKey: the page signs with it and can never read it.
// Without it, tweetnacl signs and the seed is what IndexedDB keeps. The
// agent id is always derived from the key (self-certifying), so no agent
// has to be told about the console before it reads its tasks. Beside it,
// where WebCrypto has X25519, an encryption key for confidential tasks
// (docs/PROTOCOL.md §9.1), non-extractable too: the task keys of the
// confidential tasks this identity requests are wrapped to it.
import { encryptionKeyIdOf, type EncryptionKeyPair } from "./confidential.js";
import { generateX25519, webCryptoHasX25519 } from "./hpke.js";
import { idbGet, idbPut } from "./idb.js";
import { parsePrivateKey } from "./key-import.js";
import { identityFromSeed, publicKeyOfSeed, type ConsoleIdentity, type KeyBackend } from "./keys.js";
import { generateNonExtractable, identityFromCryptoKey, importSeedNonExtractable, webCryptoHasEd25519 } from "./webcrypto-keys.js";

const RECORD_KEY = "identity";

/** Where the key came from. */
export type KeySource = "generated" | "imported";

interface StoredKey {
  version: 1;
  backend: KeyBackend;
  source: KeySource;
  createdAtMs: number;
  publicKey: Uint8Array;
  /** backend "webcrypto": the non-extractable private key. */
  privateKey?: CryptoKey;
  /** backend "tweetnacl": the 32-byte seed. */
  seed?: Uint8Array;
  /** The X25519 key for confidential tasks; absent where WebCrypto has no X25519. */
  encryption?: EncryptionKeyPair;
}

export interface HeldIdentity {
  identity: ConsoleIdentity;
  source: KeySource;
  createdAtMs: number;
  /** Its X25519 key; undefined where this browser has no X25519 in WebCrypto, and confidential tasks stay sealed. */
  encryption: EncryptionKeyPair | undefined;
}

function isEncryptionKey(value: unknown): value is EncryptionKeyPair {
  if (typeof value !== "object" || value === null) return false;
  const key = value as Partial<EncryptionKeyPair>;
  return key.privateKey instanceof CryptoKey && key.publicKey instanceof Uint8Array && key.publicKey.byteLength === 32 && typeof key.keyId === "string";
}

/** A new non-extractable X25519 key, or undefined where the browser has none. */
async function freshEncryptionKey(): Promise<EncryptionKeyPair | undefined> {
  if (!(await webCryptoHasX25519())) return undefined;
  const { privateKey, publicKey } = await generateX25519();
  return { privateKey, publicKey, keyId: await encryptionKeyIdOf(publicKey) };
}

function isStoredKey(value: unknown): value is StoredKey {
  if (typeof value !== "object" || value === null) return false;
  const record = value as Partial<StoredKey>;
  if (record.version !== 1 || !(record.publicKey instanceof Uint8Array)) return false;
  if (record.backend === "webcrypto") return record.privateKey instanceof CryptoKey;
  return record.backend === "tweetnacl" && record.seed instanceof Uint8Array && record.seed.byteLength === 32;
}

async function held(record: StoredKey): Promise<HeldIdentity> {
  const identity =
    record.backend === "webcrypto" && record.privateKey !== undefined
      ? await identityFromCryptoKey(record.privateKey, record.publicKey)
      : await identityFromSeed(record.seed!);
  return { identity, source: record.source, createdAtMs: record.createdAtMs, encryption: isEncryptionKey(record.encryption) ? record.encryption : undefined };
}

/** A key from a seed: imported into WebCrypto (non-extractable) when the browser can, kept as the seed otherwise. */
async function recordFromSeed(seed: Uint8Array, source: KeySource): Promise<StoredKey> {
  const createdAtMs = Date.now();
  if (await webCryptoHasEd25519()) {
    const { privateKey, publicKey } = await importSeedNonExtractable(seed);
    seed.fill(0); // from here on only the CryptoKey can sign
    return { version: 1, backend: "webcrypto", source, createdAtMs, publicKey, privateKey, encryption: await freshEncryptionKey() };
  }
  return { version: 1, backend: "tweetnacl", source, createdAtMs, publicKey: publicKeyOfSeed(seed), seed: Uint8Array.from(seed), encryption: await freshEncryptionKey() };
}

async function freshRecord(): Promise<StoredKey> {
  if (await webCryptoHasEd25519()) {
    const { privateKey, publicKey } = await generateNonExtractable();
    return { version: 1, backend: "webcrypto", source: "generated", createdAtMs: Date.now(), publicKey, privateKey, encryption: await freshEncryptionKey() };
  }
  return recordFromSeed(crypto.getRandomValues(new Uint8Array(32)), "generated");
}

/** The identity this browser holds, made (and kept) on first use. */
export async function loadOrCreateIdentity(): Promise<HeldIdentity> {
  const stored = await idbGet(RECORD_KEY);
  if (isStoredKey(stored)) {
    // A key kept before the console took confidential tasks gains its X25519 key once.
    if (!isEncryptionKey(stored.encryption)) {
      const encryption = await freshEncryptionKey();
      if (encryption !== undefined) {
        stored.encryption = encryption;
        await idbPut(RECORD_KEY, stored);
      }
    }
    return held(stored);
  }
  const record = await freshRecord();
  await idbPut(RECORD_KEY, record);
  return held(record);
}

/** Replaces the held identity with a new key. The old one is forgotten: tasks it requested are not readable as the new one. */
export async function replaceWithNewIdentity(): Promise<HeldIdentity> {
  const record = await freshRecord();
  await idbPut(RECORD_KEY, record);
  return held(record);
}

/** Replaces the held identity with an imported private key (PKCS#8 PEM or OKP JWK). */
export async function importIdentity(text: string): Promise<HeldIdentity> {
  const record = await recordFromSeed(parsePrivateKey(text), "imported");
  await idbPut(RECORD_KEY, record);
  return held(record);
}

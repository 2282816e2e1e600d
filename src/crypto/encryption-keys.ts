// An agent's X25519 encryption keys for confidential tasks: the current one
// and the retired ones still opened for their overlap. On disk beside
// agent.key: `encryption.key` (PKCS#8 PEM, mode 0600) and, for each retired
// key, `encryption-retired/<key id>.key` with its end of overlap in the
// PEM's first line as a comment.
import { createHash, createPrivateKey } from "node:crypto";
import { chmod, mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { toBase64Url } from "./encoding.js";
import { generateX25519, rawPrivateKey, x25519, x25519PrivateKey } from "./hpke.js";

/** How long a retired key is still opened, by default: 7 days. */
export const DEFAULT_ENCRYPTION_OVERLAP_MS = 7 * 24 * 3600 * 1000;

/** An X25519 key pair for confidential tasks, with its id and its life (made, retired until). */
export interface EncryptionKey {
  /** The raw 32-byte X25519 private key. Never leaves the process except to its key file. */
  readonly secretKey: Uint8Array;
  /** The raw 32-byte X25519 public key. */
  readonly publicKey: Uint8Array;
  /** RFC 7638 thumbprint of the OKP JWK with crv "X25519". */
  readonly keyId: string;
  /** When the key was made (the file's, for a loaded key). */
  readonly createdAtMs: number;
  /** For a retired key: until when messages sealed to it are opened. */
  readonly retiredUntilMs?: number;
}

/** The key id of a raw X25519 public key (docs/PROTOCOL.md §9.1). */
export function encryptionKeyIdOf(publicKey: Uint8Array): string {
  const canonical = `{"crv":"X25519","kty":"OKP","x":"${toBase64Url(publicKey)}"}`;
  return createHash("sha256").update(canonical).digest("base64url");
}

/** The key whose raw private bytes are `secretKey`. */
export function encryptionKeyOf(secretKey: Uint8Array, createdAtMs: number, retiredUntilMs?: number): EncryptionKey {
  if (secretKey.byteLength !== 32) throw new RangeError("an X25519 private key is 32 bytes");
  const publicKey = x25519.publicKeyOf(secretKey);
  return { secretKey: Uint8Array.from(secretKey), publicKey, keyId: encryptionKeyIdOf(publicKey), createdAtMs, retiredUntilMs };
}

export function encryptionKeyToPem(key: EncryptionKey): string {
  return x25519PrivateKey(key.secretKey).export({ format: "pem", type: "pkcs8" }).toString();
}

/** Reads an X25519 private key in PKCS#8 PEM (as `openssl genpkey -algorithm x25519` writes it). */
export function encryptionKeyFromPem(pem: string, createdAtMs = 0, retiredUntilMs?: number): EncryptionKey {
  const keyObject = createPrivateKey({ key: pem, format: "pem" });
  if (keyObject.asymmetricKeyType !== "x25519") throw new TypeError(`not an X25519 key: ${keyObject.asymmetricKeyType ?? "unknown"}`);
  return encryptionKeyOf(rawPrivateKey(keyObject), createdAtMs, retiredUntilMs);
}

/** The keys an agent opens with: the current one first, then the retired ones within their overlap. */
export class EncryptionKeyRing {
  private readonly byId = new Map<string, EncryptionKey>();

  constructor(
    readonly current: EncryptionKey,
    readonly retired: readonly EncryptionKey[] = [],
  ) {
    for (const key of [current, ...retired]) this.byId.set(key.keyId, key);
  }

  /** The key with this id, if it may still open messages at `nowMs`. */
  find(keyId: string, nowMs: number = Date.now()): EncryptionKey | undefined {
    const key = this.byId.get(keyId);
    if (key === undefined || (key.retiredUntilMs !== undefined && key.retiredUntilMs <= nowMs)) return undefined;
    return key;
  }

  /** The keys to publish at `nowMs`: the current one and each retired one still in its overlap. */
  published(nowMs: number = Date.now()): EncryptionKey[] {
    return [this.current, ...this.retired.filter((key) => key.retiredUntilMs! > nowMs)];
  }

  /** A ring with a new random current key and this one retired until `nowMs + overlapMs`. */
  rotated(nowMs: number = Date.now(), overlapMs = DEFAULT_ENCRYPTION_OVERLAP_MS): EncryptionKeyRing {
    const retiring = { ...this.current, retiredUntilMs: nowMs + overlapMs };
    return new EncryptionKeyRing(encryptionKeyOf(generateX25519(), nowMs), [retiring, ...this.retired.filter((key) => key.retiredUntilMs! > nowMs)]);
  }
}

/** The current encryption key's file in a data dir. */
export const ENCRYPTION_KEY_FILE = "encryption.key";
/** The data dir's folder of retired encryption keys, still opened for their overlap. */
export const RETIRED_KEYS_DIR = "encryption-retired";
const CURRENT_FILE = ENCRYPTION_KEY_FILE;
const RETIRED_DIR = RETIRED_KEYS_DIR;

/** The encryption key files of a data dir, as paths relative to it: the current key, then each retired one. */
export async function encryptionKeyFiles(dataDir: string): Promise<string[]> {
  const files: string[] = [];
  if (await stat(join(dataDir, ENCRYPTION_KEY_FILE)).then(() => true, () => false)) files.push(ENCRYPTION_KEY_FILE);
  const retired = await readdir(join(dataDir, RETIRED_KEYS_DIR)).catch((error: NodeJS.ErrnoException) => (error.code === "ENOENT" ? [] : Promise.reject(error)));
  for (const name of retired.filter((entry) => entry.endsWith(".key")).sort()) files.push(`${RETIRED_KEYS_DIR}/${name}`);
  return files;
}
const RETIRED_LINE = /^# retired-until (\d+) created (\d+)\n/;

async function writeSecret(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text, { mode: 0o600 });
  await chmod(`${path}.tmp`, 0o600);
  await rename(`${path}.tmp`, path);
}

/** Loads the data dir's encryption keys, making the first one when there is none. Retired keys past their overlap are deleted. */
export async function loadOrCreateEncryptionKeys(dataDir: string, nowMs: number = Date.now()): Promise<EncryptionKeyRing> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  let current: EncryptionKey;
  try {
    const path = join(dataDir, CURRENT_FILE);
    // Whole milliseconds: the binding's Timestamp takes no fraction of a nanosecond.
    current = encryptionKeyFromPem(await readFile(path, "utf8"), Math.floor((await stat(path)).mtimeMs));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    current = encryptionKeyOf(generateX25519(), nowMs);
    await writeSecret(join(dataDir, CURRENT_FILE), encryptionKeyToPem(current));
  }
  const retired: EncryptionKey[] = [];
  const dir = join(dataDir, RETIRED_DIR);
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => (error.code === "ENOENT" ? [] : Promise.reject(error)));
  for (const name of names.filter((entry) => entry.endsWith(".key"))) {
    const text = await readFile(join(dir, name), "utf8");
    const line = RETIRED_LINE.exec(text);
    if (line === null) continue;
    const until = Number(line[1]);
    if (until <= nowMs) {
      await rm(join(dir, name), { force: true });
      continue;
    }
    retired.push(encryptionKeyFromPem(text.slice(line[0].length), Number(line[2]), until));
  }
  return new EncryptionKeyRing(current, retired);
}

/** Writes a ring made by `rotated`: the retired keys first, then the new current key. */
export async function saveEncryptionKeys(dataDir: string, ring: EncryptionKeyRing): Promise<void> {
  const dir = join(dataDir, RETIRED_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (const key of ring.retired) {
    await writeSecret(join(dir, `${key.keyId}.key`), `# retired-until ${key.retiredUntilMs} created ${key.createdAtMs}\n${encryptionKeyToPem(key)}`);
  }
  await writeSecret(join(dataDir, CURRENT_FILE), encryptionKeyToPem(ring.current));
}

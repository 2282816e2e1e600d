// A data dir's backup: a directory holding a consistent copy of the store
// (SQLite's online backup), the agent's identity files and a manifest that
// names every file with its size and SHA-256, so that a restore can tell a
// whole backup from a damaged or partial one before it writes anything.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { chmod, copyFile, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { IDENTITY_FILE, KEY_FILE } from "../agent/identity.js";
import { ENCRYPTION_KEY_FILE, encryptionKeyFiles, RETIRED_KEYS_DIR } from "../crypto/encryption-keys.js";
import { SQLITE_FILE } from "../store/open.js";
import type { StorageKind } from "../store/storage.js";

export const MANIFEST_FILE = "manifest.json";
export const BACKUP_FORMAT = "synapse-backup/1";

export interface BackupFile {
  name: string;
  size: number;
  sha256: string;
}

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  /** When the copy was taken (RFC 3339). */
  createdAt: string;
  agentId: string;
  keyId: string;
  /** Which store held the state; a PostgreSQL database is copied with its own tools (pg_dump). */
  store: StorageKind;
  /** Whether the store's contents are in the backup (synapse.db). */
  storeCopied: boolean;
  files: BackupFile[];
}

/** A backup that cannot be taken or restored: the message says why and what to do. */
export class BackupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BackupError";
  }
}

export interface WriteBackupOptions {
  /** The agent's data dir (identity files). */
  dataDir: string;
  /** The new backup directory: created, or empty. */
  to: string;
  agentId: string;
  keyId: string;
  store: StorageKind;
  /** Writes the store's copy into this file; absent when the store is not copied. */
  copyStore?: (file: string) => Promise<void>;
  now?: () => Date;
}

/** Takes a backup into a new directory; on failure removes what it wrote. */
export async function writeBackup(options: WriteBackupOptions): Promise<BackupManifest> {
  await prepareEmptyDir(options.to, "backup directory");
  try {
    const names: string[] = [];
    if (options.copyStore !== undefined) {
      await options.copyStore(join(options.to, SQLITE_FILE));
      names.push(SQLITE_FILE);
    }
    for (const name of [KEY_FILE, IDENTITY_FILE]) {
      const from = join(options.dataDir, name);
      if (!(await exists(from))) continue;
      await copyFile(from, join(options.to, name));
      names.push(name);
    }
    if (!names.includes(KEY_FILE)) throw new BackupError(`${join(options.dataDir, KEY_FILE)} is missing: without the agent's key a restored agent could not sign as itself`);
    await chmod(join(options.to, KEY_FILE), 0o600);
    // Without its encryption keys a restored agent could not open the confidential tasks it holds.
    for (const name of await encryptionKeyFiles(options.dataDir)) {
      await mkdir(dirname(join(options.to, name)), { recursive: true, mode: 0o700 });
      await copyFile(join(options.dataDir, name), join(options.to, name));
      await chmod(join(options.to, name), 0o600);
      names.push(name);
    }
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      createdAt: (options.now?.() ?? new Date()).toISOString(),
      agentId: options.agentId,
      keyId: options.keyId,
      store: options.store,
      storeCopied: options.copyStore !== undefined,
      files: await Promise.all(names.map((name) => describe(options.to, name))),
    };
    await writeFile(join(options.to, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    return manifest;
  } catch (error) {
    await rm(options.to, { recursive: true, force: true });
    throw error;
  }
}

/** Reads a backup's manifest and checks every file it names against its size and digest. */
export async function checkBackup(dir: string): Promise<BackupManifest> {
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8")) as BackupManifest;
  } catch (error) {
    throw new BackupError(`${join(dir, MANIFEST_FILE)} cannot be read (${(error as Error).message}): ${dir} is not a synapse backup`);
  }
  if (manifest.format !== BACKUP_FORMAT || !Array.isArray(manifest.files)) {
    throw new BackupError(`${dir} holds a backup in a format this synapse does not know (${JSON.stringify(manifest.format)}; it reads ${BACKUP_FORMAT})`);
  }
  for (const file of manifest.files) {
    if (!isBackupFileName(file.name)) throw new BackupError(`the manifest names ${JSON.stringify(file.name)}, which is not a backup file`);
    const found = await describe(dir, file.name).catch(() => undefined);
    if (found === undefined) throw new BackupError(`${join(dir, file.name)} is missing: the backup is incomplete`);
    if (found.size !== file.size || found.sha256 !== file.sha256) throw new BackupError(`${join(dir, file.name)} differs from the manifest: the backup is damaged`);
  }
  return manifest;
}

/** Copies a checked backup into a data dir that holds no identity and no store yet. */
export async function restoreBackup(from: string, dataDir: string): Promise<BackupManifest> {
  const manifest = await checkBackup(from);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  for (const name of [KEY_FILE, IDENTITY_FILE, ENCRYPTION_KEY_FILE, SQLITE_FILE, `${SQLITE_FILE}-wal`]) {
    if (await exists(join(dataDir, name))) {
      throw new BackupError(`${join(dataDir, name)} exists: restore into a new data dir, or move the old one aside first`);
    }
  }
  for (const file of manifest.files) {
    await mkdir(dirname(join(dataDir, file.name)), { recursive: true, mode: 0o700 });
    await copyFile(join(from, file.name), join(dataDir, file.name));
    if (file.name !== IDENTITY_FILE && file.name !== SQLITE_FILE) await chmod(join(dataDir, file.name), 0o600); // keys
  }
  return manifest;
}

/** A name a manifest may hold: a file of the backup's own folder, or a retired encryption key in its one subfolder. */
function isBackupFileName(name: string): boolean {
  if (name.startsWith(".")) return false;
  if (!name.includes("/")) return true;
  return new RegExp(`^${RETIRED_KEYS_DIR}/[A-Za-z0-9_-]+\\.key$`).test(name);
}

async function prepareEmptyDir(dir: string, what: string): Promise<void> {
  if (await exists(dir)) {
    if (!(await stat(dir)).isDirectory()) throw new BackupError(`the ${what} ${dir} is a file`);
    if ((await readdir(dir)).length > 0) throw new BackupError(`the ${what} ${dir} is not empty: name a new directory`);
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

async function describe(dir: string, name: string): Promise<BackupFile> {
  const path = join(dir, name);
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    size += chunk.byteLength;
  }
  return { name, size, sha256: hash.digest("hex") };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

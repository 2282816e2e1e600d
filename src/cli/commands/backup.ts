// `synapse backup` and `synapse restore`: a running agent's state and
// identity copied into a new directory, and brought back into a new data dir.
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { IDENTITY_FILE } from "../../agent/identity.js";
import { askControl } from "../../ops/control-socket.js";
import { BackupError, checkBackup, restoreBackup, writeBackup, type BackupManifest } from "../../ops/backup.js";
import { SQLITE_FILE } from "../../store/open.js";
import { backupSqliteFile, openSqliteDatabase } from "../../store/sqlite/database.js";
import { parse, requirePositional, UsageError } from "../args.js";
import { printJson, printLine } from "../output.js";

export const backupUsage = `usage: synapse backup DIR [--data-dir DATA_DIR] [--json]

Copies an agent's state (its SQLite store, consistent as of one moment) and
its identity (agent.key, identity.json) into the new or empty directory DIR,
with a manifest of every file's size and SHA-256. While \`synapse serve\` runs
on DATA_DIR (default: SYNAPSE_DATA_DIR, or .synapse) the server takes the
copy itself, without stopping, through DATA_DIR/control.sock; otherwise the
store is copied directly. An agent whose state is in PostgreSQL gets its
identity copied and the database named for pg_dump (docs/OPERATIONS.md).
Exit status 0 when the backup is complete, 1 when it could not be taken.`;

export const restoreUsage = `usage: synapse restore DIR --data-dir DATA_DIR [--json]

Checks the backup in DIR against its manifest and copies it into DATA_DIR,
which must not hold an identity or a store yet. \`synapse serve --data-dir
DATA_DIR\` then serves every task the backup held, with its signed event log.
Exit status 0 when restored, 1 when the backup is damaged or DATA_DIR is in use.`;

interface IdentityFacts {
  agentId: string;
  keyId: string;
}

async function identityFacts(dataDir: string): Promise<IdentityFacts> {
  const path = join(dataDir, IDENTITY_FILE);
  try {
    const file = JSON.parse(await readFile(path, "utf8")) as { agent_id?: string; key_id?: string };
    if (typeof file.agent_id === "string" && typeof file.key_id === "string") return { agentId: file.agent_id, keyId: file.key_id };
  } catch {
    // Reported below.
  }
  throw new BackupError(`${path} is missing or unreadable: ${dataDir} is not an agent's data dir`);
}

export async function backup(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { "data-dir": { type: "string" }, json: { type: "boolean" } }, backupUsage);
  if (values.help) {
    printLine(backupUsage);
    return 0;
  }
  const to = resolve(requirePositional(positionals, 0, "the backup directory", backupUsage));
  if (positionals.length > 1) throw new UsageError(`one backup directory, got ${positionals.join(" ")}\n\n${backupUsage}`);
  const dataDir = resolve(values["data-dir"] ?? process.env.SYNAPSE_DATA_DIR ?? ".synapse");
  const reply = await askControl(dataDir, { command: "backup", to });
  let manifest: BackupManifest;
  let online = false;
  if (reply !== undefined) {
    if (!reply.ok) throw new BackupError(reply.error);
    manifest = reply.result as BackupManifest;
    online = true;
  } else {
    const { agentId, keyId } = await identityFacts(dataDir);
    manifest = await writeBackup({ dataDir, to, agentId, keyId, store: "sqlite", copyStore: (file) => backupSqliteFile(join(dataDir, SQLITE_FILE), file) });
  }
  if (values.json) printJson({ directory: to, online, ...manifest });
  else {
    printLine(`backed up agent ${manifest.agentId} from ${dataDir} into ${to} (${online ? "taken by the running server" : "the server was not running"})`);
    for (const file of manifest.files) printLine(`  ${file.name.padEnd(14)} ${String(file.size).padStart(10)} bytes  sha256 ${file.sha256}`);
    if (manifest.store === "postgres") printLine("the state is in PostgreSQL: copy the database with pg_dump (see docs/OPERATIONS.md)");
    else if (manifest.store === "memory") printLine("the server keeps its state in memory: only its identity was copied");
  }
  return 0;
}

export async function restore(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { "data-dir": { type: "string" }, json: { type: "boolean" } }, restoreUsage);
  if (values.help) {
    printLine(restoreUsage);
    return 0;
  }
  const from = resolve(requirePositional(positionals, 0, "the backup directory", restoreUsage));
  if (values["data-dir"] === undefined) throw new UsageError(`restore needs --data-dir: the new data dir to restore into\n\n${restoreUsage}`);
  const dataDir = resolve(values["data-dir"]);
  await checkBackup(from);
  const manifest = await restoreBackup(from, dataDir);
  let tasks: number | undefined;
  if (manifest.storeCopied) {
    // Opening checks every page and brings the schema up to this version: what `serve` would do, before it is asked to.
    const db = openSqliteDatabase(join(dataDir, SQLITE_FILE));
    try {
      tasks = (db.prepare("SELECT COUNT(*) AS n FROM tasks").get() as { n: number }).n;
    } finally {
      db.close();
    }
  }
  if (values.json) printJson({ dataDir, ...manifest, ...(tasks === undefined ? {} : { tasks }) });
  else {
    printLine(`restored agent ${manifest.agentId} (backup of ${manifest.createdAt}) into ${dataDir}`);
    if (tasks !== undefined) printLine(`the store holds ${tasks} ${tasks === 1 ? "task" : "tasks"}; start it with: synapse serve --data-dir ${dataDir}`);
    else printLine(`the state is in ${manifest.store}: restore the database with its own tools (pg_restore) before starting`);
  }
  return 0;
}

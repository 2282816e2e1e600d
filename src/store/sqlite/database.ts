// Opening the SQLite database: one process holds it exclusively (a second
// `synapse serve` on the same data dir is refused, and the lock goes with a
// crashed process), in WAL mode, checked and migrated before use. Every
// failure names the file and says what to do.
import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { StoreInUseError, StoreOpenError } from "../errors.js";
import { SQLITE_MIGRATIONS, type Migration } from "./migrations.js";

export type Fsync = "full" | "normal";

export interface SqliteOptions {
  /**
   * normal (default): a commit is durable against a process crash (kill -9)
   * at once, and against power loss once the WAL is checkpointed. full:
   * every commit is fsynced, durable against power loss too, and slower.
   */
  fsync?: Fsync;
  /** Check every page at start (PRAGMA quick_check). Default true. */
  checkIntegrity?: boolean;
  /** SQLite's page cache, in MiB. Default 8 (DEFAULT_CACHE_MIB). */
  cacheMiB?: number;
}

/**
 * better-sqlite3 builds SQLite with a 16 MB page cache, which a busy store
 * fills and keeps. Writes touch the last pages of each table and a few index
 * pages, and the tasks in flight are read from the store's own cache, so half
 * of that serves as well; the rest of the file stays in the OS's page cache.
 */
export const DEFAULT_CACHE_MIB = 8;

function damaged(path: string, problem: string): StoreOpenError {
  return new StoreOpenError(
    `${path} is not a usable Synapse database (${problem}). It is damaged or is not ours. To start with an empty store, move it aside ` +
      `(mv '${path}' '${path}.damaged'; also any '${path}-wal') and start again; every task and pin it held is then forgotten. Or restore it from a backup.`,
  );
}

export function openSqliteDatabase(path: string, options: SqliteOptions = {}): Database.Database {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let db: Database.Database;
  try {
    // No waiting on a lock: another process holding the file is an answer, not a delay.
    db = new Database(path, { timeout: 0 });
  } catch (error) {
    throw damaged(path, messageOf(error));
  }
  try {
    // Exclusive before WAL: the WAL index then lives in this process, and no other process may open the file.
    db.pragma("locking_mode = EXCLUSIVE");
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${options.fsync === "full" ? "FULL" : "NORMAL"}`);
    db.pragma("busy_timeout = 0");
    db.pragma(`cache_size = -${Math.round((options.cacheMiB ?? DEFAULT_CACHE_MIB) * 1024)}`);
    takeLock(db);
    if (options.checkIntegrity !== false) checkPages(db, path);
    migrate(db, path, SQLITE_MIGRATIONS);
    return db;
  } catch (error) {
    db.close();
    if (error instanceof StoreOpenError) throw error;
    if (isLocked(error)) throw inUse(path);
    throw damaged(path, messageOf(error));
  }
}

function isLocked(error: unknown): boolean {
  const code = (error as { code?: string }).code ?? "";
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED");
}

function inUse(path: string): StoreInUseError {
  return new StoreInUseError(
    `${path} is in use by another process (SQLite lets one process hold it): stop the other synapse, or give this one its own --data-dir. ` +
      `Several instances of one agent share state through PostgreSQL (--store postgres://...).`,
  );
}

function takeLock(db: Database.Database): void {
  db.exec("BEGIN IMMEDIATE; COMMIT");
}

function checkPages(db: Database.Database, path: string): void {
  const rows = db.pragma("quick_check(1)") as Array<{ quick_check: string }>;
  const verdict = rows[0]?.quick_check ?? "no answer";
  if (verdict !== "ok") throw damaged(path, `integrity check: ${verdict}`);
}

function migrate(db: Database.Database, path: string, migrations: readonly Migration[]): void {
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)");
  const current = (db.prepare("SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations").get() as { version: number }).version;
  const latest = migrations[migrations.length - 1]?.version ?? 0;
  if (current > latest) {
    throw new StoreOpenError(
      `${path} has schema version ${current}, written by a newer synapse; this one knows versions up to ${latest}. Upgrade synapse, or start with another --data-dir.`,
    );
  }
  const record = db.prepare("INSERT INTO schema_migrations (version, description, applied_at_ms) VALUES (?, ?, ?)");
  for (const migration of migrations) {
    if (migration.version <= current) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      record.run(migration.version, migration.description, Date.now());
    })();
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Copies a database no process holds into `file` (SQLite's backup API),
 * without migrating or otherwise changing it. A database a running server
 * holds is refused as in use: that server takes the copy itself.
 */
export async function backupSqliteFile(path: string, file: string): Promise<void> {
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: true, timeout: 0 });
  } catch (error) {
    throw new StoreOpenError(`${path} cannot be opened (${messageOf(error)})`);
  }
  try {
    db.pragma("busy_timeout = 0");
    await db.backup(file);
  } catch (error) {
    if (isLocked(error)) throw inUse(path);
    throw damaged(path, messageOf(error));
  } finally {
    db.close();
  }
}

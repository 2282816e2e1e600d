// Connecting to PostgreSQL: a pool whose BIGINT columns read back as
// numbers, a transaction helper, and the schema migrated under an advisory
// lock before use. Every failure to open says where and what to do, and
// never prints a password.
import pg from "pg";
import { StoreOpenError } from "../errors.js";
import type { Migration } from "../sqlite/migrations.js";
import { POSTGRES_MIGRATIONS } from "./migrations.js";

/** Advisory lock keys (arbitrary, fixed): one per kind of work that must not interleave across instances. */
export const LOCKS = { migrations: 7_311_001, admission: 7_311_002, catalogue: 7_311_003, uploads: 7_311_004 } as const;

const INT8_OID = 20;

/** BIGINT columns hold milliseconds and sizes, all below 2^53: read them as numbers. */
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary" ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** The URL without its password, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "postgres://(unparseable URL)";
  }
}

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  poolSize?: number;
}

export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<pg.Pool> {
  const where = redactUrl(url);
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, types, connectionTimeoutMillis: 10_000 });
  // An idle client that loses its connection must not take the process down; the pool replaces it.
  pool.on("error", () => undefined);
  try {
    await pool.query("SELECT 1");
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new StoreOpenError(`could not connect to PostgreSQL at ${where}: ${messageOf(error)}. Is the server running and the URL right (postgres://user:password@host:port/database)?`);
  }
  try {
    await migrate(pool, where, POSTGRES_MIGRATIONS);
  } catch (error) {
    await pool.end().catch(() => undefined);
    if (error instanceof StoreOpenError) throw error;
    throw new StoreOpenError(`could not prepare the Synapse schema in ${where}: ${messageOf(error)}`);
  }
  return pool;
}

async function migrate(pool: pg.Pool, where: string, migrations: readonly Migration[]): Promise<void> {
  await transaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1)", [LOCKS.migrations]);
    await client.query("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)");
    const current = Number((await client.query("SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations")).rows[0].version);
    const latest = migrations[migrations.length - 1]?.version ?? 0;
    if (current > latest) {
      throw new StoreOpenError(`${where} has schema version ${current}, written by a newer synapse; this one knows versions up to ${latest}. Upgrade synapse, or use another database.`);
    }
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      await client.query(migration.sql);
      await client.query("INSERT INTO schema_migrations (version, description, applied_at_ms) VALUES ($1, $2, $3)", [migration.version, migration.description, Date.now()]);
    }
  });
}

/** Runs `work` in one transaction on one connection; a throw rolls everything back. */
export async function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** The unique constraint a failed insert broke, if that is why it failed. */
export function brokenConstraint(error: unknown): string | undefined {
  const pgError = error as { code?: string; constraint?: string };
  return pgError.code === "23505" ? pgError.constraint : undefined;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

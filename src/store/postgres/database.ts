// Connecting to PostgreSQL: a pool whose BIGINT columns read back as
// numbers, a transaction helper, and the schema migrated under an advisory
// lock before use. Every failure to open says where and what to do, and
// never prints a password. A database that goes away (a restart, a crash)
// fails the uses meanwhile with StoreUnavailableError, never the process:
// every connection has an error listener, and the pool reconnects.
import pg from "pg";
import type { Logger } from "../../log.js";
import { AvailabilityTracker } from "../availability.js";
import { StoreOpenError, StoreUnavailableError, StoreUnreachableError } from "../errors.js";
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
  /** How long a new connection may take before the use that wanted it fails (default 3 s). */
  connectTimeoutMs?: number;
  /** Between probes while the database is unreachable (default 250 ms). */
  probeIntervalMs?: number;
}

/** SQLSTATEs that mean the server went or is not there yet: admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections. */
const UNREACHABLE_STATES = new Set(["57P01", "57P02", "57P03", "53300"]);
/** Socket errors on the way to the server. */
const SOCKET_ERRORS = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ENOTFOUND"]);
/** What pg says when a connection ends under it, or cannot be made in time. */
const LOST_CONNECTION = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly|Query read timeout)/;

/** Whether the error says the database could not be reached (rather than that a statement was refused). */
export function isConnectionFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (code.startsWith("08") || UNREACHABLE_STATES.has(code) || SOCKET_ERRORS.has(code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isConnectionFailure);
  return LOST_CONNECTION.test(error.message);
}

/** What a statement runs on: the pool (Database) or a transaction's connection. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * The pool, as the stores use it: each use fails fast with
 * StoreUnavailableError while the database is known to be unreachable,
 * and a use that finds it unreachable marks it so (the availability tracker
 * then probes until it answers).
 */
export class Database implements Queryable {
  readonly availability: AvailabilityTracker;

  constructor(
    readonly pool: pg.Pool,
    where: string,
    logger: Logger,
    probeIntervalMs = 250,
  ) {
    this.availability = new AvailabilityTracker({
      probe: async () => {
        await pool.query("SELECT 1");
      },
      probeIntervalMs,
      retryAfterSeconds: 1,
      logger,
      where,
    });
  }

  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    this.availability.check();
    try {
      return await this.pool.query<R>(text, values);
    } catch (error) {
      throw this.failure(error);
    }
  }

  /** The error a use throws: StoreUnavailableError when the database could not be reached, else the error itself. */
  failure(error: unknown): unknown {
    if (!isConnectionFailure(error)) return error;
    this.availability.lost(error);
    return this.availability.unavailable(error);
  }

  async end(): Promise<void> {
    this.availability.close();
    await this.pool.end();
  }
}

export async function openPostgres(url: string, logger: Logger, options: PostgresOptions = {}): Promise<Database> {
  const where = redactUrl(url);
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, types, connectionTimeoutMillis: options.connectTimeoutMs ?? 3000, keepAlive: true });
  // An idle client that loses its connection must not take the process down; the pool replaces it.
  pool.on("error", () => undefined);
  const db = new Database(pool, where, logger, options.probeIntervalMs);
  try {
    await pool.query("SELECT 1");
  } catch (error) {
    await db.end().catch(() => undefined);
    const message = `could not connect to PostgreSQL at ${where}: ${messageOf(error)}. Is the server running and the URL right (postgres://user:password@host:port/database)?`;
    throw isConnectionFailure(error) ? new StoreUnreachableError(message) : new StoreOpenError(message);
  }
  try {
    await migrate(db, where, POSTGRES_MIGRATIONS);
  } catch (error) {
    await db.end().catch(() => undefined);
    if (error instanceof StoreOpenError) throw error;
    const message = `could not prepare the Synapse schema in ${where}: ${messageOf(error)}`;
    throw isConnectionFailure(error) || error instanceof StoreUnavailableError ? new StoreUnreachableError(message) : new StoreOpenError(message);
  }
  return db;
}

async function migrate(db: Database, where: string, migrations: readonly Migration[]): Promise<void> {
  await transaction(db, async (client) => {
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

/**
 * Runs `work` in one transaction on one connection; a throw rolls everything
 * back. A connection lost meanwhile fails the work (StoreUnavailableError)
 * and is closed rather than pooled again.
 */
export async function transaction<T>(db: Database, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  db.availability.check();
  let client: pg.PoolClient;
  try {
    client = await db.pool.connect();
  } catch (error) {
    throw db.failure(error);
  }
  // A checked-out client has no listener of the pool's: without this one, a lost connection's 'error' event ends the process.
  let lost: unknown;
  const onError = (error: unknown) => (lost ??= error);
  client.on("error", onError);
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    if (lost === undefined && isConnectionFailure(error)) lost = error;
    if (lost === undefined) await client.query("ROLLBACK").catch(() => undefined);
    throw db.failure(lost ?? error);
  } finally {
    client.removeListener("error", onError);
    // A truthy argument closes the connection instead of pooling it again.
    client.release(lost === undefined ? undefined : lost instanceof Error ? lost : new Error(String(lost)));
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

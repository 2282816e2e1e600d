// The stores a benchmark can run `synapse serve` on, and the `serve` flags
// that select each one. PostgreSQL comes from SYNAPSE_BENCH_POSTGRES (a URL
// to a server where databases may be created) or a throwaway cluster started
// here (durable settings: fsync on), with a fresh database per server; when
// neither is possible, its stores are skipped with one line saying why.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { findPostgresBin, startCluster, type Cluster } from "../scripts/postgres-cluster.js";
import { BenchUsageError } from "./usage-error.js";
import { startChildServer, type ChildServer } from "./child-server.js";

export type StoreName = "memory" | "sqlite" | "sqlite-full" | "postgres" | "postgres-full";
export const STORE_NAMES: readonly StoreName[] = ["memory", "sqlite", "sqlite-full", "postgres", "postgres-full"];

/** What each store is, in one line, for the output. */
export const STORE_NOTES: Record<StoreName, string> = {
  memory: "--store memory: this process's memory, kept until --retention (tests only)",
  sqlite: "SQLite in the data dir (the default), WAL, --fsync normal: a crash loses nothing acknowledged; power loss may lose the last commits",
  "sqlite-full": "SQLite with --fsync full: every commit is fsynced (survives power loss)",
  postgres: "PostgreSQL, fresh database, synchronous_commit=off: power loss or a database crash may lose the last commits (as SQLite normal)",
  "postgres-full": "PostgreSQL, fresh database, synchronous_commit=on with fsync: every commit is flushed (as SQLite full)",
};

export const isPostgres = (store: StoreName): boolean => store === "postgres" || store === "postgres-full";

export function parseStores(value: string, flag: string): StoreName[] {
  const names = value.split(",").map((name) => name.trim()).filter((name) => name !== "");
  for (const name of names) {
    if (!(STORE_NAMES as readonly string[]).includes(name)) throw new BenchUsageError(`${flag}: unknown store ${JSON.stringify(name)} (one of ${STORE_NAMES.join(", ")})`);
  }
  if (names.length === 0) throw new BenchUsageError(`${flag} needs at least one store`);
  return [...new Set(names as StoreName[])];
}

export interface BenchPostgres {
  /** Where the databases live, for the output. */
  where: string;
  /** `serve` flags for a fresh database with the store's commit setting. */
  serveArgs(store: StoreName): Promise<string[]>;
  stop(): Promise<void>;
}

/** A PostgreSQL server for the bench, or the reason there is none. */
export async function openBenchPostgres(progress: (message: string) => void): Promise<BenchPostgres | { skipped: string }> {
  let admin = process.env.SYNAPSE_BENCH_POSTGRES;
  let cluster: Cluster | undefined;
  let where = "SYNAPSE_BENCH_POSTGRES";
  if (!admin) {
    if (findPostgresBin() === undefined) {
      return { skipped: "PostgreSQL not installed (no initdb) and SYNAPSE_BENCH_POSTGRES not set: PostgreSQL rows skipped" };
    }
    progress("starting a throwaway PostgreSQL cluster (initdb, fsync on)");
    const started = await startCluster({ durable: true });
    cluster = started;
    process.on("exit", () => cluster?.stop()); // an error or Ctrl-C still removes it
    admin = started.url;
    where = "throwaway local cluster (initdb, 127.0.0.1, fsync on)";
  }
  const adminUrl = admin;
  return {
    where,
    async serveArgs(store) {
      const name = `synapse_bench_${store.replace("-", "_")}_${randomBytes(4).toString("hex")}`;
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
        // synchronous_commit is a per-database setting; fsync is the server's.
        await client.query(`ALTER DATABASE ${name} SET synchronous_commit = ${store === "postgres-full" ? "on" : "off"}`);
      } finally {
        await client.end();
      }
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return ["--store", url.toString()];
    },
    async stop() {
      const stopping = cluster;
      cluster = undefined;
      stopping?.stop();
    },
  };
}

/** `serve` flags for a store other than PostgreSQL. */
export function localServeArgs(store: Exclude<StoreName, "postgres" | "postgres-full">): string[] {
  switch (store) {
    case "memory":
      return ["--store", "memory"];
    case "sqlite":
      return ["--store", "sqlite", "--fsync", "normal"];
    case "sqlite-full":
      return ["--store", "sqlite", "--fsync", "full"];
  }
}

/**
 * Flags every benchmarked server gets: an admission limit high enough that the
 * bench measures the store, not the limit; no idle timeout, so the clients of
 * a server waiting its turn keep their connections.
 */
export const COMMON_SERVE_ARGS: readonly string[] = ["--max-concurrent-tasks", "10000", "--idle-timeout", "0"];

/** `synapse serve` on `store` as a child process, its warnings forwarded to `progress`. */
export async function startStoreServer(
  store: StoreName,
  postgres: BenchPostgres | undefined,
  progress: (message: string) => void,
  options: { traceGc?: boolean; nodeFlags?: readonly string[]; serveFlags?: readonly string[] } = {},
): Promise<ChildServer> {
  let storeArgs: string[];
  if (isPostgres(store)) {
    if (postgres === undefined) throw new Error(`no PostgreSQL server for the ${store} store`);
    storeArgs = await postgres.serveArgs(store);
  } else {
    storeArgs = localServeArgs(store as Exclude<StoreName, "postgres" | "postgres-full">);
  }
  const server = await startChildServer({
    label: store,
    args: [...storeArgs, ...COMMON_SERVE_ARGS, ...(options.serveFlags ?? [])],
    onStderr: (line) => progress(`[${store} server] ${line}`),
    traceGc: options.traceGc,
    nodeFlags: options.nodeFlags,
  });
  progress(`${store}: synapse serve pid ${server.pid} at ${server.url}`);
  return server;
}

// Opens the storage a `--store` value names: nothing (or "sqlite") is the
// SQLite file in the data dir, "sqlite:PATH" another file, "memory" this
// process's memory (tests), and a postgres:// or postgresql:// URL a
// PostgreSQL database shared by several instances.
import { join } from "node:path";
import type { Logger } from "../log.js";
import { StoreOpenError } from "./errors.js";
import { memoryStorage } from "./memory/index.js";
import { postgresStorage } from "./postgres/index.js";
import { sqliteStorage, type Fsync } from "./sqlite/index.js";
import type { Storage } from "./storage.js";

export const SQLITE_FILE = "synapse.db";

export interface OpenStorageOptions {
  dataDir: string;
  fsync?: Fsync;
  logger?: Logger;
}

/** What a `--store` value names; a value that names no store throws StoreOpenError. */
export type StoreSpec = { kind: "sqlite"; path?: string } | { kind: "memory" } | { kind: "postgres"; url: string };

export function parseStoreSpec(spec: string | undefined): StoreSpec {
  const value = spec?.trim() ?? "";
  if (value === "" || value === "sqlite") return { kind: "sqlite" };
  if (value === "memory") return { kind: "memory" };
  if (value.startsWith("sqlite:")) {
    const path = value.slice("sqlite:".length).replace(/^\/\//, "");
    if (path === "") throw new StoreOpenError("--store sqlite:PATH needs a file path");
    return { kind: "sqlite", path };
  }
  if (/^postgres(ql)?:\/\//.test(value)) return { kind: "postgres", url: value };
  throw new StoreOpenError(`--store ${JSON.stringify(value)} is not a store: use sqlite (the default), sqlite:PATH, memory, or a postgres:// URL`);
}

export async function openStorage(spec: string | undefined, options: OpenStorageOptions): Promise<Storage> {
  const parsed = parseStoreSpec(spec);
  switch (parsed.kind) {
    case "sqlite":
      return sqliteStorage(parsed.path ?? join(options.dataDir, SQLITE_FILE), { fsync: options.fsync });
    case "memory":
      return memoryStorage();
    case "postgres":
      return postgresStorage(parsed.url, { logger: options.logger });
  }
}

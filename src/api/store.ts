// Stores by name, for the server entry point: what openStore returns is the
// internal Storage seen through a small interface; agents get the Storage
// back from a WeakMap, so a look-alike object cannot be passed in.
import type { Logger } from "../log.js";
import { openStorage } from "../store/open.js";
import type { PinStore } from "../store/pins.js";
import type { Storage } from "../store/storage.js";

/**
 * A store opened with {@link openStore}: where an agent keeps its tasks,
 * their signed event logs, replies, results, pending callbacks and pinned
 * keys. Close it after the agent that uses it.
 */
export interface Store {
  /** Which kind of store it is. */
  readonly kind: "memory" | "sqlite" | "postgres";
  /** Where it is (a file path or a URL without its password), for logs. */
  readonly location: string;
  /** The keys of other agents pinned on first use; give them to `PinnedKeys` (from `synapse-connect`) to compose a trust policy. */
  readonly pins: PinStore;
  /** Closes the store. */
  close(): Promise<void>;
}

/**
 * Where an agent keeps its state, by name:
 * - `"sqlite"`: the file `synapse.db` in the data directory (the default);
 * - `"sqlite:PATH"`: another SQLite file;
 * - `"postgres://user:password@host:port/db"` (or `postgresql://`): a
 *   PostgreSQL database, which several instances of one agent (the same
 *   identity) share and act as one;
 * - `"memory"`: this process's memory, forgotten at exit (tests).
 */
export type StoreSpec = "sqlite" | "memory" | `sqlite:${string}` | `postgres://${string}` | `postgresql://${string}`;

/** Options of {@link openStore}. */
export interface OpenStoreOptions {
  /** The data directory holding `synapse.db` for `"sqlite"`; default `.synapse`. */
  dataDir?: string;
  /**
   * SQLite: `"normal"` (default) loses nothing acknowledged when the process
   * crashes, only the last commits on a power loss; `"full"` syncs every commit.
   */
  fsync?: "normal" | "full";
  /** Where the store logs (PostgreSQL reconnects, for example). */
  logger?: Logger;
}

const openedStores = new WeakMap<Store, Storage>();

/** The Storage behind a store from openStore, or undefined for anything else. */
export function storageOf(store: Store): Storage | undefined {
  return openedStores.get(store);
}

/**
 * Opens a store by name (see {@link StoreSpec}). SQLite is held by one
 * process at a time; PostgreSQL may be shared by several.
 *
 * @throws {@link StoreOpenError} when the store cannot be opened, with a
 *   sentence saying what is wrong and what to do.
 */
export async function openStore(spec: StoreSpec = "sqlite", options: OpenStoreOptions = {}): Promise<Store> {
  const storage = await openStorage(spec, { dataDir: options.dataDir ?? DEFAULT_DATA_DIR, fsync: options.fsync, logger: options.logger });
  openedStores.set(storage, storage);
  return storage;
}

/** The data directory an agent uses when none is given. */
export const DEFAULT_DATA_DIR = ".synapse";

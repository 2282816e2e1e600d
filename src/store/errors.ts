// Why a store could not be opened: always a sentence that names what is
// wrong and what to do, shown to the operator as it is.
/** A store that cannot be opened; the message says what is wrong and what to do. */
export class StoreOpenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreOpenError";
  }
}

/** How long a caller is told to wait before trying again, unless a store says otherwise. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

/**
 * The store cannot be used now (its database is unreachable, its disk is
 * full); nothing was written. Callers may try again after `retryAfterSeconds`.
 */
export class StoreUnavailableError extends Error {
  constructor(
    message: string,
    /** unreachable: the database server did not answer; disk_full: there was no room for the write. */
    readonly reason: "unreachable" | "disk_full",
    readonly retryAfterSeconds = DEFAULT_RETRY_AFTER_SECONDS,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "StoreUnavailableError";
  }
}

/** A disk-full data dir tells writers to come back later than a restarting database does. */
const DISK_FULL_RETRY_AFTER_SECONDS = 30;

/**
 * The error as a StoreUnavailableError when it says the store cannot be used
 * now: one already, or SQLite's "database or disk is full" (SQLITE_FULL,
 * which leaves the database as it was before the write).
 */
export function storeUnavailable(error: unknown): StoreUnavailableError | undefined {
  if (error instanceof StoreUnavailableError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof Error && error.name === "SqliteError" && code === "SQLITE_FULL") {
    return new StoreUnavailableError("the data dir's disk is full: nothing was written; free some space", "disk_full", DISK_FULL_RETRY_AFTER_SECONDS, { cause: error });
  }
  return undefined;
}

/** A store that could not be opened because its server did not answer: worth trying again (serve --store-wait). */
export class StoreUnreachableError extends StoreOpenError {
  constructor(message: string) {
    super(message);
    this.name = "StoreUnreachableError";
  }
}

/** The store is held by another running process (a second `synapse serve` on one data dir). */
export class StoreInUseError extends StoreOpenError {
  constructor(message: string) {
    super(message);
    this.name = "StoreInUseError";
  }
}

// Opening the state store at start when its database server may not be up
// yet (containers started together, a database restarting): tries again
// with a capped exponential backoff, logging each try, for as long as
// --store-wait allows (default: until it answers).
import type { Logger } from "../log.js";
import { StoreUnreachableError } from "../store/errors.js";
import type { Storage } from "../store/storage.js";

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5000;

/**
 * Opens the store with `open`, again after each StoreUnreachableError until
 * `waitMs` has passed (undefined: no end; 0: one try). Any other failure (a
 * bad URL, a schema from a newer version) ends the wait at once.
 */
export async function openStorageWaiting(open: () => Promise<Storage>, waitMs: number | undefined, logger: Logger): Promise<Storage> {
  const started = Date.now();
  let delay = FIRST_DELAY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      const storage = await open();
      if (attempt > 1) logger.info({ attempt, waited_ms: Date.now() - started }, "the state store answers");
      return storage;
    } catch (error) {
      if (!(error instanceof StoreUnreachableError)) throw error;
      const waited = Date.now() - started;
      // The last try is made when the wait ends.
      const pause = waitMs === undefined ? delay : Math.min(delay, waitMs - waited);
      if (pause <= 0) {
        throw new StoreUnreachableError(waitMs === 0 ? error.message : `${error.message} (waited ${(waited / 1000).toFixed(1)} s, as --store-wait allows)`);
      }
      logger.warn({ attempt, retry_in_ms: pause, reason: error.message }, "the state store does not answer yet; waiting for it");
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }
}

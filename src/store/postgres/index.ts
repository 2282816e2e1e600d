// Storage in PostgreSQL: several instances of one agent (same identity)
// share it and behave as one agent.
import { PostgresA2APushStore } from "./a2a-push.js";
import { randomUUID } from "node:crypto";
import { silentLogger, type Logger } from "../../log.js";
import type { Storage } from "../storage.js";
import { openPostgres, redactUrl, type PostgresOptions } from "./database.js";
import { PostgresGroupStorage } from "./groups.js";
import { PostgresCatalogueStorage, PostgresDirectoryStorage, PostgresPinStore } from "./registry.js";
import { PostgresTaskStore } from "./tasks.js";
import { PostgresUploadStore } from "./uploads.js";

export interface PostgresStorageOptions extends PostgresOptions {
  logger?: Logger;
  /** How often the tasks someone waits on are polled in case a notification was lost (default 2 s). */
  pollIntervalMs?: number;
}

export async function postgresStorage(url: string, options: PostgresStorageOptions = {}): Promise<Storage> {
  const pool = await openPostgres(url, options);
  const tasks = new PostgresTaskStore({ pool, url, origin: randomUUID(), logger: options.logger ?? silentLogger, pollIntervalMs: options.pollIntervalMs });
  try {
    await tasks.start();
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
  return {
    kind: "postgres",
    location: redactUrl(url),
    tasks,
    uploads: new PostgresUploadStore(pool),
    pins: new PostgresPinStore(pool),
    directory: new PostgresDirectoryStorage(pool),
    catalogue: new PostgresCatalogueStorage(pool),
    a2aPush: new PostgresA2APushStore(pool),
    groups: new PostgresGroupStorage(pool),
    async close() {
      await tasks.close();
      await pool.end();
    },
  };
}

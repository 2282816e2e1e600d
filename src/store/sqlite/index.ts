// Storage in one SQLite file (the embedded default: <data-dir>/synapse.db).
import { SqliteA2APushStore } from "./a2a-push.js";
import type { Storage } from "../storage.js";
import { openSqliteDatabase, type SqliteOptions } from "./database.js";
import { SqliteGroupStorage } from "./groups.js";
import { SqliteCatalogueStorage, SqliteDirectoryStorage, SqlitePinStore } from "./registry.js";
import { SqliteTaskStore } from "./tasks.js";
import { SqliteUploadStore } from "./uploads.js";

export type { Fsync, SqliteOptions } from "./database.js";

export function sqliteStorage(path: string, options: SqliteOptions & { now?: () => number } = {}): Storage {
  const db = openSqliteDatabase(path, options);
  const tasks = new SqliteTaskStore(db, options.now);
  return {
    kind: "sqlite",
    location: path,
    tasks,
    uploads: new SqliteUploadStore(db),
    pins: new SqlitePinStore(db),
    directory: new SqliteDirectoryStorage(db),
    catalogue: new SqliteCatalogueStorage(db),
    a2aPush: new SqliteA2APushStore(db),
    groups: new SqliteGroupStorage(db),
    close: () => tasks.close(),
  };
}

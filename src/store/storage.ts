// Everything an agent (and a registry beside it) remembers, in one place:
// tasks and their logs, uploads, pinned keys, the directory and the
// catalogue, the groups it hosts. One of these is opened per process, on
// memory, SQLite or PostgreSQL.
import type { A2APushStore } from "./a2a-push.js";
import type { GroupStorage } from "./group-storage.js";
import type { PinStore } from "./pins.js";
import type { CatalogueStorage, DirectoryStorage } from "./registry-storage.js";
import type { TaskStore } from "./store.js";
import type { UploadStore } from "./uploads.js";

export type StorageKind = "memory" | "sqlite" | "postgres";

export interface Storage {
  readonly kind: StorageKind;
  /** Where it is, for logs (never a password). */
  readonly location: string;
  readonly tasks: TaskStore;
  /** Files sent with POST /upload. */
  readonly uploads: UploadStore;
  readonly pins: PinStore;
  readonly directory: DirectoryStorage;
  readonly catalogue: CatalogueStorage;
  /** Groups this agent hosts (A2N). */
  readonly groups: GroupStorage;
  /** A2A push-notification configs and what each has delivered. */
  readonly a2aPush: A2APushStore;
  close(): Promise<void>;
}

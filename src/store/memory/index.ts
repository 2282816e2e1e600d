// Storage held in this process's memory: for tests and embedding only.
import { MemoryA2APushStore } from "./a2a-push.js";
import type { Storage } from "../storage.js";
import { MemoryGroupStorage } from "./groups.js";
import { MemoryCatalogueStorage, MemoryDirectoryStorage, MemoryPinStore } from "./registry.js";
import { MemoryTaskStore, type MemoryTaskStoreOptions } from "./tasks.js";
import { MemoryUploadStore } from "./uploads.js";

export { MemoryTaskStore, type MemoryTaskStoreOptions } from "./tasks.js";
export { MemoryUploadStore } from "./uploads.js";
export { MemoryCatalogueStorage, MemoryDirectoryStorage, MemoryPinStore } from "./registry.js";

export function memoryStorage(now?: () => number, options?: MemoryTaskStoreOptions): Storage {
  const tasks = new MemoryTaskStore(now, options);
  return {
    kind: "memory",
    location: "memory",
    tasks,
    uploads: new MemoryUploadStore(tasks),
    pins: new MemoryPinStore(),
    directory: new MemoryDirectoryStorage(),
    catalogue: new MemoryCatalogueStorage(),
    a2aPush: new MemoryA2APushStore(),
    groups: new MemoryGroupStorage(tasks),
    close: () => tasks.close(),
  };
}

// Storage held in this process's memory: for tests and embedding only.
import type { Storage } from "../storage.js";
import { MemoryGroupStorage } from "./groups.js";
import { MemoryCatalogueStorage, MemoryDirectoryStorage, MemoryPinStore } from "./registry.js";
import { MemoryTaskStore } from "./tasks.js";
import { MemoryUploadStore } from "./uploads.js";

export { MemoryTaskStore } from "./tasks.js";
export { MemoryUploadStore } from "./uploads.js";
export { MemoryCatalogueStorage, MemoryDirectoryStorage, MemoryPinStore } from "./registry.js";

export function memoryStorage(now?: () => number): Storage {
  const tasks = new MemoryTaskStore(now);
  return {
    kind: "memory",
    location: "memory",
    tasks,
    uploads: new MemoryUploadStore(tasks),
    pins: new MemoryPinStore(),
    directory: new MemoryDirectoryStorage(),
    catalogue: new MemoryCatalogueStorage(),
    groups: new MemoryGroupStorage(tasks),
    close: () => tasks.close(),
  };
}

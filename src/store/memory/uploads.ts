// The in-memory UploadStore, for tests and embedding: chunks live in this
// process, under the same rules as the durable stores.
import { isTerminal } from "../../protocol/state-machine.js";
import type { TaskStore } from "../store.js";
import {
  ChunkBuffer,
  quotaRefusal,
  sliceUploadChunks,
  UPLOAD_CHUNK_BYTES,
  type UploadMeta,
  type UploadRecord,
  type UploadStore,
  type UploadWriter,
} from "../uploads.js";

interface Entry {
  record: UploadRecord;
  chunks: Uint8Array[];
  users: Set<string>;
}

const keyOf = (owner: string, sha256: string) => `${owner}\u0000${sha256}`;

export class MemoryUploadStore implements UploadStore {
  private readonly uploads = new Map<string, Entry>();
  /** Unfinished uploads and when each began. */
  private readonly pending = new Map<symbol, number>();
  /** Bytes of finished uploads, per owner and in all: kept as they change, so a commit checks both without an await in between. */
  private readonly owned = new Map<string, number>();
  private total = 0;

  /** @param tasks where "does a live task use it" is looked up */
  constructor(private readonly tasks: Pick<TaskStore, "getTask">) {}

  async beginUpload(owner: string, nowMs: number): Promise<UploadWriter> {
    const id = Symbol(owner);
    const chunks: Uint8Array[] = [];
    const buffer = new ChunkBuffer((_index, chunk) => void chunks.push(chunk));
    this.pending.set(id, nowMs);
    return {
      write: (bytes) => {
        if (!this.pending.has(id)) throw new Error("the upload was dropped");
        return buffer.write(bytes);
      },
      commit: async (meta: UploadMeta) => {
        await buffer.end();
        if (!this.pending.delete(id)) throw new Error("the upload was dropped");
        const key = keyOf(owner, meta.sha256);
        const existing = this.uploads.get(key);
        if (existing !== undefined) {
          existing.record = { ...existing.record, lastUsedAtMs: nowMs };
          return existing.record;
        }
        const refused = quotaRefusal(meta, this.owned.get(owner) ?? 0, this.total);
        if (refused !== undefined) throw refused;
        const record: UploadRecord = { owner, sha256: meta.sha256, size: meta.size, contentType: meta.contentType, fileName: meta.fileName, createdAtMs: nowMs, lastUsedAtMs: nowMs };
        this.uploads.set(key, { record, chunks, users: new Set() });
        this.count(owner, meta.size);
        return record;
      },
      abort: async () => {
        this.pending.delete(id);
      },
    };
  }

  async getUpload(owner: string, sha256: string): Promise<UploadRecord | undefined> {
    return this.uploads.get(keyOf(owner, sha256))?.record;
  }

  async readUpload(owner: string, sha256: string, offset: number, length: number): Promise<Uint8Array> {
    const entry = this.uploads.get(keyOf(owner, sha256));
    if (entry === undefined) throw new RangeError(`no upload ${sha256}`);
    if (offset >= entry.record.size || length <= 0) return new Uint8Array(0);
    const first = Math.floor(offset / UPLOAD_CHUNK_BYTES);
    const last = Math.floor((Math.min(offset + length, entry.record.size) - 1) / UPLOAD_CHUNK_BYTES);
    return sliceUploadChunks(entry.chunks.slice(first, last + 1), first, offset, length);
  }

  async usage(owner: string): Promise<number> {
    return this.owned.get(owner) ?? 0;
  }

  async totalUsage(): Promise<number> {
    return this.total;
  }

  private count(owner: string, bytes: number): void {
    const owned = (this.owned.get(owner) ?? 0) + bytes;
    if (owned === 0) this.owned.delete(owner);
    else this.owned.set(owner, owned);
    this.total += bytes;
  }

  async useUpload(owner: string, sha256: string, taskId: string, nowMs: number): Promise<boolean> {
    const entry = this.uploads.get(keyOf(owner, sha256));
    if (entry === undefined) return false;
    entry.users.add(taskId);
    entry.record = { ...entry.record, lastUsedAtMs: Math.max(entry.record.lastUsedAtMs, nowMs) };
    return true;
  }

  async pruneUploads(unusedBeforeMs: number, limit: number): Promise<number> {
    let dropped = 0;
    for (const [id, began] of this.pending) {
      if (dropped >= limit) return dropped;
      if (began < unusedBeforeMs) {
        this.pending.delete(id);
        dropped++;
      }
    }
    for (const [key, entry] of this.uploads) {
      if (dropped >= limit) break;
      if (entry.record.lastUsedAtMs >= unusedBeforeMs || (await this.usedByLiveTask(entry))) continue;
      this.uploads.delete(key);
      this.count(entry.record.owner, -entry.record.size);
      dropped++;
    }
    return dropped;
  }

  private async usedByLiveTask(entry: Entry): Promise<boolean> {
    for (const taskId of entry.users) {
      const task = await this.tasks.getTask(taskId);
      if (task !== undefined && !isTerminal(task.state)) return true;
    }
    return false;
  }
}

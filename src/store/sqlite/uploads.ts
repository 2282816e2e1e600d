// The SQLite UploadStore: an upload's bytes are written chunk by chunk as
// they arrive (each chunk its own small commit), and the upload becomes
// known by its hash in one commit that also checks the quota and the total
// (SQLite commits one at a time, so no two can slip past it). Whether a
// live task uses an upload is answered from the tasks table of the same file.
import type Database from "better-sqlite3";
import { randomUUID } from "node:crypto";
import {
  ChunkBuffer,
  sliceUploadChunks,
  UPLOAD_CHUNK_BYTES,
  quotaRefusal,
  type UploadMeta,
  type UploadRecord,
  type UploadStore,
  type UploadWriter,
} from "../uploads.js";

interface UploadRow {
  upload_id: string;
  owner: string;
  sha256: string;
  size: number;
  content_type: string;
  file_name: string;
  created_at_ms: number;
  last_used_at_ms: number;
}

function recordOf(row: UploadRow): UploadRecord {
  return {
    owner: row.owner,
    sha256: row.sha256,
    size: row.size,
    contentType: row.content_type,
    fileName: row.file_name,
    createdAtMs: row.created_at_ms,
    lastUsedAtMs: row.last_used_at_ms,
  };
}

export class SqliteUploadStore implements UploadStore {
  private readonly sql;

  constructor(private readonly db: Database.Database) {
    this.sql = {
      begin: db.prepare("INSERT INTO uploads (upload_id, owner, sha256, size, content_type, file_name, complete, created_at_ms, last_used_at_ms) VALUES (?, ?, NULL, 0, '', '', 0, ?, ?)"),
      pending: db.prepare("SELECT 1 FROM uploads WHERE upload_id = ? AND complete = 0"),
      insertChunk: db.prepare("INSERT INTO upload_chunks (upload_id, chunk, data) VALUES (?, ?, ?)"),
      byHash: db.prepare("SELECT * FROM uploads WHERE owner = ? AND sha256 = ? AND complete = 1"),
      usage: db.prepare("SELECT COALESCE(SUM(size), 0) AS used FROM uploads WHERE owner = ? AND complete = 1"),
      totalUsage: db.prepare("SELECT COALESCE(SUM(size), 0) AS used FROM uploads WHERE complete = 1"),
      finish: db.prepare("UPDATE uploads SET sha256 = ?, size = ?, content_type = ?, file_name = ?, complete = 1, last_used_at_ms = ? WHERE upload_id = ?"),
      touch: db.prepare("UPDATE uploads SET last_used_at_ms = MAX(last_used_at_ms, ?) WHERE upload_id = ?"),
      chunks: db.prepare("SELECT data FROM upload_chunks WHERE upload_id = ? AND chunk BETWEEN ? AND ? ORDER BY chunk"),
      addUser: db.prepare("INSERT INTO upload_users (upload_id, task_id) VALUES (?, ?) ON CONFLICT DO NOTHING"),
      stale: db.prepare(
        `SELECT upload_id FROM uploads u
          WHERE (u.complete = 0 AND u.created_at_ms < @before)
             OR (u.complete = 1 AND u.last_used_at_ms < @before AND NOT EXISTS (
                  SELECT 1 FROM upload_users r JOIN tasks t ON t.task_id = r.task_id WHERE r.upload_id = u.upload_id AND t.active = 1))
          LIMIT @limit`,
      ),
      deleteUpload: db.prepare("DELETE FROM uploads WHERE upload_id = ?"),
      deleteChunks: db.prepare("DELETE FROM upload_chunks WHERE upload_id = ?"),
      deleteUsers: db.prepare("DELETE FROM upload_users WHERE upload_id = ?"),
    };
  }

  async beginUpload(owner: string, nowMs: number): Promise<UploadWriter> {
    const id = randomUUID();
    this.sql.begin.run(id, owner, nowMs, nowMs);
    const buffer = new ChunkBuffer((index, chunk) => {
      // A pruned (abandoned) upload takes no more bytes.
      if (this.sql.pending.get(id) === undefined) throw new Error("the upload was dropped");
      this.sql.insertChunk.run(id, index, chunk);
    }, { reuse: true }); // better-sqlite3 copies bound blobs (SQLITE_TRANSIENT)
    return {
      write: (bytes) => buffer.write(bytes),
      commit: async (meta: UploadMeta) => {
        await buffer.end();
        return this.db.transaction(() => {
          if (this.sql.pending.get(id) === undefined) throw new Error("the upload was dropped");
          const existing = this.sql.byHash.get(owner, meta.sha256) as UploadRow | undefined;
          if (existing !== undefined) {
            this.drop(id);
            this.sql.touch.run(nowMs, existing.upload_id);
            return recordOf({ ...existing, last_used_at_ms: Math.max(existing.last_used_at_ms, nowMs) });
          }
          const owned = (this.sql.usage.get(owner) as { used: number }).used;
          const total = meta.totalBytes === undefined ? 0 : (this.sql.totalUsage.get() as { used: number }).used;
          const refused = quotaRefusal(meta, owned, total);
          if (refused !== undefined) {
            this.drop(id);
            throw refused;
          }
          this.sql.finish.run(meta.sha256, meta.size, meta.contentType, meta.fileName, nowMs, id);
          return recordOf(this.sql.byHash.get(owner, meta.sha256) as UploadRow);
        })();
      },
      abort: async () => {
        this.db.transaction(() => this.drop(id))();
      },
    };
  }

  private drop(uploadId: string): void {
    this.sql.deleteChunks.run(uploadId);
    this.sql.deleteUsers.run(uploadId);
    this.sql.deleteUpload.run(uploadId);
  }

  async getUpload(owner: string, sha256: string): Promise<UploadRecord | undefined> {
    const row = this.sql.byHash.get(owner, sha256) as UploadRow | undefined;
    return row === undefined ? undefined : recordOf(row);
  }

  async readUpload(owner: string, sha256: string, offset: number, length: number): Promise<Uint8Array> {
    const row = this.sql.byHash.get(owner, sha256) as UploadRow | undefined;
    if (row === undefined) throw new RangeError(`no upload ${sha256}`);
    if (offset >= row.size || length <= 0) return new Uint8Array(0);
    const first = Math.floor(offset / UPLOAD_CHUNK_BYTES);
    const last = Math.floor((Math.min(offset + length, row.size) - 1) / UPLOAD_CHUNK_BYTES);
    const chunks = (this.sql.chunks.all(row.upload_id, first, last) as Array<{ data: Buffer }>).map((chunk) => chunk.data);
    return sliceUploadChunks(chunks, first, offset, length);
  }

  async usage(owner: string): Promise<number> {
    return (this.sql.usage.get(owner) as { used: number }).used;
  }

  async totalUsage(): Promise<number> {
    return (this.sql.totalUsage.get() as { used: number }).used;
  }

  async useUpload(owner: string, sha256: string, taskId: string, nowMs: number): Promise<boolean> {
    return this.db.transaction(() => {
      const row = this.sql.byHash.get(owner, sha256) as UploadRow | undefined;
      if (row === undefined) return false;
      this.sql.addUser.run(row.upload_id, taskId);
      this.sql.touch.run(nowMs, row.upload_id);
      return true;
    })();
  }

  async pruneUploads(unusedBeforeMs: number, limit: number): Promise<number> {
    return this.db.transaction(() => {
      const rows = this.sql.stale.all({ before: unusedBeforeMs, limit }) as Array<{ upload_id: string }>;
      for (const row of rows) this.drop(row.upload_id);
      return rows.length;
    })();
  }
}

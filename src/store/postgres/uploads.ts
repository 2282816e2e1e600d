// The PostgreSQL UploadStore: chunks are inserted as they fill, and an
// upload becomes known by its hash in one transaction that checks the
// quota under a per-owner advisory lock, so instances uploading for one
// sender at once cannot both slip under it; with a total to check, under one
// lock for every owner, so uploads from many senders cannot either.
import type pg from "pg";
import { randomUUID } from "node:crypto";
import {
  ChunkBuffer,
  sliceUploadChunks,
  UPLOAD_CHUNK_BYTES,
  UploadQuotaError,
  quotaRefusal,
  type UploadMeta,
  type UploadRecord,
  type UploadStore,
  type UploadWriter,
} from "../uploads.js";
import { LOCKS, transaction, type Database, type Queryable } from "./database.js";

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

const BY_HASH = "SELECT * FROM uploads WHERE owner = $1 AND sha256 = $2 AND complete = 1";
const USAGE = "SELECT COALESCE(SUM(size), 0) AS used FROM uploads WHERE owner = $1 AND complete = 1";
const TOTAL_USAGE = "SELECT COALESCE(SUM(size), 0) AS used FROM uploads WHERE complete = 1";

async function drop(client: Queryable, uploadId: string): Promise<void> {
  await client.query("DELETE FROM upload_chunks WHERE upload_id = $1", [uploadId]);
  await client.query("DELETE FROM upload_users WHERE upload_id = $1", [uploadId]);
  await client.query("DELETE FROM uploads WHERE upload_id = $1", [uploadId]);
}

export class PostgresUploadStore implements UploadStore {
  constructor(private readonly pool: Database) {}

  async beginUpload(owner: string, nowMs: number): Promise<UploadWriter> {
    const id = randomUUID();
    await this.pool.query(
      "INSERT INTO uploads (upload_id, owner, sha256, size, content_type, file_name, complete, created_at_ms, last_used_at_ms) VALUES ($1, $2, NULL, 0, '', '', 0, $3, $3)",
      [id, owner, nowMs],
    );
    const buffer = new ChunkBuffer(async (index, chunk) => {
      // Inserted only while the upload is still pending: a pruned (abandoned) upload takes no more bytes.
      const { rowCount } = await this.pool.query(
        "INSERT INTO upload_chunks (upload_id, chunk, data) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM uploads WHERE upload_id = $1 AND complete = 0)",
        [id, index, chunk],
      );
      if (rowCount === 0) throw new Error("the upload was dropped");
    });
    return {
      write: (bytes) => buffer.write(bytes),
      commit: async (meta: UploadMeta) => {
        await buffer.end();
        return transaction(this.pool, async (client) => {
          if (meta.totalBytes === undefined) await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [LOCKS.uploads, owner]);
          else await client.query("SELECT pg_advisory_xact_lock($1)", [LOCKS.uploads]);
          const pending = await client.query("SELECT 1 FROM uploads WHERE upload_id = $1 AND complete = 0", [id]);
          if (pending.rowCount === 0) throw new Error("the upload was dropped");
          const existing = (await client.query<UploadRow>(BY_HASH, [owner, meta.sha256])).rows[0];
          if (existing !== undefined) {
            await drop(client, id);
            await client.query("UPDATE uploads SET last_used_at_ms = GREATEST(last_used_at_ms, $1) WHERE upload_id = $2", [nowMs, existing.upload_id]);
            return recordOf({ ...existing, last_used_at_ms: Math.max(existing.last_used_at_ms, nowMs) });
          }
          const owned = Number((await client.query(USAGE, [owner])).rows[0].used);
          const total = meta.totalBytes === undefined ? 0 : Number((await client.query(TOTAL_USAGE)).rows[0].used);
          const refused = quotaRefusal(meta, owned, total);
          if (refused !== undefined) {
            await drop(client, id);
            // The refusal's deletions must stick: commit them, then refuse.
            return refused;
          }
          await client.query(
            "UPDATE uploads SET sha256 = $1, size = $2, content_type = $3, file_name = $4, complete = 1, last_used_at_ms = $5 WHERE upload_id = $6",
            [meta.sha256, meta.size, meta.contentType, meta.fileName, nowMs, id],
          );
          return recordOf((await client.query<UploadRow>(BY_HASH, [owner, meta.sha256])).rows[0]!);
        }).then((outcome) => {
          if (outcome instanceof UploadQuotaError) throw outcome;
          return outcome;
        });
      },
      abort: async () => {
        await transaction(this.pool, (client) => drop(client, id));
      },
    };
  }

  async getUpload(owner: string, sha256: string): Promise<UploadRecord | undefined> {
    const row = (await this.pool.query<UploadRow>(BY_HASH, [owner, sha256])).rows[0];
    return row === undefined ? undefined : recordOf(row);
  }

  async readUpload(owner: string, sha256: string, offset: number, length: number): Promise<Uint8Array> {
    const row = (await this.pool.query<UploadRow>(BY_HASH, [owner, sha256])).rows[0];
    if (row === undefined) throw new RangeError(`no upload ${sha256}`);
    if (offset >= row.size || length <= 0) return new Uint8Array(0);
    const first = Math.floor(offset / UPLOAD_CHUNK_BYTES);
    const last = Math.floor((Math.min(offset + length, row.size) - 1) / UPLOAD_CHUNK_BYTES);
    const { rows } = await this.pool.query<{ data: Buffer }>("SELECT data FROM upload_chunks WHERE upload_id = $1 AND chunk BETWEEN $2 AND $3 ORDER BY chunk", [
      row.upload_id,
      first,
      last,
    ]);
    return sliceUploadChunks(
      rows.map((chunk) => chunk.data),
      first,
      offset,
      length,
    );
  }

  async usage(owner: string): Promise<number> {
    return Number((await this.pool.query(USAGE, [owner])).rows[0]!.used);
  }

  async totalUsage(): Promise<number> {
    return Number((await this.pool.query(TOTAL_USAGE)).rows[0]!.used);
  }

  async useUpload(owner: string, sha256: string, taskId: string, nowMs: number): Promise<boolean> {
    return transaction(this.pool, async (client) => {
      const row = (await client.query<UploadRow>(`${BY_HASH} FOR UPDATE`, [owner, sha256])).rows[0];
      if (row === undefined) return false;
      await client.query("INSERT INTO upload_users (upload_id, task_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [row.upload_id, taskId]);
      await client.query("UPDATE uploads SET last_used_at_ms = GREATEST(last_used_at_ms, $1) WHERE upload_id = $2", [nowMs, row.upload_id]);
      return true;
    });
  }

  async pruneUploads(unusedBeforeMs: number, limit: number): Promise<number> {
    return transaction(this.pool, async (client) => {
      const { rows } = await client.query<{ upload_id: string }>(
        `SELECT upload_id FROM uploads u
          WHERE (u.complete = 0 AND u.created_at_ms < $1)
             OR (u.complete = 1 AND u.last_used_at_ms < $1 AND NOT EXISTS (
                  SELECT 1 FROM upload_users r JOIN tasks t ON t.task_id = r.task_id WHERE r.upload_id = u.upload_id AND t.active = 1))
          LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [unusedBeforeMs, limit],
      );
      for (const row of rows) await drop(client, row.upload_id);
      return rows.length;
    });
  }
}

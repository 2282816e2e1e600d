// The PostgreSQL tables beside the tasks: result bytes in chunks, tasks this
// agent requested from others, and the callback outbox (claimed by one
// instance at a time, with a lease).
import type pg from "pg";
import type { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { chunkRange, confidentialityBytes, confidentialityFrom, envelopeBytes, eventFromBytes, resultChunks, sliceChunks } from "../codec.js";
import {
  DeliveryStatus,
  StoreConflictError,
  type DeliveryPatch,
  type DeliveryRecord,
  type OutboundTask,
  type StoredEvent,
} from "../store.js";
import { transaction, type Database } from "./database.js";
import { CHANNEL } from "./feed.js";

interface DeliveryRow {
  task_id: string;
  url: string;
  next_sequence: number;
  attempts: number;
  next_attempt_at_ms: number;
  status: number;
  last_error: string;
  owner: string;
  owner_until_ms: number;
}

function deliveryFromRow(row: DeliveryRow): DeliveryRecord {
  return {
    taskId: row.task_id,
    url: row.url,
    nextSequence: row.next_sequence,
    attempts: row.attempts,
    nextAttemptAtMs: row.next_attempt_at_ms,
    status: row.status as DeliveryStatus,
    lastError: row.last_error,
    owner: row.owner,
    ownerUntilMs: row.owner_until_ms,
  };
}

export class PostgresSideTables {
  constructor(private readonly pool: Database) {}

  // ── results ────────────────────────────────────────────────────────────

  async putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    await transaction(this.pool, async (client) => {
      await client.query("DELETE FROM result_chunks WHERE task_id = $1", [taskId]);
      await client.query("DELETE FROM results WHERE task_id = $1", [taskId]);
      await client.query("INSERT INTO results (task_id, total_size) VALUES ($1, $2)", [taskId, bytes.byteLength]);
      let index = 0;
      for (const chunk of resultChunks(bytes)) await client.query("INSERT INTO result_chunks (task_id, chunk, data) VALUES ($1, $2, $3)", [taskId, index++, chunk]);
    });
  }

  async readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    const size = (await this.pool.query<{ total_size: number }>("SELECT total_size FROM results WHERE task_id = $1", [taskId])).rows[0];
    if (size === undefined) throw new RangeError(`task ${taskId} has no result stream`);
    if (offset >= size.total_size || length <= 0) return new Uint8Array(0);
    const { first, last } = chunkRange(offset, Math.min(length, size.total_size - offset));
    const { rows } = await this.pool.query<{ data: Buffer }>(
      "SELECT data FROM result_chunks WHERE task_id = $1 AND chunk BETWEEN $2 AND $3 ORDER BY chunk",
      [taskId, first, last],
    );
    return sliceChunks(
      rows.map((row) => row.data),
      first,
      offset,
      length,
    );
  }

  // ── outbound tasks ─────────────────────────────────────────────────────

  async expectOutbound(task: OutboundTask): Promise<void> {
    await this.pool.query(
      "INSERT INTO outbound_tasks (executor_agent_id, task_id, state, last_sequence, updated_at_ms, confidential) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
      [task.executorAgentId, task.taskId, task.state, task.lastSequence, Date.now(), confidentialityBytes(task.confidential)],
    );
  }

  async getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    const { rows } = await this.pool.query<{ state: number; last_sequence: number; confidential: Buffer | null }>(
      "SELECT state, last_sequence, confidential FROM outbound_tasks WHERE executor_agent_id = $1 AND task_id = $2",
      [executorAgentId, taskId],
    );
    if (rows[0] === undefined) return undefined;
    const confidential = confidentialityFrom(rows[0].confidential);
    return { executorAgentId, taskId, state: rows[0].state as TaskState, lastSequence: rows[0].last_sequence, ...(confidential === undefined ? {} : { confidential }) };
  }

  async appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState, notice: string): Promise<OutboundTask> {
    const { rows } = await this.pool.query<{ done: boolean; confidential: Buffer | null }>(
      `WITH t AS (UPDATE outbound_tasks SET state = $3, last_sequence = $4, updated_at_ms = $5
                  WHERE executor_agent_id = $1 AND task_id = $2 AND last_sequence = $4::integer - 1 RETURNING task_id, confidential),
            e AS (INSERT INTO outbound_events (executor_agent_id, task_id, sequence, envelope) SELECT $1, task_id, $4, $6 FROM t)
       SELECT pg_notify('${CHANNEL}', $7) IS NOT NULL AS done, t.confidential FROM t`,
      [executorAgentId, event.taskId, state, event.sequence, Date.now(), envelopeBytes(event.envelope), notice],
    );
    if (rows.length === 0) {
      const current = await this.getOutbound(executorAgentId, event.taskId);
      if (current === undefined) throw new StoreConflictError("missing", `no outbound task ${event.taskId} at ${executorAgentId}`);
      throw new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${current.lastSequence}`);
    }
    const confidential = confidentialityFrom(rows[0]!.confidential);
    return { executorAgentId, taskId: event.taskId, state, lastSequence: event.sequence, ...(confidential === undefined ? {} : { confidential }) };
  }

  async listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<{ sequence: number; envelope: Buffer }>(
      "SELECT sequence, envelope FROM outbound_events WHERE executor_agent_id = $1 AND task_id = $2 AND sequence >= $3 ORDER BY sequence",
      [executorAgentId, taskId, fromSequence],
    );
    return rows.map((row) => eventFromBytes(taskId, row.sequence, row.envelope));
  }

  // ── the callback outbox ────────────────────────────────────────────────

  async getDelivery(taskId: string): Promise<DeliveryRecord | undefined> {
    const { rows } = await this.pool.query<DeliveryRow>("SELECT * FROM callback_outbox WHERE task_id = $1", [taskId]);
    return rows[0] === undefined ? undefined : deliveryFromRow(rows[0]);
  }

  async claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]> {
    // SKIP LOCKED: instances claiming at the same moment take different rows instead of queueing.
    const { rows } = await this.pool.query<DeliveryRow>(
      `UPDATE callback_outbox SET owner = $1, owner_until_ms = $2 WHERE task_id IN (
         SELECT task_id FROM callback_outbox
         WHERE status = ${DeliveryStatus.ACTIVE} AND next_attempt_at_ms <= $3 AND (owner = '' OR owner = $1 OR owner_until_ms < $3)
           AND ($5::text IS NULL OR task_id = $5)
         LIMIT $4 FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [owner, untilMs, nowMs, limit, taskId ?? null],
    );
    return rows.map(deliveryFromRow);
  }

  async updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE callback_outbox SET
         next_sequence = COALESCE($3, next_sequence), attempts = COALESCE($4, attempts), next_attempt_at_ms = COALESCE($5, next_attempt_at_ms),
         status = COALESCE($6, status), last_error = COALESCE($7, last_error),
         owner = CASE WHEN $8 THEN '' ELSE owner END, owner_until_ms = CASE WHEN $8 THEN 0 ELSE owner_until_ms END
       WHERE task_id = $1 AND owner = $2`,
      [taskId, owner, patch.nextSequence ?? null, patch.attempts ?? null, patch.nextAttemptAtMs ?? null, patch.status ?? null, patch.lastError ?? null, patch.release === true],
    );
    return (rowCount ?? 0) > 0;
  }

  async renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const { rows } = await this.pool.query<{ task_id: string }>(
      "UPDATE callback_outbox SET owner_until_ms = $1 WHERE task_id = ANY($2) AND owner = $3 RETURNING task_id",
      [untilMs, [...taskIds], owner],
    );
    return rows.map((row) => row.task_id);
  }
}

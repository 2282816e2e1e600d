// The SQLite tables beside the tasks: result bytes in chunks, tasks this
// agent requested from others (with the events their executors pushed), and
// the callback outbox.
import type Database from "better-sqlite3";
import type { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { TERMINAL_STATES } from "../../protocol/state-machine.js";
import { chunkRange, confidentialityBytes, confidentialityFrom, envelopeBytes, eventFromBytes, resultChunks, sliceChunks } from "../codec.js";
import {
  DeliveryStatus,
  StoreConflictError,
  type DeliveryPatch,
  type DeliveryRecord,
  type OutboundTask,
  type StoredEvent,
} from "../store.js";

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

const TERMINAL_LIST = [...TERMINAL_STATES].join(", ");

export class SqliteSideTables {
  private readonly sql;
  private readonly updates = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly now: () => number,
  ) {
    this.sql = {
      deleteChunks: db.prepare("DELETE FROM result_chunks WHERE task_id = ?"),
      deleteResult: db.prepare("DELETE FROM results WHERE task_id = ?"),
      insertResult: db.prepare("INSERT INTO results (task_id, total_size) VALUES (?, ?)"),
      insertChunk: db.prepare("INSERT INTO result_chunks (task_id, chunk, data) VALUES (?, ?, ?)"),
      resultSize: db.prepare("SELECT total_size FROM results WHERE task_id = ?"),
      chunks: db.prepare("SELECT data FROM result_chunks WHERE task_id = ? AND chunk BETWEEN ? AND ? ORDER BY chunk"),
      expectOutbound: db.prepare(
        "INSERT INTO outbound_tasks (executor_agent_id, task_id, state, last_sequence, updated_at_ms, confidential) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
      ),
      getOutbound: db.prepare("SELECT state, last_sequence, confidential FROM outbound_tasks WHERE executor_agent_id = ? AND task_id = ?"),
      advanceOutbound: db.prepare(
        "UPDATE outbound_tasks SET state = ?, last_sequence = ?, updated_at_ms = ? WHERE executor_agent_id = ? AND task_id = ? AND last_sequence = ?",
      ),
      insertOutboundEvent: db.prepare("INSERT INTO outbound_events (executor_agent_id, task_id, sequence, envelope) VALUES (?, ?, ?, ?)"),
      outboundEvents: db.prepare(
        "SELECT sequence, envelope FROM outbound_events WHERE executor_agent_id = ? AND task_id = ? AND sequence >= ? ORDER BY sequence",
      ),
      finishedOutbound: db.prepare(`SELECT executor_agent_id, task_id FROM outbound_tasks WHERE state IN (${TERMINAL_LIST}) AND updated_at_ms < ? LIMIT ?`),
      deleteOutboundEvents: db.prepare("DELETE FROM outbound_events WHERE executor_agent_id = ? AND task_id = ?"),
      deleteOutbound: db.prepare("DELETE FROM outbound_tasks WHERE executor_agent_id = ? AND task_id = ?"),
      insertDelivery: db.prepare(
        `INSERT INTO callback_outbox (task_id, url, next_sequence, attempts, next_attempt_at_ms, status, last_error, owner, owner_until_ms)
         VALUES (?, ?, 1, 0, 0, ${DeliveryStatus.ACTIVE}, '', '', 0)`,
      ),
      getDelivery: db.prepare("SELECT * FROM callback_outbox WHERE task_id = ?"),
      dueDeliveries: db.prepare(
        `SELECT * FROM callback_outbox WHERE status = ${DeliveryStatus.ACTIVE} AND next_attempt_at_ms <= @now
           AND (owner = '' OR owner = @owner OR owner_until_ms < @now) LIMIT @limit`,
      ),
      claimDelivery: db.prepare("UPDATE callback_outbox SET owner = ?, owner_until_ms = ? WHERE task_id = ?"),
      renewDelivery: db.prepare("UPDATE callback_outbox SET owner_until_ms = ? WHERE task_id = ? AND owner = ?"),
      deleteDelivery: db.prepare("DELETE FROM callback_outbox WHERE task_id = ?"),
    };
  }

  // ── results ────────────────────────────────────────────────────────────

  putResult(taskId: string, bytes: Uint8Array): void {
    this.db.transaction(() => {
      this.deleteResult(taskId);
      this.sql.insertResult.run(taskId, bytes.byteLength);
      resultChunks(bytes).forEach((chunk, index) => this.sql.insertChunk.run(taskId, index, chunk));
    })();
  }

  readResult(taskId: string, offset: number, length: number): Uint8Array {
    const size = this.sql.resultSize.get(taskId) as { total_size: number } | undefined;
    if (size === undefined) throw new RangeError(`task ${taskId} has no result stream`);
    if (offset >= size.total_size || length <= 0) return new Uint8Array(0);
    const { first, last } = chunkRange(offset, Math.min(length, size.total_size - offset));
    const chunks = (this.sql.chunks.all(taskId, first, last) as Array<{ data: Buffer }>).map((row) => row.data);
    return sliceChunks(chunks, first, offset, length);
  }

  deleteResult(taskId: string): void {
    this.sql.deleteChunks.run(taskId);
    this.sql.deleteResult.run(taskId);
  }

  // ── outbound tasks ─────────────────────────────────────────────────────

  expectOutbound(task: OutboundTask): void {
    this.sql.expectOutbound.run(task.executorAgentId, task.taskId, task.state, task.lastSequence, this.now(), confidentialityBytes(task.confidential));
  }

  getOutbound(executorAgentId: string, taskId: string): OutboundTask | undefined {
    const row = this.sql.getOutbound.get(executorAgentId, taskId) as { state: number; last_sequence: number; confidential: Buffer | null } | undefined;
    if (row === undefined) return undefined;
    const confidential = confidentialityFrom(row.confidential);
    return { executorAgentId, taskId, state: row.state as TaskState, lastSequence: row.last_sequence, ...(confidential === undefined ? {} : { confidential }) };
  }

  appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): OutboundTask {
    return this.db.transaction(() => {
      const current = this.getOutbound(executorAgentId, event.taskId);
      if (current === undefined) throw new StoreConflictError("missing", `no outbound task ${event.taskId} at ${executorAgentId}`);
      if (event.sequence !== current.lastSequence + 1) {
        throw new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${current.lastSequence}`);
      }
      this.sql.advanceOutbound.run(state, event.sequence, this.now(), executorAgentId, event.taskId, current.lastSequence);
      this.sql.insertOutboundEvent.run(executorAgentId, event.taskId, event.sequence, envelopeBytes(event.envelope));
      return { ...current, state, lastSequence: event.sequence };
    })();
  }

  listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): StoredEvent[] {
    const rows = this.sql.outboundEvents.all(executorAgentId, taskId, fromSequence) as Array<{ sequence: number; envelope: Buffer }>;
    return rows.map((row) => eventFromBytes(taskId, row.sequence, row.envelope));
  }

  /** Drops finished outbound tasks last changed before `beforeMs`. */
  pruneOutbound(beforeMs: number, limit: number): number {
    const rows = this.sql.finishedOutbound.all(beforeMs, limit) as Array<{ executor_agent_id: string; task_id: string }>;
    for (const row of rows) {
      this.sql.deleteOutboundEvents.run(row.executor_agent_id, row.task_id);
      this.sql.deleteOutbound.run(row.executor_agent_id, row.task_id);
    }
    return rows.length;
  }

  // ── the callback outbox ────────────────────────────────────────────────

  startDelivery(taskId: string, url: string): void {
    this.sql.insertDelivery.run(taskId, url);
  }

  deleteDelivery(taskId: string): void {
    this.sql.deleteDelivery.run(taskId);
  }

  getDelivery(taskId: string): DeliveryRecord | undefined {
    const row = this.sql.getDelivery.get(taskId) as DeliveryRow | undefined;
    return row === undefined ? undefined : deliveryFromRow(row);
  }

  claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): DeliveryRecord[] {
    return this.db.transaction(() => {
      let rows: DeliveryRow[];
      if (taskId === undefined) rows = this.sql.dueDeliveries.all({ now: nowMs, owner, limit }) as DeliveryRow[];
      else {
        const row = this.sql.getDelivery.get(taskId) as DeliveryRow | undefined;
        const free = row !== undefined && (row.owner === "" || row.owner === owner || row.owner_until_ms < nowMs);
        rows = row !== undefined && free && row.status === DeliveryStatus.ACTIVE && row.next_attempt_at_ms <= nowMs ? [row] : [];
      }
      for (const row of rows) this.sql.claimDelivery.run(owner, untilMs, row.task_id);
      return rows.map((row) => deliveryFromRow({ ...row, owner, owner_until_ms: untilMs }));
    })();
  }

  updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): boolean {
    const columns: Record<string, string | number> = {};
    if (patch.nextSequence !== undefined) columns.next_sequence = patch.nextSequence;
    if (patch.attempts !== undefined) columns.attempts = patch.attempts;
    if (patch.nextAttemptAtMs !== undefined) columns.next_attempt_at_ms = patch.nextAttemptAtMs;
    if (patch.status !== undefined) columns.status = patch.status;
    if (patch.lastError !== undefined) columns.last_error = patch.lastError;
    if (patch.release) Object.assign(columns, { owner: "", owner_until_ms: 0 });
    const names = Object.keys(columns);
    const key = names.join(",");
    let statement = this.updates.get(key);
    if (statement === undefined) {
      const set = names.length === 0 ? "owner = owner" : names.map((name) => `${name} = @${name}`).join(", ");
      statement = this.db.prepare(`UPDATE callback_outbox SET ${set} WHERE task_id = @task_id AND owner = @current_owner`);
      this.updates.set(key, statement);
    }
    const result = statement.run({
      ...columns,
      task_id: taskId,
      current_owner: owner,
    });
    return result.changes > 0;
  }

  renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): string[] {
    return this.db.transaction(() => taskIds.filter((id) => this.sql.renewDelivery.run(untilMs, id, owner).changes > 0))();
  }
}

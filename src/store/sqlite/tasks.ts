// The SQLite TaskStore: the embedded default. Each write runs synchronously
// inside a savepoint of a group commit (batch.ts), so nothing else runs
// between its reads and its writes, and it settles only once its batch is
// on disk. This process owns the database (see database.ts), which makes a
// cache of the tasks in flight coherent: reads of a running task cost no
// decoding, and finished tasks leave RAM as soon as they end. A write
// touches the cache last, so a write that fails leaves it as it was; a
// batch whose commit fails empties it.
import type Database from "better-sqlite3";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../../protocol/state-machine.js";
import { ChangeEmitter } from "../changes.js";
import { decodeSigned, envelopeBytes, eventFromBytes, patchColumns, TASK_COLUMNS, taskFromRow, taskRow, type TaskRow } from "../codec.js";
import { decodeTaskCursor, encodeTaskCursor } from "../cursor.js";
import { claimable } from "../memory/tasks.js";
import {
  StoreConflictError,
  StoreLimitError,
  type CommitOptions,
  type CreateOptions,
  type DeliveryPatch,
  type DeliveryRecord,
  type ListTasksQuery,
  type MessageScope,
  type NewTask,
  type OutboundTask,
  type SeenMessage,
  type StoredEvent,
  type TaskPage,
  type TaskPatch,
  type TaskRecord,
  type TaskStore,
} from "../store.js";
import { firstRecord } from "../records.js";
import { ActiveCounts } from "./active-counts.js";
import { BatchWriter } from "./batch.js";
import { SqliteSideTables } from "./side-tables.js";

/** Tasks in flight kept decoded; beyond this many the least recently used are read from disk again. */
const CACHE_LIMIT = 10_000;

interface MessageRow {
  scope: MessageScope;
  message_id: string;
  sender_agent_id: string;
  digest: string;
  keep_until_ms: number;
  task_id: string | null;
  reply: Buffer | null;
}

function messageFromRow(row: MessageRow): SeenMessage {
  return {
    scope: row.scope,
    messageId: row.message_id,
    senderAgentId: row.sender_agent_id,
    digest: row.digest,
    keepUntilMs: row.keep_until_ms,
    taskId: row.task_id ?? undefined,
    reply: row.reply === null ? undefined : decodeSigned(row.reply),
  };
}

const placeholders = (count: number) => Array.from({ length: count }, () => "?").join(", ");

export class SqliteTaskStore extends ChangeEmitter implements TaskStore {
  readonly exclusive = true;
  private readonly cache = new Map<string, TaskRecord>();
  private readonly side: SqliteSideTables;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly batch: BatchWriter;
  private readonly counts: ActiveCounts;
  private readonly sql;

  constructor(
    private readonly db: Database.Database,
    now: () => number = Date.now,
  ) {
    super();
    this.side = new SqliteSideTables(db, now);
    this.counts = new ActiveCounts(db);
    this.batch = new BatchWriter(db, () => {
      this.cache.clear();
      this.counts.reload();
    });
    this.sql = {
      getTask: db.prepare("SELECT * FROM tasks WHERE task_id = ?"),
      insertTask: db.prepare(`INSERT INTO tasks (${TASK_COLUMNS.join(", ")}) VALUES (${TASK_COLUMNS.map((c) => `@${c}`).join(", ")})`),
      byIdempotency: db.prepare("SELECT * FROM tasks WHERE requester_agent_id = ? AND idempotency_key = ?"),
      // Events are keyed by the task's arrival number (task_no), so new ones fill the table's last pages.
      insertFirstEvent: db.prepare("INSERT INTO task_events (task_no, sequence, envelope) VALUES (?, ?, ?)"),
      insertEvent: db.prepare("INSERT INTO task_events (task_no, sequence, envelope) SELECT task_no, ?, ? FROM tasks WHERE task_id = ?"),
      events: db.prepare(
        "SELECT sequence, envelope FROM task_events WHERE task_no = (SELECT task_no FROM tasks WHERE task_id = ?) AND sequence >= ? ORDER BY sequence LIMIT ?",
      ),
      renewLease: db.prepare("UPDATE tasks SET lease_until_ms = ? WHERE task_id = ? AND lease_owner = ?"),
      releaseLease: db.prepare("UPDATE tasks SET lease_owner = '', lease_until_ms = 0 WHERE task_id = ? AND lease_owner = ?"),
      deadlines: db.prepare(
        `SELECT * FROM tasks WHERE decision_deadline_ms <= ? AND active = 1 AND state IN (${TaskState.NEED_HUMAN}, ${TaskState.HUMAN_DECIDING})
         ORDER BY decision_deadline_ms LIMIT ?`,
      ),
      getMessage: db.prepare("SELECT * FROM seen_messages WHERE scope = ? AND message_id = ?"),
      insertMessage: db.prepare(
        `INSERT INTO seen_messages (scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      ),
      pruneMessages: db.prepare("DELETE FROM seen_messages WHERE keep_until_ms <= ?"),
      finishedTasks: db.prepare("SELECT task_no, task_id FROM tasks WHERE active = 0 AND updated_at_ms < ? LIMIT ?"),
      deleteEvents: db.prepare("DELETE FROM task_events WHERE task_no = ?"),
      deleteTask: db.prepare("DELETE FROM tasks WHERE task_no = ?"),
    };
  }

  // ── tasks and their event logs ─────────────────────────────────────────

  async createTask(task: NewTask, firstEvent: StoredEvent, options: CreateOptions = {}): Promise<TaskRecord> {
    const record = firstRecord(task);
    return this.batch.run(() => {
      if (firstEvent.sequence !== 1) throw new StoreConflictError("sequence", "the first event must have sequence 1");
      if (this.sql.getTask.get(task.taskId) !== undefined) throw new StoreConflictError("task_exists", `task ${task.taskId} exists`);
      if (task.idempotencyKey && this.sql.byIdempotency.get(task.requester.agentId, task.idempotencyKey) !== undefined) {
        throw new StoreConflictError("idempotency_key", `idempotency key ${task.idempotencyKey} is in use`);
      }
      if (options.maxActive !== undefined && !isTerminal(task.state)) {
        const active = this.counts.active;
        if (active >= options.maxActive) throw new StoreLimitError(active, options.maxActive);
      }
      if (options.message !== undefined) this.insertMessageOrThrow(options.message);
      const taskNo = this.sql.insertTask.run(taskRow(record)).lastInsertRowid;
      this.sql.insertFirstEvent.run(taskNo, 1, envelopeBytes(firstEvent.envelope));
      if (options.callbackUrl) this.side.startDelivery(task.taskId, options.callbackUrl);
      this.counts.moved(undefined, record.state);
      this.remember(record);
      return { value: record, after: () => this.emit({ kind: "task", taskId: task.taskId, sequence: 1, event: firstEvent, task: record }) };
    });
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.load(taskId);
  }

  private load(taskId: string): TaskRecord | undefined {
    const cached = this.cache.get(taskId);
    if (cached !== undefined) return cached;
    const row = this.sql.getTask.get(taskId) as TaskRow | undefined;
    if (row === undefined) return undefined;
    const task = taskFromRow(row);
    this.remember(task);
    return task;
  }

  /** Keeps a task in flight decoded; a finished one leaves the cache. */
  private remember(task: TaskRecord): void {
    this.cache.delete(task.taskId);
    if (isTerminal(task.state)) return;
    this.cache.set(task.taskId, task);
    if (this.cache.size > CACHE_LIMIT) this.cache.delete(this.cache.keys().next().value!);
  }

  async commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options: CommitOptions = {}): Promise<TaskRecord> {
    return this.batch.run(() => {
      const current = this.load(taskId);
      if (current === undefined) throw new StoreConflictError("missing", `task ${taskId} does not exist`);
      if (current.version !== expectedVersion) {
        throw new StoreConflictError("version", `task ${taskId} is at version ${current.version}, not ${expectedVersion}`);
      }
      if (event !== undefined && event.sequence !== current.lastSequence + 1) {
        throw new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${current.lastSequence}`);
      }
      if (options.fence !== undefined && current.leaseOwner !== options.fence) {
        throw new StoreConflictError("lease", `task ${taskId} is no longer leased to ${options.fence}`);
      }
      if (options.claim !== undefined && !claimable(current, patch.leaseOwner ?? "", options.claim)) {
        throw new StoreConflictError("lease", `task ${taskId} is leased to ${current.leaseOwner}`);
      }
      if (options.message !== undefined) this.insertMessageOrThrow(options.message);
      const updated: TaskRecord = { ...current, ...patch, version: current.version + 1, lastSequence: event ? event.sequence : current.lastSequence };
      // Set on the object patchColumns made, not spread into new ones (a spread that adds fields costs a hidden class per copy).
      const columns = patchColumns(patch);
      columns.version = updated.version;
      columns.last_sequence = updated.lastSequence;
      const update = this.updateStatement(Object.keys(columns));
      columns.task_id = taskId;
      update.run(columns);
      if (event !== undefined) this.sql.insertEvent.run(event.sequence, envelopeBytes(event.envelope), taskId);
      this.counts.moved(current.state, updated.state);
      this.remember(updated);
      const announce = event === undefined ? undefined : () => this.emit({ kind: "task", taskId, sequence: event.sequence, event, task: updated });
      return { value: updated, after: announce };
    });
  }

  private updateStatement(columns: string[]): Database.Statement {
    const key = `update:${columns.join(",")}`;
    let statement = this.statements.get(key);
    if (statement === undefined) {
      statement = this.db.prepare(`UPDATE tasks SET ${columns.map((c) => `${c} = @${c}`).join(", ")} WHERE task_id = @task_id`);
      this.statements.set(key, statement);
    }
    return statement;
  }

  /** A prepared statement for SQL that depends only on `key` (for IN lists). */
  private statement(key: string, sql: () => string): Database.Statement {
    let statement = this.statements.get(key);
    if (statement === undefined) {
      statement = this.db.prepare(sql());
      this.statements.set(key, statement);
    }
    return statement;
  }

  async listTasks(query: ListTasksQuery): Promise<TaskPage> {
    const states = [...new Set(query.states ?? [])];
    const types = [...new Set(query.taskTypes ?? [])];
    const requester = query.requesterAgentId;
    const cursor = query.pageToken ? decodeTaskCursor(query.pageToken) : undefined;
    const statement = this.statement(`list:${requester === undefined ? 0 : 1}:${states.length}:${types.length}:${cursor ? 1 : 0}`, () => {
      const filters = requester === undefined ? ["1 = 1"] : ["requester_agent_id = ?"];
      if (states.length > 0) filters.push(`state IN (${placeholders(states.length)})`);
      if (types.length > 0) filters.push(`task_type IN (${placeholders(types.length)})`);
      if (cursor) filters.push("(created_at_ms < ? OR (created_at_ms = ? AND task_id < ?))");
      return `SELECT * FROM tasks WHERE ${filters.join(" AND ")} ORDER BY created_at_ms DESC, task_id DESC LIMIT ?`;
    });
    const params: Array<string | number> = [...(requester === undefined ? [] : [requester]), ...states, ...types];
    if (cursor) params.push(cursor.createdAtMs, cursor.createdAtMs, cursor.taskId);
    const rows = statement.all(...params, query.pageSize + 1) as TaskRow[];
    const tasks = rows.slice(0, query.pageSize).map((row) => this.cache.get(row.task_id) ?? taskFromRow(row));
    return { tasks, nextPageToken: rows.length > query.pageSize ? encodeTaskCursor(tasks[tasks.length - 1]!) : "" };
  }

  async countTasks(states: readonly TaskState[]): Promise<number> {
    // Only unfinished states: counted in memory. With a terminal state among them: the table.
    const counted = this.counts.count(states);
    if (counted !== undefined) return counted;
    const wanted = [...new Set(states)];
    const statement = this.statement(`count:${wanted.length}`, () => `SELECT COUNT(*) AS n FROM tasks WHERE state IN (${placeholders(wanted.length)})`);
    return (statement.get(...wanted) as { n: number }).n;
  }

  async findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined> {
    const row = this.sql.byIdempotency.get(requesterAgentId, key) as TaskRow | undefined;
    return row === undefined ? undefined : (this.cache.get(row.task_id) ?? taskFromRow(row));
  }

  async listEvents(taskId: string, fromSequence: number, limit = -1): Promise<StoredEvent[]> {
    const rows = this.sql.events.all(taskId, fromSequence, limit) as Array<{ sequence: number; envelope: Buffer }>;
    return rows.map((row) => eventFromBytes(taskId, row.sequence, row.envelope));
  }

  // ── who runs what ──────────────────────────────────────────────────────

  async listUnleased(states: readonly TaskState[], nowMs: number, limit: number, force = false): Promise<TaskRecord[]> {
    const wanted = [...new Set(states)];
    if (wanted.length === 0) return [];
    const statement = this.statement(`unleased:${wanted.length}:${force}`, () => {
      const lease = force ? "" : " AND (lease_owner = '' OR lease_until_ms < ?)";
      return `SELECT * FROM tasks WHERE active = 1 AND state IN (${placeholders(wanted.length)})${lease} ORDER BY updated_at_ms LIMIT ?`;
    });
    const rows = (force ? statement.all(...wanted, limit) : statement.all(...wanted, nowMs, limit)) as TaskRow[];
    return rows.map((row) => this.cache.get(row.task_id) ?? taskFromRow(row));
  }

  async renewLeases(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return this.batch.run(() => {
      const held = taskIds.filter((id) => this.sql.renewLease.run(untilMs, id, owner).changes > 0);
      for (const id of held) this.patchCached(id, { leaseUntilMs: untilMs });
      return { value: held };
    });
  }

  async releaseLeases(owner: string, taskIds: readonly string[]): Promise<void> {
    return this.batch.run(() => {
      const released = taskIds.filter((id) => this.sql.releaseLease.run(id, owner).changes > 0);
      for (const id of released) this.patchCached(id, { leaseOwner: "", leaseUntilMs: 0 });
      return { value: undefined };
    });
  }

  /** Lease fields change without a new version: the cached copy follows. */
  private patchCached(taskId: string, fields: Pick<TaskPatch, "leaseOwner" | "leaseUntilMs">): void {
    const cached = this.cache.get(taskId);
    if (cached !== undefined) this.cache.set(taskId, { ...cached, ...fields });
  }

  async listDecisionDeadlines(atMs: number, limit: number): Promise<TaskRecord[]> {
    return (this.sql.deadlines.all(atMs, limit) as TaskRow[]).map((row) => this.cache.get(row.task_id) ?? taskFromRow(row));
  }

  // ── messages already processed ─────────────────────────────────────────

  private insertMessage(entry: SeenMessage): boolean {
    const reply = entry.reply === undefined ? null : envelopeBytes(entry.reply.envelope);
    return this.sql.insertMessage.run(entry.scope, entry.messageId, entry.senderAgentId, entry.digest, entry.keepUntilMs, entry.taskId ?? null, reply).changes > 0;
  }

  private insertMessageOrThrow(entry: SeenMessage): void {
    if (!this.insertMessage(entry)) throw new StoreConflictError("message", `message ${entry.messageId} was already processed`);
  }

  async rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined> {
    const inserted = await this.batch.run(() => ({ value: this.insertMessage(entry) }));
    return inserted ? undefined : this.getMessage(entry.scope, entry.messageId);
  }

  async getMessage(scope: MessageScope, messageId: string): Promise<SeenMessage | undefined> {
    const row = this.sql.getMessage.get(scope, messageId) as MessageRow | undefined;
    return row === undefined ? undefined : messageFromRow(row);
  }

  async pruneMessages(nowMs: number): Promise<number> {
    return this.batch.run(() => ({ value: this.sql.pruneMessages.run(nowMs).changes }));
  }

  // ── results, outbound tasks, the callback outbox ───────────────────────

  async putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    return this.batch.run(() => ({ value: this.side.putResult(taskId, bytes) }));
  }

  async readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    return this.side.readResult(taskId, offset, length);
  }

  async expectOutbound(task: OutboundTask): Promise<void> {
    return this.batch.run(() => ({ value: this.side.expectOutbound(task) }));
  }

  async getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.side.getOutbound(executorAgentId, taskId);
  }

  async appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask> {
    return this.batch.run(() => {
      const task = this.side.appendOutboundEvent(executorAgentId, event, state);
      return { value: task, after: () => this.emit({ kind: "outbound", executorAgentId, taskId: event.taskId, sequence: event.sequence, event, task }) };
    });
  }

  async listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    return this.side.listOutboundEvents(executorAgentId, taskId, fromSequence);
  }

  async getDelivery(taskId: string): Promise<DeliveryRecord | undefined> {
    return this.side.getDelivery(taskId);
  }

  async claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]> {
    return this.batch.run(() => ({ value: this.side.claimDeliveries(owner, nowMs, untilMs, limit, taskId) }));
  }

  async updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean> {
    return this.batch.run(() => ({ value: this.side.updateDelivery(taskId, owner, patch) }));
  }

  async renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return this.batch.run(() => ({ value: this.side.renewDeliveries(owner, taskIds, untilMs) }));
  }

  // ── retention ──────────────────────────────────────────────────────────

  async pruneTasks(beforeMs: number, limit: number): Promise<number> {
    return this.batch.run(() => {
      const finished = this.sql.finishedTasks.all(beforeMs, limit) as Array<{ task_no: number; task_id: string }>;
      for (const { task_no: taskNo, task_id: taskId } of finished) {
        this.sql.deleteEvents.run(taskNo);
        this.side.deleteResult(taskId);
        this.side.deleteDelivery(taskId);
        this.sql.deleteTask.run(taskNo);
      }
      const pruned = finished.length + this.side.pruneOutbound(beforeMs, limit - finished.length);
      for (const { task_id: taskId } of finished) this.cache.delete(taskId);
      return { value: pruned };
    });
  }

  async close(): Promise<void> {
    this.batch.flush();
    if (this.db.open) this.db.close();
  }
}

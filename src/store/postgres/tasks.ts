// The PostgreSQL TaskStore, shared by every instance of one agent. A commit
// is one statement (data-modifying CTEs): the conditional update of the
// task, its event, the message that caused it and the NOTIFY that tells
// the other instances all happen or none does. Unique constraints, not
// process memory, refuse a second task id, idempotency key or message id.
import type pg from "pg";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import type { Logger } from "../../log.js";
import type { StoreAvailability } from "../availability.js";
import { isTerminal, TERMINAL_STATES } from "../../protocol/state-machine.js";
import { ChangeEmitter } from "../changes.js";
import { decodeSigned, envelopeBytes, eventFromBytes, patchColumns, TASK_COLUMNS, taskFromRow, taskRow, type SqlValue, type TaskRow } from "../codec.js";
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
import { brokenConstraint, LOCKS, transaction, type Database } from "./database.js";
import { CHANNEL, notice, PostgresChangeFeed } from "./feed.js";
import { PostgresSideTables } from "./side-tables.js";

/** Positional parameters for one statement: each value gets the next $n. */
class Params {
  readonly values: unknown[] = [];
  add(value: unknown, cast?: string): string {
    this.values.push(value);
    return cast ? `$${this.values.length}::${cast}` : `$${this.values.length}`;
  }
}

interface MessageRow {
  scope: MessageScope;
  message_id: string;
  sender_agent_id: string;
  digest: string;
  keep_until_ms: number;
  task_id: string | null;
  reply: Buffer | null;
}

const CONFLICTS: Record<string, [StoreConflictError["reason"], string]> = {
  tasks_pkey: ["task_exists", "the task id is in use"],
  tasks_idempotency: ["idempotency_key", "the idempotency key is in use"],
  seen_messages_pkey: ["message", "the message was already processed"],
  task_events_pkey: ["sequence", "an event with that sequence exists"],
};

/** A unique-constraint failure as the StoreConflictError it means. */
function conflictOf(error: unknown): StoreConflictError | undefined {
  const constraint = brokenConstraint(error);
  const known = constraint === undefined ? undefined : CONFLICTS[constraint];
  return known === undefined ? undefined : new StoreConflictError(known[0], known[1]);
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

/** The INSERT of a seen message as a CTE step that runs only when `source` yields a row. */
function messageInsert(params: Params, entry: SeenMessage, source: string): string {
  const reply = entry.reply === undefined ? null : envelopeBytes(entry.reply.envelope);
  return `INSERT INTO seen_messages (scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply)
    SELECT ${params.add(entry.scope, "text")}, ${params.add(entry.messageId, "text")}, ${params.add(entry.senderAgentId, "text")},
      ${params.add(entry.digest, "text")}, ${params.add(entry.keepUntilMs, "bigint")}, ${params.add(entry.taskId ?? null, "text")}, ${params.add(reply, "bytea")} FROM ${source}`;
}

const TERMINAL_LIST = [...TERMINAL_STATES].join(", ");

export interface PostgresTaskStoreOptions {
  pool: Database;
  url: string;
  /** This instance, as named in its NOTIFY payloads. */
  origin: string;
  logger: Logger;
  pollIntervalMs?: number;
}

export class PostgresTaskStore extends ChangeEmitter implements TaskStore {
  readonly exclusive = false;
  readonly availability: StoreAvailability;
  private readonly pool: Database;
  private readonly side: PostgresSideTables;
  private readonly feed: PostgresChangeFeed;

  constructor(private readonly options: PostgresTaskStoreOptions) {
    super();
    this.pool = options.pool;
    this.availability = options.pool.availability;
    this.side = new PostgresSideTables(options.pool);
    this.feed = new PostgresChangeFeed({
      url: options.url,
      origin: options.origin,
      emit: (change) => this.emit(change),
      lastSequences: (ids) => this.lastSequences(ids),
      logger: options.logger,
      pollIntervalMs: options.pollIntervalMs ?? 2000,
      onLost: (cause) => options.pool.availability.suspect(cause),
    });
  }

  /** Starts listening for the other instances' changes. */
  start(): Promise<void> {
    return this.feed.start();
  }

  watchTasks(taskIds: () => Iterable<string>): void {
    this.feed.watch(taskIds);
  }

  private async lastSequences(taskIds: string[]): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ task_id: string; last_sequence: number }>("SELECT task_id, last_sequence FROM tasks WHERE task_id = ANY($1)", [taskIds]);
    return new Map(rows.map((row) => [row.task_id, row.last_sequence]));
  }

  private notify(params: Params, change: Parameters<typeof notice>[1]): string {
    return `pg_notify('${CHANNEL}', ${params.add(notice(this.options.origin, change), "text")})`;
  }

  // ── tasks and their event logs ─────────────────────────────────────────

  async createTask(task: NewTask, firstEvent: StoredEvent, options: CreateOptions = {}): Promise<TaskRecord> {
    if (firstEvent.sequence !== 1) throw new StoreConflictError("sequence", "the first event must have sequence 1");
    const record: TaskRecord = { ...task, version: 1, lastSequence: 1 };
    const params = new Params();
    const row = taskRow(record);
    const steps = [`t AS (INSERT INTO tasks (${TASK_COLUMNS.join(", ")}) VALUES (${TASK_COLUMNS.map((column) => params.add(row[column])).join(", ")}) RETURNING task_id)`];
    steps.push(`e AS (INSERT INTO task_events (task_id, sequence, envelope) SELECT task_id, 1, ${params.add(envelopeBytes(firstEvent.envelope), "bytea")} FROM t)`);
    if (options.message !== undefined) steps.push(`m AS (${messageInsert(params, options.message, "t")})`);
    if (options.callbackUrl) {
      steps.push(`o AS (INSERT INTO callback_outbox (task_id, url, next_sequence, attempts, next_attempt_at_ms, status, last_error, owner, owner_until_ms)
        SELECT task_id, ${params.add(options.callbackUrl, "text")}, 1, 0, 0, 0, '', '', 0 FROM t)`);
    }
    const sql = `WITH ${steps.join(", ")} SELECT ${this.notify(params, { kind: "task", taskId: task.taskId, sequence: 1 })} FROM t`;
    try {
      if (options.maxActive !== undefined && !isTerminal(task.state)) {
        const max = options.maxActive;
        // Admissions queue on one lock, so every instance counts what the others committed.
        await transaction(this.pool, async (client) => {
          await client.query("SELECT pg_advisory_xact_lock($1)", [LOCKS.admission]);
          const active = Number((await client.query("SELECT COUNT(*) AS n FROM tasks WHERE active = 1")).rows[0].n);
          if (active >= max) throw new StoreLimitError(active, max);
          await client.query(sql, params.values);
        });
      } else {
        await this.pool.query(sql, params.values);
      }
    } catch (error) {
      throw conflictOf(error) ?? error;
    }
    this.emit({ kind: "task", taskId: task.taskId, sequence: 1, event: firstEvent, task: record });
    return record;
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    const { rows } = await this.pool.query<TaskRow>("SELECT * FROM tasks WHERE task_id = $1", [taskId]);
    return rows[0] === undefined ? undefined : taskFromRow(rows[0]);
  }

  async commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options: CommitOptions = {}): Promise<TaskRecord> {
    const params = new Params();
    const columns: Record<string, SqlValue> = patchColumns(patch);
    const assignments = Object.entries(columns).map(([column, value]) => `${column} = ${params.add(value)}`);
    assignments.push("version = version + 1");
    if (event !== undefined) assignments.push(`last_sequence = ${params.add(event.sequence, "integer")}`);
    const conditions = [`task_id = ${params.add(taskId, "text")}`, `version = ${params.add(expectedVersion, "integer")}`];
    if (event !== undefined) conditions.push(`last_sequence = ${params.add(event.sequence - 1, "integer")}`);
    if (options.fence !== undefined) conditions.push(`lease_owner = ${params.add(options.fence, "text")}`);
    if (options.claim !== undefined && !options.claim.force) {
      conditions.push(`(lease_owner = '' OR lease_owner = ${params.add(patch.leaseOwner ?? "", "text")} OR lease_until_ms < ${params.add(options.claim.nowMs, "bigint")})`);
    }
    const steps = [`t AS (UPDATE tasks SET ${assignments.join(", ")} WHERE ${conditions.join(" AND ")} RETURNING *)`];
    if (event !== undefined) {
      steps.push(`e AS (INSERT INTO task_events (task_id, sequence, envelope) SELECT task_id, last_sequence, ${params.add(envelopeBytes(event.envelope), "bytea")} FROM t)`);
    }
    if (options.message !== undefined) steps.push(`m AS (${messageInsert(params, options.message, "t")})`);
    const notify = event === undefined ? "" : `, ${this.notify(params, { kind: "task", taskId, sequence: event.sequence })}`;
    let rows: TaskRow[];
    try {
      ({ rows } = await this.pool.query<TaskRow>(`WITH ${steps.join(", ")} SELECT t.*${notify} FROM t`, params.values));
    } catch (error) {
      throw conflictOf(error) ?? error;
    }
    if (rows[0] === undefined) throw await this.whyNot(taskId, expectedVersion, patch, event, options);
    const next = taskFromRow(rows[0]);
    if (event !== undefined) this.emit({ kind: "task", taskId, sequence: event.sequence, event, task: next });
    return next;
  }

  /** Which condition of a commit that changed nothing failed. */
  private async whyNot(taskId: string, expectedVersion: number, patch: TaskPatch, event: StoredEvent | undefined, options: CommitOptions): Promise<StoreConflictError> {
    const current = await this.getTask(taskId);
    if (current === undefined) return new StoreConflictError("missing", `task ${taskId} does not exist`);
    if (current.version !== expectedVersion) return new StoreConflictError("version", `task ${taskId} is at version ${current.version}, not ${expectedVersion}`);
    if (event !== undefined && event.sequence !== current.lastSequence + 1) {
      return new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${current.lastSequence}`);
    }
    if (options.fence !== undefined && current.leaseOwner !== options.fence) return new StoreConflictError("lease", `task ${taskId} is no longer leased to ${options.fence}`);
    if (options.claim !== undefined && !claimable(current, patch.leaseOwner ?? "", options.claim)) {
      return new StoreConflictError("lease", `task ${taskId} is leased to ${current.leaseOwner}`);
    }
    return new StoreConflictError("version", `task ${taskId} changed meanwhile`);
  }

  async listTasks(query: ListTasksQuery): Promise<TaskPage> {
    const params = new Params();
    const filters = query.requesterAgentId === undefined ? ["TRUE"] : [`requester_agent_id = ${params.add(query.requesterAgentId)}`];
    const states = [...new Set(query.states ?? [])];
    if (states.length > 0) filters.push(`state = ANY(${params.add(states, "integer[]")})`);
    const types = [...new Set(query.taskTypes ?? [])];
    if (types.length > 0) filters.push(`task_type = ANY(${params.add(types, "text[]")})`);
    if (query.pageToken) {
      const cursor = decodeTaskCursor(query.pageToken);
      const at = params.add(cursor.createdAtMs, "bigint");
      filters.push(`(created_at_ms < ${at} OR (created_at_ms = ${at} AND task_id < ${params.add(cursor.taskId, "text")}))`);
    }
    const sql = `SELECT * FROM tasks WHERE ${filters.join(" AND ")} ORDER BY created_at_ms DESC, task_id DESC LIMIT ${params.add(query.pageSize + 1, "integer")}`;
    const { rows } = await this.pool.query<TaskRow>(sql, params.values);
    const tasks = rows.slice(0, query.pageSize).map(taskFromRow);
    return { tasks, nextPageToken: rows.length > query.pageSize ? encodeTaskCursor(tasks[tasks.length - 1]!) : "" };
  }

  async countTasks(states: readonly TaskState[]): Promise<number> {
    const wanted = [...new Set(states)];
    if (wanted.length === 0) return 0;
    const onlyActive = wanted.every((state) => !isTerminal(state));
    const { rows } = await this.pool.query(`SELECT COUNT(*) AS n FROM tasks WHERE state = ANY($1::integer[])${onlyActive ? " AND active = 1" : ""}`, [wanted]);
    return Number(rows[0]!.n);
  }

  async findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined> {
    const { rows } = await this.pool.query<TaskRow>("SELECT * FROM tasks WHERE requester_agent_id = $1 AND idempotency_key = $2", [requesterAgentId, key]);
    return rows[0] === undefined ? undefined : taskFromRow(rows[0]);
  }

  async listEvents(taskId: string, fromSequence: number, limit?: number): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<{ sequence: number; envelope: Buffer }>(
      "SELECT sequence, envelope FROM task_events WHERE task_id = $1 AND sequence >= $2 ORDER BY sequence LIMIT $3",
      [taskId, fromSequence, limit ?? null],
    );
    return rows.map((row) => eventFromBytes(taskId, row.sequence, row.envelope));
  }

  // ── who runs what ──────────────────────────────────────────────────────

  async listUnleased(states: readonly TaskState[], nowMs: number, limit: number, force = false): Promise<TaskRecord[]> {
    const lease = force ? "" : " AND (lease_owner = '' OR lease_until_ms < $3::bigint)";
    const { rows } = await this.pool.query<TaskRow>(
      `SELECT * FROM tasks WHERE active = 1 AND state = ANY($1::integer[])${lease} ORDER BY updated_at_ms LIMIT $2`,
      force ? [[...new Set(states)], limit] : [[...new Set(states)], limit, nowMs],
    );
    return rows.map(taskFromRow);
  }

  async renewLeases(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const { rows } = await this.pool.query<{ task_id: string }>(
      "UPDATE tasks SET lease_until_ms = $1 WHERE task_id = ANY($2) AND lease_owner = $3 RETURNING task_id",
      [untilMs, [...taskIds], owner],
    );
    return rows.map((row) => row.task_id);
  }

  async releaseLeases(owner: string, taskIds: readonly string[]): Promise<void> {
    if (taskIds.length === 0) return;
    await this.pool.query("UPDATE tasks SET lease_owner = '', lease_until_ms = 0 WHERE task_id = ANY($1) AND lease_owner = $2", [[...taskIds], owner]);
  }

  async listDecisionDeadlines(atMs: number, limit: number): Promise<TaskRecord[]> {
    const { rows } = await this.pool.query<TaskRow>(
      `SELECT * FROM tasks WHERE decision_deadline_ms <= $1 AND active = 1 AND state IN (${TaskState.NEED_HUMAN}, ${TaskState.HUMAN_DECIDING})
       ORDER BY decision_deadline_ms LIMIT $2`,
      [atMs, limit],
    );
    return rows.map(taskFromRow);
  }

  // ── messages already processed ─────────────────────────────────────────

  async rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined> {
    const params = new Params();
    const sql = `${messageInsert(params, entry, "(SELECT 1) AS one")} ON CONFLICT DO NOTHING`;
    const { rowCount } = await this.pool.query(sql, params.values);
    if (rowCount) return undefined;
    return this.getMessage(entry.scope, entry.messageId);
  }

  async getMessage(scope: MessageScope, messageId: string): Promise<SeenMessage | undefined> {
    const { rows } = await this.pool.query<MessageRow>("SELECT * FROM seen_messages WHERE scope = $1 AND message_id = $2", [scope, messageId]);
    return rows[0] === undefined ? undefined : messageFromRow(rows[0]);
  }

  async pruneMessages(nowMs: number): Promise<number> {
    return (await this.pool.query("DELETE FROM seen_messages WHERE keep_until_ms <= $1", [nowMs])).rowCount ?? 0;
  }

  // ── results, outbound tasks, the callback outbox ───────────────────────

  putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    return this.side.putResult(taskId, bytes);
  }

  readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    return this.side.readResult(taskId, offset, length);
  }

  expectOutbound(task: OutboundTask): Promise<void> {
    return this.side.expectOutbound(task);
  }

  getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.side.getOutbound(executorAgentId, taskId);
  }

  async appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask> {
    const payload = notice(this.options.origin, { kind: "outbound", taskId: event.taskId, sequence: event.sequence, executorAgentId });
    const task = await this.side.appendOutboundEvent(executorAgentId, event, state, payload);
    this.emit({ kind: "outbound", executorAgentId, taskId: event.taskId, sequence: event.sequence, event, task });
    return task;
  }

  listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    return this.side.listOutboundEvents(executorAgentId, taskId, fromSequence);
  }

  getDelivery(taskId: string): Promise<DeliveryRecord | undefined> {
    return this.side.getDelivery(taskId);
  }

  claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]> {
    return this.side.claimDeliveries(owner, nowMs, untilMs, limit, taskId);
  }

  updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean> {
    return this.side.updateDelivery(taskId, owner, patch);
  }

  renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return this.side.renewDeliveries(owner, taskIds, untilMs);
  }

  // ── retention ──────────────────────────────────────────────────────────

  async pruneTasks(beforeMs: number, limit: number): Promise<number> {
    return transaction(this.pool, async (client) => {
      const { rows } = await client.query<{ task_id: string }>(
        "DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE active = 0 AND updated_at_ms < $1 LIMIT $2) RETURNING task_id",
        [beforeMs, limit],
      );
      const ids = rows.map((row) => row.task_id);
      if (ids.length > 0) {
        await client.query("DELETE FROM task_events WHERE task_id = ANY($1)", [ids]);
        await client.query("DELETE FROM result_chunks WHERE task_id = ANY($1)", [ids]);
        await client.query("DELETE FROM results WHERE task_id = ANY($1)", [ids]);
        await client.query("DELETE FROM callback_outbox WHERE task_id = ANY($1)", [ids]);
      }
      const outbound = await client.query(
        `WITH gone AS (DELETE FROM outbound_tasks WHERE (executor_agent_id, task_id) IN (
           SELECT executor_agent_id, task_id FROM outbound_tasks WHERE state IN (${TERMINAL_LIST}) AND updated_at_ms < $1 LIMIT $2)
           RETURNING executor_agent_id, task_id),
         events AS (DELETE FROM outbound_events o USING gone WHERE o.executor_agent_id = gone.executor_agent_id AND o.task_id = gone.task_id)
         SELECT COUNT(*) AS n FROM gone`,
        [beforeMs, Math.max(0, limit - ids.length)],
      );
      return ids.length + Number(outbound.rows[0].n);
    });
  }

  async close(): Promise<void> {
    await this.feed.close();
  }
}

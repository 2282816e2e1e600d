// The in-memory TaskStore, for tests and embedding: everything is lost when
// the process exits, but it honours every rule a durable store must (the
// contract suite in test/store-contract runs against it too). A task is
// held as objects while it runs; once finished it is packed into bytes
// (packed.ts), since a store that keeps every task must not keep each at
// several times its encoded size.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../../protocol/state-machine.js";
import { ChangeEmitter } from "../changes.js";
import { decodeTaskCursor, encodeTaskCursor } from "../cursor.js";
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
import { MemoryMessages } from "./messages.js";
import { Names, PackedTask } from "./packed.js";
import { Slabs } from "./sections.js";
import { MemorySideTables } from "./side-tables.js";

const DECIDING = new Set([TaskState.NEED_HUMAN, TaskState.HUMAN_DECIDING]);

/**
 * Finished tasks held as objects before the oldest is packed. Reads follow
 * an ending closely (the waiting Send, GetTask polls, Watch streams
 * catching up, the run releasing its lease): these find the same objects,
 * with their encoded bytes cached, instead of decoding.
 */
export const KEEP_FINISHED = 64;

export interface MemoryTaskStoreOptions {
  /** Finished tasks kept as objects before being packed (default KEEP_FINISHED; 0 packs at the terminal commit). */
  keepFinished?: number;
}

/** A task held as objects: while it runs, and for a short while after it ends. */
interface LiveTask {
  record: TaskRecord;
  events: StoredEvent[];
  /** The messages remembered with it, packed with it. */
  messages: SeenMessage[];
}

type Held = LiveTask | PackedTask;

/** What listing, counting and pruning look at, without decoding a packed task. */
interface Summary {
  readonly taskId: string;
  readonly taskType: string;
  readonly requesterAgentId: string;
  readonly state: TaskState;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

function summary(held: Held): Summary {
  if (held instanceof PackedTask) return held;
  const { taskId, taskType, requester, state, createdAtMs, updatedAtMs } = held.record;
  return { taskId, taskType, requesterAgentId: requester.agentId, state, createdAtMs, updatedAtMs };
}

const recordOf = (held: Held): TaskRecord => (held instanceof PackedTask ? held.record() : held.record);

/** Newest first; ties broken by task id so pages never overlap. */
function newerFirst(a: Summary, b: Summary): number {
  return b.createdAtMs - a.createdAtMs || (a.taskId < b.taskId ? 1 : a.taskId > b.taskId ? -1 : 0);
}

const idempotencyKeyOf = (requesterAgentId: string, key: string) => `${requesterAgentId}\u0000${key}`;

export class MemoryTaskStore extends ChangeEmitter implements TaskStore {
  readonly exclusive = true;
  private readonly tasks = new Map<string, Held>();
  /** Non-terminal task ids: what lease scans and the concurrency limit look at. */
  private readonly active = new Set<string>();
  /** Finished tasks still held as objects, oldest first. */
  private readonly finished = new Set<string>();
  private readonly idempotency = new Map<string, string>();
  private readonly messages = new MemoryMessages();
  private readonly slabs = new Slabs();
  private readonly names = new Names();
  private readonly side: MemorySideTables;
  private readonly keepFinished: number;

  constructor(now: () => number = Date.now, options: MemoryTaskStoreOptions = {}) {
    super();
    this.side = new MemorySideTables(now, this.slabs.allocate);
    this.keepFinished = options.keepFinished ?? KEEP_FINISHED;
  }

  async createTask(task: NewTask, firstEvent: StoredEvent, options: CreateOptions = {}): Promise<TaskRecord> {
    if (this.tasks.has(task.taskId)) throw new StoreConflictError("task_exists", `task ${task.taskId} exists`);
    const idempotencyKey = task.idempotencyKey ? idempotencyKeyOf(task.requester.agentId, task.idempotencyKey) : undefined;
    if (idempotencyKey !== undefined && this.idempotency.has(idempotencyKey)) {
      throw new StoreConflictError("idempotency_key", `idempotency key ${task.idempotencyKey} is in use`);
    }
    if (firstEvent.sequence !== 1) throw new StoreConflictError("sequence", "the first event must have sequence 1");
    if (options.message !== undefined && this.messages.has(options.message.scope, options.message.messageId)) {
      throw new StoreConflictError("message", `message ${options.message.messageId} was already processed`);
    }
    if (options.maxActive !== undefined && !isTerminal(task.state) && this.active.size >= options.maxActive) {
      throw new StoreLimitError(this.active.size, options.maxActive);
    }
    const record = firstRecord(task);
    const entry: LiveTask = { record, events: [firstEvent], messages: [] };
    this.tasks.set(task.taskId, entry);
    if (!isTerminal(record.state)) this.active.add(task.taskId);
    if (idempotencyKey !== undefined) this.idempotency.set(idempotencyKey, task.taskId);
    if (options.message !== undefined) this.remember(options.message, entry);
    if (options.callbackUrl) this.side.startDelivery(task.taskId, options.callbackUrl);
    this.emit({ kind: "task", taskId: task.taskId, sequence: 1, event: firstEvent, task: record });
    if (isTerminal(record.state)) this.finish(task.taskId);
    return record;
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    const held = this.tasks.get(taskId);
    return held === undefined ? undefined : recordOf(held);
  }

  async commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options: CommitOptions = {}): Promise<TaskRecord> {
    const held = this.tasks.get(taskId);
    if (held === undefined) throw new StoreConflictError("missing", `task ${taskId} does not exist`);
    const current = recordOf(held);
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
    if (options.message !== undefined && this.messages.has(options.message.scope, options.message.messageId)) {
      throw new StoreConflictError("message", `message ${options.message.messageId} was already processed`);
    }
    const next: TaskRecord = { ...current, ...patch, version: current.version + 1, lastSequence: event ? event.sequence : current.lastSequence };
    // A packed task that changes again is held as objects until it is packed anew.
    const entry: LiveTask = held instanceof PackedTask ? { record: current, events: held.events(1), messages: [] } : held;
    this.tasks.set(taskId, entry);
    entry.record = next;
    if (event) entry.events.push(event);
    if (isTerminal(next.state)) this.active.delete(taskId);
    else {
      this.active.add(taskId);
      this.finished.delete(taskId);
    }
    if (options.message !== undefined) this.remember(options.message, entry);
    if (event) this.emit({ kind: "task", taskId, sequence: event.sequence, event, task: next });
    if (isTerminal(next.state)) this.finish(taskId);
    return next;
  }

  /** A finished task joins the newest finished ones; the oldest beyond the bound is packed. */
  private finish(taskId: string): void {
    this.finished.delete(taskId);
    this.finished.add(taskId);
    while (this.finished.size > this.keepFinished) {
      const oldest = this.finished.values().next().value!;
      this.finished.delete(oldest);
      this.pack(oldest);
    }
  }

  private pack(taskId: string): void {
    const held = this.tasks.get(taskId);
    if (held === undefined || held instanceof PackedTask || !isTerminal(held.record.state)) return;
    let packed: PackedTask;
    try {
      packed = PackedTask.pack(held.record, held.events, this.slabs.allocate, this.names);
    } catch {
      return; // kept as objects: larger, but as correct (the commit that finished it has happened)
    }
    this.tasks.set(taskId, packed);
    this.messages.packWith(held.messages, packed, held.events);
  }

  async listTasks(query: ListTasksQuery): Promise<TaskPage> {
    const states = query.states && query.states.length > 0 ? new Set(query.states) : undefined;
    const types = query.taskTypes && query.taskTypes.length > 0 ? new Set(query.taskTypes) : undefined;
    const cursor = query.pageToken ? decodeTaskCursor(query.pageToken) : undefined;
    const candidates: Summary[] = [];
    for (const held of this.tasks.values()) {
      const task = summary(held);
      if (query.requesterAgentId !== undefined && task.requesterAgentId !== query.requesterAgentId) continue;
      if ((states !== undefined && !states.has(task.state)) || (types !== undefined && !types.has(task.taskType))) continue;
      if (cursor === undefined || task.createdAtMs < cursor.createdAtMs || (task.createdAtMs === cursor.createdAtMs && task.taskId < cursor.taskId)) candidates.push(task);
    }
    candidates.sort(newerFirst);
    const page = candidates.slice(0, query.pageSize).map((task) => recordOf(this.tasks.get(task.taskId)!));
    const more = candidates.length > page.length;
    return { tasks: page, nextPageToken: more ? encodeTaskCursor(page[page.length - 1]!) : "" };
  }

  async countTasks(states: readonly TaskState[]): Promise<number> {
    const wanted = new Set(states);
    let count = 0;
    if ([...wanted].every((state) => !isTerminal(state))) {
      for (const id of this.active) if (wanted.has(this.liveRecord(id).state)) count++;
      return count;
    }
    for (const held of this.tasks.values()) if (wanted.has(summary(held).state)) count++;
    return count;
  }

  /** An active task's record (active tasks are never packed). */
  private liveRecord(taskId: string): TaskRecord {
    return recordOf(this.tasks.get(taskId)!);
  }

  async findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined> {
    const taskId = this.idempotency.get(idempotencyKeyOf(requesterAgentId, key));
    return taskId === undefined ? undefined : this.getTask(taskId);
  }

  async listEvents(taskId: string, fromSequence: number, limit?: number): Promise<StoredEvent[]> {
    const held = this.tasks.get(taskId);
    if (held === undefined) return [];
    if (held instanceof PackedTask) return held.events(fromSequence, limit);
    // Sequences start at 1 without gaps, so the index is sequence - 1.
    const start = Math.max(0, fromSequence - 1);
    return held.events.slice(start, limit === undefined ? undefined : start + limit);
  }

  async listUnleased(states: readonly TaskState[], nowMs: number, limit: number, force = false): Promise<TaskRecord[]> {
    const wanted = new Set(states);
    const found: TaskRecord[] = [];
    for (const id of this.active) {
      const task = this.liveRecord(id);
      if (wanted.has(task.state) && (force || task.leaseOwner === "" || task.leaseUntilMs < nowMs)) found.push(task);
    }
    return found.sort((a, b) => a.updatedAtMs - b.updatedAtMs).slice(0, limit);
  }

  async renewLeases(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return taskIds.filter((id) => this.patchLease(id, owner, { leaseUntilMs: untilMs }));
  }

  async releaseLeases(owner: string, taskIds: readonly string[]): Promise<void> {
    for (const id of taskIds) this.patchLease(id, owner, { leaseOwner: "", leaseUntilMs: 0 });
  }

  /** Lease fields change without a new version; a packed task keeps them outside its bytes. */
  private patchLease(taskId: string, owner: string, fields: { leaseOwner?: string; leaseUntilMs: number }): boolean {
    const held = this.tasks.get(taskId);
    if (held instanceof PackedTask) {
      if (held.leaseOwner !== owner) return false;
      held.leaseOwner = fields.leaseOwner ?? held.leaseOwner;
      held.leaseUntilMs = fields.leaseUntilMs;
      return true;
    }
    if (held === undefined || held.record.leaseOwner !== owner) return false;
    held.record = { ...held.record, ...fields };
    return true;
  }

  async listDecisionDeadlines(atMs: number, limit: number): Promise<TaskRecord[]> {
    const due: TaskRecord[] = [];
    for (const id of this.active) {
      const task = this.liveRecord(id);
      const deadline = task.pendingDecision?.deadline;
      if (DECIDING.has(task.state) && deadline !== undefined && timestampMs(deadline) <= atMs) due.push(task);
    }
    // The earliest first, as the SQL stores answer: a scan that takes only `limit` arms the most urgent.
    due.sort((a, b) => timestampMs(a.pendingDecision!.deadline!) - timestampMs(b.pendingDecision!.deadline!));
    return due.slice(0, limit);
  }

  // ── messages already processed ─────────────────────────────────────────

  /** Keeps a message; one tied to a task held as objects is packed with that task. */
  private remember(entry: SeenMessage, task?: LiveTask): void {
    const held = task ?? (entry.taskId === undefined ? undefined : this.tasks.get(entry.taskId));
    const live = held !== undefined && !(held instanceof PackedTask) && held.record.taskId === entry.taskId ? held : undefined;
    this.messages.put(entry, live !== undefined);
    live?.messages.push(entry);
  }

  async rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined> {
    const existing = this.messages.get(entry.scope, entry.messageId);
    if (existing !== undefined) return existing;
    this.remember(entry);
    return undefined;
  }

  async getMessage(scope: MessageScope, messageId: string): Promise<SeenMessage | undefined> {
    return this.messages.get(scope, messageId);
  }

  /** Whether a message is remembered, synchronously: for stores that commit beside this one (groups). */
  hasMessage(scope: MessageScope, messageId: string): boolean {
    return this.messages.has(scope, messageId);
  }

  /** Remembers a message synchronously (the caller checked hasMessage in the same turn). */
  putMessage(entry: SeenMessage): void {
    this.remember(entry);
  }

  async pruneMessages(nowMs: number): Promise<number> {
    return this.messages.prune(nowMs);
  }

  // ── results, outbound tasks, the callback outbox ───────────────────────

  async putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    this.side.putResult(taskId, bytes);
  }

  async readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    return this.side.readResult(taskId, offset, length);
  }

  async expectOutbound(task: OutboundTask): Promise<void> {
    this.side.expectOutbound(task);
  }

  async getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.side.getOutbound(executorAgentId, taskId);
  }

  async appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask> {
    const task = this.side.appendOutboundEvent(executorAgentId, event, state);
    this.emit({ kind: "outbound", executorAgentId, taskId: event.taskId, sequence: event.sequence, event, task });
    return task;
  }

  async listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    return this.side.listOutboundEvents(executorAgentId, taskId, fromSequence);
  }

  async getDelivery(taskId: string): Promise<DeliveryRecord | undefined> {
    return this.side.getDelivery(taskId);
  }

  async claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]> {
    return this.side.claimDeliveries(owner, nowMs, untilMs, limit, taskId);
  }

  async updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean> {
    return this.side.updateDelivery(taskId, owner, patch);
  }

  async renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return this.side.renewDeliveries(owner, taskIds, untilMs);
  }

  // ── retention ──────────────────────────────────────────────────────────

  async pruneTasks(beforeMs: number, limit: number): Promise<number> {
    let dropped = 0;
    for (const held of this.tasks.values()) {
      if (dropped >= limit) break;
      const task = summary(held);
      if (!isTerminal(task.state) || task.updatedAtMs >= beforeMs) continue;
      const idempotencyKey = held instanceof PackedTask ? held.idempotencyKey : held.record.idempotencyKey;
      this.tasks.delete(task.taskId);
      this.finished.delete(task.taskId);
      this.side.forgetTask(task.taskId);
      if (idempotencyKey) this.idempotency.delete(idempotencyKeyOf(task.requesterAgentId, idempotencyKey));
      dropped++;
    }
    return dropped + this.side.pruneOutbound(beforeMs, limit - dropped);
  }

  async close(): Promise<void> {
    // Nothing to release.
  }
}

/** Whether `owner` may take the task's lease. */
export function claimable(task: Pick<TaskRecord, "leaseOwner" | "leaseUntilMs">, owner: string, claim: { nowMs: number; force?: boolean }): boolean {
  return claim.force === true || task.leaseOwner === "" || task.leaseOwner === owner || task.leaseUntilMs < claim.nowMs;
}

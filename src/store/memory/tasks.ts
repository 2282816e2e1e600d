// The in-memory TaskStore, for tests and embedding: everything is lost when
// the process exits, but it honours every rule a durable store must (the
// contract suite in test/store-contract runs against it too).
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../../protocol/state-machine.js";
import { ChangeEmitter } from "../changes.js";
import { decodeTaskCursor, encodeTaskCursor } from "../cursor.js";
import {
  DeliveryStatus,
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

/** Newest first; ties broken by task id so pages never overlap. */
function newerFirst(a: TaskRecord, b: TaskRecord): number {
  return b.createdAtMs - a.createdAtMs || (a.taskId < b.taskId ? 1 : a.taskId > b.taskId ? -1 : 0);
}

const DECIDING = new Set([TaskState.NEED_HUMAN, TaskState.HUMAN_DECIDING]);

interface OutboundEntry {
  task: OutboundTask;
  events: StoredEvent[];
  updatedAtMs: number;
}

export class MemoryTaskStore extends ChangeEmitter implements TaskStore {
  readonly exclusive = true;
  private readonly tasks = new Map<string, TaskRecord>();
  /** Non-terminal task ids: what lease scans and the concurrency limit look at. */
  private readonly active = new Set<string>();
  private readonly events = new Map<string, StoredEvent[]>();
  private readonly idempotency = new Map<string, string>();
  private readonly messages = new Map<string, SeenMessage>();
  private readonly results = new Map<string, Uint8Array>();
  private readonly outbound = new Map<string, OutboundEntry>();
  private readonly deliveries = new Map<string, DeliveryRecord>();

  constructor(private readonly now: () => number = Date.now) {
    super();
  }

  async createTask(task: NewTask, firstEvent: StoredEvent, options: CreateOptions = {}): Promise<TaskRecord> {
    if (this.tasks.has(task.taskId)) throw new StoreConflictError("task_exists", `task ${task.taskId} exists`);
    const idempotencyKey = task.idempotencyKey ? `${task.requester.agentId}\u0000${task.idempotencyKey}` : undefined;
    if (idempotencyKey !== undefined && this.idempotency.has(idempotencyKey)) {
      throw new StoreConflictError("idempotency_key", `idempotency key ${task.idempotencyKey} is in use`);
    }
    if (firstEvent.sequence !== 1) throw new StoreConflictError("sequence", "the first event must have sequence 1");
    if (options.message !== undefined && this.messages.has(messageKey(options.message.scope, options.message.messageId))) {
      throw new StoreConflictError("message", `message ${options.message.messageId} was already processed`);
    }
    if (options.maxActive !== undefined && !isTerminal(task.state) && this.active.size >= options.maxActive) {
      throw new StoreLimitError(this.active.size, options.maxActive);
    }
    const record: TaskRecord = { ...task, version: 1, lastSequence: 1 };
    this.tasks.set(task.taskId, record);
    if (!isTerminal(record.state)) this.active.add(task.taskId);
    this.events.set(task.taskId, [firstEvent]);
    if (idempotencyKey !== undefined) this.idempotency.set(idempotencyKey, task.taskId);
    if (options.message !== undefined) this.messages.set(messageKey(options.message.scope, options.message.messageId), options.message);
    if (options.callbackUrl) {
      this.deliveries.set(task.taskId, {
        taskId: task.taskId,
        url: options.callbackUrl,
        nextSequence: 1,
        attempts: 0,
        nextAttemptAtMs: 0,
        status: DeliveryStatus.ACTIVE,
        lastError: "",
        owner: "",
        ownerUntilMs: 0,
      });
    }
    this.emit({ kind: "task", taskId: task.taskId, sequence: 1, event: firstEvent, task: record });
    return record;
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.tasks.get(taskId);
  }

  async commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options: CommitOptions = {}): Promise<TaskRecord> {
    const current = this.tasks.get(taskId);
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
    if (options.message !== undefined && this.messages.has(messageKey(options.message.scope, options.message.messageId))) {
      throw new StoreConflictError("message", `message ${options.message.messageId} was already processed`);
    }
    const next: TaskRecord = { ...current, ...patch, version: current.version + 1, lastSequence: event ? event.sequence : current.lastSequence };
    this.tasks.set(taskId, next);
    if (isTerminal(next.state)) this.active.delete(taskId);
    else this.active.add(taskId);
    if (event) this.events.get(taskId)!.push(event);
    if (options.message !== undefined) this.messages.set(messageKey(options.message.scope, options.message.messageId), options.message);
    if (event) this.emit({ kind: "task", taskId, sequence: event.sequence, event, task: next });
    return next;
  }

  async listTasks(query: ListTasksQuery): Promise<TaskPage> {
    const states = query.states && query.states.length > 0 ? new Set(query.states) : undefined;
    const types = query.taskTypes && query.taskTypes.length > 0 ? new Set(query.taskTypes) : undefined;
    const cursor = query.pageToken ? decodeTaskCursor(query.pageToken) : undefined;
    const candidates = [...this.tasks.values()]
      .filter(
        (task) =>
          (query.requesterAgentId === undefined || task.requester.agentId === query.requesterAgentId) &&
          (states === undefined || states.has(task.state)) &&
          (types === undefined || types.has(task.taskType)) &&
          (cursor === undefined || task.createdAtMs < cursor.createdAtMs || (task.createdAtMs === cursor.createdAtMs && task.taskId < cursor.taskId)),
      )
      .sort(newerFirst);
    const page = candidates.slice(0, query.pageSize);
    const more = candidates.length > page.length;
    return { tasks: page, nextPageToken: more ? encodeTaskCursor(page[page.length - 1]!) : "" };
  }

  async countTasks(states: readonly TaskState[]): Promise<number> {
    const wanted = new Set(states);
    let count = 0;
    if ([...wanted].every((state) => !isTerminal(state))) {
      for (const id of this.active) if (wanted.has(this.tasks.get(id)!.state)) count++;
      return count;
    }
    for (const task of this.tasks.values()) if (wanted.has(task.state)) count++;
    return count;
  }

  async findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined> {
    const taskId = this.idempotency.get(`${requesterAgentId}\u0000${key}`);
    return taskId === undefined ? undefined : this.tasks.get(taskId);
  }

  async listEvents(taskId: string, fromSequence: number, limit?: number): Promise<StoredEvent[]> {
    const log = this.events.get(taskId) ?? [];
    // Sequences start at 1 without gaps, so the index is sequence - 1.
    const start = Math.max(0, fromSequence - 1);
    return log.slice(start, limit === undefined ? undefined : start + limit);
  }

  async listUnleased(states: readonly TaskState[], nowMs: number, limit: number, force = false): Promise<TaskRecord[]> {
    const wanted = new Set(states);
    const found: TaskRecord[] = [];
    for (const id of this.active) {
      const task = this.tasks.get(id)!;
      if (wanted.has(task.state) && (force || task.leaseOwner === "" || task.leaseUntilMs < nowMs)) found.push(task);
    }
    return found.sort((a, b) => a.updatedAtMs - b.updatedAtMs).slice(0, limit);
  }

  async renewLeases(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    const held: string[] = [];
    for (const id of taskIds) {
      const task = this.tasks.get(id);
      if (task === undefined || task.leaseOwner !== owner) continue;
      this.tasks.set(id, { ...task, leaseUntilMs: untilMs });
      held.push(id);
    }
    return held;
  }

  async releaseLeases(owner: string, taskIds: readonly string[]): Promise<void> {
    for (const id of taskIds) {
      const task = this.tasks.get(id);
      if (task !== undefined && task.leaseOwner === owner) this.tasks.set(id, { ...task, leaseOwner: "", leaseUntilMs: 0 });
    }
  }

  async listDecisionDeadlines(atMs: number, limit: number): Promise<TaskRecord[]> {
    const due: TaskRecord[] = [];
    for (const id of this.active) {
      const task = this.tasks.get(id)!;
      const deadline = task.pendingDecision?.deadline;
      if (DECIDING.has(task.state) && deadline !== undefined && timestampMs(deadline) <= atMs) due.push(task);
    }
    return due.slice(0, limit);
  }

  async rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined> {
    const key = messageKey(entry.scope, entry.messageId);
    const existing = this.messages.get(key);
    if (existing !== undefined) return existing;
    this.messages.set(key, entry);
    return undefined;
  }

  async getMessage(scope: MessageScope, messageId: string): Promise<SeenMessage | undefined> {
    return this.messages.get(messageKey(scope, messageId));
  }

  /** Whether a message is remembered, synchronously: for stores that commit beside this one (groups). */
  hasMessage(scope: MessageScope, messageId: string): boolean {
    return this.messages.has(messageKey(scope, messageId));
  }

  /** Remembers a message synchronously (the caller checked hasMessage in the same turn). */
  putMessage(entry: SeenMessage): void {
    this.messages.set(messageKey(entry.scope, entry.messageId), entry);
  }

  async pruneMessages(nowMs: number): Promise<number> {
    let dropped = 0;
    for (const [key, entry] of this.messages) {
      if (entry.keepUntilMs <= nowMs) {
        this.messages.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  async putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    this.results.set(taskId, bytes);
  }

  async readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    const bytes = this.results.get(taskId);
    if (bytes === undefined) throw new RangeError(`task ${taskId} has no result stream`);
    return bytes.subarray(offset, Math.min(bytes.byteLength, offset + length));
  }

  async expectOutbound(task: OutboundTask): Promise<void> {
    const key = outboundKey(task.executorAgentId, task.taskId);
    if (!this.outbound.has(key)) this.outbound.set(key, { task, events: [], updatedAtMs: this.now() });
  }

  async getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.outbound.get(outboundKey(executorAgentId, taskId))?.task;
  }

  async appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask> {
    const entry = this.outbound.get(outboundKey(executorAgentId, event.taskId));
    if (entry === undefined) throw new StoreConflictError("missing", `no outbound task ${event.taskId} at ${executorAgentId}`);
    if (event.sequence !== entry.task.lastSequence + 1) {
      throw new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${entry.task.lastSequence}`);
    }
    entry.events.push(event);
    entry.task = { ...entry.task, state, lastSequence: event.sequence };
    entry.updatedAtMs = this.now();
    this.emit({ kind: "outbound", executorAgentId, taskId: event.taskId, sequence: event.sequence, event, task: entry.task });
    return entry.task;
  }

  async listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    return (this.outbound.get(outboundKey(executorAgentId, taskId))?.events ?? []).slice(Math.max(0, fromSequence - 1));
  }

  async getDelivery(taskId: string): Promise<DeliveryRecord | undefined> {
    return this.deliveries.get(taskId);
  }

  async claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]> {
    const claimed: DeliveryRecord[] = [];
    const candidates = taskId === undefined ? this.deliveries.values() : [this.deliveries.get(taskId)].filter((d) => d !== undefined);
    for (const delivery of candidates) {
      if (claimed.length >= limit) break;
      if (delivery.status !== DeliveryStatus.ACTIVE || delivery.nextAttemptAtMs > nowMs) continue;
      if (delivery.owner !== "" && delivery.owner !== owner && delivery.ownerUntilMs >= nowMs) continue;
      const next = { ...delivery, owner, ownerUntilMs: untilMs };
      this.deliveries.set(delivery.taskId, next);
      claimed.push(next);
    }
    return claimed;
  }

  async updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean> {
    const delivery = this.deliveries.get(taskId);
    if (delivery === undefined || delivery.owner !== owner) return false;
    const { release, ...fields } = patch;
    this.deliveries.set(taskId, { ...delivery, ...fields, ...(release ? { owner: "", ownerUntilMs: 0 } : {}) });
    return true;
  }

  async renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    const held: string[] = [];
    for (const id of taskIds) {
      const delivery = this.deliveries.get(id);
      if (delivery === undefined || delivery.owner !== owner) continue;
      this.deliveries.set(id, { ...delivery, ownerUntilMs: untilMs });
      held.push(id);
    }
    return held;
  }

  async pruneTasks(beforeMs: number, limit: number): Promise<number> {
    let dropped = 0;
    for (const task of this.tasks.values()) {
      if (dropped >= limit) break;
      if (!isTerminal(task.state) || task.updatedAtMs >= beforeMs) continue;
      this.tasks.delete(task.taskId);
      this.events.delete(task.taskId);
      this.results.delete(task.taskId);
      this.deliveries.delete(task.taskId);
      if (task.idempotencyKey) this.idempotency.delete(`${task.requester.agentId}\u0000${task.idempotencyKey}`);
      dropped++;
    }
    for (const [key, entry] of this.outbound) {
      if (dropped >= limit) break;
      if (isTerminal(entry.task.state) && entry.updatedAtMs < beforeMs) {
        this.outbound.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  async close(): Promise<void> {
    // Nothing to release.
  }
}

function messageKey(scope: MessageScope, messageId: string): string {
  return `${scope}\u0000${messageId}`;
}

function outboundKey(executorAgentId: string, taskId: string): string {
  return `${executorAgentId}\u0000${taskId}`;
}

/** Whether `owner` may take the task's lease. */
export function claimable(task: Pick<TaskRecord, "leaseOwner" | "leaseUntilMs">, owner: string, claim: { nowMs: number; force?: boolean }): boolean {
  return claim.force === true || task.leaseOwner === "" || task.leaseOwner === owner || task.leaseUntilMs < claim.nowMs;
}

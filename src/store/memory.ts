// The in-memory Store: the embedded default. Everything is lost when the
// process exits; it honours the same atomicity and version rules a durable
// store must.
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import {
  StoreConflictError,
  type ListTasksQuery,
  type OutboundTask,
  type SeenMessage,
  type Store,
  type StoredEvent,
  type StoredReply,
  type TaskPage,
  type TaskPatch,
  type TaskRecord,
} from "./store.js";

interface Cursor {
  createdAtMs: number;
  taskId: string;
}

function encodeCursor(task: TaskRecord): string {
  return Buffer.from(JSON.stringify({ c: task.createdAtMs, t: task.taskId })).toString("base64url");
}

function decodeCursor(token: string): Cursor {
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { c: unknown; t: unknown };
    if (typeof parsed.c === "number" && typeof parsed.t === "string") return { createdAtMs: parsed.c, taskId: parsed.t };
  } catch {
    // fall through
  }
  throw new RangeError("page_token is not one this server issued");
}

/** Newest first; ties broken by task id so pages never overlap. */
function newerFirst(a: TaskRecord, b: TaskRecord): number {
  return b.createdAtMs - a.createdAtMs || (a.taskId < b.taskId ? 1 : a.taskId > b.taskId ? -1 : 0);
}

export class MemoryStore implements Store {
  private readonly tasks = new Map<string, TaskRecord>();
  /** Tasks per state, kept with every write so that counting is constant time. */
  private readonly perState = new Map<TaskState, number>();
  private readonly events = new Map<string, StoredEvent[]>();
  private readonly idempotency = new Map<string, string>();
  private readonly messages = new Map<string, SeenMessage>();
  private readonly results = new Map<string, Uint8Array>();
  private readonly outbound = new Map<string, { task: OutboundTask; events: StoredEvent[] }>();

  async createTask(task: Omit<TaskRecord, "version" | "lastSequence">, firstEvent?: StoredEvent): Promise<TaskRecord> {
    if (this.tasks.has(task.taskId)) throw new StoreConflictError(`task ${task.taskId} exists`);
    if (firstEvent !== undefined && firstEvent.sequence !== 1) throw new StoreConflictError("the first event must have sequence 1");
    const record: TaskRecord = { ...task, version: 1, lastSequence: firstEvent ? 1 : 0 };
    this.tasks.set(task.taskId, record);
    this.tally(undefined, record.state);
    this.events.set(task.taskId, firstEvent ? [firstEvent] : []);
    if (task.idempotencyKey) this.idempotency.set(`${task.requester.agentId}\u0000${task.idempotencyKey}`, task.taskId);
    return record;
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.tasks.get(taskId);
  }

  async commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent): Promise<TaskRecord> {
    const current = this.tasks.get(taskId);
    if (current === undefined) throw new StoreConflictError(`task ${taskId} does not exist`);
    if (current.version !== expectedVersion) {
      throw new StoreConflictError(`task ${taskId} is at version ${current.version}, not ${expectedVersion}`);
    }
    if (event !== undefined && event.sequence !== current.lastSequence + 1) {
      throw new StoreConflictError(`event sequence ${event.sequence} does not follow ${current.lastSequence}`);
    }
    const next: TaskRecord = {
      ...current,
      ...patch,
      version: current.version + 1,
      lastSequence: event ? event.sequence : current.lastSequence,
    };
    this.tasks.set(taskId, next);
    this.tally(current.state, next.state);
    if (event) this.events.get(taskId)!.push(event);
    return next;
  }

  async listTasks(query: ListTasksQuery): Promise<TaskPage> {
    const states = query.states && query.states.length > 0 ? new Set(query.states) : undefined;
    let candidates = [...this.tasks.values()]
      .filter((task) => task.requester.agentId === query.requesterAgentId && (states === undefined || states.has(task.state)))
      .sort(newerFirst);
    if (query.pageToken) {
      const cursor = decodeCursor(query.pageToken);
      candidates = candidates.filter(
        (task) => task.createdAtMs < cursor.createdAtMs || (task.createdAtMs === cursor.createdAtMs && task.taskId < cursor.taskId),
      );
    }
    const page = candidates.slice(0, query.pageSize);
    const more = candidates.length > page.length;
    return { tasks: page, nextPageToken: more ? encodeCursor(page[page.length - 1]!) : "" };
  }

  async countTasks(states: readonly TaskState[]): Promise<number> {
    return [...new Set(states)].reduce((sum, state) => sum + (this.perState.get(state) ?? 0), 0);
  }

  private tally(from: TaskState | undefined, to: TaskState): void {
    if (from === to) return;
    if (from !== undefined) this.perState.set(from, (this.perState.get(from) ?? 1) - 1);
    this.perState.set(to, (this.perState.get(to) ?? 0) + 1);
  }

  async findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined> {
    const taskId = this.idempotency.get(`${requesterAgentId}\u0000${key}`);
    return taskId === undefined ? undefined : this.tasks.get(taskId);
  }

  async listEvents(taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    const log = this.events.get(taskId) ?? [];
    // Sequences start at 1 without gaps, so the index is sequence - 1.
    return log.slice(Math.max(0, fromSequence - 1));
  }

  async rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined> {
    const existing = this.messages.get(entry.messageId);
    if (existing !== undefined) return existing;
    this.messages.set(entry.messageId, entry);
    return undefined;
  }

  async completeMessage(messageId: string, reply: StoredReply | undefined, taskId?: string): Promise<void> {
    const existing = this.messages.get(messageId);
    if (existing) this.messages.set(messageId, { ...existing, reply, taskId: taskId ?? existing.taskId });
  }

  async forgetMessage(messageId: string): Promise<void> {
    this.messages.delete(messageId);
  }

  async getMessage(messageId: string): Promise<SeenMessage | undefined> {
    return this.messages.get(messageId);
  }

  async pruneMessages(nowMs: number): Promise<number> {
    let dropped = 0;
    for (const [id, entry] of this.messages) {
      if (entry.keepUntilMs <= nowMs) {
        this.messages.delete(id);
        dropped++;
      }
    }
    return dropped;
  }

  async expectOutbound(task: OutboundTask): Promise<void> {
    const key = `${task.executorAgentId}\u0000${task.taskId}`;
    if (!this.outbound.has(key)) this.outbound.set(key, { task, events: [] });
  }

  async getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.outbound.get(`${executorAgentId}\u0000${taskId}`)?.task;
  }

  async appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask> {
    const entry = this.outbound.get(`${executorAgentId}\u0000${event.taskId}`);
    if (entry === undefined) throw new StoreConflictError(`no outbound task ${event.taskId} at ${executorAgentId}`);
    if (event.sequence !== entry.task.lastSequence + 1) {
      throw new StoreConflictError(`event sequence ${event.sequence} does not follow ${entry.task.lastSequence}`);
    }
    entry.events.push(event);
    entry.task = { ...entry.task, state, lastSequence: event.sequence };
    return entry.task;
  }

  async listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    return (this.outbound.get(`${executorAgentId}\u0000${taskId}`)?.events ?? []).slice(Math.max(0, fromSequence - 1));
  }

  async putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    this.results.set(taskId, bytes);
  }

  async readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    const bytes = this.results.get(taskId);
    if (bytes === undefined) throw new RangeError(`task ${taskId} has no result stream`);
    return bytes.subarray(offset, Math.min(bytes.byteLength, offset + length));
  }
}

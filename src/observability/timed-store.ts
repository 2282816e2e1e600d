// A TaskStore that times its commits: createTask and commit (the writes
// every state change makes) are measured and reported to an observer, by
// outcome; every other method is passed through as it is. It wraps any
// store (memory, SQLite, PostgreSQL), so no store times itself. While no
// one observes (an agent not served with metrics) nothing is measured.
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { StoreAvailability } from "../store/availability.js";
import type { ChangeListener } from "../store/changes.js";
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
} from "../store/store.js";
import type { AgentObserver, StoreOperation, StoreOutcome } from "./agent-observer.js";

const outcomeOf = (error: unknown): StoreOutcome => (error instanceof StoreConflictError || error instanceof StoreLimitError ? "conflict" : "error");

export class TimedTaskStore implements TaskStore {
  readonly watchTasks?: (taskIds: () => Iterable<string>) => void;

  constructor(
    private readonly inner: TaskStore,
    private readonly observer: Pick<AgentObserver, "storeWrite"> & { readonly idle?: boolean },
  ) {
    const watch = inner.watchTasks;
    if (watch !== undefined) this.watchTasks = (taskIds) => watch.call(inner, taskIds);
  }

  get exclusive(): boolean {
    return this.inner.exclusive;
  }

  get availability(): StoreAvailability | undefined {
    return this.inner.availability;
  }

  private timed<T>(operation: StoreOperation, started: number, write: Promise<T>): Promise<T> {
    return write.then(
      (value) => {
        this.observer.storeWrite(operation, "ok", (performance.now() - started) / 1000);
        return value;
      },
      (error: unknown) => {
        this.observer.storeWrite(operation, outcomeOf(error), (performance.now() - started) / 1000);
        throw error;
      },
    );
  }

  createTask(task: NewTask, firstEvent: StoredEvent, options?: CreateOptions): Promise<TaskRecord> {
    if (this.observer.idle) return this.inner.createTask(task, firstEvent, options);
    return this.timed("create_task", performance.now(), this.inner.createTask(task, firstEvent, options));
  }

  commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options?: CommitOptions): Promise<TaskRecord> {
    if (this.observer.idle) return this.inner.commit(taskId, expectedVersion, patch, event, options);
    return this.timed("commit", performance.now(), this.inner.commit(taskId, expectedVersion, patch, event, options));
  }

  // ── everything else, as it is ──────────────────────────────────────────

  onChange(listener: ChangeListener): () => void {
    return this.inner.onChange(listener);
  }
  rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined> {
    return this.inner.rememberMessage(entry);
  }
  getMessage(scope: MessageScope, messageId: string): Promise<SeenMessage | undefined> {
    return this.inner.getMessage(scope, messageId);
  }
  pruneMessages(nowMs: number): Promise<number> {
    return this.inner.pruneMessages(nowMs);
  }
  getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.inner.getTask(taskId);
  }
  listTasks(query: ListTasksQuery): Promise<TaskPage> {
    return this.inner.listTasks(query);
  }
  countTasks(states: readonly TaskState[]): Promise<number> {
    return this.inner.countTasks(states);
  }
  findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined> {
    return this.inner.findTaskByIdempotencyKey(requesterAgentId, key);
  }
  listEvents(taskId: string, fromSequence: number, limit?: number): Promise<StoredEvent[]> {
    return this.inner.listEvents(taskId, fromSequence, limit);
  }
  listUnleased(states: readonly TaskState[], nowMs: number, limit: number, force?: boolean): Promise<TaskRecord[]> {
    return this.inner.listUnleased(states, nowMs, limit, force);
  }
  renewLeases(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return this.inner.renewLeases(owner, taskIds, untilMs);
  }
  releaseLeases(owner: string, taskIds: readonly string[]): Promise<void> {
    return this.inner.releaseLeases(owner, taskIds);
  }
  listDecisionDeadlines(atMs: number, limit: number): Promise<TaskRecord[]> {
    return this.inner.listDecisionDeadlines(atMs, limit);
  }
  putResult(taskId: string, bytes: Uint8Array): Promise<void> {
    return this.inner.putResult(taskId, bytes);
  }
  readResult(taskId: string, offset: number, length: number): Promise<Uint8Array> {
    return this.inner.readResult(taskId, offset, length);
  }
  expectOutbound(task: OutboundTask): Promise<void> {
    return this.inner.expectOutbound(task);
  }
  getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined> {
    return this.inner.getOutbound(executorAgentId, taskId);
  }
  appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask> {
    return this.inner.appendOutboundEvent(executorAgentId, event, state);
  }
  listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    return this.inner.listOutboundEvents(executorAgentId, taskId, fromSequence);
  }
  getDelivery(taskId: string): Promise<DeliveryRecord | undefined> {
    return this.inner.getDelivery(taskId);
  }
  claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]> {
    return this.inner.claimDeliveries(owner, nowMs, untilMs, limit, taskId);
  }
  updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean> {
    return this.inner.updateDelivery(taskId, owner, patch);
  }
  renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]> {
    return this.inner.renewDeliveries(owner, taskIds, untilMs);
  }
  pruneTasks(beforeMs: number, limit: number): Promise<number> {
    return this.inner.pruneTasks(beforeMs, limit);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

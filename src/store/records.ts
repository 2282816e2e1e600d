// Task records as every store makes them. A record is copied with a change
// at every commit ({ ...current, ...patch, version, lastSequence }). V8
// copies a spread fast only when the fields set after it already exist on
// the source: a field the source lacks gives every copy a new hidden class
// of its own (a few microseconds and a Map allocation per copy, measured).
// So a record carries every field from the start, the optional ones as
// undefined, in the order the SQLite codec reads them back, and records
// made here and read back share one hidden class.
import type { NewTask, TaskRecord } from "./store.js";

/** Every field of T present (optional ones may hold undefined): a literal of this type cannot leave one out. */
type EveryField<T> = { [K in keyof Required<T>]: T[K] };

/** A new task's first record: version 1, its first event recorded. */
export function firstRecord(task: NewTask): TaskRecord {
  const record: EveryField<TaskRecord> = {
    taskId: task.taskId,
    taskType: task.taskType,
    requester: task.requester,
    executor: task.executor,
    state: task.state,
    progress: task.progress,
    statusMessage: task.statusMessage,
    createdAtMs: task.createdAtMs,
    updatedAtMs: task.updatedAtMs,
    version: 1,
    lastSequence: 1,
    request: task.request,
    payload: task.payload,
    idempotencyKey: task.idempotencyKey,
    requestMessageId: task.requestMessageId,
    pendingInfo: task.pendingInfo,
    pendingDecision: task.pendingDecision,
    result: task.result,
    error: task.error,
    rejection: task.rejection,
    resultStream: task.resultStream,
    executionAttempts: task.executionAttempts,
    startedAtMs: task.startedAtMs,
    leaseOwner: task.leaseOwner,
    leaseUntilMs: task.leaseUntilMs,
    answers: task.answers,
    carried: task.carried,
    confidential: task.confidential,
    sealed: task.sealed,
    sealedRequest: task.sealedRequest,
  };
  return record;
}

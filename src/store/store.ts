// The TaskStore: every piece of engine state (tasks, their event logs, the
// messages already processed, result bytes, callbacks still to deliver,
// who runs what) goes through this interface, so the same engine runs on
// memory, SQLite or PostgreSQL. Writes are atomic: a state change, the
// event that records it and the message that caused it commit together,
// guarded by the task's version (optimistic locking).
import type { JsonObject, Message } from "@bufbuild/protobuf";
import type { Confidentiality } from "../../gen/synapse/v1/confidential_pb.js";
import type { Envelope, Header } from "../../gen/synapse/v1/envelope_pb.js";
import type {
  TaskError,
  TaskNeedHumanPayload,
  TaskNeedInfoPayload,
  TaskRejectPayload,
  TaskRequestPayload,
  TaskResult,
  TaskState,
} from "../../gen/synapse/v1/payloads_pb.js";
import type { StoreAvailability } from "./availability.js";

export interface PartyRecord {
  agentId: string;
  systemId: string;
  keyId: string;
}

export interface ResultStreamRecord {
  contentType: string;
  totalSize: number;
  sha256: Uint8Array;
}

/** Who answered a human decision. */
export interface DeciderRecord {
  userId: string;
  userName: string;
  role: string;
}

/**
 * An answer the requester gave: provided information or a human's approval.
 * Kept so that a handler run again after a restart gets the same answers
 * without asking twice.
 */
export type TaskAnswer =
  | { readonly kind: "info"; readonly phase: "admission" | "execution"; readonly fields: JsonObject }
  | {
      readonly kind: "decision";
      readonly decisionId: string;
      /** The question's code (TaskNeedHumanPayload.reason.code). */
      readonly code: string;
      readonly action: "approve" | "modify";
      readonly fields: JsonObject;
      readonly notes: string;
      readonly decidedBy: DeciderRecord;
    };

/**
 * The ids a task's request carried in its header, which every event and
 * reply of the task carries in turn, unchanged: W3C trace context, the
 * session and the correlation id. Absent when the request carried none.
 */
export interface CarriedIds {
  readonly traceparent: string;
  readonly tracestate: string;
  readonly sessionId: string;
  readonly correlationId: string;
}

export interface TaskRecord {
  readonly taskId: string;
  readonly taskType: string;
  readonly requester: PartyRecord;
  readonly executor: PartyRecord;
  readonly state: TaskState;
  readonly progress: number;
  readonly statusMessage: string;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** Incremented by every commit; commits name the version they expect. */
  readonly version: number;
  /** Sequence of the latest event; the next event is lastSequence + 1. */
  readonly lastSequence: number;
  readonly request: TaskRequestPayload;
  /** The task's input now: the request payload with provided and modified fields merged in. */
  readonly payload: JsonObject;
  readonly idempotencyKey: string;
  readonly requestMessageId: string;
  readonly pendingInfo?: TaskNeedInfoPayload;
  readonly pendingDecision?: TaskNeedHumanPayload;
  readonly result?: TaskResult;
  readonly error?: TaskError;
  readonly rejection?: TaskRejectPayload;
  readonly resultStream?: ResultStreamRecord;
  /** How many times a handler was started for this task (recorded before it starts). */
  readonly executionAttempts: number;
  /** When the first handler run started (0: never); timeouts count from here. */
  readonly startedAtMs: number;
  /** The instance that runs (or waits in) the task's handler; "" when none. */
  readonly leaseOwner: string;
  /** Until when the lease holds unless renewed. */
  readonly leaseUntilMs: number;
  /** Every answer received, oldest first. */
  readonly answers: readonly TaskAnswer[];
  /** The request's trace context, session and correlation ids; fixed when the task is created. */
  readonly carried?: CarriedIds;
  /** For a confidential task: its request's Confidentiality (the task key wrapped to each party); fixed when the task is created. */
  readonly confidential?: Confidentiality;
  /**
   * For a confidential task, as stored: its content (request, input,
   * questions, answers, status line, result, error) sealed under its key;
   * those fields are then empty in the store (see src/agent/sealed-store.ts).
   */
  readonly sealed?: Uint8Array;
  /** For a confidential task, as stored: its request (and its input while that is the request's), sealed once when it is made. */
  readonly sealedRequest?: Uint8Array;
}

/** A task as created: the store sets version and lastSequence. */
export type NewTask = Omit<TaskRecord, "version" | "lastSequence">;

export type TaskPatch = Partial<Omit<TaskRecord, "taskId" | "version" | "lastSequence" | "createdAtMs" | "requester" | "executor" | "taskType" | "requestMessageId" | "idempotencyKey" | "carried" | "confidential">>;

/** One entry of a task's event log: a signed envelope and its decoded form. */
export interface StoredEvent {
  /** The task it belongs to. */
  readonly taskId: string;
  /** Its place in the task's event log, from 1. */
  readonly sequence: number;
  /** The signed envelope, as it travels. */
  readonly envelope: Envelope;
  /** Its signed header. */
  readonly header: Header;
  /** Its signed payload, the payload message of its type. */
  readonly payload: Message;
}

/** A signed reply that is not (necessarily) a task event. */
export interface StoredReply {
  readonly envelope: Envelope;
  readonly header: Header;
  readonly payload: Message;
}

/**
 * Which receiver remembered a message: message ids are unique per scope
 * ("a2n": a group host's GroupService; "a2a": a requester's unsigned
 * message from an A2A client, its id prefixed with the caller's agent id).
 */
export type MessageScope = "p2p" | "registry" | "a2n" | "a2a";

/** A message already processed: its digest and the reply it got. */
export interface SeenMessage {
  readonly scope: MessageScope;
  readonly messageId: string;
  readonly senderAgentId: string;
  readonly digest: string;
  /** Until when the entry matters: after it the message would be refused as expired anyway. */
  readonly keepUntilMs: number;
  readonly taskId?: string;
  readonly reply?: StoredReply;
}

export interface ListTasksQuery {
  /** Only this requester's tasks; undefined lists every requester's (an operator's read). */
  requesterAgentId: string | undefined;
  states?: readonly TaskState[];
  /** Only tasks of these types; empty or undefined means all. */
  taskTypes?: readonly string[];
  pageSize: number;
  pageToken?: string;
}

export interface TaskPage {
  tasks: TaskRecord[];
  nextPageToken: string;
}

/** A task this agent requested from another agent, whose events arrive by callback. */
export interface OutboundTask {
  readonly taskId: string;
  readonly executorAgentId: string;
  readonly state: TaskState;
  readonly lastSequence: number;
  /**
   * A confidential task's request `confidential` (suite, task key id, the
   * task key wrapped to each party, one of them to this agent): its pushed
   * events open with the key unwrapped from it.
   */
  readonly confidential?: Confidentiality;
}

export enum DeliveryStatus {
  /** Events remain to be pushed (or may still come). */
  ACTIVE = 0,
  /** Every event up to the terminal one was acknowledged. */
  DONE = 1,
  /** The endpoint refused or stayed unreachable past the retry budget. */
  GIVEN_UP = 2,
}

/** A callback outbox entry: pushing one task's events to its callback_url. */
export interface DeliveryRecord {
  readonly taskId: string;
  readonly url: string;
  /** The sequence of the next event to push; every earlier one was acknowledged. */
  readonly nextSequence: number;
  /** Failed attempts for the event at nextSequence. */
  readonly attempts: number;
  /** Not before this time (backoff after a failure). */
  readonly nextAttemptAtMs: number;
  readonly status: DeliveryStatus;
  readonly lastError: string;
  /** The instance pushing now; "" when none. */
  readonly owner: string;
  readonly ownerUntilMs: number;
}

export type DeliveryPatch = Partial<Pick<DeliveryRecord, "nextSequence" | "attempts" | "nextAttemptAtMs" | "status" | "lastError">> & {
  /** Gives up ownership with the update. */
  release?: boolean;
};

export type ConflictReason = "task_exists" | "group_exists" | "idempotency_key" | "message" | "missing" | "version" | "sequence" | "lease";

export class StoreConflictError extends Error {
  constructor(
    readonly reason: ConflictReason,
    message: string,
  ) {
    super(message);
    this.name = "StoreConflictError";
  }
}

/** A task was not created: the agent already runs as many as it may. */
export class StoreLimitError extends Error {
  constructor(
    readonly active: number,
    readonly max: number,
  ) {
    super(`${active} tasks are active, the most allowed is ${max}`);
    this.name = "StoreLimitError";
  }
}

export interface CreateOptions {
  /** The message that asked for the task, remembered in the same commit (with the first event as its reply). */
  message?: SeenMessage;
  /** Refuse (StoreLimitError) unless fewer than maxActive non-terminal tasks exist; checked in the same commit. */
  maxActive?: number;
  /** Starts a callback outbox entry for the task. */
  callbackUrl?: string;
}

export interface CommitOptions {
  /** The message that caused the change, remembered in the same commit. */
  message?: SeenMessage;
  /** Commit only while this instance holds the task's lease (an execution that lost it must not write). */
  fence?: string;
  /**
   * Commit only if the lease is free, expired at nowMs, or already this
   * owner's (the patch names the new leaseOwner). `force` ignores a live
   * lease of another owner: for a store only one process uses.
   */
  claim?: { nowMs: number; force?: boolean };
}

/** Messages already processed, so that none is accepted twice. */
export interface MessageStore {
  /** Records a message as seen, unless one with its scope and id is: then returns that one and changes nothing. */
  rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined>;
  getMessage(scope: MessageScope, messageId: string): Promise<SeenMessage | undefined>;
  /** Drops remembered messages whose keepUntilMs has passed. */
  pruneMessages(nowMs: number): Promise<number>;
}

// What changed in a store, as it happens (ChangeEmitter in changes.ts fans it out).
export type StoreChange =
  | { kind: "task"; taskId: string; sequence: number; event?: StoredEvent; task?: TaskRecord }
  | { kind: "outbound"; executorAgentId: string; taskId: string; sequence: number; event?: StoredEvent; task?: OutboundTask };

export type ChangeListener = (change: StoreChange) => void;

export interface ChangeSource {
  /** Calls `listener` after every committed change; returns the unsubscribe function. */
  onChange(listener: ChangeListener): () => void;
  /**
   * Names the tasks someone is waiting on. A store shared by several
   * processes looks at them now and then, in case a notification was lost.
   */
  watchTasks?(taskIds: () => Iterable<string>): void;
}

export interface TaskStore extends ChangeSource, MessageStore {
  /** Whether one process owns the store (SQLite, memory): leases of other instances are then dead. */
  readonly exclusive: boolean;
  /** Whether the store can be used now, for a store on another server (PostgreSQL); absent when it always can. */
  readonly availability?: StoreAvailability;

  // ── tasks and their event logs ─────────────────────────────────────────

  /** Inserts a task with its first event (sequence 1). StoreConflictError when the id, idempotency key or message id is taken. */
  createTask(task: NewTask, firstEvent: StoredEvent, options?: CreateOptions): Promise<TaskRecord>;
  getTask(taskId: string): Promise<TaskRecord | undefined>;
  /**
   * Applies a patch and appends an event atomically, if the task is still at
   * expectedVersion and the event's sequence is lastSequence + 1 (and the
   * options' conditions hold); otherwise StoreConflictError and nothing changes.
   */
  commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options?: CommitOptions): Promise<TaskRecord>;
  listTasks(query: ListTasksQuery): Promise<TaskPage>;
  countTasks(states: readonly TaskState[]): Promise<number>;
  findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined>;
  /** Events with sequence >= fromSequence, in order, at most `limit` (default all). */
  listEvents(taskId: string, fromSequence: number, limit?: number): Promise<StoredEvent[]>;

  // ── who runs what ──────────────────────────────────────────────────────

  /** Tasks in `states` whose lease is free or expired at nowMs (any lease when `force`), oldest first. */
  listUnleased(states: readonly TaskState[], nowMs: number, limit: number, force?: boolean): Promise<TaskRecord[]>;
  /** Extends the leases `owner` still holds; returns the ids it still holds. */
  renewLeases(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]>;
  /** Gives up leases (at shutdown, or when an execution ends). */
  releaseLeases(owner: string, taskIds: readonly string[]): Promise<void>;
  /** Tasks waiting for a human decision whose deadline is at or before `atMs`. */
  listDecisionDeadlines(atMs: number, limit: number): Promise<TaskRecord[]>;

  // ── results ────────────────────────────────────────────────────────────

  /** Stores a task's result bytes (replacing any earlier ones). */
  putResult(taskId: string, bytes: Uint8Array): Promise<void>;
  /** Up to `length` bytes of a task's result from `offset`; RangeError when there is none. */
  readResult(taskId: string, offset: number, length: number): Promise<Uint8Array>;

  // ── tasks this agent requested (callbacks received) ────────────────────

  /** Starts expecting callbacks for a task this agent requested. */
  expectOutbound(task: OutboundTask): Promise<void>;
  getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined>;
  /** Appends a received event if its sequence is lastSequence + 1 (else StoreConflictError). */
  appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask>;
  listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]>;

  // ── the callback outbox ────────────────────────────────────────────────

  getDelivery(taskId: string): Promise<DeliveryRecord | undefined>;
  /** Takes active deliveries that are due and not held by a live owner (or are owner's already). */
  claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): Promise<DeliveryRecord[]>;
  /** Updates a delivery `owner` holds; false when it no longer holds it. */
  updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): Promise<boolean>;
  /** Extends the deliveries `owner` still holds; returns their task ids. */
  renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): Promise<string[]>;

  // ── retention ──────────────────────────────────────────────────────────

  /**
   * Drops terminal tasks last changed before `beforeMs`, with their events,
   * results and outbox entries, and finished outbound tasks; at most `limit`.
   */
  pruneTasks(beforeMs: number, limit: number): Promise<number>;

  close(): Promise<void>;
}

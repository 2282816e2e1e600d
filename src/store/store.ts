// The Store: every piece of engine state (tasks, their event logs, the
// messages already processed, result bytes) goes through this interface,
// so a durable implementation can replace the in-memory one. Writes are
// atomic: a state change and the event that records it commit together,
// guarded by the task's version (optimistic locking).
import type { Message } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
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
}

export type TaskPatch = Partial<Omit<TaskRecord, "taskId" | "version" | "lastSequence" | "createdAtMs" | "requester" | "executor">>;

/** One entry of a task's event log: a signed envelope and its decoded form. */
export interface StoredEvent {
  readonly taskId: string;
  readonly sequence: number;
  readonly envelope: Envelope;
  readonly header: Header;
  readonly payload: Message;
}

/** A message already processed: its digest and the reply it got. */
export interface SeenMessage {
  readonly messageId: string;
  readonly senderAgentId: string;
  readonly digest: string;
  /** Until when the entry matters: after it the message would be refused as expired anyway. */
  readonly keepUntilMs: number;
  readonly taskId?: string;
  readonly reply?: StoredReply;
}

export interface StoredReply {
  readonly envelope: Envelope;
  readonly header: Header;
  readonly payload: Message;
}

export interface ListTasksQuery {
  requesterAgentId: string;
  states?: readonly TaskState[];
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
}

export class StoreConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreConflictError";
  }
}

export interface Store {
  /** Inserts a new task with its first event. StoreConflictError when the id exists. */
  createTask(task: Omit<TaskRecord, "version" | "lastSequence">, firstEvent?: StoredEvent): Promise<TaskRecord>;
  getTask(taskId: string): Promise<TaskRecord | undefined>;
  /**
   * Applies a patch and appends an event atomically, if the task is still at
   * expectedVersion and the event's sequence is lastSequence + 1; otherwise
   * StoreConflictError and nothing changes.
   */
  commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent): Promise<TaskRecord>;
  listTasks(query: ListTasksQuery): Promise<TaskPage>;
  countTasks(states: readonly TaskState[]): Promise<number>;
  findTaskByIdempotencyKey(requesterAgentId: string, key: string): Promise<TaskRecord | undefined>;
  /** Events with sequence >= fromSequence, in order. */
  listEvents(taskId: string, fromSequence: number): Promise<StoredEvent[]>;

  /** Records a message as seen, unless one with its id is: then returns that one and changes nothing. */
  rememberMessage(entry: SeenMessage): Promise<SeenMessage | undefined>;
  /** Attaches the reply to a remembered message. */
  completeMessage(messageId: string, reply: StoredReply | undefined, taskId?: string): Promise<void>;
  /** Forgets a message whose processing failed, so that it may be sent again. */
  forgetMessage(messageId: string): Promise<void>;
  getMessage(messageId: string): Promise<SeenMessage | undefined>;
  /** Drops remembered messages whose keepUntilMs has passed. */
  pruneMessages(nowMs: number): Promise<number>;

  /** Starts expecting callbacks for a task this agent requested. */
  expectOutbound(task: OutboundTask): Promise<void>;
  getOutbound(executorAgentId: string, taskId: string): Promise<OutboundTask | undefined>;
  /** Appends a received event if its sequence is lastSequence + 1 (else StoreConflictError). */
  appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): Promise<OutboundTask>;
  listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]>;

  putResult(taskId: string, bytes: Uint8Array): Promise<void>;
  /** Up to `length` bytes of a task's result from `offset`. */
  readResult(taskId: string, offset: number, length: number): Promise<Uint8Array>;
}

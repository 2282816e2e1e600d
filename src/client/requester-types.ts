// What SynapseClient takes and returns: its options, what a send returns,
// the options of a submission, a decision and a sealed envelope, and what a
// watch yields.
import type { JsonObject, Message } from "@bufbuild/protobuf";
import type { ConnectError, Transport } from "@connectrpc/connect";
import type { Envelope, Header, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import type { TaskPriority, TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../agent/identity.js";
import type { CallbackInbox } from "../agent/inbox.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { TransportOptions } from "./transport.js";

/** Options of {@link SynapseClient.connect}. */
export interface ClientOptions {
  /** The executor's base URL, for example http://127.0.0.1:8080. */
  baseUrl: string;
  /** This requester's identity (its key signs every message and token). */
  identity: AgentIdentity;
  /** The protocol and HTTP version to call with; default Connect (JSON) over HTTP/1.1, HTTP/2 for https. */
  transport?: TransportOptions;
  /** A transport to use instead of one built from baseUrl and `transport` (an agent's outbound transport, say). */
  rpcTransport?: Transport;
  /**
   * How the executor's key is trusted. Default: pinned on first use in
   * memory; pass a PinnedKeys opened on a file to keep pins across runs.
   */
  trust?: TrustPolicy;
  /**
   * Ask executors to push every event to this requester's own agent
   * (CallbackReceiver): its base URL and its inbox. The requester identity
   * must be that agent's identity.
   */
  callback?: { url: string; inbox: CallbackInbox };
  /** How long the first call (GetCapabilities) may take; default no limit. */
  connectTimeoutMs?: number;
  /** Retries for watch and result reads after a dropped connection; default 5. */
  maxRetries?: number;
  /** The first retry waits this long, each next one twice as long; default 500 ms. */
  retryBaseDelayMs?: number;
  /**
   * Retries of a Send that failed UNAVAILABLE (the server was shutting down,
   * refused the stream, or could not be reached), with the backoff above;
   * default 3. The same envelope is sent again: a Send is idempotent by
   * message id, so a message already processed gets its reply again.
   */
  sendRetries?: number;
}

/** A signed message from the executor, verified. */
export interface VerifiedMessage {
  /** The envelope as it arrived. */
  envelope: Envelope;
  /** Its signed header. */
  header: Header;
  /** Its message type, for example `MessageType.TASK_STATUS_UPDATE`. */
  type: MessageType;
  /** Its signed payload, the payload message of `type` (a `TaskStatusUpdatePayload`, say). */
  payload: Message;
}

/** What a Send returned. */
export interface SendResult {
  /** The executor's signed reply (task_confirm or task_reject for a request, task_ack for a cancel, ack for others), verified. */
  reply?: VerifiedMessage;
  /** The task as it stands after the message (after waiting, when asked to wait). */
  task?: Task;
}

/** Options of {@link SynapseClient.submit}. */
export interface SubmitOptions {
  /** The task id, any string the executor has not seen from you; default a new time-ordered UUID (`uuidV7`). */
  taskId?: string;
  /** Hold the reply until the task is terminal or needs input, for at most this long. */
  waitMs?: number;
  /** A key that makes a resubmission of the same task return the first one's reply instead of a new task. */
  idempotencyKey?: string;
  /** The task's priority; default normal. */
  priority?: TaskPriority;
  /** When the task must be done by. */
  deadline?: Date;
  /** A session id, carried in every message of the task. */
  sessionId?: string;
  /** A correlation id, carried in every message of the task. */
  correlationId?: string;
  /** Free-form context for the executor. */
  metadata?: JsonObject;
  /** The task this one is a subtask of (TaskContext.parent_task_id). */
  parentTaskId?: string;
  /** Uploaded files the task names (POST /upload answered sha256 and size); the signature covers them. */
  uploads?: Array<{ name: string; sha256: string; size: number }>;
  /**
   * Make the task confidential (docs/PROTOCOL.md §9): every message of it is
   * signed, then encrypted to the executor's published encryption key and to
   * this requester's own; the executor's store keeps it sealed.
   */
  confidential?: boolean;
  /**
   * With `confidential`: the task key {@link SynapseClient.uploadConfidential}
   * made for this `taskId` in another process (its `taskKey`); in the same
   * client the key made there is used without it.
   */
  taskKey?: Uint8Array;
}

/** A human's decision, for {@link SynapseClient.decide}. */
export interface DecisionInput {
  /** Approve the task as it is, modify it (with `fields`) and go on, or reject it (it fails with `human_rejected`). */
  action: "approve" | "reject" | "modify";
  /** The approved fields (approve) or the changed ones (modify); they reach the handler. */
  fields?: JsonObject;
  /** A note for the record. */
  notes?: string;
  /** Why it was rejected. */
  rejectionReason?: string;
  /** Who decided; default this requester's agent id as the user id. */
  decidedBy?: { userId?: string; userName?: string; role?: string };
}

/**
 * What {@link SynapseClient.watch} yields: the task as it stood when the
 * watch began (`snapshot`, once), each verified event with the state it
 * leads to (`event`), a signed `heartbeat` on an idle stream, and
 * `reconnecting` before it resumes after a dropped connection.
 */
export type ClientWatchItem =
  | { kind: "snapshot"; task: Task }
  | { kind: "event"; sequence: number; event: VerifiedMessage; state: TaskState }
  | { kind: "heartbeat"; heartbeat: VerifiedMessage }
  | { kind: "reconnecting"; attempt: number; fromSequence: number; error: ConnectError };

/** Options of {@link SynapseClient.watch}. */
export interface WatchOptions {
  /** The first event to yield (events are numbered from 1); default 1, the whole log. */
  fromSequence?: number;
  /** Stops the watch when aborted. */
  signal?: AbortSignal;
}

/**
 * What {@link SynapseClient.envelope} seals besides the message type and
 * payload. Ids left out are the task's when this client submitted it (the
 * latest 1,024 tasks), so every message about a task carries its trace,
 * session and correlation ids.
 */
export interface EnvelopeExtras {
  /** The task the message is about. */
  taskId?: string;
  /** For a task_request: the key under which the executor remembers it. */
  idempotencyKey?: string;
  /** The session id; default the task's. */
  sessionId?: string;
  /** The correlation id; default the task's. */
  correlationId?: string;
  /** W3C `traceparent`; default the active OpenTelemetry span's, else the task's trace, else a new trace. */
  traceparent?: string;
  /** W3C `tracestate`, with `traceparent`. */
  tracestate?: string;
}

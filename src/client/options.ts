// What SynapseClient (requester.ts) is given and gives back: its options,
// verified messages, the results of a Send, submit and decision inputs,
// and the items a watch yields.
import type { JsonObject, Message } from "@bufbuild/protobuf";
import type { ConnectError, Transport } from "@connectrpc/connect";
import type { Envelope, Header, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import type { TaskPriority, TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { AgentIdentity } from "../agent/identity.js";
import type { CallbackInbox } from "../agent/inbox.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { TransportOptions } from "./transport.js";

export interface ClientOptions {
  /** The executor's base URL, for example http://127.0.0.1:8080. */
  baseUrl: string;
  /** This requester's identity (its key signs every message and token). */
  identity: AgentIdentity;
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
  /** Retries for watch and result reads after a dropped connection. */
  maxRetries?: number;
  retryBaseDelayMs?: number;
}

/** A signed message from the executor, verified. */
export interface VerifiedMessage {
  envelope: Envelope;
  header: Header;
  type: MessageType;
  payload: Message;
}

export interface SendResult {
  reply?: VerifiedMessage;
  task?: Task;
}

export interface SubmitOptions {
  taskId?: string;
  /** Hold the reply until the task is terminal or needs input, for at most this long. */
  waitMs?: number;
  idempotencyKey?: string;
  priority?: TaskPriority;
  deadline?: Date;
  sessionId?: string;
  correlationId?: string;
  metadata?: JsonObject;
  /** The task this one is a subtask of (TaskContext.parent_task_id). */
  parentTaskId?: string;
  /** Uploaded files the task names (POST /upload answered sha256 and size); the signature covers them. */
  uploads?: Array<{ name: string; sha256: string; size: number }>;
}

export interface DecisionInput {
  action: "approve" | "reject" | "modify";
  fields?: JsonObject;
  notes?: string;
  rejectionReason?: string;
  decidedBy?: { userId?: string; userName?: string; role?: string };
}

export type ClientWatchItem =
  | { kind: "snapshot"; task: Task }
  | { kind: "event"; sequence: number; event: VerifiedMessage; state: TaskState }
  | { kind: "heartbeat"; heartbeat: VerifiedMessage }
  | { kind: "reconnecting"; attempt: number; fromSequence: number; error: ConnectError };

export interface WatchOptions {
  fromSequence?: number;
  signal?: AbortSignal;
}

/** What envelope() seals besides type and payload. */
export interface EnvelopeExtras {
  taskId?: string;
  idempotencyKey?: string;
  /** Default: the task's (for a task this client submitted). */
  sessionId?: string;
  /** Default: the task's (for a task this client submitted). */
  correlationId?: string;
  /** W3C trace context; default the active span's, else the task's trace (for a task this client submitted), else a new trace. */
  traceparent?: string;
  tracestate?: string;
}

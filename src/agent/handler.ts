// The TaskHandler API: what a user implements to run tasks of one type.
// The engine calls validateTask before confirming a task and executeTask to
// run it; the context lets the handler report progress, ask for missing
// information or a human decision and await the answer, and see cancellation.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { Logger } from "../log.js";

/** A field the task needs (becomes a MissingField in p2p:task_need_info). */
export interface MissingFieldSpec {
  /** The payload field asked for. */
  field: string;
  /** Why it is needed, for the requester. */
  reason: string;
  /** A value the requester may take. */
  suggestedValue?: JsonValue;
  /** Other acceptable values. */
  alternatives?: JsonValue[];
}

/** A task as a handler sees it before running it. */
export interface TaskInput {
  /** The task id (chosen by the requester). */
  taskId: string;
  /** The task type. */
  taskType: string;
  /** The task payload as submitted (after schema validation). */
  payload: JsonObject;
  /** The agent that requested the task (verified by its signature). */
  requester: { agentId: string; systemId: string };
  /**
   * The id of the message that requested the task, as its requester chose
   * it: the task request's header message_id, or for a task that came over
   * A2A the A2A message's messageId.
   */
  requestMessageId: string;
}

/** What {@link TaskHandler.validateTask} decides before a task is confirmed. */
export type Validation =
  | { kind: "accept" }
  /** Ask the requester for these fields (p2p:task_need_info) before confirming. */
  | { kind: "need_info"; fields: MissingFieldSpec[]; question?: string }
  /** Refuse the task (p2p:task_reject). */
  | { kind: "reject"; code?: ErrorCode; message: string; retryAfterSeconds?: number; suggestedAgentId?: string };

/** What a handler asks a human (p2p:task_need_human), with {@link TaskContext.askHuman}. */
export interface HumanQuestion {
  /** A short code, for example "approval_required". */
  code: string;
  /** The question, for the human. */
  message: string;
  /** What the task is about, in a line. */
  taskSummary?: string;
  /** Why the task cannot go on without a decision. */
  blockedReason?: string;
  /** Choices to offer: a value for a payload field, its pros and cons, and how confident the agent is (0 to 1). */
  options?: Array<{ field: string; value: JsonValue; prosCons?: string; confidence?: number }>;
  /** 1 (team) to 3 (executive). */
  escalationLevel?: number;
  /** Decide by then or the task fails. */
  deadline?: Date;
}

/** A human's answer, as {@link TaskContext.askHuman} returns it. */
export interface HumanAnswer {
  /** "approve" or "modify"; a rejection never reaches the handler (the task fails). */
  action: "approve" | "modify";
  /** approved_fields for approve, modified_fields for modify (also merged into ctx.payload). */
  fields: JsonObject;
  /** The decider's note. */
  notes: string;
  /** Who decided. */
  decidedBy: { userId: string; userName: string; role: string };
}

/** A result too large for one message, produced as bytes and read with ReadResult. */
export interface ResultStreamSource {
  /** The bytes' media type, for example "text/csv". */
  contentType: string;
  /** The bytes, at once or as they are produced. */
  data: AsyncIterable<Uint8Array> | Uint8Array;
}

/**
 * One piece of a {@link ResultArtifact}: text, a JSON value, a file's bytes
 * or a file's URL, with an optional file name and media type.
 */
export type ResultPart = (
  | { text: string }
  | { data: JsonValue }
  | { bytes: Uint8Array }
  | { url: string }
) & {
  /** The file name, for example "report.csv". */
  fileName?: string;
  /** The media type, for example "text/plain". */
  mediaType?: string;
};

/**
 * A named output of a task besides (or instead of) its JSON `output`, for
 * example a generated file. It is kept in the signed result, under
 * {@link RESULT_ARTIFACTS_KEY} of its metadata, with each part as A2A's
 * Part JSON (bytes base64); A2A clients see each as one of the task's
 * artifacts.
 */
export interface ResultArtifact {
  /** Unique within the task; default `<taskId>-artifact-<n>`. */
  artifactId?: string;
  /** A human-readable name. */
  name?: string;
  /** What it is. */
  description?: string;
  /** Its content, at least one part. */
  parts: ResultPart[];
}

/** The key of the result metadata that holds a task's {@link ResultArtifact}s. */
export const RESULT_ARTIFACTS_KEY = "artifacts";

/** What a handler returns: the task's result (p2p:task_complete). */
export interface TaskOutput {
  /** The output, checked against the task type's output schema. */
  output?: JsonValue;
  /** What the output is, for example "json" (the default) or "text". */
  outputType?: string;
  /** A one-line summary of the result. */
  summary?: string;
  /** Facts about the run (timings, counts). */
  metadata?: JsonObject;
  /** Bytes offered through ReadResult; total size and SHA-256 go into the signed task_complete. */
  stream?: ResultStreamSource;
  /** Named outputs (text, data, files, links), kept in the signed result's metadata. */
  artifacts?: ResultArtifact[];
  /**
   * The result is a direct answer rather than the record of work done: an
   * A2A client that waited for it (a blocking SendMessage) gets it as an
   * A2A Message (the summary as text, then the artifacts' parts) instead
   * of a Task. The task is kept as any other; recorded in the signed
   * result's metadata under {@link RESULT_DIRECT_REPLY_KEY}. Default false.
   */
  directReply?: boolean;
}

/** The key of the result metadata that marks a {@link TaskOutput.directReply}. */
export const RESULT_DIRECT_REPLY_KEY = "directReply";

/**
 * The ids the task's request carried in its header, which every event of
 * the task carries too: W3C trace context, the session and the correlation
 * id. Empty strings when the request carried none.
 */
export interface TaskTrace {
  /** The request's W3C `traceparent`, for example "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01". */
  readonly traceparent: string;
  /** The request's W3C `tracestate`. */
  readonly tracestate: string;
  /** The trace id of `traceparent` (32 hex digits). */
  readonly traceId: string;
  /** The request's session id. */
  readonly sessionId: string;
  /** The request's correlation id. */
  readonly correlationId: string;
}

/** A file the task request names (TaskRequestPayload.uploads), uploaded beforehand with POST /upload. */
export interface UploadedFile {
  /** The name the request gives it, for example "csv". */
  name: string;
  /** SHA-256 of its bytes, lowercase hex: what the request signed. */
  sha256: string;
  /** Its size in bytes. */
  size: number;
  /** Its media type, as the uploader sent it. */
  contentType: string;
  /** Its file name, as the uploader sent it. */
  fileName: string;
}

/** The files a task's request names, each checked against its signed hash before the handler runs. */
export interface TaskUploads {
  /** Every file the request names, in its order. */
  readonly files: readonly UploadedFile[];
  /** The file the request names `name`, if any. */
  get(name: string): UploadedFile | undefined;
  /**
   * The file's bytes, chunk by chunk from the store, never all in memory;
   * hashed again as they are read (a TaskFailure upload_mismatch at the
   * end if the store changed under the task).
   */
  open(name: string): AsyncIterable<Uint8Array>;
}

/**
 * A running task, as its handler sees it: the task, and what the handler
 * may do while it runs (report progress, ask questions, read the files the
 * request names, notice it is cancelled).
 */
export interface TaskContext extends TaskInput {
  /**
   * 1 for the first run of this task's handler; more when a resumable
   * handler runs again after the agent restarted (or another instance took
   * the task over). Answers given before are replayed: askForInfo and
   * askHuman return them at once, in the order they were asked.
   */
  readonly attempt: number;
  /** Aborted when the task is cancelled, times out, or the agent shuts down. */
  readonly signal: AbortSignal;
  /** The task's trace, session and correlation ids (read-only): pass them on to work this task starts elsewhere. */
  readonly trace: TaskTrace;
  /** A logger whose lines name the task and its trace id. */
  readonly logger: Logger;
  /** Reports progress (0-100) as a p2p:task_status_update. */
  progress(percent: number, message?: string, intermediateResult?: JsonValue): Promise<void>;
  /** Sends p2p:task_need_info and resolves with the provided fields (also merged into payload). */
  askForInfo(fields: MissingFieldSpec[], question?: string): Promise<JsonObject>;
  /** Sends p2p:task_need_human and resolves when a human approves or modifies. */
  askHuman(question: HumanQuestion): Promise<HumanAnswer>;
  /** The uploaded files the request names (none when it names none). */
  readonly uploads: TaskUploads;
}

/**
 * Runs tasks of one type. The agent calls `validateTask` (if given) before
 * confirming a task, then `executeTask` to run it; whatever `executeTask`
 * returns completes the task, whatever it throws fails it ({@link TaskFailure}
 * picks the protocol code).
 */
export interface TaskHandler {
  /**
   * Whether executeTask may run again for a task whose run was interrupted
   * (the agent restarted, or the instance running it died). It then starts
   * over from the task's current payload (with provided and modified fields
   * merged in), ctx.attempt > 1. A handler that is not resumable never runs
   * twice: its interrupted task fails with agent_not_ready (recoverable), so
   * the requester knows to submit it again. Default false.
   */
  readonly resumable?: boolean;
  /** Accepts the task, asks for missing fields first, or rejects it; default accept. */
  validateTask?(task: TaskInput): Validation | Promise<Validation>;
  /** Runs the task and returns its output. */
  executeTask(ctx: TaskContext): Promise<TaskOutput>;
}

/** Thrown by a handler to fail its task with a specific protocol code. */
export class TaskFailure extends Error {
  constructor(
    /** The protocol error code the task fails with. */
    readonly code: ErrorCode,
    message: string,
    /** Whether the requester may submit the task again and expect it to work. */
    readonly recoverable = false,
    /** Facts about the failure, for the requester. */
    readonly details?: JsonValue,
  ) {
    super(message);
    this.name = "TaskFailure";
  }
}

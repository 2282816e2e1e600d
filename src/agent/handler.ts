// The TaskHandler API: what a user implements to run tasks of one type.
// The engine calls validateTask before confirming a task and executeTask to
// run it; the context lets the handler report progress, ask for missing
// information or a human decision and await the answer, and see cancellation.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { Logger } from "../log.js";

/** A field the task needs (becomes a MissingField in p2p:task_need_info). */
export interface MissingFieldSpec {
  field: string;
  reason: string;
  suggestedValue?: JsonValue;
  alternatives?: JsonValue[];
}

export interface TaskInput {
  taskId: string;
  taskType: string;
  /** The task payload as submitted (after schema validation). */
  payload: JsonObject;
  requester: { agentId: string; systemId: string };
}

export type Validation =
  | { kind: "accept" }
  /** Ask the requester for these fields (p2p:task_need_info) before confirming. */
  | { kind: "need_info"; fields: MissingFieldSpec[]; question?: string }
  /** Refuse the task (p2p:task_reject). */
  | { kind: "reject"; code?: ErrorCode; message: string; retryAfterSeconds?: number; suggestedAgentId?: string };

export interface HumanQuestion {
  /** A short code, for example "approval_required". */
  code: string;
  message: string;
  taskSummary?: string;
  blockedReason?: string;
  options?: Array<{ field: string; value: JsonValue; prosCons?: string; confidence?: number }>;
  /** 1 (team) to 3 (executive). */
  escalationLevel?: number;
  /** Decide by then or the task fails. */
  deadline?: Date;
}

export interface HumanAnswer {
  /** "approve" or "modify"; a rejection never reaches the handler (the task fails). */
  action: "approve" | "modify";
  /** approved_fields for approve, modified_fields for modify (also merged into ctx.payload). */
  fields: JsonObject;
  notes: string;
  decidedBy: { userId: string; userName: string; role: string };
}

/** A result too large for one message, produced as bytes and read with ReadResult. */
export interface ResultStreamSource {
  contentType: string;
  data: AsyncIterable<Uint8Array> | Uint8Array;
}

export interface TaskOutput {
  /** The output, checked against the task type's output schema. */
  output?: JsonValue;
  /** What the output is, for example "json" (the default) or "text". */
  outputType?: string;
  summary?: string;
  metadata?: JsonObject;
  /** Bytes offered through ReadResult; total size and SHA-256 go into the signed task_complete. */
  stream?: ResultStreamSource;
}

/** A file the task request names (TaskRequestPayload.uploads), uploaded beforehand with POST /upload. */
export interface UploadedFile {
  /** The name the request gives it, for example "csv". */
  name: string;
  /** SHA-256 of its bytes, lowercase hex: what the request signed. */
  sha256: string;
  size: number;
  /** As the uploader sent them. */
  contentType: string;
  fileName: string;
}

/** The files a task's request names, each checked against its signed hash before the handler runs. */
export interface TaskUploads {
  readonly files: readonly UploadedFile[];
  get(name: string): UploadedFile | undefined;
  /**
   * The file's bytes, chunk by chunk from the store, never all in memory;
   * hashed again as they are read (a TaskFailure upload_mismatch at the
   * end if the store changed under the task).
   */
  open(name: string): AsyncIterable<Uint8Array>;
}

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
  validateTask?(task: TaskInput): Validation | Promise<Validation>;
  executeTask(ctx: TaskContext): Promise<TaskOutput>;
}

/** Thrown by a handler to fail its task with a specific protocol code. */
export class TaskFailure extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly recoverable = false,
    readonly details?: JsonValue,
  ) {
    super(message);
    this.name = "TaskFailure";
  }
}

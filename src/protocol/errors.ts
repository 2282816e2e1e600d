// Protocol errors as ConnectErrors: one place maps each ErrorCode to its
// Connect code (and so its HTTP status) and attaches a synapse.v1.ErrorDetail.
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorCode, ErrorDetailSchema, type ErrorDetail, type MissingField } from "../../gen/synapse/v1/errors_pb.js";

const connectCodes: Record<ErrorCode, Code> = {
  [ErrorCode.UNSPECIFIED]: Code.Unknown,
  [ErrorCode.MESSAGE_FORMAT_INVALID]: Code.InvalidArgument,
  [ErrorCode.INVALID_PARAMS]: Code.InvalidArgument,
  [ErrorCode.SIGNATURE_INVALID]: Code.Unauthenticated,
  [ErrorCode.MESSAGE_EXPIRED]: Code.Unauthenticated,
  [ErrorCode.TASK_NOT_FOUND]: Code.NotFound,
  [ErrorCode.REPLAY_DETECTED]: Code.AlreadyExists,
  [ErrorCode.UNKNOWN_SENDER]: Code.Unauthenticated,
  [ErrorCode.WRONG_RECEIVER]: Code.PermissionDenied,
  [ErrorCode.ILLEGAL_TRANSITION]: Code.FailedPrecondition,
  [ErrorCode.TASK_ALREADY_COMPLETED]: Code.FailedPrecondition,
  [ErrorCode.UNSUPPORTED_VERSION]: Code.FailedPrecondition,
  [ErrorCode.MESSAGE_TOO_LARGE]: Code.ResourceExhausted,
  [ErrorCode.UPLOAD_NOT_FOUND]: Code.NotFound,
  [ErrorCode.UPLOAD_MISMATCH]: Code.DataLoss,
  [ErrorCode.CONFIDENTIALITY_REQUIRED]: Code.InvalidArgument,
  [ErrorCode.DECRYPTION_FAILED]: Code.InvalidArgument,
  [ErrorCode.ENCRYPTION_KEY_UNKNOWN]: Code.InvalidArgument,
  [ErrorCode.INNER_SIGNATURE_INVALID]: Code.InvalidArgument,
  [ErrorCode.EXECUTION_FAILED]: Code.Internal,
  [ErrorCode.EXECUTION_TIMEOUT]: Code.DeadlineExceeded,
  [ErrorCode.TASK_DURATION_EXCEEDED]: Code.DeadlineExceeded,
  [ErrorCode.TASK_CANCELLED]: Code.Canceled,
  [ErrorCode.HUMAN_REJECTED]: Code.FailedPrecondition,
  [ErrorCode.OUTPUT_INVALID]: Code.Internal,
  [ErrorCode.PERMISSION_DENIED]: Code.PermissionDenied,
  [ErrorCode.CAPABILITY_LACKING]: Code.PermissionDenied,
  [ErrorCode.UNAUTHENTICATED]: Code.Unauthenticated,
  [ErrorCode.CONCURRENCY_LIMIT]: Code.ResourceExhausted,
  [ErrorCode.RATE_LIMITED]: Code.ResourceExhausted,
  [ErrorCode.UPLOAD_TOO_LARGE]: Code.ResourceExhausted,
  [ErrorCode.UPLOAD_QUOTA_EXCEEDED]: Code.ResourceExhausted,
  [ErrorCode.AGENT_NOT_READY]: Code.Unavailable,
  [ErrorCode.INTERNAL]: Code.Internal,
};

export function connectCodeOf(code: ErrorCode): Code {
  return connectCodes[code] ?? Code.Unknown;
}

/** The protocol's string spelling: ERROR_CODE_RATE_LIMITED -> "rate_limited". */
export function protocolCodeName(code: ErrorCode): string {
  const name = ErrorCode[code] as string | undefined;
  return name === undefined ? `error_${code}` : name.toLowerCase();
}

export interface ErrorExtras {
  retryAfterSeconds?: number;
  missingFields?: MissingField[];
  details?: JsonObject;
  cause?: unknown;
  /** Overrides the RPC status the code normally maps to (NOT_FOUND for a task-type lookup, say). */
  status?: Code;
}

// Errors echo what callers sent (ids, versions, keys). Echoes are clipped, and
// every message and detail is bounded: gRPC carries them in trailers, and a
// trailer block over 64 KB resets the stream instead of reporting the status.
/** Longest echo of a caller's string inside an error message. */
export const MAX_ECHO_CHARS = 128;
/** Longest error message. */
export const MAX_ERROR_MESSAGE_CHARS = 1024;
const MAX_DETAIL_STRING_CHARS = 256;
const MAX_DETAIL_ENTRIES = 32;
const MAX_DETAIL_DEPTH = 4;
const MAX_DETAILS_JSON_CHARS = 4096;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** The string with any unpaired surrogate replaced: encodeURIComponent (grpc-message) throws on one. */
export function wellFormed(value: string): string {
  return value.replace(LONE_SURROGATE, "\ufffd");
}

/** A caller's string as an error may echo it: at most `max` characters, well formed. */
export function clip(value: string, max = MAX_ECHO_CHARS): string {
  if (value.length <= max) return wellFormed(value);
  const suffix = `…(${value.length} chars)`;
  return wellFormed(value.slice(0, max - suffix.length) + suffix);
}

/** An error message within MAX_ERROR_MESSAGE_CHARS. */
export function capMessage(message: string): string {
  return clip(message, MAX_ERROR_MESSAGE_CHARS);
}

/** Details with every string clipped, lists and objects cut short, and at most MAX_DETAILS_JSON_CHARS in all. */
export function capDetails(details: JsonObject): JsonObject {
  const capped = capJson(details, 0) as JsonObject;
  return JSON.stringify(capped).length <= MAX_DETAILS_JSON_CHARS ? capped : { truncated: true };
}

/** Whether an ErrorDetail is within the bounds errorDetail() gives. */
export function detailWithinBounds(detail: ErrorDetail): boolean {
  return detail.message === capMessage(detail.message) && (detail.details === undefined || JSON.stringify(detail.details).length <= MAX_DETAILS_JSON_CHARS);
}

function capJson(value: JsonValue, depth: number): JsonValue {
  if (typeof value === "string") return clip(value, MAX_DETAIL_STRING_CHARS);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DETAIL_DEPTH) return null;
  if (Array.isArray(value)) return value.slice(0, MAX_DETAIL_ENTRIES).map((item) => capJson(item, depth + 1));
  const entries = Object.entries(value).slice(0, MAX_DETAIL_ENTRIES);
  return Object.fromEntries(entries.map(([key, item]) => [clip(key, MAX_DETAIL_STRING_CHARS), capJson(item, depth + 1)]));
}

export function errorDetail(code: ErrorCode, message: string, extras: ErrorExtras = {}): ErrorDetail {
  return create(ErrorDetailSchema, {
    code,
    message: capMessage(message),
    protocolCode: protocolCodeName(code),
    retryAfterSeconds: extras.retryAfterSeconds ?? 0,
    missingFields: (extras.missingFields ?? []).slice(0, MAX_DETAIL_ENTRIES),
    details: extras.details === undefined ? undefined : capDetails(extras.details),
  });
}

/** A ConnectError carrying a synapse.v1.ErrorDetail. */
export function protocolError(code: ErrorCode, message: string, extras: ErrorExtras = {}): ConnectError {
  const detail = errorDetail(code, message, extras);
  return new ConnectError(detail.message, extras.status ?? connectCodeOf(code), undefined, [{ desc: ErrorDetailSchema, value: detail }], extras.cause);
}

/**
 * The one answer for a task that does not exist or is not the caller's: a
 * non-party must not be able to tell the two apart (same code, message, details).
 */
export function taskNotFound(taskId: string): ConnectError {
  return protocolError(ErrorCode.TASK_NOT_FOUND, `no task ${clip(taskId)}`);
}

/** The ErrorDetail attached to an error, if any (works for errors from any Synapse server). */
export function findErrorDetail(error: unknown): ErrorDetail | undefined {
  const connectError = ConnectError.from(error);
  return connectError.findDetails(ErrorDetailSchema)[0];
}

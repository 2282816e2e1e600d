// Protocol errors as ConnectErrors: one place maps each ErrorCode to its
// Connect code (and so its HTTP status) and attaches a synapse.v1.ErrorDetail.
import { create, type JsonObject } from "@bufbuild/protobuf";
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

export function errorDetail(code: ErrorCode, message: string, extras: ErrorExtras = {}): ErrorDetail {
  return create(ErrorDetailSchema, {
    code,
    message,
    protocolCode: protocolCodeName(code),
    retryAfterSeconds: extras.retryAfterSeconds ?? 0,
    missingFields: extras.missingFields ?? [],
    details: extras.details,
  });
}

/** A ConnectError carrying a synapse.v1.ErrorDetail. */
export function protocolError(code: ErrorCode, message: string, extras: ErrorExtras = {}): ConnectError {
  const detail = errorDetail(code, message, extras);
  return new ConnectError(message, extras.status ?? connectCodeOf(code), undefined, [{ desc: ErrorDetailSchema, value: detail }], extras.cause);
}

/** The ErrorDetail attached to an error, if any (works for errors from any Synapse server). */
export function findErrorDetail(error: unknown): ErrorDetail | undefined {
  const connectError = ConnectError.from(error);
  return connectError.findDetails(ErrorDetailSchema)[0];
}

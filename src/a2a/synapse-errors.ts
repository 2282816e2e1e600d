// The engine's refusals (ConnectErrors with a synapse.v1.ErrorDetail) in
// A2A's terms, so that every binding answers with the code A2A defines.
import { ConnectError } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { findErrorDetail } from "../protocol/errors.js";
import { a2aError, a2aErrorKind, type A2AErrorKind } from "./errors.js";

const kindOf: Partial<Record<ErrorCode, A2AErrorKind>> = {
  [ErrorCode.TASK_NOT_FOUND]: "TaskNotFound",
  [ErrorCode.INVALID_PARAMS]: "InvalidParams",
  [ErrorCode.MESSAGE_FORMAT_INVALID]: "InvalidParams",
  [ErrorCode.REPLAY_DETECTED]: "InvalidParams",
  [ErrorCode.ILLEGAL_TRANSITION]: "UnsupportedOperation",
  [ErrorCode.TASK_ALREADY_COMPLETED]: "UnsupportedOperation",
  [ErrorCode.UNAUTHENTICATED]: "Unauthenticated",
  [ErrorCode.SIGNATURE_INVALID]: "Unauthenticated",
  [ErrorCode.UNKNOWN_SENDER]: "Unauthenticated",
  [ErrorCode.PERMISSION_DENIED]: "PermissionDenied",
  [ErrorCode.CAPABILITY_LACKING]: "InvalidParams",
  [ErrorCode.CONCURRENCY_LIMIT]: "ResourceExhausted",
  [ErrorCode.RATE_LIMITED]: "ResourceExhausted",
  [ErrorCode.MESSAGE_TOO_LARGE]: "ResourceExhausted",
  [ErrorCode.AGENT_NOT_READY]: "Unavailable",
};

/**
 * An error thrown by the engine as an A2A error (the message kept, the
 * Synapse detail kept beside the ErrorInfo); A2A errors pass unchanged.
 * `override` picks another kind for some codes (CancelTask: a task past
 * cancelling is TaskNotCancelable).
 */
export function asA2AError(error: unknown, override: Partial<Record<ErrorCode, A2AErrorKind>> = {}): ConnectError {
  const connectError = ConnectError.from(error);
  if (a2aErrorKind(connectError) !== undefined) return connectError;
  const detail = findErrorDetail(connectError);
  if (detail === undefined) return connectError;
  const kind = override[detail.code] ?? kindOf[detail.code] ?? "Internal";
  const mapped = a2aError(kind, connectError.rawMessage, { metadata: { synapseCode: detail.protocolCode }, cause: error });
  if (detail.retryAfterSeconds > 0) mapped.metadata.set("retry-after", String(detail.retryAfterSeconds));
  return mapped;
}

/** Runs `work`, answering the engine's refusals as A2A errors. */
export async function inA2ATerms<T>(work: () => Promise<T>, override?: Partial<Record<ErrorCode, A2AErrorKind>>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asA2AError(error, override);
  }
}

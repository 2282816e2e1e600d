// What the JSON bindings (JSON-RPC, REST) tell a caller about an error the
// A2A service threw: its A2A kind (from the google.rpc.ErrorInfo detail
// errors.ts attaches), the message, and the details as ProtoJSON `Any`
// objects ("@type" first). An error that is not the caller's to read (an
// INTERNAL, an unknown failure, a NOT_FOUND that names no A2A kind) is
// reported as an internal error with a fixed message, and logged in full.
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/synapse/v1/errors_pb.js";
import { findErrorDetail } from "../protocol/errors.js";
import { A2A_ERROR_DOMAIN, a2aCodeOf, a2aErrorKind, a2aReasonOf, findErrorInfo, findFieldViolations, type A2AErrorKind } from "./errors.js";

const TYPE_PREFIX = "type.googleapis.com/";
export const INTERNAL_MESSAGE = "internal error";

/** An error as a JSON binding reports it. */
export interface PublicError {
  /** The A2A kind it names, if any. */
  kind?: A2AErrorKind;
  /** The gRPC code it stands for (FAILED_PRECONDITION for TaskNotCancelable, say). */
  code: Code;
  message: string;
  /** ProtoJSON Any objects: google.rpc.ErrorInfo, google.rpc.BadRequest, synapse.v1.ErrorDetail. */
  details: JsonObject[];
  /** Seconds the caller should wait before retrying, when the error says. */
  retryAfterSeconds?: number;
  /** Whether the error was hidden (the caller sees INTERNAL_MESSAGE; the original should be logged). */
  hidden: boolean;
}

/** Codes whose message is ours to pass on when no A2A kind is named: a refusal the caller can act on. */
const CALLER_CODES = new Set<Code>([
  Code.InvalidArgument,
  Code.OutOfRange,
  Code.Unauthenticated,
  Code.PermissionDenied,
  Code.ResourceExhausted,
  Code.FailedPrecondition,
  Code.AlreadyExists,
  Code.Aborted,
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.Canceled,
  Code.Unimplemented,
]);

/** The gRPC code's canonical name (FAILED_PRECONDITION), as google.rpc.Status.status spells it. */
export function codeName(code: Code): string {
  return (Code[code] ?? "Unknown").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

function errorInfoJson(reason: string, metadata: Record<string, string>): JsonObject {
  const info: JsonObject = { "@type": `${TYPE_PREFIX}google.rpc.ErrorInfo`, reason, domain: A2A_ERROR_DOMAIN };
  if (Object.keys(metadata).length > 0) info.metadata = metadata;
  return info;
}

/** How `error` is shown to the caller of a JSON binding. */
export function publicError(error: unknown): PublicError {
  const connectError = ConnectError.from(error);
  const kind = a2aErrorKind(connectError);
  if (kind === "Internal" || (kind === undefined && !CALLER_CODES.has(connectError.code))) {
    return { kind: "Internal", code: Code.Internal, message: INTERNAL_MESSAGE, details: [errorInfoJson(a2aReasonOf("Internal"), {})], hidden: true };
  }
  const details: JsonObject[] = [];
  const info = findErrorInfo(connectError);
  if (kind !== undefined) details.push(errorInfoJson(a2aReasonOf(kind), info?.metadata ?? {}));
  else details.push(errorInfoJson(codeName(connectError.code), {}));
  const violations = findFieldViolations(connectError);
  if (violations.length > 0) details.push({ "@type": `${TYPE_PREFIX}google.rpc.BadRequest`, fieldViolations: violations.map((v) => ({ field: v.field, description: v.description })) });
  const detail = findErrorDetail(connectError);
  if (detail !== undefined) details.push({ "@type": `${TYPE_PREFIX}${ErrorDetailSchema.typeName}`, ...(toJson(ErrorDetailSchema, detail) as JsonObject) });
  const retry = detail?.retryAfterSeconds;
  return {
    kind,
    code: kind === undefined ? connectError.code : a2aCodeOf(kind),
    message: connectError.rawMessage,
    details,
    retryAfterSeconds: retry !== undefined && retry > 0 ? retry : undefined,
    hidden: false,
  };
}

// The errors an A2A agent answers with, whatever binding carried them, as one
// typed client error: the A2A error kind read from a JSON-RPC error code, a
// REST google.rpc.Status (its ErrorInfo reason, else its HTTP status) or a
// gRPC status (its ErrorInfo detail, else its code).
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import { A2A_ERROR_DOMAIN, type A2ASpecErrorKind } from "../../protocol/a2a-error-kinds.js";

/** What went wrong, by A2A's names (section 5.4 of the specification), plus the client's own failures. */
export type A2AErrorKind =
  | A2ASpecErrorKind
  /** The agent card could not be read or is not an A2A v1.0 card. */
  | "CardInvalid"
  /** The agent card carries signatures and one was checked against its key and failed. */
  | "CardSignatureInvalid"
  /** A verified card was required and the card is unsigned or its key could not be found. */
  | "CardUnverified"
  /** The card names no interface this client can use (binding and A2A version). */
  | "NoSupportedInterface"
  | "Unknown";

export { A2A_ERROR_DOMAIN };

const REASONS: Record<string, A2AErrorKind> = {
  TASK_NOT_FOUND: "TaskNotFound",
  TASK_NOT_CANCELABLE: "TaskNotCancelable",
  PUSH_NOTIFICATION_NOT_SUPPORTED: "PushNotificationNotSupported",
  UNSUPPORTED_OPERATION: "UnsupportedOperation",
  CONTENT_TYPE_NOT_SUPPORTED: "ContentTypeNotSupported",
  INVALID_AGENT_RESPONSE: "InvalidAgentResponse",
  EXTENDED_AGENT_CARD_NOT_CONFIGURED: "ExtendedAgentCardNotConfigured",
  EXTENSION_SUPPORT_REQUIRED: "ExtensionSupportRequired",
  VERSION_NOT_SUPPORTED: "VersionNotSupported",
  INVALID_PARAMS: "InvalidParams",
  INVALID_REQUEST: "InvalidRequest",
  METHOD_NOT_FOUND: "MethodNotFound",
  PARSE_ERROR: "ParseError",
  UNAUTHENTICATED: "Unauthenticated",
  PERMISSION_DENIED: "PermissionDenied",
  RESOURCE_EXHAUSTED: "ResourceExhausted",
  UNAVAILABLE: "Unavailable",
  INTERNAL: "Internal",
};

const JSON_RPC_CODES: Record<number, A2AErrorKind> = {
  [-32001]: "TaskNotFound",
  [-32002]: "TaskNotCancelable",
  [-32003]: "PushNotificationNotSupported",
  [-32004]: "UnsupportedOperation",
  [-32005]: "ContentTypeNotSupported",
  [-32006]: "InvalidAgentResponse",
  [-32007]: "ExtendedAgentCardNotConfigured",
  [-32008]: "ExtensionSupportRequired",
  [-32009]: "VersionNotSupported",
  [-32700]: "ParseError",
  [-32600]: "InvalidRequest",
  [-32601]: "MethodNotFound",
  [-32602]: "InvalidParams",
  [-32603]: "Internal",
};

const GRPC_CODES: Partial<Record<Code, A2AErrorKind>> = {
  [Code.NotFound]: "TaskNotFound",
  [Code.InvalidArgument]: "InvalidParams",
  [Code.Unimplemented]: "MethodNotFound",
  [Code.Unauthenticated]: "Unauthenticated",
  [Code.PermissionDenied]: "PermissionDenied",
  [Code.ResourceExhausted]: "ResourceExhausted",
  [Code.Unavailable]: "Unavailable",
  [Code.Internal]: "Internal",
};

const HTTP_STATUSES: Record<number, A2AErrorKind> = {
  400: "InvalidParams",
  401: "Unauthenticated",
  403: "PermissionDenied",
  404: "TaskNotFound",
  415: "ContentTypeNotSupported",
  429: "ResourceExhausted",
  500: "Internal",
  502: "Unavailable",
  503: "Unavailable",
  504: "Unavailable",
};

/** Kinds after which a stream is worth resuming with SubscribeToTask: the connection failed, not the request. */
const RESUMABLE = new Set<A2AErrorKind>(["Unavailable", "Internal", "Unknown"]);

/** What an A2A call failed with: the A2A error kind, and what the binding said. */
export class A2AClientError extends Error {
  override readonly name = "A2AClientError";

  constructor(
    readonly kind: A2AErrorKind,
    message: string,
    /** Where it came from: the binding's own code (JSON-RPC error code, HTTP status, gRPC code), when there was one. */
    readonly detail: { binding?: "JSONRPC" | "HTTP+JSON" | "GRPC"; code?: number; reason?: string; data?: unknown } = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Whether the failure was of the connection (a dropped stream), not an answer to the request. */
  get resumable(): boolean {
    return RESUMABLE.has(this.kind);
  }
}

/** The kind an ErrorInfo reason names, when it is one of A2A's. */
export function kindOfReason(reason: string | undefined): A2AErrorKind | undefined {
  return reason === undefined ? undefined : REASONS[reason];
}

interface ErrorInfoJson {
  "@type"?: unknown;
  reason?: unknown;
  domain?: unknown;
}

/** The reason of the first google.rpc.ErrorInfo among JSON details (JSON-RPC `data`, REST `details`). */
function reasonInJson(details: unknown): string | undefined {
  if (!Array.isArray(details)) return undefined;
  for (const detail of details as ErrorInfoJson[]) {
    if (typeof detail === "object" && detail !== null && typeof detail["@type"] === "string" && detail["@type"].endsWith("google.rpc.ErrorInfo") && typeof detail.reason === "string") {
      return detail.reason;
    }
  }
  return undefined;
}

/** A JSON-RPC error object as the client error it names. */
export function fromJsonRpcError(error: { code?: unknown; message?: unknown; data?: unknown }): A2AClientError {
  const code = typeof error.code === "number" ? error.code : undefined;
  const reason = reasonInJson(error.data);
  const kind = (code === undefined ? undefined : JSON_RPC_CODES[code]) ?? kindOfReason(reason) ?? "Unknown";
  const message = typeof error.message === "string" && error.message !== "" ? error.message : `JSON-RPC error ${code ?? "without a code"}`;
  return new A2AClientError(kind, message, { binding: "JSONRPC", code, reason, data: error.data });
}

/** A REST error answer (google.rpc.Status JSON under `error`, or anything else) as a client error. */
export function fromRestError(status: number, body: unknown): A2AClientError {
  const error = typeof body === "object" && body !== null ? (body as { error?: { message?: unknown; details?: unknown } }).error : undefined;
  const reason = reasonInJson(error?.details);
  const kind = kindOfReason(reason) ?? HTTP_STATUSES[status] ?? (status >= 500 ? "Internal" : "Unknown");
  const message = typeof error?.message === "string" && error.message !== "" ? error.message : `HTTP ${status}`;
  return new A2AClientError(kind, message, { binding: "HTTP+JSON", code: status, reason, data: body });
}

/** google.rpc.ErrorInfo's reason (field 1) from its binary form. */
function decodeErrorInfoReason(bytes: Uint8Array): string | undefined {
  try {
    const reader = new BinaryReader(bytes);
    while (reader.pos < reader.len) {
      const [field, wireType] = reader.tag();
      if (field === 1 && wireType === 2) return reader.string();
      reader.skip(wireType);
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** A Connect or gRPC error as a client error, by its ErrorInfo detail when it has one. */
export function fromConnectError(error: ConnectError): A2AClientError {
  let reason: string | undefined;
  for (const detail of error.details) {
    if ("type" in detail && detail.type === "google.rpc.ErrorInfo") {
      reason = decodeErrorInfoReason(detail.value);
      if (reason !== undefined) break;
    }
  }
  const kind = kindOfReason(reason) ?? (reason === undefined ? GRPC_CODES[error.code] : undefined) ?? "Unknown";
  return new A2AClientError(kind, error.rawMessage || `gRPC ${Code[error.code]}`, { binding: "GRPC", code: error.code, reason }, { cause: error });
}

/** Any failure of a call (a network error, an abort) as a client error; client errors pass through. */
export function asClientError(error: unknown, binding: "JSONRPC" | "HTTP+JSON" | "GRPC"): A2AClientError {
  if (error instanceof A2AClientError) return error;
  if (error instanceof ConnectError) return fromConnectError(error);
  const message = error instanceof Error ? error.message : String(error);
  return new A2AClientError("Unavailable", message, { binding }, { cause: error });
}

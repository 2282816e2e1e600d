// A2A errors as ConnectErrors: one place maps each A2A error kind to the gRPC
// code the specification gives (section 5.4) and attaches the
// google.rpc.ErrorInfo detail (reason, domain "a2a-protocol.org") every
// binding reads back to pick its own code (JSON-RPC number, HTTP status).
import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import { A2A_ERROR_DOMAIN, type A2ASpecErrorKind } from "../protocol/a2a-error-kinds.js";
import { capMessage, clip, MAX_ECHO_CHARS } from "../protocol/errors.js";

/** The A2A error kinds: the spec's A2A-specific errors plus the standard ones every binding has. */
export type A2AErrorKind = A2ASpecErrorKind;

interface KindSpec {
  /** google.rpc.ErrorInfo.reason: the error's name in UPPER_SNAKE_CASE without "Error". */
  reason: string;
  code: Code;
  /** Whether the spec defines it as an A2A-specific error (section 5.4's table). */
  a2aSpecific: boolean;
}

const kinds: Record<A2AErrorKind, KindSpec> = {
  TaskNotFound: { reason: "TASK_NOT_FOUND", code: Code.NotFound, a2aSpecific: true },
  TaskNotCancelable: { reason: "TASK_NOT_CANCELABLE", code: Code.FailedPrecondition, a2aSpecific: true },
  PushNotificationNotSupported: { reason: "PUSH_NOTIFICATION_NOT_SUPPORTED", code: Code.FailedPrecondition, a2aSpecific: true },
  UnsupportedOperation: { reason: "UNSUPPORTED_OPERATION", code: Code.FailedPrecondition, a2aSpecific: true },
  ContentTypeNotSupported: { reason: "CONTENT_TYPE_NOT_SUPPORTED", code: Code.InvalidArgument, a2aSpecific: true },
  InvalidAgentResponse: { reason: "INVALID_AGENT_RESPONSE", code: Code.Internal, a2aSpecific: true },
  ExtendedAgentCardNotConfigured: { reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED", code: Code.FailedPrecondition, a2aSpecific: true },
  ExtensionSupportRequired: { reason: "EXTENSION_SUPPORT_REQUIRED", code: Code.FailedPrecondition, a2aSpecific: true },
  VersionNotSupported: { reason: "VERSION_NOT_SUPPORTED", code: Code.FailedPrecondition, a2aSpecific: true },
  InvalidParams: { reason: "INVALID_PARAMS", code: Code.InvalidArgument, a2aSpecific: false },
  InvalidRequest: { reason: "INVALID_REQUEST", code: Code.InvalidArgument, a2aSpecific: false },
  MethodNotFound: { reason: "METHOD_NOT_FOUND", code: Code.Unimplemented, a2aSpecific: false },
  ParseError: { reason: "PARSE_ERROR", code: Code.InvalidArgument, a2aSpecific: false },
  Unauthenticated: { reason: "UNAUTHENTICATED", code: Code.Unauthenticated, a2aSpecific: false },
  PermissionDenied: { reason: "PERMISSION_DENIED", code: Code.PermissionDenied, a2aSpecific: false },
  ResourceExhausted: { reason: "RESOURCE_EXHAUSTED", code: Code.ResourceExhausted, a2aSpecific: false },
  Unavailable: { reason: "UNAVAILABLE", code: Code.Unavailable, a2aSpecific: false },
  Internal: { reason: "INTERNAL", code: Code.Internal, a2aSpecific: false },
};

const kindByReason = new Map<string, A2AErrorKind>(Object.entries(kinds).map(([kind, spec]) => [spec.reason, kind as A2AErrorKind]));

export { A2A_ERROR_DOMAIN };
export const ERROR_INFO_TYPE = "google.rpc.ErrorInfo";
export const BAD_REQUEST_TYPE = "google.rpc.BadRequest";

/** One invalid field, as google.rpc.BadRequest.FieldViolation carries it. */
export interface FieldViolation {
  field: string;
  description: string;
}

export interface A2AErrorExtra {
  /** google.rpc.ErrorInfo.metadata: short string context (a task id, say). */
  metadata?: Record<string, string>;
  /** Invalid or missing request fields, sent as a google.rpc.BadRequest detail. */
  fieldViolations?: FieldViolation[];
  cause?: unknown;
}

/** The gRPC code the spec gives a kind. */
export function a2aCodeOf(kind: A2AErrorKind): Code {
  return kinds[kind].code;
}

/** ErrorInfo.reason for a kind (TASK_NOT_FOUND). */
export function a2aReasonOf(kind: A2AErrorKind): string {
  return kinds[kind].reason;
}

/** Whether the spec lists the kind among its A2A-specific errors (JSON-RPC -32001..-32009). */
export function isA2ASpecific(kind: A2AErrorKind): boolean {
  return kinds[kind].a2aSpecific;
}

const MAX_METADATA_ENTRIES = 16;
const MAX_VIOLATIONS = 32;

/** A ConnectError for an A2A error: the spec's gRPC code and an ErrorInfo detail naming the kind. */
export function a2aError(kind: A2AErrorKind, message: string, extra: A2AErrorExtra = {}): ConnectError {
  const spec = kinds[kind];
  const metadata = Object.entries(extra.metadata ?? {})
    .slice(0, MAX_METADATA_ENTRIES)
    .map(([key, value]): [string, string] => [clip(key), clip(value, MAX_ECHO_CHARS)]);
  const details = [{ type: ERROR_INFO_TYPE, value: encodeErrorInfo(spec.reason, A2A_ERROR_DOMAIN, metadata) }];
  const violations = (extra.fieldViolations ?? []).slice(0, MAX_VIOLATIONS);
  if (violations.length > 0) details.push({ type: BAD_REQUEST_TYPE, value: encodeBadRequest(violations) });
  const error = new ConnectError(capMessage(message), spec.code, undefined, undefined, extra.cause);
  // Raw details (type and bytes): the same form Connect keeps for details it decodes from a peer.
  error.details.push(...details);
  return error;
}

/** The decoded ErrorInfo of an error, if it carries one. */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

/** The ErrorInfo detail of an error (from a2aError or any server's status details). */
export function findErrorInfo(error: unknown): ErrorInfo | undefined {
  const connectError = ConnectError.from(error);
  for (const detail of connectError.details) {
    if (!("type" in detail) || detail.type !== ERROR_INFO_TYPE) continue;
    try {
      return decodeErrorInfo(detail.value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The invalid fields an error names (its BadRequest detail), empty when none. */
export function findFieldViolations(error: unknown): FieldViolation[] {
  const connectError = ConnectError.from(error);
  for (const detail of connectError.details) {
    if (!("type" in detail) || detail.type !== BAD_REQUEST_TYPE) continue;
    try {
      return decodeBadRequest(detail.value);
    } catch {
      return [];
    }
  }
  return [];
}

/** The A2A kind an error carries in its ErrorInfo (domain a2a-protocol.org), or undefined. */
export function a2aErrorKind(error: unknown): A2AErrorKind | undefined {
  const info = findErrorInfo(error);
  if (info === undefined || info.domain !== A2A_ERROR_DOMAIN) return undefined;
  return kindByReason.get(info.reason);
}

// google.rpc.ErrorInfo: reason = 1, domain = 2, map<string, string> metadata = 3.
function encodeErrorInfo(reason: string, domain: string, metadata: [string, string][]): Uint8Array {
  const writer = new BinaryWriter();
  writer.uint32(10).string(reason);
  writer.uint32(18).string(domain);
  for (const [key, value] of metadata) {
    writer.uint32(26).fork().uint32(10).string(key).uint32(18).string(value).join();
  }
  return writer.finish();
}

function decodeErrorInfo(bytes: Uint8Array): ErrorInfo {
  const reader = new BinaryReader(bytes);
  const info: ErrorInfo = { reason: "", domain: "", metadata: {} };
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === 2) info.reason = reader.string();
    else if (field === 2 && wireType === 2) info.domain = reader.string();
    else if (field === 3 && wireType === 2) {
      const entry = decodeStringPair(reader.bytes());
      info.metadata[entry[0]] = entry[1];
    } else reader.skip(wireType);
  }
  return info;
}

// google.rpc.BadRequest: repeated FieldViolation field_violations = 1 { field = 1, description = 2 }.
function encodeBadRequest(violations: FieldViolation[]): Uint8Array {
  const writer = new BinaryWriter();
  for (const violation of violations) {
    writer.uint32(10).fork().uint32(10).string(clip(violation.field)).uint32(18).string(clip(violation.description, 256)).join();
  }
  return writer.finish();
}

function decodeBadRequest(bytes: Uint8Array): FieldViolation[] {
  const reader = new BinaryReader(bytes);
  const violations: FieldViolation[] = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === 2) {
      const [name, description] = decodeStringPair(reader.bytes());
      violations.push({ field: name, description });
    } else reader.skip(wireType);
  }
  return violations;
}

/** Fields 1 and 2 of a message holding two strings (a map entry, a FieldViolation). */
function decodeStringPair(bytes: Uint8Array): [string, string] {
  const reader = new BinaryReader(bytes);
  let first = "";
  let second = "";
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === 2) first = reader.string();
    else if (field === 2 && wireType === 2) second = reader.string();
    else reader.skip(wireType);
  }
  return [first, second];
}

// How records become table rows and back, for the SQL stores: protobuf
// messages as their binary encoding, JSON values as JSON text, signed
// envelopes as the exact bytes of the Envelope message (never re-signed).
import { create, fromBinary, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { ConfidentialitySchema, type Confidentiality } from "../../gen/synapse/v1/confidential_pb.js";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, HeaderSchema, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import {
  TaskErrorSchema,
  TaskNeedHumanPayloadSchema,
  TaskNeedInfoPayloadSchema,
  TaskRejectPayloadSchema,
  TaskRequestPayloadSchema,
  type TaskRequestPayload,
  TaskResultSchema,
  type TaskState,
} from "../../gen/synapse/v1/payloads_pb.js";
import { encoded, rememberEncoding } from "../protocol/encoded.js";
import { envelopeEncoding } from "../protocol/envelope-codec.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { isTerminal } from "../protocol/state-machine.js";
import type { CarriedIds, ResultStreamRecord, StoredEvent, StoredReply, TaskAnswer, TaskPatch, TaskRecord } from "./store.js";

/** A column value as both drivers take and give it. */
export type SqlValue = string | number | Uint8Array | null;

/** A row of the tasks table as the drivers return it. */
export interface TaskRow {
  task_id: string;
  task_type: string;
  requester_agent_id: string;
  requester_system_id: string;
  requester_key_id: string;
  executor_agent_id: string;
  executor_system_id: string;
  executor_key_id: string;
  state: number;
  active: number;
  progress: number;
  status_message: string;
  created_at_ms: number;
  updated_at_ms: number;
  version: number;
  last_sequence: number;
  request: Uint8Array;
  payload: string;
  idempotency_key: string;
  request_message_id: string;
  pending_info: Uint8Array | null;
  pending_decision: Uint8Array | null;
  decision_deadline_ms: number | null;
  result: Uint8Array | null;
  error: Uint8Array | null;
  rejection: Uint8Array | null;
  result_stream: string | null;
  execution_attempts: number;
  started_at_ms: number;
  lease_owner: string;
  lease_until_ms: number;
  answers: string;
  traceparent: string;
  tracestate: string;
  session_id: string;
  correlation_id: string;
  confidential: Uint8Array | null;
  sealed: Uint8Array | null;
  sealed_request: Uint8Array | null;
}

/** The columns of the tasks table, in insert order. */
export const TASK_COLUMNS = [
  "task_id",
  "task_type",
  "requester_agent_id",
  "requester_system_id",
  "requester_key_id",
  "executor_agent_id",
  "executor_system_id",
  "executor_key_id",
  "state",
  "active",
  "progress",
  "status_message",
  "created_at_ms",
  "updated_at_ms",
  "version",
  "last_sequence",
  "request",
  "payload",
  "idempotency_key",
  "request_message_id",
  "pending_info",
  "pending_decision",
  "decision_deadline_ms",
  "result",
  "error",
  "rejection",
  "result_stream",
  "execution_attempts",
  "started_at_ms",
  "lease_owner",
  "lease_until_ms",
  "answers",
  "traceparent",
  "tracestate",
  "session_id",
  "correlation_id",
  "confidential",
  "sealed",
  "sealed_request",
] as const satisfies ReadonlyArray<keyof TaskRow>;

const bin = (bytes: Uint8Array) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

function encodeResultStream(stream: ResultStreamRecord | undefined): string | null {
  return stream === undefined ? null : JSON.stringify({ contentType: stream.contentType, totalSize: stream.totalSize, sha256: Buffer.from(stream.sha256).toString("base64") });
}

function decodeResultStream(text: string | null): ResultStreamRecord | undefined {
  if (text === null) return undefined;
  const parsed = JSON.parse(text) as { contentType: string; totalSize: number; sha256: string };
  return { contentType: parsed.contentType, totalSize: parsed.totalSize, sha256: new Uint8Array(Buffer.from(parsed.sha256, "base64")) };
}

// The encoded columns a patch may set, shared by a patch's columns and a whole row.
const requestColumn = (request: TaskRequestPayload) => bin(encoded(TaskRequestPayloadSchema, request));
const payloadColumn = (payload: JsonObject | undefined) => JSON.stringify(payload ?? {});
const pendingInfoColumn = (info: TaskPatch["pendingInfo"]) => (info === undefined ? null : bin(toBinary(TaskNeedInfoPayloadSchema, info)));
const pendingDecisionColumn = (decision: TaskPatch["pendingDecision"]) => (decision === undefined ? null : bin(toBinary(TaskNeedHumanPayloadSchema, decision)));
const decisionDeadlineColumn = (decision: TaskPatch["pendingDecision"]) => (decision?.deadline === undefined ? null : timestampMs(decision.deadline));
const resultColumn = (result: TaskPatch["result"]) => (result === undefined ? null : bin(encoded(TaskResultSchema, result)));
const errorColumn = (error: TaskPatch["error"]) => (error === undefined ? null : bin(toBinary(TaskErrorSchema, error)));
const rejectionColumn = (rejection: TaskPatch["rejection"]) => (rejection === undefined ? null : bin(toBinary(TaskRejectPayloadSchema, rejection)));
const answersColumn = (answers: TaskPatch["answers"]) => JSON.stringify(answers ?? []);
const activeColumn = (state: TaskState) => (isTerminal(state) ? 0 : 1);

/** Column values for each field a patch may set (a field set to undefined clears its column). */
const FIELD_COLUMNS: { [K in keyof TaskPatch]-?: (value: TaskPatch[K]) => Record<string, SqlValue> } = {
  state: (state) => ({ state: state!, active: activeColumn(state!) }),
  progress: (progress) => ({ progress: progress ?? 0 }),
  statusMessage: (message) => ({ status_message: message ?? "" }),
  updatedAtMs: (ms) => ({ updated_at_ms: ms ?? 0 }),
  request: (request) => ({ request: requestColumn(request!) }),
  payload: (payload) => ({ payload: payloadColumn(payload) }),
  pendingInfo: (info) => ({ pending_info: pendingInfoColumn(info) }),
  pendingDecision: (decision) => ({ pending_decision: pendingDecisionColumn(decision), decision_deadline_ms: decisionDeadlineColumn(decision) }),
  result: (result) => ({ result: resultColumn(result) }),
  error: (error) => ({ error: errorColumn(error) }),
  rejection: (rejection) => ({ rejection: rejectionColumn(rejection) }),
  resultStream: (stream) => ({ result_stream: encodeResultStream(stream) }),
  executionAttempts: (attempts) => ({ execution_attempts: attempts ?? 0 }),
  startedAtMs: (ms) => ({ started_at_ms: ms ?? 0 }),
  leaseOwner: (owner) => ({ lease_owner: owner ?? "" }),
  leaseUntilMs: (ms) => ({ lease_until_ms: ms ?? 0 }),
  answers: (answers) => ({ answers: answersColumn(answers) }),
  sealed: (sealed) => ({ sealed: sealed === undefined ? null : bin(sealed) }),
  sealedRequest: (sealed) => ({ sealed_request: sealed === undefined ? null : bin(sealed) }),
};

/** The columns a patch sets, with their values. */
export function patchColumns(patch: TaskPatch): Record<string, SqlValue> {
  const columns: Record<string, SqlValue> = {};
  for (const key of Object.keys(patch) as Array<keyof TaskPatch>) {
    const encode = FIELD_COLUMNS[key] as ((value: unknown) => Record<string, SqlValue>) | undefined;
    if (encode !== undefined) Object.assign(columns, encode(patch[key]));
  }
  return columns;
}

/**
 * Every column of a task's row, in one object literal: a row built by adding
 * its columns one by one went past V8's limit for fast properties and was
 * turned into a dictionary on every insert.
 */
export function taskRow(task: TaskRecord): Record<(typeof TASK_COLUMNS)[number], SqlValue> {
  return {
    task_id: task.taskId,
    task_type: task.taskType,
    requester_agent_id: task.requester.agentId,
    requester_system_id: task.requester.systemId,
    requester_key_id: task.requester.keyId,
    executor_agent_id: task.executor.agentId,
    executor_system_id: task.executor.systemId,
    executor_key_id: task.executor.keyId,
    state: task.state,
    active: activeColumn(task.state),
    progress: task.progress ?? 0,
    status_message: task.statusMessage ?? "",
    created_at_ms: task.createdAtMs,
    updated_at_ms: task.updatedAtMs ?? 0,
    version: task.version,
    last_sequence: task.lastSequence,
    request: requestColumn(task.request),
    payload: isRequestPayload(task.payload, task.request) ? REQUEST_PAYLOAD : payloadColumn(task.payload),
    idempotency_key: task.idempotencyKey,
    request_message_id: task.requestMessageId,
    pending_info: pendingInfoColumn(task.pendingInfo),
    pending_decision: pendingDecisionColumn(task.pendingDecision),
    decision_deadline_ms: decisionDeadlineColumn(task.pendingDecision),
    result: resultColumn(task.result),
    error: errorColumn(task.error),
    rejection: rejectionColumn(task.rejection),
    result_stream: encodeResultStream(task.resultStream),
    execution_attempts: task.executionAttempts ?? 0,
    started_at_ms: task.startedAtMs ?? 0,
    lease_owner: task.leaseOwner ?? "",
    lease_until_ms: task.leaseUntilMs ?? 0,
    answers: answersColumn(task.answers),
    traceparent: task.carried?.traceparent ?? "",
    tracestate: task.carried?.tracestate ?? "",
    session_id: task.carried?.sessionId ?? "",
    correlation_id: task.carried?.correlationId ?? "",
    confidential: task.confidential === undefined ? null : bin(toBinary(ConfidentialitySchema, task.confidential)),
    sealed: task.sealed === undefined ? null : bin(task.sealed),
    sealed_request: task.sealedRequest === undefined ? null : bin(task.sealedRequest),
  };
}

/**
 * The payload column of a task whose input is its request's payload, as
 * intake makes it: the request column holds it already, so it is not
 * written twice (a row half the size with a large input). Never valid JSON,
 * so never mistaken for an input; a changed input is written as JSON.
 */
const REQUEST_PAYLOAD = "";

/** Whether a task's input is its request's payload, as intake made it (the same object). */
function isRequestPayload(payload: object, request: TaskRequestPayload): boolean {
  return request.task?.payload !== undefined && payload === request.task.payload;
}

/** A message decoded from bytes, with those bytes remembered (a binary reply then carries them as they are). */
function remembered<T extends object>(message: T, bytes: Uint8Array): T {
  rememberEncoding(message, bytes);
  return message;
}

/** The carried ids of a row; undefined when it carries none (as a task created without them). */
function carriedFromRow(row: TaskRow): CarriedIds | undefined {
  const { traceparent, tracestate, session_id: sessionId, correlation_id: correlationId } = row;
  if (traceparent === "" && tracestate === "" && sessionId === "" && correlationId === "") return undefined;
  return { traceparent, tracestate, sessionId, correlationId };
}

const optional = <T>(bytes: Uint8Array | null, decode: (bytes: Uint8Array) => T): T | undefined => (bytes === null ? undefined : decode(bytes));

export function taskFromRow(row: TaskRow): TaskRecord {
  const request = fromBinary(TaskRequestPayloadSchema, row.request);
  return {
    taskId: row.task_id,
    taskType: row.task_type,
    requester: { agentId: row.requester_agent_id, systemId: row.requester_system_id, keyId: row.requester_key_id },
    executor: { agentId: row.executor_agent_id, systemId: row.executor_system_id, keyId: row.executor_key_id },
    state: row.state as TaskState,
    progress: row.progress,
    statusMessage: row.status_message,
    createdAtMs: Number(row.created_at_ms),
    updatedAtMs: Number(row.updated_at_ms),
    version: row.version,
    lastSequence: row.last_sequence,
    request,
    payload: row.payload === REQUEST_PAYLOAD ? (request.task?.payload ?? {}) : (JSON.parse(row.payload) as JsonObject),
    idempotencyKey: row.idempotency_key,
    requestMessageId: row.request_message_id,
    pendingInfo: optional(row.pending_info, (bytes) => fromBinary(TaskNeedInfoPayloadSchema, bytes)),
    pendingDecision: optional(row.pending_decision, (bytes) => fromBinary(TaskNeedHumanPayloadSchema, bytes)),
    result: optional(row.result, (bytes) => remembered(fromBinary(TaskResultSchema, bytes), bytes)),
    error: optional(row.error, (bytes) => fromBinary(TaskErrorSchema, bytes)),
    rejection: optional(row.rejection, (bytes) => fromBinary(TaskRejectPayloadSchema, bytes)),
    resultStream: decodeResultStream(row.result_stream),
    executionAttempts: row.execution_attempts,
    startedAtMs: Number(row.started_at_ms),
    leaseOwner: row.lease_owner,
    leaseUntilMs: Number(row.lease_until_ms),
    answers: JSON.parse(row.answers) as TaskAnswer[],
    carried: carriedFromRow(row),
    confidential: optional(row.confidential ?? null, (bytes) => fromBinary(ConfidentialitySchema, bytes)),
    sealed: row.sealed === null || row.sealed === undefined ? undefined : new Uint8Array(row.sealed),
    sealedRequest: row.sealed_request === null || row.sealed_request === undefined ? undefined : new Uint8Array(row.sealed_request),
  };
}

/** The exact bytes of a signed envelope, as stored (encoded once, whoever asks first). */
export function envelopeBytes(envelope: Envelope): Buffer {
  return bin(envelopeEncoding(envelope));
}

/** A stored envelope decoded again: the envelope, its header and its typed payload. */
export function decodeSigned(bytes: Uint8Array): StoredReply {
  const envelope = fromBinary(EnvelopeSchema, bytes);
  rememberEncoding(envelope, bytes);
  const header = fromBinary(HeaderSchema, envelope.header);
  const info = messageTypeInfo(header.messageType);
  if (info === undefined) throw new TypeError(`stored envelope has an unknown message type ${header.messageType}`);
  // A confidential payload is ciphertext: whoever holds the task key opens it (src/agent/sealed-store.ts).
  return { envelope, header, payload: header.confidential === undefined ? fromBinary(info.payloadSchema, envelope.payload) : create(info.payloadSchema) };
}

export function eventFromBytes(taskId: string, sequence: number, bytes: Uint8Array): StoredEvent {
  return { taskId, sequence, ...decodeSigned(bytes) };
}

/** Result bytes are kept in chunks of this size, so a read from any offset touches only what it returns. */
export const RESULT_CHUNK_BYTES = 256 * 1024;

export function resultChunks(bytes: Uint8Array): Buffer[] {
  const chunks: Buffer[] = [];
  for (let offset = 0; offset < bytes.byteLength; offset += RESULT_CHUNK_BYTES) {
    chunks.push(bin(bytes.subarray(offset, Math.min(bytes.byteLength, offset + RESULT_CHUNK_BYTES))));
  }
  return chunks;
}

/** The chunk indexes holding bytes [offset, offset + length). */
export function chunkRange(offset: number, length: number): { first: number; last: number } {
  return { first: Math.floor(offset / RESULT_CHUNK_BYTES), last: Math.floor(Math.max(offset, offset + length - 1) / RESULT_CHUNK_BYTES) };
}

/** Cuts bytes [offset, offset + length) out of the chunks from index `first` (in order). */
export function sliceChunks(chunks: readonly Uint8Array[], first: number, offset: number, length: number): Uint8Array {
  const joined = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  const start = offset - first * RESULT_CHUNK_BYTES;
  return joined.subarray(start, Math.min(joined.byteLength, start + length));
}

/** A request's `confidential` as a column value (an outbound task's), and back. */
export function confidentialityBytes(confidential: Confidentiality | undefined): Uint8Array | null {
  return confidential === undefined ? null : bin(toBinary(ConfidentialitySchema, confidential));
}

export function confidentialityFrom(bytes: Uint8Array | null | undefined): Confidentiality | undefined {
  return bytes === null || bytes === undefined ? undefined : fromBinary(ConfidentialitySchema, bytes);
}

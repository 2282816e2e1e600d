// Headers encoded directly: every event and reply is sealed over a freshly
// encoded Header, and protobuf-es's reflective writer (a closure per field,
// a buffer grown from 128 bytes by doubling) cost several times what writing
// its fifteen fields straight into a buffer of the right size does. The
// bytes are what toBinary(HeaderSchema, header) writes (a test checks it); a
// header this encoder does not cover (unknown fields, an enum or nanos
// outside 0..2^31, a timestamp before 1970 or past 2106, a sequence outside
// 0..2^32) is left to toBinary.
import { toBinary } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { ConfidentialitySchema } from "../../gen/synapse/v1/confidential_pb.js";
import { HeaderSchema, type Header, type TraceContext } from "../../gen/synapse/v1/envelope_pb.js";
import { varintSize } from "./varint.js";
import { delimited, FieldWriter, INT32_LIMIT, noUnknown, plainBelow, sizeAgent, sizeText, sizeTimestamp as sizeTimestampParts, sizeVarintField, UINT32_LIMIT } from "./sized-writer.js";

// Tags (field number << 3 | wire type) of Header's fields.
const MESSAGE_ID = 0x0a; // 1
const MESSAGE_TYPE = 0x10; // 2, varint
const PROTOCOL_VERSION = 0x1a; // 3
const SENDER = 0x22; // 4
const RECEIVER = 0x2a; // 5
const SENT_AT = 0x32; // 6
const EXPIRES_AT = 0x3a; // 7
const REPLY_TO = 0x42; // 8
const TASK_ID = 0x4a; // 9
const SESSION_ID = 0x52; // 10
const CORRELATION_ID = 0x5a; // 11
const TRACE = 0x62; // 12
const IDEMPOTENCY_KEY = 0x6a; // 13
const PAYLOAD_TYPE = 0x72; // 14
const SEQUENCE = 0x78; // 15, varint
// 16, length-delimited: (16 << 3) | 2 = 130, a two-byte varint tag.
const CONFIDENTIAL_TAG = [0x82, 0x01] as const;

/** A non-negative int32, which protobuf writes as the plain varint this encoder writes. */
const plainInt32 = (value: number) => plainBelow(value, INT32_LIMIT);

/** The binary encoding of a Header, as toBinary writes it. */
export function encodeHeader(header: Header): Uint8Array {
  if (!covered(header)) return toBinary(HeaderSchema, header);
  // Byte lengths of the strings, measured once, in writing order.
  const texts: number[] = [];
  // A confidential header's Confidentiality (small, and the last field) is encoded by toBinary and placed as it is.
  const confidential = header.confidential === undefined ? undefined : toBinary(ConfidentialitySchema, header.confidential);
  const size = sizeHeader(header, texts) + (confidential === undefined ? 0 : CONFIDENTIAL_TAG.length + varintSize(confidential.byteLength) + confidential.byteLength);
  const out = new Writer(size, texts);
  out.textField(MESSAGE_ID, header.messageId);
  out.varintField(MESSAGE_TYPE, header.messageType);
  out.textField(PROTOCOL_VERSION, header.protocolVersion);
  out.agent(SENDER, header.sender);
  out.agent(RECEIVER, header.receiver);
  out.timestampField(SENT_AT, header.sentAt);
  out.timestampField(EXPIRES_AT, header.expiresAt);
  out.textField(REPLY_TO, header.replyTo);
  out.textField(TASK_ID, header.taskId);
  out.textField(SESSION_ID, header.sessionId);
  out.textField(CORRELATION_ID, header.correlationId);
  out.trace(TRACE, header.trace);
  out.textField(IDEMPOTENCY_KEY, header.idempotencyKey);
  out.textField(PAYLOAD_TYPE, header.payloadType);
  out.varintField(SEQUENCE, Number(header.sequence));
  if (confidential !== undefined) out.confidential(confidential);
  return out.done();
}

function coveredTimestamp(timestamp: Timestamp | undefined): boolean {
  return timestamp === undefined || (noUnknown(timestamp) && timestamp.seconds >= 0n && timestamp.seconds < UINT32_LIMIT && plainInt32(timestamp.nanos));
}

function covered(header: Header): boolean {
  return (
    noUnknown(header) &&
    plainInt32(header.messageType) &&
    header.sequence >= 0n &&
    header.sequence < UINT32_LIMIT &&
    noUnknown(header.sender) &&
    noUnknown(header.receiver) &&
    noUnknown(header.trace) &&
    coveredTimestamp(header.sentAt) &&
    coveredTimestamp(header.expiresAt)
  );
}

function sizeTimestamp(timestamp: Timestamp | undefined): number {
  return timestamp === undefined ? 0 : sizeTimestampParts(Number(timestamp.seconds), timestamp.nanos);
}

function sizeTrace(trace: TraceContext | undefined, texts: number[]): number {
  if (trace === undefined) return 0;
  return delimited(sizeText(trace.traceparent, texts) + sizeText(trace.tracestate, texts));
}

function sizeHeader(header: Header, texts: number[]): number {
  return (
    sizeText(header.messageId, texts) +
    sizeVarintField(header.messageType) +
    sizeText(header.protocolVersion, texts) +
    sizeAgent(header.sender, texts) +
    sizeAgent(header.receiver, texts) +
    sizeTimestamp(header.sentAt) +
    sizeTimestamp(header.expiresAt) +
    sizeText(header.replyTo, texts) +
    sizeText(header.taskId, texts) +
    sizeText(header.sessionId, texts) +
    sizeText(header.correlationId, texts) +
    sizeTrace(header.trace, texts) +
    sizeText(header.idempotencyKey, texts) +
    sizeText(header.payloadType, texts) +
    sizeVarintField(Number(header.sequence))
  );
}

/** Writes a Header into a buffer of its exact size, taking the strings' lengths in the order they were measured. */
class Writer extends FieldWriter {
  constructor(size: number, texts: readonly number[]) {
    super(size, texts, "header");
  }

  trace(tag: number, trace: TraceContext | undefined): void {
    if (trace !== undefined) this.textPair(tag, trace.traceparent, trace.tracestate);
  }

  timestampField(tag: number, timestamp: Timestamp | undefined): void {
    if (timestamp !== undefined) this.timestamp(tag, Number(timestamp.seconds), timestamp.nanos);
  }

  /** Header.confidential, already encoded. */
  confidential(encoded: Uint8Array): void {
    for (const byte of CONFIDENTIAL_TAG) this.byte(byte);
    this.varint(encoded.byteLength);
    this.raw(encoded);
  }
}

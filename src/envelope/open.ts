// open: verify an envelope's signature before believing any of it, then
// check who it is from and for, and when; return typed header and payload.
// Every refusal is a ConnectError with a synapse.v1.ErrorDetail.
import { fromBinary, type Message } from "@bufbuild/protobuf";
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { createHash } from "node:crypto";
import {
  HeaderSchema,
  MessageType,
  SignatureAlgorithm,
  type Envelope,
  type Header,
} from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { defaultEd25519, SIGNATURE_LENGTH, type Ed25519 } from "../crypto/ed25519.js";
import { keyIdOf } from "../crypto/keys.js";
import { rememberEncoding } from "../protocol/encoded.js";
import { clip, protocolError } from "../protocol/errors.js";
import { messageTypeInfo, type MessageTypeInfo } from "../protocol/message-types.js";
import { compareVersions } from "../protocol/versions.js";
import { confidentialDigest, openSealedPayload } from "./confidential.js";
import { envelopeSigningInput } from "./pae.js";
import { PROTOCOL_VERSION } from "./seal.js";
import type { TrustPolicy } from "./trust.js";

/** How far, by default, a sender's `sent_at` may be from the receiver's clock: 5 minutes. */
export const DEFAULT_CLOCK_SKEW_MS = 5 * 60 * 1000;

export interface OpenOptions {
  trust: TrustPolicy;
  /** This agent's id; messages addressed elsewhere are refused. Omit only to read, not to act. */
  self?: string;
  /** This agent's key id; a message whose receiver.key_id names another key is refused. */
  selfKeyId?: string;
  /** Allowed distance between the sender's sent_at and our clock. */
  clockSkewMs?: number;
  now?: () => number;
  ed?: Ed25519;
  /**
   * Check sent_at and expires_at (default true). Records read back later,
   * such as a task's event log, are checked for authenticity, not freshness.
   */
  checkTime?: boolean;
  /** How to find the task key of a confidential message; without it, confidential messages are refused. */
  confidential?: ConfidentialKeys;
}

/** Finds the task key a confidential message was sealed with, or throws its typed refusal. */
export interface ConfidentialKeys {
  taskKey(header: Header): Uint8Array | Promise<Uint8Array>;
}

/** An envelope that passed every check, with its header and payload decoded. */
export interface OpenedEnvelope {
  /** The envelope as it arrived. */
  envelope: Envelope;
  /** The signed header. */
  header: Header;
  /** Facts about its message type. */
  info: MessageTypeInfo;
  /** The signed payload, a message of the type `header.payload_type` names. */
  payload: Message;
  /** The sender's verified public key. */
  publicKey: Uint8Array;
  /** SHA-256 (hex) over signing input and signature: equal digests are the same envelope. */
  digest: string;
  /** For a confidential message: the task key it opened with. */
  taskKey?: Uint8Array;
}

const invalid = (message: string) => protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, message);

/** The sender's public key: from the trust policy, or embedded in the signature when its id matches. */
async function signerKey(envelope: Envelope, trust: TrustPolicy, confidential: boolean): Promise<Uint8Array> {
  const signature = envelope.signature;
  if (signature === undefined || (signature.value.byteLength === 0 && !confidential)) {
    throw protocolError(ErrorCode.SIGNATURE_INVALID, "envelope is not signed");
  }
  if (signature.algorithm !== SignatureAlgorithm.ED25519) {
    throw protocolError(ErrorCode.SIGNATURE_INVALID, `unsupported signature algorithm ${signature.algorithm}`);
  }
  if (!confidential && signature.value.byteLength !== SIGNATURE_LENGTH) {
    throw protocolError(ErrorCode.SIGNATURE_INVALID, `signature must be ${SIGNATURE_LENGTH} bytes`);
  }
  let publicKey = await trust.publicKeyFor(signature.keyId);
  if (publicKey === undefined && signature.publicKey.byteLength > 0) {
    let embeddedId: string;
    try {
      embeddedId = keyIdOf(signature.publicKey);
    } catch {
      throw protocolError(ErrorCode.SIGNATURE_INVALID, "embedded public key is malformed");
    }
    if (embeddedId !== signature.keyId) {
      throw protocolError(ErrorCode.SIGNATURE_INVALID, "embedded public key does not match key_id");
    }
    publicKey = signature.publicKey;
  }
  if (publicKey === undefined) {
    throw protocolError(ErrorCode.UNKNOWN_SENDER, `no public key known for key id ${clip(signature.keyId)}`);
  }
  return publicKey;
}

function parseHeader(bytes: Uint8Array): Header {
  try {
    return fromBinary(HeaderSchema, bytes);
  } catch {
    throw invalid("header bytes are not a synapse.v1.Header");
  }
}

// Header strings are identifiers, not content: bounded, so that nothing that
// remembers or echoes them (trust pins, replies, events) grows with a caller's whim.
export const MAX_HEADER_STRING_CHARS = 256;
const MAX_TRACESTATE_CHARS = 512; // W3C Trace Context: vendors propagate at least 512

/** Each bounded header string: its name in errors, how to read it, its limit (a table made once, not per message). */
const HEADER_STRINGS: ReadonlyArray<readonly [name: string, read: (header: Header) => string | undefined, max: number]> = [
  ["message_id", (h) => h.messageId, MAX_HEADER_STRING_CHARS],
  ["protocol_version", (h) => h.protocolVersion, MAX_HEADER_STRING_CHARS],
  ["sender.agent_id", (h) => h.sender?.agentId, MAX_HEADER_STRING_CHARS],
  ["sender.system_id", (h) => h.sender?.systemId, MAX_HEADER_STRING_CHARS],
  ["sender.key_id", (h) => h.sender?.keyId, MAX_HEADER_STRING_CHARS],
  ["receiver.agent_id", (h) => h.receiver?.agentId, MAX_HEADER_STRING_CHARS],
  ["receiver.system_id", (h) => h.receiver?.systemId, MAX_HEADER_STRING_CHARS],
  ["receiver.key_id", (h) => h.receiver?.keyId, MAX_HEADER_STRING_CHARS],
  ["reply_to", (h) => h.replyTo, MAX_HEADER_STRING_CHARS],
  ["task_id", (h) => h.taskId, MAX_HEADER_STRING_CHARS],
  ["session_id", (h) => h.sessionId, MAX_HEADER_STRING_CHARS],
  ["correlation_id", (h) => h.correlationId, MAX_HEADER_STRING_CHARS],
  ["trace.traceparent", (h) => h.trace?.traceparent, MAX_HEADER_STRING_CHARS],
  ["trace.tracestate", (h) => h.trace?.tracestate, MAX_TRACESTATE_CHARS],
  ["idempotency_key", (h) => h.idempotencyKey, MAX_HEADER_STRING_CHARS],
  ["payload_type", (h) => h.payloadType, MAX_HEADER_STRING_CHARS],
];

function checkHeaderStrings(header: Header): void {
  for (const [name, read, max] of HEADER_STRINGS) {
    const value = read(header);
    if (value !== undefined && value.length > max) throw invalid(`header.${name} is longer than ${max} characters`);
  }
}

// The range of google.protobuf.Timestamp: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
const MIN_TIMESTAMP_SECONDS = -62_135_596_800n;
const MAX_TIMESTAMP_SECONDS = 253_402_300_799n;

/** Milliseconds of a signed timestamp, refusing values no clock can show (they would not fit a Date). */
function timestampOf(field: string, value: Timestamp): number {
  if (value.seconds < MIN_TIMESTAMP_SECONDS || value.seconds > MAX_TIMESTAMP_SECONDS || value.nanos < 0 || value.nanos > 999_999_999) {
    throw invalid(`header.${field} is outside the range of google.protobuf.Timestamp (years 1 to 9999, nanos 0 to 999999999)`);
  }
  return timestampMs(value);
}

function checkTime(header: Header, now: number, skewMs: number): void {
  if (header.sentAt === undefined) throw invalid("header.sent_at is required");
  const sentAt = timestampOf("sent_at", header.sentAt);
  const expiresAt = header.expiresAt === undefined ? sentAt + skewMs : timestampOf("expires_at", header.expiresAt);
  if (Math.abs(now - sentAt) > skewMs) {
    throw protocolError(ErrorCode.MESSAGE_EXPIRED, `sent_at is outside the allowed clock skew of ${skewMs / 1000} s`, {
      details: { sent_at: new Date(sentAt).toISOString(), now: new Date(now).toISOString() },
    });
  }
  if (expiresAt <= now) {
    throw protocolError(ErrorCode.MESSAGE_EXPIRED, "message has expired", {
      details: { expires_at: new Date(expiresAt).toISOString() },
    });
  }
}

export async function open(envelope: Envelope, options: OpenOptions): Promise<OpenedEnvelope> {
  const ed = options.ed ?? defaultEd25519;
  // A confidential envelope carries its signature inside the ciphertext (docs/PROTOCOL.md §9.3).
  if (envelope.signature !== undefined && envelope.signature.value.byteLength === 0) {
    const header = parseHeader(envelope.header);
    if (header.confidential !== undefined) return openConfidential(envelope, header, options, ed);
  }
  const publicKey = await signerKey(envelope, options.trust, false);
  const signingInput = envelopeSigningInput(envelope.header, envelope.payload);
  if (!ed.verify(signingInput, envelope.signature!.value, publicKey)) {
    throw protocolError(ErrorCode.SIGNATURE_INVALID, "signature does not verify");
  }
  // Only now, with the bytes proven to be the signer's, parse them.
  const header = parseHeader(envelope.header);
  const info = await checkHeader(header, envelope, publicKey, options);
  const payload = parsePayload(info, envelope.payload);
  await options.trust.accepted?.(header.sender!.agentId, envelope.signature!.keyId, publicKey);
  const digest = createHash("sha256").update(signingInput).update(envelope.signature!.value).digest("hex");
  return { envelope, header, info, payload, publicKey, digest };
}

/** Header checks before decryption, then the task key, the payload opened, the signature inside verified. */
async function openConfidential(envelope: Envelope, header: Header, options: OpenOptions, ed: Ed25519): Promise<OpenedEnvelope> {
  const publicKey = await signerKey(envelope, options.trust, true);
  const info = await checkHeader(header, envelope, publicKey, options);
  if (options.confidential === undefined) {
    throw protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, "this receiver holds no key for confidential messages");
  }
  const taskKey = await options.confidential.taskKey(header);
  const inner = openSealedPayload(envelope.header, header, envelope.payload, taskKey);
  if (!ed.verify(envelopeSigningInput(envelope.header, inner.payload), inner.signature, publicKey)) {
    throw protocolError(ErrorCode.INNER_SIGNATURE_INVALID, "the signature inside the confidential payload does not verify");
  }
  const payload = parsePayload(info, inner.payload);
  await options.trust.accepted?.(header.sender!.agentId, envelope.signature!.keyId, publicKey);
  return { envelope, header, info, payload, publicKey, digest: confidentialDigest(envelope.header, envelope.payload), taskKey };
}

function parsePayload(info: MessageTypeInfo, bytes: Uint8Array): Message {
  let payload: Message;
  try {
    payload = fromBinary(info.payloadSchema, bytes);
  } catch {
    throw invalid(`payload bytes are not a ${info.payloadSchema.typeName}`);
  }
  // What is kept of it (a task's request) is stored as the bytes that were signed, not encoded again.
  rememberEncoding(payload, bytes);
  return payload;
}

/** Every check of a header that the signature (or, for a confidential message, its associated data) covers. */
async function checkHeader(header: Header, envelope: Envelope, publicKey: Uint8Array, options: OpenOptions): Promise<MessageTypeInfo> {
  checkHeaderStrings(header);
  const keyId = envelope.signature!.keyId;
  if (header.sender === undefined || header.sender.agentId === "") throw invalid("header.sender.agent_id is required");
  if (header.sender.keyId !== keyId) {
    throw protocolError(ErrorCode.SIGNATURE_INVALID, "header.sender.key_id differs from the signature's key_id");
  }
  const verdict = await options.trust.check(header.sender.agentId, keyId, publicKey);
  if (verdict.kind === "conflict") {
    throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${clip(header.sender.agentId)} is known with a different key`, {
      details: { agent_id: clip(header.sender.agentId), key_id: clip(keyId), expected_key_id: verdict.expectedKeyId },
    });
  }
  if (verdict.kind === "unknown") {
    throw protocolError(
      ErrorCode.UNKNOWN_SENDER,
      `agent ${clip(header.sender.agentId)} with key ${clip(keyId)} is not trusted: an agent id is trusted on first use only when it is derived from its key ` +
        "(agent_ and the first 32 hex digits of SHA-256 of the public key); any other must be in the receiver's trust store or registry",
      { details: { agent_id: clip(header.sender.agentId), key_id: clip(keyId) } },
    );
  }
  if (options.self !== undefined && header.receiver?.agentId !== options.self) {
    throw protocolError(ErrorCode.WRONG_RECEIVER, `message is addressed to ${clip(header.receiver?.agentId || "nobody")}, not ${options.self}`);
  }
  // receiver.key_id is optional; when set it pins the key the sender expects, so another key is a wrong receiver too.
  const receiverKeyId = header.receiver?.keyId ?? "";
  if (options.selfKeyId !== undefined && receiverKeyId !== "" && receiverKeyId !== options.selfKeyId) {
    throw protocolError(ErrorCode.WRONG_RECEIVER, `message is addressed to key ${clip(receiverKeyId)}, not this agent's key ${options.selfKeyId}`, {
      details: { key_id: clip(receiverKeyId), expected_key_id: options.selfKeyId },
    });
  }
  if (header.messageId === "") throw invalid("header.message_id is required");
  const version = compareVersions(header.protocolVersion, PROTOCOL_VERSION);
  if (version === undefined) throw invalid(`protocol_version ${JSON.stringify(clip(header.protocolVersion))} is not semver`);
  if (!version.compatible) {
    throw protocolError(ErrorCode.UNSUPPORTED_VERSION, `protocol ${clip(header.protocolVersion)} is not compatible with ${PROTOCOL_VERSION}`);
  }
  if (options.checkTime !== false) checkTime(header, (options.now ?? Date.now)(), options.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS);

  const info = messageTypeInfo(header.messageType);
  if (info === undefined || header.messageType === MessageType.UNSPECIFIED) {
    throw invalid(`unknown message type ${header.messageType}`);
  }
  if (header.payloadType !== info.payloadSchema.typeName) {
    throw invalid(`${info.wireName} must carry ${info.payloadSchema.typeName}, not ${clip(header.payloadType || "nothing")}`);
  }
  if (info.taskScoped && header.taskId === "") throw invalid(`${info.wireName} requires header.task_id`);
  return info;
}

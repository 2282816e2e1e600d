// Sealing and verifying envelopes in the browser, exactly as
// docs/PROTOCOL.md §2 says: header and payload serialized once with
// protobuf-es, the signing input PAE(["synapse.v1.Envelope", header,
// payload]) from src/envelope/pae.ts, Ed25519 with tweetnacl. Events are
// verified against the executor's key from GetCapabilities, never against a
// key the message carries itself.
import { create, fromBinary, toBinary, type JsonObject, type Message } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import nacl from "tweetnacl";
import { EnvelopeSchema, HeaderSchema, MessageType, SignatureAlgorithm, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskPriority, TaskRequestPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import { envelopeSigningInput } from "../envelope/pae.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { bytesEqual } from "./bytes.js";
import type { ConsoleIdentity } from "./keys.js";

/** The protocol version this console speaks (the same as src/envelope/seal.ts, which is Node-only). */
export const PROTOCOL_VERSION = "1.0.0";
/** How long a sealed message stays valid. */
export const TTL_MS = 5 * 60 * 1000;
/** The receiver's default clock skew (§2.4 step 8), used for live replies. */
export const CLOCK_SKEW_MS = 300 * 1000;

/** The executor as GetCapabilities declared it. */
export interface Executor {
  readonly agentId: string;
  readonly systemId: string;
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

export interface TaskRequestInput {
  taskId: string;
  taskType: string;
  payload: JsonObject;
  /** Milliseconds since the epoch; defaults to now. */
  nowMs?: number;
}

/** A p2p:task_request from `identity` to `executor`, signed over the exact bytes that travel. */
export function sealTaskRequest(identity: ConsoleIdentity, executor: Executor, input: TaskRequestInput): { envelope: Envelope; header: Header } {
  const sentAtMs = input.nowMs ?? Date.now();
  const header = create(HeaderSchema, {
    messageId: crypto.randomUUID(),
    messageType: MessageType.TASK_REQUEST,
    protocolVersion: PROTOCOL_VERSION,
    sender: { agentId: identity.agentId, systemId: identity.systemId, keyId: identity.keyId },
    receiver: { agentId: executor.agentId, systemId: executor.systemId, keyId: executor.keyId },
    sentAt: timestampFromMs(sentAtMs),
    expiresAt: timestampFromMs(sentAtMs + TTL_MS),
    taskId: input.taskId,
    payloadType: TaskRequestPayloadSchema.typeName,
  });
  const payload = create(TaskRequestPayloadSchema, {
    task: { id: input.taskId, type: input.taskType, priority: TaskPriority.NORMAL, payload: input.payload },
  });
  const headerBytes = toBinary(HeaderSchema, header);
  const payloadBytes = toBinary(TaskRequestPayloadSchema, payload);
  const signature = nacl.sign.detached(envelopeSigningInput(headerBytes, payloadBytes), identity.secretKey);
  const envelope = create(EnvelopeSchema, {
    header: headerBytes,
    payload: payloadBytes,
    // The public key travels too, so an agent pinning on first use can check a requester it has not met.
    signature: { algorithm: SignatureAlgorithm.ED25519, keyId: identity.keyId, value: signature, publicKey: identity.publicKey },
  });
  return { envelope, header };
}

export type Verification =
  | { ok: true; header: Header; type: MessageType; payload: Message }
  | { ok: false; reason: string };

export interface Expectations {
  executor: Executor;
  /** This console's agent id: the receiver every executor message must name. */
  self: string;
  taskId?: string;
  /** For events: the log position the signed header must carry. */
  sequence?: bigint;
  /** Check freshness (live replies only; events are records, §5.2). */
  checkTime?: boolean;
  nowMs?: number;
}

const refuse = (reason: string): Verification => ({ ok: false, reason });

/** The receiver checks of §2.4 that apply to a requester reading its executor's messages. */
export function verifyEnvelope(envelope: Envelope | undefined, expect: Expectations): Verification {
  const signature = envelope?.signature;
  if (envelope === undefined || signature === undefined) return refuse("no signature");
  if (signature.algorithm !== SignatureAlgorithm.ED25519 || signature.value.byteLength !== nacl.sign.signatureLength) {
    return refuse("not a 64-byte Ed25519 signature");
  }
  if (signature.keyId !== expect.executor.keyId) return refuse(`signed with key ${signature.keyId}, not the executor's`);
  if (signature.publicKey.byteLength > 0 && !bytesEqual(signature.publicKey, expect.executor.publicKey)) {
    return refuse("embedded public key differs from the executor's");
  }
  const input = envelopeSigningInput(envelope.header, envelope.payload);
  if (!nacl.sign.detached.verify(input, signature.value, expect.executor.publicKey)) return refuse("signature does not verify");
  // Only now is anything parsed, and only the bytes that were verified.
  let header: Header;
  try {
    header = fromBinary(HeaderSchema, envelope.header);
  } catch {
    return refuse("header does not parse");
  }
  if (header.sender?.keyId !== signature.keyId) return refuse("header names another signing key");
  if (header.sender.agentId !== expect.executor.agentId) return refuse(`sent by ${header.sender.agentId}, not the executor`);
  if (header.receiver?.agentId !== expect.self) return refuse(`addressed to ${header.receiver?.agentId ?? "nobody"}, not this console`);
  if (header.protocolVersion.split(".")[0] !== PROTOCOL_VERSION.split(".")[0]) return refuse(`protocol ${header.protocolVersion}`);
  if (expect.taskId !== undefined && header.taskId !== expect.taskId) return refuse(`for task ${header.taskId}`);
  if (expect.sequence !== undefined && header.sequence !== expect.sequence) return refuse(`signed as sequence ${header.sequence}`);
  if (expect.checkTime) {
    const now = expect.nowMs ?? Date.now();
    const sentAt = header.sentAt ? timestampMs(header.sentAt) : Number.NaN;
    const expiresAt = header.expiresAt ? timestampMs(header.expiresAt) : sentAt + CLOCK_SKEW_MS;
    if (!(Math.abs(now - sentAt) <= CLOCK_SKEW_MS && now < expiresAt)) return refuse("expired or not yet valid");
  }
  const info = messageTypeInfo(header.messageType);
  if (info === undefined || header.payloadType !== info.payloadSchema.typeName) return refuse(`payload type ${header.payloadType} does not fit the message type`);
  try {
    return { ok: true, header, type: header.messageType, payload: fromBinary(info.payloadSchema, envelope.payload) };
  } catch {
    return refuse("payload does not parse");
  }
}

/** The protocol spelling of a message type, "p2p:task_confirm". */
export function wireName(type: MessageType): string {
  return messageTypeInfo(type)?.wireName ?? `unknown(${type})`;
}

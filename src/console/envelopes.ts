// Sealing and verifying envelopes in the browser, exactly as
// docs/PROTOCOL.md §2 says: header and payload serialized once with
// protobuf-es, the signing input PAE(["synapse.v1.Envelope", header,
// payload]) from src/envelope/pae.ts, Ed25519 by the console's key to sign
// and by tweetnacl to verify. Executor messages are verified against the
// executor's key from GetCapabilities, never against a key the message
// carries itself.
import { create, fromBinary, toBinary, type DescMessage, type JsonObject, type Message, type MessageShape } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import nacl from "tweetnacl";
import { EnvelopeSchema, HeaderSchema, MessageType, SignatureAlgorithm, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskPriority, TaskRequestPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import { envelopeSigningInput } from "../envelope/pae.js";
import { uuidV7 } from "../protocol/ids.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { bytesEqual } from "./bytes.js";
import { confidentialityOf, sealPayload, type ConfidentialSealing } from "./confidential.js";
import type { ConsoleIdentity } from "./keys.js";

/** The protocol version this console speaks (the same as src/envelope/seal.ts, which is Node-only). */
export const PROTOCOL_VERSION = "1.0.0";
/** How long a sealed message stays valid. */
export const TTL_MS = 5 * 60 * 1000;
/** The receiver's default clock skew (§2.4 step 9), used for live replies. */
export const CLOCK_SKEW_MS = 300 * 1000;

/** The executor as GetCapabilities declared it. */
export interface Executor {
  readonly agentId: string;
  readonly systemId: string;
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

export interface SealInput<Desc extends DescMessage> {
  type: MessageType;
  schema: Desc;
  payload: MessageShape<Desc>;
  taskId?: string;
  /** Milliseconds since the epoch; defaults to now. */
  nowMs?: number;
  /** Seal it (docs/PROTOCOL.md §9.2): a message of a confidential task. */
  sealing?: ConfidentialSealing;
}

/** A message from `identity` to `executor`, signed over the exact bytes that travel. */
export async function sealMessage<Desc extends DescMessage>(identity: ConsoleIdentity, executor: Executor, input: SealInput<Desc>): Promise<{ envelope: Envelope; header: Header }> {
  const sentAtMs = input.nowMs ?? Date.now();
  const header = create(HeaderSchema, {
    messageId: uuidV7(sentAtMs),
    messageType: input.type,
    protocolVersion: PROTOCOL_VERSION,
    sender: { agentId: identity.agentId, systemId: identity.systemId, keyId: identity.keyId },
    receiver: { agentId: executor.agentId, systemId: executor.systemId, keyId: executor.keyId },
    sentAt: timestampFromMs(sentAtMs),
    expiresAt: timestampFromMs(sentAtMs + TTL_MS),
    taskId: input.taskId ?? "",
    payloadType: input.schema.typeName,
  });
  if (input.sealing !== undefined) header.confidential = await confidentialityOf(input.sealing);
  const headerBytes = toBinary(HeaderSchema, header);
  const payloadBytes = toBinary(input.schema, input.payload);
  const signature = await identity.sign(envelopeSigningInput(headerBytes, payloadBytes));
  if (input.sealing !== undefined) {
    // Signed in plaintext, then the signature and the payload encrypted together; the outer signature carries no value.
    const sealed = await sealPayload(headerBytes, header, signature, payloadBytes, input.sealing.taskKey);
    const envelope = create(EnvelopeSchema, {
      header: headerBytes,
      payload: sealed,
      signature: { algorithm: SignatureAlgorithm.ED25519, keyId: identity.keyId, value: new Uint8Array(0), publicKey: identity.publicKey },
    });
    return { envelope, header };
  }
  const envelope = create(EnvelopeSchema, {
    header: headerBytes,
    payload: payloadBytes,
    // The public key travels too, so an agent pinning on first use can check a requester it has not met.
    signature: { algorithm: SignatureAlgorithm.ED25519, keyId: identity.keyId, value: signature, publicKey: identity.publicKey },
  });
  return { envelope, header };
}

export interface TaskRequestInput {
  taskId: string;
  taskType: string;
  payload: JsonObject;
  nowMs?: number;
  sealing?: ConfidentialSealing;
}

/** A p2p:task_request. */
export function sealTaskRequest(identity: ConsoleIdentity, executor: Executor, input: TaskRequestInput): Promise<{ envelope: Envelope; header: Header }> {
  const payload = create(TaskRequestPayloadSchema, {
    task: { id: input.taskId, type: input.taskType, priority: TaskPriority.NORMAL, payload: input.payload },
  });
  return sealMessage(identity, executor, { type: MessageType.TASK_REQUEST, schema: TaskRequestPayloadSchema, payload, taskId: input.taskId, nowMs: input.nowMs, sealing: input.sealing });
}

export type Verification =
  | { ok: true; header: Header; type: MessageType; payload: Message; /** It travelled sealed, and was opened here. */ sealed?: boolean }
  | { ok: false; reason: string; header?: Header };

export interface Expectations {
  executor: Executor;
  /** Whom every executor message must be addressed to: this console, or (read by an operator) the task's requester. */
  receiver: string;
  taskId?: string;
  /** For events: the log position the signed header must carry. */
  sequence?: bigint;
  /** Check freshness (live replies only; events are records, §5.2). */
  checkTime?: boolean;
  nowMs?: number;
}

const refuse = (reason: string, header?: Header): Verification => ({ ok: false, reason, header });

/** The header of an envelope, parsed without trusting it: for showing what a message that failed its checks claims. */
export function unverifiedHeader(envelope: Envelope | undefined): Header | undefined {
  try {
    return envelope ? fromBinary(HeaderSchema, envelope.header) : undefined;
  } catch {
    return undefined;
  }
}

/** The receiver checks of §2.4 that apply to a requester (or operator) reading its executor's messages. */
export function verifyEnvelope(envelope: Envelope | undefined, expect: Expectations): Verification {
  const signature = envelope?.signature;
  if (envelope === undefined || signature === undefined) return refuse("no signature");
  // What a refused message claims, parsed only to show it (never to decide anything).
  const claimed = () => unverifiedHeader(envelope);
  // A sealed message carries its signature inside the ciphertext: task-keys.ts opens it first, where this browser can.
  if (signature.value.byteLength === 0 && claimed()?.confidential !== undefined) {
    return refuse("sealed: a confidential task's events open only with its parties' keys, and this browser has no X25519 in WebCrypto (synapse status or watch shows them)", claimed());
  }
  if (signature.algorithm !== SignatureAlgorithm.ED25519 || signature.value.byteLength !== nacl.sign.signatureLength) {
    return refuse("not a 64-byte Ed25519 signature", claimed());
  }
  if (signature.keyId !== expect.executor.keyId) return refuse(`signed with key ${signature.keyId}, not the executor's`, claimed());
  if (signature.publicKey.byteLength > 0 && !bytesEqual(signature.publicKey, expect.executor.publicKey)) {
    return refuse("embedded public key differs from the executor's", claimed());
  }
  const input = envelopeSigningInput(envelope.header, envelope.payload);
  if (!nacl.sign.detached.verify(input, signature.value, expect.executor.publicKey)) return refuse("signature does not verify", claimed());
  // Only now is the header parsed: the bytes that were verified.
  const header = unverifiedHeader(envelope);
  if (header === undefined) return refuse("header does not parse");
  if (header.sender?.keyId !== signature.keyId) return refuse("header names another signing key", header);
  if (header.sender.agentId !== expect.executor.agentId) return refuse(`sent by ${header.sender.agentId}, not the executor`, header);
  if (header.receiver?.agentId !== expect.receiver) return refuse(`addressed to ${header.receiver?.agentId ?? "nobody"}, not ${expect.receiver}`, header);
  if (header.protocolVersion.split(".")[0] !== PROTOCOL_VERSION.split(".")[0]) return refuse(`protocol ${header.protocolVersion}`, header);
  if (expect.taskId !== undefined && header.taskId !== expect.taskId) return refuse(`for task ${header.taskId}`, header);
  if (expect.sequence !== undefined && header.sequence !== expect.sequence) return refuse(`signed as sequence ${header.sequence}`, header);
  if (expect.checkTime) {
    const now = expect.nowMs ?? Date.now();
    const sentAt = header.sentAt ? timestampMs(header.sentAt) : Number.NaN;
    const expiresAt = header.expiresAt ? timestampMs(header.expiresAt) : sentAt + CLOCK_SKEW_MS;
    if (!(Math.abs(now - sentAt) <= CLOCK_SKEW_MS && now < expiresAt)) return refuse("expired or not yet valid", header);
  }
  const info = messageTypeInfo(header.messageType);
  if (info === undefined || header.payloadType !== info.payloadSchema.typeName) return refuse(`payload type ${header.payloadType} does not fit the message type`, header);
  try {
    return { ok: true, header, type: header.messageType, payload: fromBinary(info.payloadSchema, envelope.payload) };
  } catch {
    return refuse("payload does not parse", header);
  }
}

/** The protocol spelling of a message type, "p2p:task_confirm". */
export function wireName(type: MessageType): string {
  return messageTypeInfo(type)?.wireName ?? `unknown(${type})`;
}

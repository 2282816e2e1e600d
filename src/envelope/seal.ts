// seal: build a Header, serialize header and payload once, and sign exactly
// those bytes. The serialized bytes are what travels; nothing is re-encoded.
import { create, toBinary, type Message, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  EnvelopeSchema,
  HeaderSchema,
  MessageType,
  SignatureAlgorithm,
  type Envelope,
  type Header,
} from "../../gen/synapse/v1/envelope_pb.js";
import { defaultEd25519, type Ed25519 } from "../crypto/ed25519.js";
import type { AgentKey } from "../crypto/keys.js";
import { encodeHeader } from "../protocol/header-codec.js";
import { uuidV7 } from "../protocol/ids.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { envelopeSigningInput } from "./pae.js";

/** The protocol version this package speaks (`header.protocol_version`); majors must match. */
export const PROTOCOL_VERSION = "1.0.0";
/** How long a sealed message stays valid unless the caller says otherwise. */
export const DEFAULT_TTL_MS = 5 * 60 * 1000;

/** One end of a message: an agent, and optionally its system and key. */
export interface Party {
  /** The agent id. */
  agentId: string;
  /** The agent's system id. */
  systemId?: string;
  /** For a receiver: the key it is expected to hold (a receiver with another key refuses the message). */
  keyId?: string;
}

/** What to seal: the message, who sends it to whom, and the header's optional fields. */
export interface SealInput {
  /** What the message is; decides the payload type and who may send it. */
  messageType: MessageType;
  /** A message of the payload type that belongs to messageType. */
  payload: Message;
  /** The signing agent; its key id is taken from the key. */
  sender: Party;
  /** Who the message is for; receivers refuse a message addressed to another agent. */
  receiver: Party;
  /** The task the message is about (every task_* message and human_decision). */
  taskId?: string;
  /** The message id this message answers. */
  replyTo?: string;
  /** A session id, carried through unchanged. */
  sessionId?: string;
  /** A correlation id, carried through unchanged. */
  correlationId?: string;
  /** The W3C `traceparent`, carried through unchanged. */
  traceparent?: string;
  /** The W3C `tracestate`, carried through unchanged. */
  tracestate?: string;
  /** For task_request: a key that makes a second request with it return the first task. */
  idempotencyKey?: string;
  /** For task events: the position in the task's event log, from 1. */
  sequence?: bigint;
  /** The message id; default a new time-ordered UUID made at `sentAtMs` (`uuidV7`). */
  messageId?: string;
  /** Milliseconds since the epoch; defaults to now. */
  sentAtMs?: number;
  /** The payload's bytes when the caller encoded it already (they must be an encoding of `payload`). */
  encodedPayload?: Uint8Array;
  /** Validity after sentAt; defaults to DEFAULT_TTL_MS. */
  ttlMs?: number;
}

/** A sealed message. */
export interface Sealed {
  /** The envelope to send: header and payload bytes and their signature. */
  envelope: Envelope;
  /** The header that was serialized into it. */
  header: Header;
}

export function buildHeader(input: SealInput, key: AgentKey): Header {
  const info = messageTypeInfo(input.messageType);
  if (info === undefined) throw new TypeError(`unknown message type ${input.messageType}`);
  if (input.payload.$typeName !== info.payloadSchema.typeName) {
    throw new TypeError(`${info.wireName} carries ${info.payloadSchema.typeName}, not ${input.payload.$typeName}`);
  }
  const sentAtMs = input.sentAtMs ?? Date.now();
  const init: MessageInitShape<typeof HeaderSchema> = {
    messageId: input.messageId ?? uuidV7(sentAtMs),
    messageType: input.messageType,
    protocolVersion: PROTOCOL_VERSION,
    sender: { agentId: input.sender.agentId, systemId: input.sender.systemId ?? "", keyId: key.keyId },
    receiver: { agentId: input.receiver.agentId, systemId: input.receiver.systemId ?? "", keyId: input.receiver.keyId ?? "" },
    sentAt: timestampFromMs(sentAtMs),
    expiresAt: timestampFromMs(sentAtMs + (input.ttlMs ?? DEFAULT_TTL_MS)),
    replyTo: input.replyTo ?? "",
    taskId: input.taskId ?? "",
    sessionId: input.sessionId ?? "",
    correlationId: input.correlationId ?? "",
    idempotencyKey: input.idempotencyKey ?? "",
    payloadType: info.payloadSchema.typeName,
    sequence: input.sequence ?? 0n,
  };
  if (input.traceparent) init.trace = { traceparent: input.traceparent, tracestate: input.tracestate ?? "" };
  return create(HeaderSchema, init);
}

/** Signs already-serialized header and payload bytes. */
export function signParts(header: Uint8Array, payload: Uint8Array, key: AgentKey, ed: Ed25519 = defaultEd25519): Envelope {
  const value = ed.sign(envelopeSigningInput(header, payload), key.seed);
  return create(EnvelopeSchema, {
    header,
    payload,
    signature: { algorithm: SignatureAlgorithm.ED25519, keyId: key.keyId, value, publicKey: key.publicKey },
  });
}

export function seal(input: SealInput, key: AgentKey, ed: Ed25519 = defaultEd25519): Sealed {
  const header = buildHeader(input, key);
  const info = messageTypeInfo(input.messageType)!;
  const headerBytes = encodeHeader(header);
  const payloadBytes = input.encodedPayload ?? toBinary(info.payloadSchema, input.payload);
  return { envelope: signParts(headerBytes, payloadBytes, key, ed), header };
}

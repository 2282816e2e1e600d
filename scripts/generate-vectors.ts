// Writes test/vectors/envelopes.json: language-neutral envelope vectors made
// with fixed keys, ids and times. Run it only when the signing rule or the
// contract changes on purpose (`npm run vectors`); the tests check that the
// code still reproduces every committed byte.
import { create, toJson, type Message } from "@bufbuild/protobuf";
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { EnvelopeSchema, HeaderSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import {
  HeartbeatPayloadSchema,
  AgentStatus,
  TaskCompletePayloadSchema,
  TaskRequestPayloadSchema,
  TaskPriority,
} from "../gen/synapse/v1/payloads_pb.js";
import { nodeEd25519 } from "../src/crypto/ed25519.js";
import { toHex } from "../src/crypto/encoding.js";
import { keyFromSeed, type AgentKey } from "../src/crypto/keys.js";
import { envelopeSigningInput, ENVELOPE_SIGNING_DOMAIN } from "../src/envelope/pae.js";
import { seal } from "../src/envelope/seal.js";
import { messageTypeInfo } from "../src/protocol/message-types.js";

const seedFor = (label: string) => new Uint8Array(createHash("sha256").update(label).digest());
const requester = keyFromSeed(seedFor("synapse test vector: requester"));
const executor = keyFromSeed(seedFor("synapse test vector: executor"));
const outsider = keyFromSeed(seedFor("synapse test vector: outsider"));

const SENT_AT = Date.parse("2026-01-01T00:00:00Z");
const VERIFY_AT = "2026-01-01T00:01:00Z";
const EXPIRED_AT = "2026-01-01T00:10:00Z";

interface Case {
  name: string;
  key: AgentKey;
  sender: string;
  receiver: string;
  messageType: MessageType;
  payload: Message;
  messageId: string;
  taskId?: string;
  sequence?: bigint;
}

const cases: Case[] = [
  {
    name: "task_request",
    key: requester,
    sender: "agent_requester",
    receiver: "agent_executor",
    messageType: MessageType.TASK_REQUEST,
    messageId: "0190a5b2-0000-7000-8000-000000000001",
    taskId: "task-0001",
    payload: create(TaskRequestPayloadSchema, {
      task: { id: "task-0001", type: "text_analysis", priority: TaskPriority.NORMAL, payload: { text: "Hello, Synapse. Agents talk." } },
      context: { sessionId: "sess-1", correlationId: "corr-1" },
    }),
  },
  {
    name: "task_complete_event",
    key: executor,
    sender: "agent_executor",
    receiver: "agent_requester",
    messageType: MessageType.TASK_COMPLETE,
    messageId: "0190a5b2-0000-7000-8000-000000000002",
    taskId: "task-0001",
    sequence: 3n,
    payload: create(TaskCompletePayloadSchema, {
      taskId: "task-0001",
      result: { outputType: "json", output: { kind: { case: "structValue", value: { fields: {} } } } },
      summary: "done",
    }),
  },
  {
    // Every payload field at its default: the payload travels as zero bytes.
    name: "heartbeat_empty_payload",
    key: executor,
    sender: "agent_executor",
    receiver: "agent_requester",
    messageType: MessageType.HEARTBEAT,
    messageId: "0190a5b2-0000-7000-8000-000000000003",
    payload: create(HeartbeatPayloadSchema, { status: AgentStatus.UNSPECIFIED }),
  },
];

function positive(c: Case) {
  const { envelope, header } = seal(
    {
      messageType: c.messageType,
      payload: c.payload,
      sender: { agentId: c.sender, systemId: "vectors" },
      receiver: { agentId: c.receiver, systemId: "vectors" },
      taskId: c.taskId,
      sequence: c.sequence,
      messageId: c.messageId,
      sentAtMs: SENT_AT,
    },
    c.key,
    nodeEd25519,
  );
  const schema = messageTypeInfo(c.messageType)!.payloadSchema;
  return {
    name: c.name,
    seed: toHex(c.key.seed),
    public_key: toHex(c.key.publicKey),
    key_id: c.key.keyId,
    header: toJson(HeaderSchema, header),
    header_hex: toHex(envelope.header),
    payload_type: schema.typeName,
    payload: toJson(schema, c.payload),
    payload_hex: toHex(envelope.payload),
    signing_input_hex: toHex(envelopeSigningInput(envelope.header, envelope.payload)),
    signature_hex: toHex(envelope.signature!.value),
    envelope: toJson(EnvelopeSchema, envelope),
    receiver: c.receiver,
    verify_at: VERIFY_AT,
  };
}

function flipBit(hex: string, byteIndex: number): string {
  const bytes = Buffer.from(hex, "hex");
  bytes[byteIndex]! ^= 0x01;
  return bytes.toString("hex");
}

const base = positive(cases[0]!);
const otherSignature = toHex(nodeEd25519.sign(Buffer.from(base.signing_input_hex, "hex"), outsider.seed));
const negative = [
  { name: "header_bit_flipped", header_hex: flipBit(base.header_hex, 10), payload_hex: base.payload_hex, signature_hex: base.signature_hex, verify_public_key: base.public_key, verify_at: VERIFY_AT, expected_error: "signature_invalid" },
  { name: "payload_bit_flipped", header_hex: base.header_hex, payload_hex: flipBit(base.payload_hex, 5), signature_hex: base.signature_hex, verify_public_key: base.public_key, verify_at: VERIFY_AT, expected_error: "signature_invalid" },
  { name: "signature_bit_flipped", header_hex: base.header_hex, payload_hex: base.payload_hex, signature_hex: flipBit(base.signature_hex, 7), verify_public_key: base.public_key, verify_at: VERIFY_AT, expected_error: "signature_invalid" },
  { name: "signed_by_wrong_key", header_hex: base.header_hex, payload_hex: base.payload_hex, signature_hex: otherSignature, verify_public_key: base.public_key, verify_at: VERIFY_AT, expected_error: "signature_invalid" },
  { name: "expired", header_hex: base.header_hex, payload_hex: base.payload_hex, signature_hex: base.signature_hex, verify_public_key: base.public_key, verify_at: EXPIRED_AT, expected_error: "message_expired" },
];

const document = {
  description:
    "Synapse envelope vectors. signing_input = PAE([utf8(signing_domain), header bytes, payload bytes]) with PAE as in PASETO (LE64 count, then LE64 length and bytes of each piece); signature = Ed25519(seed, signing_input). Positive vectors must verify and re-sign to exactly signature_hex; negative vectors must be refused with expected_error. Time checks: refuse when |verify_at - sent_at| > clock_skew_seconds or verify_at >= expires_at.",
  signing_domain: ENVELOPE_SIGNING_DOMAIN,
  clock_skew_seconds: 300,
  positive: cases.map(positive),
  negative,
};

await writeFile(new URL("../../test/vectors/envelopes.json", import.meta.url), `${JSON.stringify(document, null, 2)}\n`);
console.log(`wrote ${document.positive.length} positive and ${negative.length} negative envelope vectors`);

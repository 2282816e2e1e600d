// Writes test/vectors/confidential.json: confidential envelopes (docs/PROTOCOL.md
// §9) made with fixed identity and encryption keys, task key, ephemeral keys,
// nonces, ids and times, so every byte is reproducible. Run it only when the
// construction changes on purpose (`npm run vectors`); the tests check that
// the code still reproduces and opens every committed byte.
import { create, toBinary, toJson, type Message } from "@bufbuild/protobuf";
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { SignedEncryptionKeySchema, type WrappedKey } from "../gen/synapse/v1/confidential_pb.js";
import { EnvelopeSchema, MessageType, type Envelope } from "../gen/synapse/v1/envelope_pb.js";
import { TaskCompletePayloadSchema, TaskInfoProvidedPayloadSchema, TaskNeedInfoPayloadSchema, TaskPriority, TaskRequestPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { nodeEd25519 } from "../src/crypto/ed25519.js";
import { toHex } from "../src/crypto/encoding.js";
import { encryptionKeyOf } from "../src/crypto/encryption-keys.js";
import { deriveX25519 } from "../src/crypto/hpke.js";
import { keyFromSeed } from "../src/crypto/keys.js";
import { sealConfidential, sealResult, taskKeyIdOf, wrapTaskKey } from "../src/envelope/confidential.js";
import { signEncryptionKey } from "../src/envelope/encryption-binding.js";
import { envelopeSigningInput } from "../src/envelope/pae.js";
import { messageTypeInfo } from "../src/protocol/message-types.js";

const bytesFor = (label: string) => new Uint8Array(createHash("sha256").update(label).digest());
const SENT_AT = Date.parse("2026-01-01T00:00:00Z");
const VERIFY_AT = "2026-01-01T00:01:00Z";

function party(name: string) {
  const key = keyFromSeed(bytesFor(`synapse test vector: ${name}`));
  const encryption = encryptionKeyOf(deriveX25519(bytesFor(`synapse confidential vector: ${name} x25519`)), SENT_AT);
  return { name, agentId: `agent_${name}`, key, encryption };
}
const requester = party("requester");
const executor = party("executor");
const outsider = party("outsider");
const parties = [requester, executor, outsider];

const TASK_ID = "task-secret-0001";
const taskKey = bytesFor("synapse confidential vector: task key");
const otherTaskKey = bytesFor("synapse confidential vector: another task key");
const ephemeral = (label: string) => deriveX25519(bytesFor(`synapse confidential vector: ephemeral ${label}`));
const nonceFor = (label: string) => bytesFor(`synapse confidential vector: nonce ${label}`).subarray(0, 12);

const wrapTo = (to: typeof executor, key = taskKey, keyId = to.encryption.keyId) =>
  wrapTaskKey(key, { taskId: TASK_ID, sender: { agentId: requester.agentId, keyId: requester.key.keyId }, recipient: { agentId: to.agentId, keyId } }, to.encryption.publicKey, ephemeral(`${to.name} ${keyId}`));

const requestPayload = create(TaskRequestPayloadSchema, {
  task: { id: TASK_ID, type: "text_analysis", priority: TaskPriority.NORMAL, payload: { text: "The merger closes on Friday; tell no one." } },
  context: { sessionId: "sess-secret", correlationId: "corr-secret" },
});

interface Built {
  from: typeof executor;
  to: typeof executor;
  type: MessageType;
  payload: Message;
  messageId: string;
  sequence?: bigint;
  keys?: WrappedKey[];
  key?: Uint8Array;
  nonce: string;
}

function build(c: Built): Envelope {
  return sealConfidential(
    {
      messageType: c.type,
      payload: c.payload,
      sender: { agentId: c.from.agentId, systemId: "vectors" },
      receiver: { agentId: c.to.agentId, systemId: "vectors" },
      taskId: TASK_ID,
      sequence: c.sequence,
      messageId: c.messageId,
      sentAtMs: SENT_AT,
    },
    c.from.key,
    { taskKey: c.key ?? taskKey, keys: c.keys, nonce: nonceFor(c.nonce) },
    nodeEd25519,
  ).envelope;
}

const requestCase: Built = {
  from: requester,
  to: executor,
  type: MessageType.TASK_REQUEST,
  payload: requestPayload,
  messageId: "0190a5b2-0000-7000-8000-00000000c001",
  keys: [wrapTo(executor), wrapTo(requester)],
  nonce: "request",
};
const resultPlaintext = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
const sealedResult = sealResult(taskKey, TASK_ID, resultPlaintext);
const positiveCases: Array<Built & { name: string; opener: string }> = [
  { ...requestCase, name: "task_request", opener: "executor" },
  {
    name: "task_need_info_event",
    opener: "requester",
    from: executor,
    to: requester,
    type: MessageType.TASK_NEED_INFO,
    payload: create(TaskNeedInfoPayloadSchema, { taskId: TASK_ID, question: "Which language is the text in?", missingFields: [{ field: "language", reason: "required" }] }),
    messageId: "0190a5b2-0000-7000-8000-00000000c002",
    sequence: 2n,
    nonce: "need info",
  },
  {
    name: "task_info_provided",
    opener: "executor",
    from: requester,
    to: executor,
    type: MessageType.TASK_INFO_PROVIDED,
    payload: create(TaskInfoProvidedPayloadSchema, { taskId: TASK_ID, fields: { language: "en" } }),
    messageId: "0190a5b2-0000-7000-8000-00000000c003",
    nonce: "info provided",
  },
  {
    name: "task_complete_event",
    opener: "requester",
    from: executor,
    to: requester,
    type: MessageType.TASK_COMPLETE,
    payload: create(TaskCompletePayloadSchema, {
      taskId: TASK_ID,
      summary: "analysed",
      result: {
        outputType: "json",
        stream: { streamId: TASK_ID, totalSize: BigInt(sealedResult.byteLength), sha256: createHash("sha256").update(sealedResult).digest(), contentType: "application/octet-stream" },
      },
    }),
    messageId: "0190a5b2-0000-7000-8000-00000000c004",
    sequence: 4n,
    nonce: "complete",
  },
];

function described(c: Built & { name: string; opener: string }) {
  const envelope = build(c);
  const info = messageTypeInfo(c.type)!;
  const payload = toBinary(info.payloadSchema, c.payload);
  const header = envelope.header;
  return {
    name: c.name,
    opener: c.opener,
    envelope_hex: toHex(toBinary(EnvelopeSchema, envelope)),
    header_hex: toHex(header),
    payload_type: info.payloadSchema.typeName,
    plaintext_payload_hex: toHex(payload),
    inner_signature_hex: toHex(nodeEd25519.sign(envelopeSigningInput(envelope.header, payload), c.from.key.seed)),
    payload: toJson(info.payloadSchema, c.payload),
  };
}

function flip(hexText: string, byte: number): string {
  const bytes = Buffer.from(hexText, "hex");
  bytes[byte] = bytes[byte]! ^ 0x01;
  return bytes.toString("hex");
}

const envelopeOf = (c: Built, change?: (envelope: Envelope) => void) => {
  const envelope = build(c);
  change?.(envelope);
  return toHex(toBinary(EnvelopeSchema, envelope));
};

const swappedSender = (() => {
  // Mallory takes the requester's sealed payload and puts it under a header of her own, signed as hers.
  const original = build(requestCase);
  const forged = build({ ...requestCase, from: outsider, keys: [wrapTo(executor)] });
  forged.payload = original.payload;
  return toHex(toBinary(EnvelopeSchema, forged));
})();

const tamperedAad = (() => {
  const envelope = build(requestCase);
  const header = Buffer.from(envelope.header);
  const at = header.indexOf(Buffer.from("vectors")); // a letter of sender.system_id: still a valid header
  header[at] = "W".charCodeAt(0);
  envelope.header = header;
  return toHex(toBinary(EnvelopeSchema, envelope));
})();

const tamperedCiphertext = envelopeOf(requestCase, (envelope) => {
  envelope.payload = Buffer.from(flip(toHex(envelope.payload), 40), "hex");
});

// One who holds the task key (the executor) re-seals the requester's message with the signature zeroed.
const strippedSignature = (() => {
  const envelope = build({ ...positiveCases[2]! });
  return { envelope_hex: toHex(toBinary(EnvelopeSchema, envelope)), zero_signature: true };
})();

const negative = [
  { name: "wrapped_to_another_agent", opener: "executor", envelope_hex: envelopeOf({ ...requestCase, keys: [wrapTo(outsider)] }), expected_error: "encryption_key_unknown" },
  { name: "wrapped_to_another_key", opener: "executor", envelope_hex: envelopeOf({ ...requestCase, keys: [wrapTo(executor, taskKey, outsider.encryption.keyId)] }), expected_error: "encryption_key_unknown" },
  { name: "reencrypted_to_third_party", opener: "outsider", envelope_hex: envelopeOf({ ...requestCase, keys: [wrapTo(executor), wrapTo(outsider)] }), expected_error: "wrong_receiver" },
  { name: "swapped_sender", opener: "executor", envelope_hex: swappedSender, expected_error: "decryption_failed" },
  { name: "tampered_associated_data", opener: "executor", envelope_hex: tamperedAad, expected_error: "decryption_failed" },
  { name: "tampered_ciphertext", opener: "executor", envelope_hex: tamperedCiphertext, expected_error: "decryption_failed" },
  { name: "sealed_with_another_task_key", opener: "executor", envelope_hex: envelopeOf({ ...positiveCases[2]!, key: otherTaskKey }), expected_error: "encryption_key_unknown" },
  { name: "stripped_inner_signature", opener: "executor", ...strippedSignature, expected_error: "inner_signature_invalid" },
  {
    name: "inner_signature_by_another_key",
    opener: "executor",
    envelope_hex: envelopeOf({ ...positiveCases[2]! }),
    resign_with_seed: toHex(outsider.key.seed),
    expected_error: "inner_signature_invalid",
  },
];

const document = {
  description:
    "Synapse confidential envelope vectors (docs/PROTOCOL.md §9). Identity: Ed25519 as in envelopes.json; trust maps agent_id to ed25519_public_key. " +
    "A task_request opens with the opener's x25519_private_key (the keys entry wrapped to it); every other message opens with task_key. " +
    "Positive vectors must open to plaintext_payload_hex with inner_signature_hex verifying over PAE([\"synapse.v1.Envelope\", header, plaintext payload]); " +
    "negative vectors must be refused with expected_error. For stripped_inner_signature and inner_signature_by_another_key the checker re-seals the message itself " +
    "with task_key (same header and nonce) after replacing the inner signature with 64 zero bytes, or with a signature by resign_with_seed. " +
    "result: the sealed result records of result_plaintext (bytes i % 251 for i in 0..result_size-1) for task_id.",
  suite: "CONFIDENTIAL_SUITE_X25519_HKDF_SHA256_AES128GCM",
  verify_at: VERIFY_AT,
  clock_skew_seconds: 300,
  task_id: TASK_ID,
  task_key_hex: toHex(taskKey),
  task_key_id: taskKeyIdOf(taskKey),
  parties: Object.fromEntries(
    parties.map((p) => [
      p.name,
      {
        agent_id: p.agentId,
        ed25519_seed: toHex(p.key.seed),
        ed25519_public_key: toHex(p.key.publicKey),
        key_id: p.key.keyId,
        x25519_private_key: toHex(p.encryption.secretKey),
        x25519_public_key: toHex(p.encryption.publicKey),
        encryption_key_id: p.encryption.keyId,
        encryption_key_binding_hex: toHex(toBinary(SignedEncryptionKeySchema, signEncryptionKey(p.agentId, p.key, p.encryption, nodeEd25519))),
      },
    ]),
  ),
  positive: positiveCases.map(described),
  negative,
  result: {
    task_id: TASK_ID,
    result_size: resultPlaintext.byteLength,
    result_sha256: createHash("sha256").update(resultPlaintext).digest("hex"),
    sealed_size: sealedResult.byteLength,
    sealed_sha256: createHash("sha256").update(sealedResult).digest("hex"),
    first_record_prefix_hex: toHex(sealedResult.subarray(0, 32)),
    last_record_hex: toHex(sealedResult.subarray(65_552)),
  },
};

await writeFile(new URL("../../test/vectors/confidential.json", import.meta.url), `${JSON.stringify(document, null, 2)}\n`);

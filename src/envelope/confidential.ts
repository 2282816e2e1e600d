// Confidential messages (docs/PROTOCOL.md §9): a task key wrapped with HPKE
// to each party, and every message of the task signed in plaintext and then
// sealed with AES-128-GCM under a key derived from it, the clear header as
// associated data. Also the task's sealed result records, the files it
// names sealed the same way, and its record at rest. Every refusal is a
// typed protocol error.
import { create, toBinary } from "@bufbuild/protobuf";
import { createHash, randomBytes } from "node:crypto";
import { ConfidentialitySchema, ConfidentialSuite, WrappedKeySchema, type Confidentiality, type WrappedKey } from "../../gen/synapse/v1/confidential_pb.js";
import { EnvelopeSchema, SignatureAlgorithm, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { defaultEd25519, SIGNATURE_LENGTH, type Ed25519 } from "../crypto/ed25519.js";
import type { EncryptionKeyRing } from "../crypto/encryption-keys.js";
import { aesGcmOpen, aesGcmSeal, hkdfExpand, hkdfExtract, hpkeOpen, hpkeSeal } from "../crypto/hpke.js";
import type { AgentKey } from "../crypto/keys.js";
import { encodeHeader } from "../protocol/header-codec.js";
import { clip, protocolError } from "../protocol/errors.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { envelopeSigningInput, pae } from "./pae.js";
import { buildHeader, seal, type SealInput, type Sealed } from "./seal.js";

export const SUITE = ConfidentialSuite.X25519_HKDF_SHA256_AES128GCM;
export const TASK_KEY_BYTES = 32;
const NONCE_BYTES = 12;
const AES_KEY_BYTES = 16;
/** Plaintext bytes per sealed result record; each sealed record is 16 bytes longer. */
export const RESULT_RECORD_BYTES = 65_536;
const TAG_BYTES = 16;

const text = (value: string) => new TextEncoder().encode(value);

// Nonces come from the system's CSPRNG a few hundred at a time: one call per 12 bytes cost more than the AES that uses them.
const NONCE_POOL_BYTES = 4096;
let noncePool = Buffer.alloc(0);
let nonceAt = 0;
function freshNonce(): Uint8Array {
  if (nonceAt + NONCE_BYTES > noncePool.byteLength) {
    noncePool = randomBytes(NONCE_POOL_BYTES);
    nonceAt = 0;
  }
  const nonce = new Uint8Array(noncePool.subarray(nonceAt, nonceAt + NONCE_BYTES)); // a copy: the pool is never handed out
  nonceAt += NONCE_BYTES;
  return nonce;
}
const EMPTY = new Uint8Array(0);
const TASK_KEY_LABEL = text("synapse.v1.TaskKey");

/** A fresh random task key. */
export function newTaskKey(): Uint8Array {
  return new Uint8Array(randomBytes(TASK_KEY_BYTES));
}

/** The task key's id: base64url of the first 16 bytes of SHA-256("synapse.v1.TaskKey" || key). */
export function taskKeyIdOf(taskKey: Uint8Array): string {
  return createHash("sha256").update(TASK_KEY_LABEL).update(taskKey).digest().subarray(0, 16).toString("base64url");
}

// HKDF-Extract of a task key is the same at every use: made once per key (a task key is one object while in use).
const extracted = new WeakMap<Uint8Array, Buffer>();
// So are the keys of a whole task's result, record and uploads.
const taskScoped = new WeakMap<Uint8Array, Map<string, Buffer>>();

/** HKDF-SHA256 with an empty salt, info PAE([label, ...pieces]), 16 bytes: the AES-128 key for one use of a task key. */
function derivedKey(taskKey: Uint8Array, label: string, ...pieces: string[]): Buffer {
  let prk = extracted.get(taskKey);
  if (prk === undefined) {
    prk = hkdfExtract(EMPTY, taskKey);
    extracted.set(taskKey, prk);
  }
  return hkdfExpand(prk, pae([text(label), ...pieces.map(text)]), AES_KEY_BYTES);
}

/** A key for the whole task (its result, its record, one of its uploads), derived once. */
function taskScopedKey(taskKey: Uint8Array, label: string, piece: string): Buffer {
  let keys = taskScoped.get(taskKey);
  if (keys === undefined) {
    keys = new Map();
    taskScoped.set(taskKey, keys);
  }
  const name = `${label}\u0000${piece}`;
  let key = keys.get(name);
  if (key === undefined) {
    key = derivedKey(taskKey, label, piece);
    if (keys.size < 64) keys.set(name, key); // a task has one result and record key, and a few uploads
  }
  return key;
}

const decryptionFailed = (message: string) => protocolError(ErrorCode.DECRYPTION_FAILED, message);
const keyUnknown = (message: string, details?: Record<string, string>) => protocolError(ErrorCode.ENCRYPTION_KEY_UNKNOWN, message, details ? { details } : undefined);

/** Who a wrapped key is from and for: the request's sender, and a party's agent id and encryption key id. */
export interface WrapParties {
  taskId: string;
  sender: { agentId: string; keyId: string };
  recipient: { agentId: string; keyId: string };
}

function wrapInfo({ taskId, sender, recipient }: WrapParties): Uint8Array {
  return pae([TASK_KEY_LABEL, ...[taskId, sender.agentId, sender.keyId, recipient.agentId, recipient.keyId].map(text)]);
}

/** The task key sealed with HPKE to one party's X25519 key (`ephemeral` only for test vectors). */
export function wrapTaskKey(taskKey: Uint8Array, parties: WrapParties, recipientPublicKey: Uint8Array, ephemeral?: Parameters<typeof hpkeSeal>[4]): WrappedKey {
  const { enc, ciphertext } = hpkeSeal(recipientPublicKey, wrapInfo(parties), EMPTY, taskKey, ephemeral);
  return create(WrappedKeySchema, { agentId: parties.recipient.agentId, keyId: parties.recipient.keyId, enc, ciphertext });
}

/**
 * The task key of a confidential task, from the entry of its request's
 * `confidential` wrapped to `self` with one of its keys; checked against
 * task_key_id. `sender` is the request's sender (agent id and key id).
 */
export function unwrapTaskKey(
  confidential: Confidentiality,
  taskId: string,
  sender: { agentId: string; keyId: string },
  self: string,
  ring: EncryptionKeyRing,
  nowMs: number = Date.now(),
): Uint8Array {
  const mine = confidential.keys.filter((wrapped) => wrapped.agentId === self);
  const wrapped = mine.find((entry) => ring.find(entry.keyId, nowMs) !== undefined);
  if (wrapped === undefined) {
    throw keyUnknown(
      mine.length === 0 ? `the task key is not wrapped to ${clip(self)}` : `the task key is wrapped to key ${clip(mine[0]!.keyId)}, which this agent does not hold (or holds no longer)`,
      { key_id: clip(mine[0]?.keyId ?? ""), expected_key_id: ring.current.keyId },
    );
  }
  const key = ring.find(wrapped.keyId, nowMs)!;
  const taskKey = hpkeOpen(key.secretKey, key.publicKey, wrapped.enc, wrapInfo({ taskId, sender, recipient: { agentId: self, keyId: wrapped.keyId } }), EMPTY, wrapped.ciphertext);
  if (taskKey === undefined || taskKey.byteLength !== TASK_KEY_BYTES) throw decryptionFailed("the wrapped task key does not open");
  if (taskKeyIdOf(taskKey) !== confidential.taskKeyId) throw decryptionFailed("the wrapped task key does not match header.confidential.task_key_id");
  return new Uint8Array(taskKey);
}

/** The task key of a confidential task_request, wrapped to `self`. */
export function unwrapRequestKey(header: Header, self: string, ring: EncryptionKeyRing, nowMs: number = Date.now()): Uint8Array {
  return unwrapTaskKey(header.confidential!, header.taskId, { agentId: header.sender?.agentId ?? "", keyId: header.sender?.keyId ?? "" }, self, ring, nowMs);
}

/** How to seal one confidential message. */
export interface ConfidentialSealing {
  taskKey: Uint8Array;
  /** On a task_request: the task key wrapped to each party. */
  keys?: readonly WrappedKey[];
  /** The 12-byte nonce; fresh and random unless a test vector fixes it. */
  nonce?: Uint8Array;
}

/** The header's `confidential`, for a message sealed under `sealing`. */
export function confidentialityOf(sealing: ConfidentialSealing): Confidentiality {
  return create(ConfidentialitySchema, {
    suite: SUITE,
    taskKeyId: taskKeyIdOf(sealing.taskKey),
    nonce: sealing.nonce ?? freshNonce(),
    keys: [...(sealing.keys ?? [])],
  });
}

const associatedData = (header: Uint8Array) => pae([text("synapse.v1.Confidential"), header]);

/** Seals a message confidentially: signed over header and plaintext payload, then the signature and payload encrypted. */
export function sealConfidential(input: SealInput, key: AgentKey, sealing: ConfidentialSealing, ed: Ed25519 = defaultEd25519): Sealed {
  const header = buildHeader(input, key);
  header.confidential = confidentialityOf(sealing);
  const headerBytes = encodeHeader(header);
  const info = messageTypeInfo(input.messageType)!;
  const payload = input.encodedPayload ?? toBinary(info.payloadSchema, input.payload);
  const signature = ed.sign(envelopeSigningInput(headerBytes, payload), key.seed);
  const plaintext = new Uint8Array(SIGNATURE_LENGTH + payload.byteLength);
  plaintext.set(signature, 0);
  plaintext.set(payload, SIGNATURE_LENGTH);
  const sealed = aesGcmSeal(derivedKey(sealing.taskKey, "synapse.v1.MessageKey", header.messageId), header.confidential.nonce, associatedData(headerBytes), plaintext);
  const envelope = create(EnvelopeSchema, {
    header: headerBytes,
    payload: sealed,
    signature: { algorithm: SignatureAlgorithm.ED25519, keyId: key.keyId, value: EMPTY, publicKey: key.publicKey },
  });
  return { envelope, header };
}

/** Seals a message: confidentially when `sealing` is given, plain (signed only) otherwise. */
export function sealMessage(input: SealInput, key: AgentKey, sealing: ConfidentialSealing | undefined, ed: Ed25519 = defaultEd25519): Sealed {
  return sealing === undefined ? seal(input, key, ed) : sealConfidential(input, key, sealing, ed);
}

/** The inner signature and the plaintext payload of a confidential envelope; `decryption_failed` when they do not open. */
export function openSealedPayload(headerBytes: Uint8Array, header: Header, sealedPayload: Uint8Array, taskKey: Uint8Array): { signature: Uint8Array; payload: Uint8Array } {
  const confidential = header.confidential!;
  if (confidential.suite !== SUITE) throw decryptionFailed(`unknown confidential suite ${confidential.suite}`);
  if (confidential.nonce.byteLength !== NONCE_BYTES) throw decryptionFailed(`header.confidential.nonce must be ${NONCE_BYTES} bytes`);
  if (taskKeyIdOf(taskKey) !== confidential.taskKeyId) throw keyUnknown(`sealed with task key ${clip(confidential.taskKeyId)}, not this task's`);
  const plaintext = aesGcmOpen(derivedKey(taskKey, "synapse.v1.MessageKey", header.messageId), confidential.nonce, associatedData(headerBytes), sealedPayload);
  if (plaintext === undefined) throw decryptionFailed("the payload does not open: the header or the ciphertext was changed, or another key sealed it");
  if (plaintext.byteLength < SIGNATURE_LENGTH) throw decryptionFailed("the opened payload is shorter than a signature");
  return { signature: plaintext.subarray(0, SIGNATURE_LENGTH), payload: plaintext.subarray(SIGNATURE_LENGTH) };
}

/** The SHA-256 digest that identifies a confidential envelope as it travelled (for replay checks). */
export function confidentialDigest(headerBytes: Uint8Array, sealedPayload: Uint8Array): string {
  return createHash("sha256").update(envelopeSigningInput(headerBytes, sealedPayload)).digest("hex");
}

// ── result and upload records ──────────────────────────────────────────────

function recordNonce(index: number): Uint8Array {
  const nonce = new Uint8Array(NONCE_BYTES);
  new DataView(nonce.buffer).setBigUint64(4, BigInt(index), false);
  return nonce;
}

/** What one kind of record stream is sealed under: its key, and the label and id its records' associated data name. */
interface RecordScheme {
  key: Buffer;
  label: Uint8Array;
  id: Uint8Array;
  /** What a refusal calls a record ("result record", "upload csv record"). */
  what: string;
}

function recordAad(scheme: RecordScheme, index: number, final: boolean): Uint8Array {
  const le = new Uint8Array(8);
  new DataView(le.buffer).setBigUint64(0, BigInt(index), true);
  return pae([scheme.label, scheme.id, le, Uint8Array.of(final ? 1 : 0)]);
}

const resultScheme = (taskKey: Uint8Array, taskId: string): RecordScheme => ({
  key: taskScopedKey(taskKey, "synapse.v1.ResultKey", taskId),
  label: text("synapse.v1.ResultRecord"),
  id: text(taskId),
  what: "result record",
});

const uploadScheme = (taskKey: Uint8Array, name: string): RecordScheme => ({
  key: taskScopedKey(taskKey, "synapse.v1.UploadKey", name),
  label: text("synapse.v1.UploadRecord"),
  id: text(name),
  what: `upload ${clip(name)} record`,
});

function sealRecords(scheme: RecordScheme, plaintext: Uint8Array): Uint8Array {
  const count = Math.max(1, Math.ceil(plaintext.byteLength / RESULT_RECORD_BYTES));
  const parts: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const record = plaintext.subarray(i * RESULT_RECORD_BYTES, Math.min(plaintext.byteLength, (i + 1) * RESULT_RECORD_BYTES));
    parts.push(aesGcmSeal(scheme.key, recordNonce(i), recordAad(scheme, i, i === count - 1), record));
  }
  return Buffer.concat(parts);
}

const SEALED_RECORD_BYTES = RESULT_RECORD_BYTES + TAG_BYTES;

function openRecord(scheme: RecordScheme, index: number, final: boolean, sealed: Uint8Array): Uint8Array {
  const opened = aesGcmOpen(scheme.key, recordNonce(index), recordAad(scheme, index, final), sealed);
  if (opened === undefined) throw decryptionFailed(`${scheme.what} ${index} does not open`);
  return opened;
}

function openRecords(scheme: RecordScheme, sealed: Uint8Array): Uint8Array {
  const count = Math.max(1, Math.ceil(sealed.byteLength / SEALED_RECORD_BYTES));
  const parts: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    parts.push(openRecord(scheme, i, i === count - 1, sealed.subarray(i * SEALED_RECORD_BYTES, Math.min(sealed.byteLength, (i + 1) * SEALED_RECORD_BYTES))));
  }
  return Buffer.concat(parts);
}

/** Opens a sealed stream record by record as its chunks arrive; the record still held at the end is the final one. */
async function* openRecordStream(scheme: RecordScheme, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  let held = Buffer.alloc(0);
  let index = 0;
  for await (const chunk of chunks) {
    held = held.byteLength === 0 ? Buffer.from(chunk) : Buffer.concat([held, chunk]);
    // A full record followed by more bytes is not the last one.
    while (held.byteLength > SEALED_RECORD_BYTES) {
      yield openRecord(scheme, index++, false, held.subarray(0, SEALED_RECORD_BYTES));
      held = held.subarray(SEALED_RECORD_BYTES);
    }
  }
  yield openRecord(scheme, index, true, held);
}

/** The plaintext size of a sealed record stream of `sealedSize` bytes (a size no stream has: -1). */
export function openedRecordsSize(sealedSize: number): number {
  const count = Math.max(1, Math.ceil(sealedSize / SEALED_RECORD_BYTES));
  const size = sealedSize - count * TAG_BYTES;
  return size < 0 ? -1 : size;
}

/** A result sealed as records of RESULT_RECORD_BYTES (§9.5): what is stored, served and signed. */
export function sealResult(taskKey: Uint8Array, taskId: string, plaintext: Uint8Array): Uint8Array {
  return sealRecords(resultScheme(taskKey, taskId), plaintext);
}

/** Opens a whole sealed result; `decryption_failed` when a record does not open or the stream was cut. */
export function openResult(taskKey: Uint8Array, taskId: string, sealed: Uint8Array): Uint8Array {
  return openRecords(resultScheme(taskKey, taskId), sealed);
}

/**
 * A file a confidential task names, sealed as records under the task key
 * (§9.7): what is uploaded, and what the request's sha256 and size describe.
 * Seal one file per name per task key (the records' nonces count from 0).
 */
export function sealUpload(taskKey: Uint8Array, name: string, plaintext: Uint8Array): Uint8Array {
  return sealRecords(uploadScheme(taskKey, name), plaintext);
}

/** Opens a whole sealed upload; `decryption_failed` when a record does not open or the file was cut. */
export function openUpload(taskKey: Uint8Array, name: string, sealed: Uint8Array): Uint8Array {
  return openRecords(uploadScheme(taskKey, name), sealed);
}

/** Opens a sealed upload record by record as its chunks are read (one record in memory at a time). */
export function openUploadStream(taskKey: Uint8Array, name: string, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  return openRecordStream(uploadScheme(taskKey, name), chunks);
}

// ── the record at rest ──────────────────────────────────────────────────────

/** Seals part of a task record for the store: a fresh nonce, then AES-128-GCM with the task id and the part's name as associated data. */
export function sealAtRest(taskKey: Uint8Array, taskId: string, plaintext: Uint8Array, part: string): Uint8Array {
  const nonce = freshNonce();
  return Buffer.concat([nonce, aesGcmSeal(taskScopedKey(taskKey, "synapse.v1.RecordKey", taskId), nonce, pae([text(taskId), text(part)]), plaintext)]);
}

export function openAtRest(taskKey: Uint8Array, taskId: string, sealed: Uint8Array, part: string): Uint8Array {
  const opened = aesGcmOpen(taskScopedKey(taskKey, "synapse.v1.RecordKey", taskId), sealed.subarray(0, NONCE_BYTES), pae([text(taskId), text(part)]), sealed.subarray(NONCE_BYTES));
  if (opened === undefined) throw decryptionFailed(`the stored ${part} of task ${clip(taskId)} does not open`);
  return opened;
}


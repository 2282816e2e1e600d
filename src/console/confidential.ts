// Confidential tasks in the browser (docs/PROTOCOL.md §9), with WebCrypto:
// a task key wrapped with HPKE to each party, every message signed in
// plaintext and then sealed with AES-128-GCM under a key derived from it
// (the clear header as associated data), the sealed result records, and the
// executor's encryption key checked against its identity key. The same
// bytes as src/envelope/confidential.ts; every refusal carries its protocol
// code. No DOM here.
import { create, fromBinary, type Message } from "@bufbuild/protobuf";
import nacl from "tweetnacl";
import {
  ConfidentialitySchema,
  ConfidentialSuite,
  EncryptionKeyBindingSchema,
  WrappedKeySchema,
  type Confidentiality,
  type EncryptionKeyBinding,
  type SignedEncryptionKey,
  type WrappedKey,
} from "../../gen/synapse/v1/confidential_pb.js";
import { HeaderSchema, SignatureAlgorithm, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { envelopeSigningInput, pae } from "../envelope/pae.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { sha256, toBase64Url, utf8 } from "./bytes.js";
import { aesGcmOpen, aesGcmSeal, concat, hkdf, hpkeOpen, hpkeSeal, type WebKey } from "./hpke.js";
import { keyIdOf } from "./keys.js";

export const SUITE = ConfidentialSuite.X25519_HKDF_SHA256_AES128GCM;
export const TASK_KEY_BYTES = 32;
export const NONCE_BYTES = 12;
const SIGNATURE_BYTES = 64;
const TAG_BYTES = 16;
/** Plaintext bytes per sealed result record (§9.5). */
export const RESULT_RECORD_BYTES = 65_536;
const EMPTY = new Uint8Array(0);

export type ConfidentialCode = "decryption_failed" | "encryption_key_unknown" | "inner_signature_invalid" | "confidentiality_required" | "wrong_receiver" | "signature_invalid";

/** A confidential message (or key, or result) that was refused, with the protocol code that says why. */
export class ConfidentialRefusal extends Error {
  constructor(
    readonly code: ConfidentialCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "ConfidentialRefusal";
  }
}

const refuse = (code: ConfidentialCode, message: string): never => {
  throw new ConfidentialRefusal(code, message);
};

/** An X25519 key pair this party opens with: the private key (a CryptoKey), its raw public key and its key id. */
export interface EncryptionKeyPair {
  readonly privateKey: WebKey;
  readonly publicKey: Uint8Array;
  readonly keyId: string;
}

/** A fresh random task key. */
export function newTaskKey(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(TASK_KEY_BYTES));
}

/** base64url of the first 16 bytes of SHA-256("synapse.v1.TaskKey" || key). */
export async function taskKeyIdOf(taskKey: Uint8Array): Promise<string> {
  return toBase64Url((await sha256(concat(utf8("synapse.v1.TaskKey"), taskKey))).subarray(0, 16));
}

/** The RFC 7638 thumbprint of an X25519 public key as an OKP JWK (§9.1). */
export async function encryptionKeyIdOf(publicKey: Uint8Array): Promise<string> {
  return toBase64Url(await sha256(utf8(`{"crv":"X25519","kty":"OKP","x":"${toBase64Url(publicKey)}"}`)));
}

/** HKDF-SHA256, empty salt, info PAE([label, ...pieces]), 16 bytes: the AES-128 key for one use of a task key. */
const derivedKey = (taskKey: Uint8Array, label: string, ...pieces: Uint8Array[]) => hkdf(taskKey, pae([utf8(label), ...pieces]), 16);

// ── the executor's encryption key ───────────────────────────────────────────

/**
 * The binding, if it is `agentId`'s, signed (tweetnacl) by
 * `signingPublicKey` (the identity key the console knows the agent by), for
 * a key whose id is its thumbprint, with the one suite spoken here.
 */
export async function verifyEncryptionKey(signed: SignedEncryptionKey, agentId: string, signingPublicKey: Uint8Array): Promise<EncryptionKeyBinding> {
  let binding: EncryptionKeyBinding;
  try {
    binding = fromBinary(EncryptionKeyBindingSchema, signed.binding);
  } catch {
    return refuse("encryption_key_unknown", "the binding is not a synapse.v1.EncryptionKeyBinding");
  }
  if (binding.agentId !== agentId) refuse("encryption_key_unknown", `the key is bound to ${binding.agentId}, not ${agentId}`);
  if (binding.signingKeyId !== (await keyIdOf(signingPublicKey))) refuse("encryption_key_unknown", "the binding names another signing key");
  if (signed.signature.byteLength !== SIGNATURE_BYTES || !nacl.sign.detached.verify(pae([utf8("synapse.v1.EncryptionKeyBinding"), signed.binding]), signed.signature, signingPublicKey)) {
    refuse("encryption_key_unknown", "the binding's signature does not verify");
  }
  if (binding.publicKey.byteLength !== 32 || binding.keyId !== (await encryptionKeyIdOf(binding.publicKey))) refuse("encryption_key_unknown", "the key id is not the key's thumbprint");
  if (binding.suite !== SUITE) refuse("encryption_key_unknown", `unknown suite ${binding.suite}`);
  return binding;
}

/** The key to seal to: the newest verified binding without retired_until. */
export async function currentEncryptionKey(keys: readonly SignedEncryptionKey[], agentId: string, signingPublicKey: Uint8Array): Promise<EncryptionKeyBinding> {
  let best: EncryptionKeyBinding | undefined;
  let why = "it publishes no encryption key";
  for (const signed of keys) {
    let binding: EncryptionKeyBinding;
    try {
      binding = await verifyEncryptionKey(signed, agentId, signingPublicKey);
    } catch (error) {
      why = error instanceof Error ? error.message : String(error);
      continue;
    }
    if (binding.retiredUntil !== undefined) continue;
    if (best === undefined || (binding.createdAt?.seconds ?? 0n) > (best.createdAt?.seconds ?? 0n)) best = binding;
  }
  return best ?? refuse("encryption_key_unknown", `agent ${agentId} has no encryption key bound to its identity (${why}): it takes no confidential tasks`);
}

// ── wrapping the task key ───────────────────────────────────────────────────

export interface WrapParties {
  taskId: string;
  sender: { agentId: string; keyId: string };
  recipient: { agentId: string; keyId: string };
}

const wrapInfo = ({ taskId, sender, recipient }: WrapParties) =>
  pae([utf8("synapse.v1.TaskKey"), ...[taskId, sender.agentId, sender.keyId, recipient.agentId, recipient.keyId].map(utf8)]);

/** The task key sealed with HPKE to one party's X25519 public key. */
export async function wrapTaskKey(taskKey: Uint8Array, parties: WrapParties, recipientPublicKey: Uint8Array): Promise<WrappedKey> {
  const { enc, ciphertext } = await hpkeSeal(recipientPublicKey, wrapInfo(parties), EMPTY, taskKey);
  return create(WrappedKeySchema, { agentId: parties.recipient.agentId, keyId: parties.recipient.keyId, enc, ciphertext });
}

/** The task key from the entry of `confidential` wrapped to `self` with `key`, checked against task_key_id. */
export async function unwrapTaskKey(confidential: Confidentiality, taskId: string, sender: { agentId: string; keyId: string }, self: string, key: EncryptionKeyPair): Promise<Uint8Array> {
  const mine = confidential.keys.filter((wrapped) => wrapped.agentId === self);
  const wrapped = mine.find((entry) => entry.keyId === key.keyId);
  if (wrapped === undefined) {
    return refuse("encryption_key_unknown", mine.length === 0 ? `the task key is not wrapped to ${self}` : `the task key is wrapped to key ${mine[0]!.keyId}, which this console does not hold`);
  }
  const info = wrapInfo({ taskId, sender, recipient: { agentId: self, keyId: wrapped.keyId } });
  const taskKey = await hpkeOpen(key.privateKey, key.publicKey, wrapped.enc, info, EMPTY, wrapped.ciphertext);
  if (taskKey === undefined || taskKey.byteLength !== TASK_KEY_BYTES) return refuse("decryption_failed", "the wrapped task key does not open");
  if ((await taskKeyIdOf(taskKey)) !== confidential.taskKeyId) refuse("decryption_failed", "the wrapped task key does not match header.confidential.task_key_id");
  return taskKey;
}

/** The task key of a confidential task_request, wrapped to `self`. */
export function unwrapRequestKey(header: Header, self: string, key: EncryptionKeyPair): Promise<Uint8Array> {
  return unwrapTaskKey(header.confidential!, header.taskId, { agentId: header.sender?.agentId ?? "", keyId: header.sender?.keyId ?? "" }, self, key);
}

// ── one message ─────────────────────────────────────────────────────────────

/** How to seal one message: the task key, and on a task_request the keys wrapped to each party. */
export interface ConfidentialSealing {
  taskKey: Uint8Array;
  keys?: readonly WrappedKey[];
}

/** The header's `confidential` for a message sealed under `sealing`, with a fresh nonce. */
export async function confidentialityOf(sealing: ConfidentialSealing): Promise<Confidentiality> {
  return create(ConfidentialitySchema, {
    suite: SUITE,
    taskKeyId: await taskKeyIdOf(sealing.taskKey),
    nonce: crypto.getRandomValues(new Uint8Array(NONCE_BYTES)),
    keys: [...(sealing.keys ?? [])],
  });
}

const associatedData = (headerBytes: Uint8Array) => pae([utf8("synapse.v1.Confidential"), headerBytes]);
const messageKey = (taskKey: Uint8Array, messageId: string) => derivedKey(taskKey, "synapse.v1.MessageKey", utf8(messageId));

/** Envelope.payload of a confidential message: AES-128-GCM of signature || payload, the header as associated data. */
export async function sealPayload(headerBytes: Uint8Array, header: Header, signature: Uint8Array, payload: Uint8Array, taskKey: Uint8Array): Promise<Uint8Array> {
  return aesGcmSeal(await messageKey(taskKey, header.messageId), header.confidential!.nonce, associatedData(headerBytes), concat(signature, payload));
}

/** The inner signature and the plaintext payload of a confidential envelope. */
export async function openSealedPayload(headerBytes: Uint8Array, header: Header, sealed: Uint8Array, taskKey: Uint8Array): Promise<{ signature: Uint8Array; payload: Uint8Array }> {
  const confidential = header.confidential!;
  if (confidential.suite !== SUITE) refuse("decryption_failed", `unknown confidential suite ${confidential.suite}`);
  if (confidential.nonce.byteLength !== NONCE_BYTES) refuse("decryption_failed", `header.confidential.nonce must be ${NONCE_BYTES} bytes`);
  if ((await taskKeyIdOf(taskKey)) !== confidential.taskKeyId) refuse("encryption_key_unknown", `sealed with task key ${confidential.taskKeyId}, not this task's`);
  const plaintext = await aesGcmOpen(await messageKey(taskKey, header.messageId), confidential.nonce, associatedData(headerBytes), sealed);
  if (plaintext === undefined) return refuse("decryption_failed", "the payload does not open: the header or the ciphertext was changed, or another key sealed it");
  if (plaintext.byteLength < SIGNATURE_BYTES) refuse("decryption_failed", "the opened payload is shorter than a signature");
  return { signature: plaintext.subarray(0, SIGNATURE_BYTES), payload: plaintext.subarray(SIGNATURE_BYTES) };
}

/** Whether an envelope is sealed: its outer signature carries no value and its header names a `confidential`. */
export function isSealed(envelope: Envelope | undefined): boolean {
  if (envelope?.signature === undefined || envelope.signature.value.byteLength !== 0) return false;
  try {
    return fromBinary(HeaderSchema, envelope.header).confidential !== undefined;
  } catch {
    return false;
  }
}

export interface OpenOptions {
  /** The party opening it: a message addressed to another is `wrong_receiver` before anything is decrypted. */
  self?: string;
  /** The task key the message was sealed with (unwrapped from a request's keys, or the task's). */
  taskKey(header: Header): Promise<Uint8Array>;
  /** The Ed25519 key the sender is trusted with, by its header; undefined when there is none. */
  signerKey(header: Header): Uint8Array | undefined;
}

export interface Opened {
  header: Header;
  type: number;
  payload: Message;
  /**
   * The message as if it had travelled in the clear: the same header, the
   * plaintext payload and the inner signature. Its signature covers exactly
   * these bytes (§9.2), so it verifies like any plaintext message.
   */
  plain: Envelope;
}

/** Opens a confidential envelope as §9.3 says: header, key, payload, inner signature, then the payload parsed. */
export async function openEnvelope(envelope: Envelope, options: OpenOptions): Promise<Opened> {
  const outer = envelope.signature;
  if (outer === undefined || outer.algorithm !== SignatureAlgorithm.ED25519 || outer.value.byteLength !== 0) refuse("signature_invalid", "not a confidential envelope's signature");
  let header: Header;
  try {
    header = fromBinary(HeaderSchema, envelope.header);
  } catch {
    return refuse("signature_invalid", "the header does not parse");
  }
  if (header.confidential === undefined) refuse("signature_invalid", "unsigned: an empty signature and no header.confidential");
  if (header.sender?.keyId !== outer!.keyId) refuse("signature_invalid", "the header names another signing key");
  if (options.self !== undefined && header.receiver?.agentId !== options.self) refuse("wrong_receiver", `addressed to ${header.receiver?.agentId ?? "nobody"}, not ${options.self}`);
  const signerKey = options.signerKey(header);
  if (signerKey === undefined) refuse("signature_invalid", `no key is trusted for ${header.sender?.agentId ?? "?"}`);
  const taskKey = await options.taskKey(header);
  const { signature, payload } = await openSealedPayload(envelope.header, header, envelope.payload, taskKey);
  if (!nacl.sign.detached.verify(envelopeSigningInput(envelope.header, payload), signature, signerKey!)) refuse("inner_signature_invalid", "decrypted, but the signature inside does not verify");
  const info = messageTypeInfo(header.messageType);
  if (info === undefined || header.payloadType !== info.payloadSchema.typeName) refuse("decryption_failed", `payload type ${header.payloadType} does not fit the message type`);
  let parsed: Message;
  try {
    parsed = fromBinary(info!.payloadSchema, payload);
  } catch {
    return refuse("decryption_failed", "the opened payload does not parse");
  }
  const plain: Envelope = { ...envelope, payload, signature: { ...outer!, value: signature } };
  return { header, type: header.messageType, payload: parsed, plain };
}

// ── result records (§9.5) ───────────────────────────────────────────────────

function recordNonce(index: number): Uint8Array {
  const nonce = new Uint8Array(NONCE_BYTES);
  new DataView(nonce.buffer).setBigUint64(4, BigInt(index), false);
  return nonce;
}

function recordAad(taskId: string, index: number, final: boolean): Uint8Array {
  const le = new Uint8Array(8);
  new DataView(le.buffer).setBigUint64(0, BigInt(index), true);
  return pae([utf8("synapse.v1.ResultRecord"), utf8(taskId), le, Uint8Array.of(final ? 1 : 0)]);
}

const resultKey = (taskKey: Uint8Array, taskId: string) => derivedKey(taskKey, "synapse.v1.ResultKey", utf8(taskId));

/** A result sealed as records (what an executor stores and serves). */
export async function sealResult(taskKey: Uint8Array, taskId: string, plaintext: Uint8Array): Promise<Uint8Array> {
  const key = await resultKey(taskKey, taskId);
  const count = Math.max(1, Math.ceil(plaintext.byteLength / RESULT_RECORD_BYTES));
  const parts: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const record = plaintext.subarray(i * RESULT_RECORD_BYTES, Math.min(plaintext.byteLength, (i + 1) * RESULT_RECORD_BYTES));
    parts.push(await aesGcmSeal(key, recordNonce(i), recordAad(taskId, i, i === count - 1), record));
  }
  return concat(...parts);
}

/** Opens a whole sealed result, record by record; `decryption_failed` when one does not open or the stream was cut. */
export async function openResult(taskKey: Uint8Array, taskId: string, sealed: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  const key = await resultKey(taskKey, taskId);
  const step = RESULT_RECORD_BYTES + TAG_BYTES;
  const count = Math.max(1, Math.ceil(sealed.byteLength / step));
  const parts: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const opened = await aesGcmOpen(key, recordNonce(i), recordAad(taskId, i, i === count - 1), sealed.subarray(i * step, Math.min(sealed.byteLength, (i + 1) * step)));
    if (opened === undefined) refuse("decryption_failed", `result record ${i} does not open`);
    parts.push(opened!);
  }
  return concat(...parts);
}

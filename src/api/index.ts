/**
 * The protocol's types and its signing rule, for both sides of a task.
 *
 * - **Identities**: an agent is an Ed25519 key ({@link AgentKey}) and an id
 *   ({@link AgentIdentity}); {@link createIdentity} makes one in memory,
 *   {@link loadOrCreateIdentity} keeps one in a directory. The default id is
 *   derived from the key ({@link selfCertifyingAgentId}), so nobody else can
 *   claim it; keys are named by their RFC 7638 thumbprint ({@link keyIdOf}).
 * - **Envelopes**: {@link sealEnvelope} signs the exact bytes that travel
 *   ({@link envelopeSigningInput}); {@link openEnvelope} verifies them and
 *   runs a receiver's checks. {@link uuidV7} makes the time-ordered ids it
 *   gives a message (and the client a task) when none is named.
 * - **Trust**: who may speak for an agent id ({@link TrustPolicy}):
 *   {@link PinnedKeys} (trust on first use), {@link TrustStore} (a file the
 *   operator writes), {@link TrustChain} (several, in order).
 * - **Tokens**: {@link issueToken} and {@link verifyToken}, the bearer
 *   tokens of the RPCs that carry no envelope.
 * - **Protocol facts**: {@link TaskState}, {@link MessageType},
 *   {@link ErrorCode}, and the typed errors every refusal is
 *   (a `ConnectError` with an {@link ErrorDetail}: {@link findErrorDetail}).
 *
 * Re-exported for convenience, so that no other dependency is needed to
 * handle what this package returns: `ConnectError` and `Code` from
 * `@connectrpc/connect` (every refusal is a `ConnectError`; `instanceof`
 * works across copies of that package), and the `JsonValue` and
 * `JsonObject` types of `@bufbuild/protobuf`.
 *
 * Agents are served with `synapse-connect/server`, tasks requested with
 * `synapse-connect/client`; every generated message is in `synapse-connect/proto`.
 *
 * @example
 * ```ts
 * import { createIdentity, sealEnvelope, openEnvelope, PinnedKeys, MessageType } from "synapse-connect";
 * import { create } from "@bufbuild/protobuf";
 * import { TaskCancelPayloadSchema } from "synapse-connect/proto";
 *
 * const alice = createIdentity();
 * const bob = createIdentity();
 * const { envelope } = sealEnvelope(
 *   {
 *     messageType: MessageType.TASK_CANCEL,
 *     payload: create(TaskCancelPayloadSchema, { taskId: "t-1", reason: "not needed" }),
 *     sender: { agentId: alice.agentId },
 *     receiver: { agentId: bob.agentId },
 *     taskId: "t-1",
 *   },
 *   alice.key,
 * );
 * const opened = await openEnvelope(envelope, { trust: PinnedKeys.inMemory(), self: bob.agentId });
 * ```
 *
 * @packageDocumentation
 * @module synapse-connect
 */
import { generateKey, keyFromSeed as keyFromSeedBytes, selfCertifyingAgentId, type AgentKey } from "../crypto/keys.js";
import type { AgentIdentity } from "../agent/identity.js";
import { open, type OpenedEnvelope } from "../envelope/open.js";
import { seal, type SealInput, type Sealed } from "../envelope/seal.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";

// Identities and keys.
export { type AgentIdentity, type IdentityOverrides, loadOrCreateIdentity, IdentityFileError } from "../agent/identity.js";
export { type AgentKey, generateKey, keyFromPem, keyToPem, keyIdOf, selfCertifyingAgentId, isSelfCertifying } from "../crypto/keys.js";
export { EncryptionKeyRing, type EncryptionKey, encryptionKeyIdOf, loadOrCreateEncryptionKeys, DEFAULT_ENCRYPTION_OVERLAP_MS } from "../crypto/encryption-keys.js";

// Envelopes: the signing rule.
export { type SealInput, type Sealed, type Party, PROTOCOL_VERSION, DEFAULT_TTL_MS } from "../envelope/seal.js";
export { type OpenedEnvelope, DEFAULT_CLOCK_SKEW_MS } from "../envelope/open.js";
export { envelopeSigningInput, ENVELOPE_SIGNING_DOMAIN } from "../envelope/pae.js";
export { decodeUnverified } from "../envelope/view.js";
export { uuidV7 } from "../protocol/ids.js";

// Trust.
export type { TrustPolicy, TrustVerdict } from "../envelope/trust.js";
export { TrustStore, PinnedKeys, TrustChain, type FirstUse, type PinnedKeysOptions } from "../envelope/trust-sources.js";
export type { PinStore, PinnedKey } from "../store/pins.js";

// Bearer tokens.
export {
  issueToken,
  verifyToken,
  type TokenClaims,
  type VerifiedCaller,
  type VerifyOptions as VerifyTokenOptions,
  MAX_TOKEN_LIFETIME_SECONDS,
} from "../crypto/tokens.js";

// Protocol facts and errors.
export { MessageType, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
export { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
export { ErrorCode, type ErrorDetail } from "../../gen/synapse/v1/errors_pb.js";
export { isTerminal, stateName } from "../protocol/state-machine.js";
export { wireName as messageTypeName, type MessageTypeInfo, type SenderRole, type PayloadCase } from "../protocol/message-types.js";
export { findErrorDetail, protocolCodeName } from "../protocol/errors.js";
export { ConnectError, Code } from "@connectrpc/connect";
export type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/**
 * The key whose private seed is `seed` (32 bytes): the same seed always
 * gives the same key (test fixtures, keys kept in a secret manager).
 */
export function keyFromSeed(seed: Uint8Array): AgentKey {
  return keyFromSeedBytes(seed);
}

/** What {@link createIdentity} may be given; everything is optional. */
export interface CreateIdentityOptions {
  /** The signing key; default a new random one. */
  key?: AgentKey;
  /**
   * The agent id; default the id derived from the key
   * ({@link selfCertifyingAgentId}), which any receiver may trust on first
   * use. Any other id must be bound to the key by the receiver's trust
   * store or registry.
   */
  agentId?: string;
  /** A human-readable name; default "Synapse agent". */
  agentName?: string;
  /** The system the agent belongs to; default "synapse". */
  systemId?: string;
}

/**
 * Makes an agent identity in memory: a new Ed25519 key (or the one given)
 * and the id derived from it. Nothing is written to disk: to keep an
 * identity across runs, use {@link loadOrCreateIdentity}.
 */
export function createIdentity(options: CreateIdentityOptions = {}): AgentIdentity {
  const key = options.key ?? generateKey();
  return {
    agentId: options.agentId ?? selfCertifyingAgentId(key.publicKey),
    agentName: options.agentName ?? "Synapse agent",
    systemId: options.systemId ?? "synapse",
    key,
  };
}

/**
 * Seals a protocol message: builds its header, serializes header and
 * payload once, and signs exactly those bytes with `key` (Ed25519 over
 * {@link envelopeSigningInput}). The returned envelope carries the bytes
 * that were signed; nothing is ever re-encoded (docs/PROTOCOL.md §2).
 *
 * @param input what to send, to whom; `payload` must be the payload message
 *   of `messageType` (a `TaskCancelPayload` for `MessageType.TASK_CANCEL`).
 * @param key the sender's key; its key id goes into the header and signature.
 */
export function sealEnvelope(input: SealInput, key: AgentKey): Sealed {
  return seal(input, key);
}

/** What {@link openEnvelope} checks an envelope against. */
export interface OpenEnvelopeOptions {
  /** Whose keys are believed for which agent ids. */
  trust: TrustPolicy;
  /** This agent's id: a message addressed to anyone else is refused. Omit only to read, never to act. */
  self?: string;
  /** This agent's key id: a message whose `receiver.key_id` names another key is refused. */
  selfKeyId?: string;
  /** Allowed distance, in milliseconds, between the sender's `sent_at` and this clock; default 5 minutes. */
  clockSkewMs?: number;
  /** The clock, in milliseconds since the epoch; default `Date.now`. */
  now?: () => number;
  /**
   * Whether to check `sent_at` and `expires_at` (default true). Turn it off
   * for records read back later, such as a task's event log, which are
   * checked for authenticity, not freshness.
   */
  checkTime?: boolean;
}

/**
 * Opens an envelope as a receiver does (docs/PROTOCOL.md §2.4): verifies the
 * signature over the bytes as they travelled before parsing anything, then
 * checks the key against the trust policy, the receiver, the protocol
 * version, the time window and the payload type, and returns the typed
 * header and payload.
 *
 * @throws `ConnectError` with an {@link ErrorDetail} naming the
 *   protocol error (`signature_invalid`, `unknown_sender`, `wrong_receiver`,
 *   `message_expired`, ...) when any check fails.
 */
export function openEnvelope(envelope: Envelope, options: OpenEnvelopeOptions): Promise<OpenedEnvelope> {
  return open(envelope, options);
}

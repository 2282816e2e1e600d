// The question `open` asks before it believes a sender: is this key the key
// of this agent? Trust sources (a trust-store file, pinning on first use, a
// registry) answer it; `open` only needs this interface.

/** What a {@link TrustPolicy} knows of a key for an agent id. */
export type TrustVerdict =
  /**
   * The key is known to belong to the agent. `firstUse`: known only because
   * it was the first key seen for the id (pinned on first use), which anyone
   * minting a fresh key gets; limits meant for known senders are smaller for it.
   */
  | { kind: "trusted"; firstUse?: boolean }
  /** The agent is known with a different key. */
  | { kind: "conflict"; expectedKeyId: string }
  /** Nothing is known of this agent (or of this key). */
  | { kind: "unknown" };

/**
 * Whether a key may speak for an agent id: asked after a signature verifies,
 * before anything the message says is believed. Implemented by
 * {@link PinnedKeys}, {@link TrustStore} and {@link TrustChain}, or by your
 * own (a directory service, say).
 */
export interface TrustPolicy {
  /** A public key this policy already knows by key id, if any. */
  publicKeyFor(keyId: string): Uint8Array | undefined | Promise<Uint8Array | undefined>;
  /** Whether the key may speak for the agent. Called after the signature verifies. */
  check(agentId: string, keyId: string, publicKey: Uint8Array): TrustVerdict | Promise<TrustVerdict>;
  /**
   * Asked when every source of a chain answered "unknown", so the message
   * would be refused: a source that answered from a cache (a registry's "not
   * registered") may look again. Optional.
   */
  recheck?(agentId: string, keyId: string, publicKey: Uint8Array): TrustVerdict | Promise<TrustVerdict>;
  /** Called once a message from the agent has passed every check (pinning records here). */
  accepted?(agentId: string, keyId: string, publicKey: Uint8Array): void | Promise<void>;
  /**
   * This agent's own code vouches for a key (a requester expecting callbacks
   * from the executor it chose): a pinning policy pins it, whatever the id's form.
   */
  vouch?(agentId: string, keyId: string, publicKey: Uint8Array): void | Promise<void>;
}

/** Believes any correctly signed message: only for reading, never for acting. */
export const integrityOnly: TrustPolicy = {
  publicKeyFor: () => undefined,
  check: () => ({ kind: "trusted" }),
};

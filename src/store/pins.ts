// Keys pinned on first use: which key speaks for an agent id, learned from
// the first message that passed every check. One row per agent, never
// rewritten, and shared by every instance of the agent.

/** A key pinned for an agent id. */
export interface PinnedKey {
  /** The agent id. */
  readonly agentId: string;
  /** The pinned key's id. */
  readonly keyId: string;
  /** The pinned public key (32 bytes). */
  readonly publicKey: Uint8Array;
  /** When it was pinned, in milliseconds since the epoch. */
  readonly pinnedAtMs: number;
}

/** Where pinned keys are kept (a store's `pins`, a JSON file, memory). */
export interface PinStore {
  /** The pin of an agent id, if any. */
  getPin(agentId: string): Promise<PinnedKey | undefined>;
  /** The pin holding a key id, if any. */
  findPinByKeyId(keyId: string): Promise<PinnedKey | undefined>;
  /** Pins the key unless the agent id is pinned already; returns the pin that holds. */
  pin(entry: PinnedKey): Promise<PinnedKey>;
}

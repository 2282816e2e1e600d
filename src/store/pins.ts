// Keys pinned on first use: which key speaks for an agent id, learned from
// the first message that passed every check. One row per agent, never
// rewritten, and shared by every instance of the agent.

export interface PinnedKey {
  readonly agentId: string;
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  readonly pinnedAtMs: number;
}

export interface PinStore {
  getPin(agentId: string): Promise<PinnedKey | undefined>;
  findPinByKeyId(keyId: string): Promise<PinnedKey | undefined>;
  /** Pins the key unless the agent id is pinned already; returns the pin that holds. */
  pin(entry: PinnedKey): Promise<PinnedKey>;
}
